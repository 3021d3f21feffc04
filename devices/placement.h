/*
 * devices/placement.h - which cores each device of this process owns (hwloc).
 *
 * The cores this process may run on are split among its devices: disjoint
 * contiguous groups when there are enough cores, shared cores (device i on
 * core i mod n) when devices outnumber cores.
 */
#ifndef OR_PLACEMENT_H
#define OR_PLACEMENT_H

#include <hwloc.h>

typedef struct or_placement {
    hwloc_bitmap_t cpuset; /* PUs of the device's cores */
    int ncores;
    int numa_node; /* OS index, -1 when unknown */
    char cpulist[256];
} or_placement;

/* Fill out[0..ndevices). 0, or -1 if the host topology cannot be read. */
int or_placement_compute(int ndevices, or_placement *out);
/* Bind the calling thread to the device's cores; 0 or -1 (logged, not fatal). */
int or_placement_bind_thread(const or_placement *p);
void or_placement_release(or_placement *p);
/* Drop the cached host topology (process teardown). */
void or_placement_fini(void);

#endif
