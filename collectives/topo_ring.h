/*
 * collectives/topo_ring.h - a communicator's ring on a declared topology
 * (OPENREG_TOPO): comm ranks -> topology devices -> ring order, a pure
 * function of its inputs, so every rank computes the same ring.
 */
#ifndef OCCL_TOPO_RING_H
#define OCCL_TOPO_RING_H

#include <stddef.h>

struct or_topo;

/* ring[i] receives the comm rank at ring position i; rank_device[r] is the
 * topology device of comm rank r. The ring is the topology layer's
 * (or_topo_ring): each node's ranks consecutive, so it crosses the network
 * once per node, and within a node the widest, then shortest, links. Returns
 * 0, or -1 with the reason in why (the caller keeps its default ring): a
 * device out of range, two ranks on one device, out of memory. */
int occl_topo_ring(const struct or_topo *topo, const int *rank_device, int nranks, int *ring,
                   char *why, size_t why_size);

/* 0 if every rank names its own device of the topology (as the ring and the
 * trees need), else -1 with the reason in why: no topology or no ranks, a
 * device out of range, two ranks on one device, out of memory. */
int occl_topo_check_devices(const struct or_topo *topo, const int *rank_device, int nranks,
                            char *why, size_t why_size);

/* Times the ring goes from one node to another, closing hop included. */
int occl_topo_ring_crossings(const struct or_topo *topo, const int *rank_device, const int *ring,
                             int nranks);

#endif
