/*
 * collectives/vmodel.h - the virtual-time model of a collective without a
 * communicator: the system as the replay sees it (ranks in ring order,
 * virtual nodes, trees, the path between two ranks' devices), for programs
 * that predict a machine they do not run on (tests/perf/validate_model).
 * A communicator's calls go through the same schedules and replay
 * (vcost.c), with the communicator's ring, nodes, trees and paths.
 */
#ifndef OCCL_VMODEL_H
#define OCCL_VMODEL_H

#include <stdint.h>

#include "occl_internal.h"
#include "vclock.h"

typedef struct occl_vsystem {
    int nranks;
    const int *ring;       /* the ranks in ring order, each virtual node a run of it */
    const int *node_first; /* node k is ring[node_first[k] .. node_first[k+1]) */
    int nnodes;
    occl_trees trees;      /* built over these ranks (occl_node_trees, occl_trees_schedule) */
    /* The path a transfer from rank src to rank dst takes. */
    or_vpath (*path)(void *ctx, int src, int dst);
    void *ctx;
    /* The NICs (rails) each node spreads a ring's or a tree's traffic to
     * other nodes over: NCCL runs such a collective on several channels,
     * each leaving its node through its own NIC (its tuning model rates it
     * nChannels x bwInter, src/graph/tuning.cc). 0 or 1: one NIC, the
     * path's. Point-to-point exchanges (AlltoAll) are not spread: each
     * pair's transfer takes its own path. occl_vsystem_rails. */
    int rails;
} occl_vsystem;

struct or_topo;
/* The rails of ranks on topology devices dev[] (one per rank, ring order
 * irrelevant), grouped into nodes by node_first[0..nnodes]: the fewest,
 * over the nodes, of the node's NICs that reach the network and of the
 * ranks the collective has on it (a rank's channels leave through the
 * NICs nearest the GPUs that run them). 1 without a topology. */
int occl_vsystem_rails(const struct or_topo *topo, const int *dev, const int *ring,
                       const int *node_first, int nnodes);

/* The time of call c (its coll, count, type and root; c->comm unused) on
 * system s with algorithm algo and protocol proto, every rank entering at
 * 0 and bps[r] the memory bandwidth of rank r's device: the end of the last
 * rank, in ns; UINT64_MAX if it cannot be modelled (out of memory, or a
 * protocol the algorithm does not run). */
uint64_t occl_vmodel_time(const occl_vsystem *s, const occl_call *c, occl_algo algo, occl_proto proto,
                          const uint64_t *bps);

/* Every rank's end of call c on system s (end[r], ns), rank r having
 * entered at entry[r]: what a real run's stream clocks move to (vcost.c
 * charges a communicator's calls with the same function). false if it
 * cannot be modelled (out of memory, or a protocol the algorithm does not
 * run). */
bool occl_vmodel_ends(const occl_vsystem *s, const occl_call *c, occl_algo algo, occl_proto proto,
                      const uint64_t *entry, const uint64_t *bps, uint64_t *end);

/* The planner's choice for call c on system s, as occl_plan_choice makes it
 * in a modelled call (tuning.c): the formulas' candidates that OCCL_ALGO
 * allows and OCCL_PROTO's protocols, compared by the replay with every rank
 * entering at 0, bps[r] rank r's memory bandwidth. est_ns (may be NULL)
 * receives each candidate's completion, UINT64_MAX where none was replayed. */
occl_choice occl_plan_system(const occl_vsystem *s, const occl_call *c, const uint64_t *bps,
                             uint64_t est_ns[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS]);

/* The protocol family (NCCL's table row) algorithm algo of collective coll
 * takes its constants from. */
occl_pfam occl_vmodel_family(occl_coll coll, occl_algo algo);

#endif
