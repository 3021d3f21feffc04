/*
 * devices/placement.h - which cores and NUMA memory each device owns (hwloc).
 *
 * All devices on a host share its cores: with R ranks of D devices on the
 * host there are T = R * D device slots, and this rank's devices are slots
 * local_rank * D ... local_rank * D + D - 1. Slots are spread over NUMA
 * nodes in proportion to their cores, so a device stays inside one NUMA node
 * whenever there are at least as many slots as nodes; within a node each
 * slot gets a contiguous run of cores, or shares a core round-robin when
 * slots outnumber cores (nothing fails on a 2-core host).
 */
#ifndef OR_PLACEMENT_H
#define OR_PLACEMENT_H

#include <hwloc.h>

typedef enum { OR_BIND_CORE = 0, OR_BIND_NUMA = 1, OR_BIND_NONE = 2 } or_bind_mode;

typedef struct or_placement {
    hwloc_bitmap_t cpuset;      /* PUs of the device's cores */
    hwloc_bitmap_t numa_cpuset; /* PUs of its NUMA node(s), within the cores used */
    hwloc_bitmap_t nodeset;     /* its NUMA node(s), for memory binding */
    int ncores;
    int numa_node; /* OS index of its (first) NUMA node, -1 when unknown */
    char cpulist[256];
} or_placement;

/* Pure planning on any topology (real, synthetic or XML): the devices of
 * local_rank among local_nranks ranks, each with ndevices, over the cores in
 * `usable`. Fills out[0..ndevices); 0, or -1 if usable holds no core. */
int or_placement_plan(hwloc_topology_t topo, hwloc_const_cpuset_t usable, int local_rank,
                      int local_nranks, int ndevices, or_placement *out);

/* The host's topology, loaded once (HWLOC_SYNTHETIC / HWLOC_XMLFILE apply). */
hwloc_topology_t or_placement_topology(void);
/* Plan on this host: when the launcher bound the process to a subset of the
 * host, only that subset is split, among this rank's devices alone. */
int or_placement_compute(int local_rank, int local_nranks, int ndevices, or_placement *out);
/* Bind the calling worker thread (index worker of the device; -1: a thread
 * of the device's that is not a worker, on all its cores); 0 or -1. */
int or_placement_bind_thread(const or_placement *p, or_bind_mode mode, int worker);
/* Bind [addr, addr+len) to the device's NUMA node(s); 0 or -1. */
int or_placement_bind_memory(const or_placement *p, void *addr, size_t len);
void or_placement_release(or_placement *p);
/* Drop the cached host topology (process teardown). */
void or_placement_fini(void);

#endif
