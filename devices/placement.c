/* devices/placement.c - split the process's cores among its devices. */
#include "placement.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static hwloc_topology_t topology;
static pthread_mutex_t topology_lock = PTHREAD_MUTEX_INITIALIZER;

static int topology_get(hwloc_topology_t *out)
{
    pthread_mutex_lock(&topology_lock);
    if (!topology) {
        hwloc_topology_t t;
        if (hwloc_topology_init(&t) == 0 && hwloc_topology_load(t) == 0)
            topology = t;
        else
            hwloc_topology_destroy(t);
    }
    *out = topology;
    pthread_mutex_unlock(&topology_lock);
    return topology ? 0 : -1;
}

static int numa_node_of(hwloc_topology_t t, hwloc_const_bitmap_t cpuset)
{
    hwloc_obj_t node = NULL;
    while ((node = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, node)))
        if (node->cpuset && hwloc_bitmap_intersects(node->cpuset, cpuset))
            return (int)node->os_index;
    return -1;
}

int or_placement_compute(int ndevices, or_placement *out)
{
    hwloc_topology_t t;
    if (topology_get(&t))
        return -1;
    hwloc_bitmap_t allowed = hwloc_bitmap_alloc();
    /* The cores the process may use (taskset, cgroups, mpiexec binding). */
    if (hwloc_get_cpubind(t, allowed, HWLOC_CPUBIND_PROCESS) || hwloc_bitmap_iszero(allowed))
        hwloc_bitmap_copy(allowed, hwloc_topology_get_allowed_cpuset(t));

    int ncores = hwloc_get_nbobjs_inside_cpuset_by_type(t, allowed, HWLOC_OBJ_CORE);
    hwloc_obj_type_t unit = HWLOC_OBJ_CORE;
    if (ncores <= 0) { /* some virtual machines expose PUs only */
        unit = HWLOC_OBJ_PU;
        ncores = hwloc_get_nbobjs_inside_cpuset_by_type(t, allowed, HWLOC_OBJ_PU);
    }
    if (ncores <= 0) {
        hwloc_bitmap_free(allowed);
        return -1;
    }
    for (int d = 0; d < ndevices; d++) {
        or_placement *p = &out[d];
        memset(p, 0, sizeof *p);
        p->cpuset = hwloc_bitmap_alloc();
        int first, last;
        if (ncores >= ndevices) {
            first = d * ncores / ndevices;
            last = (d + 1) * ncores / ndevices - 1;
        } else {
            first = last = d % ncores;
        }
        for (int c = first; c <= last; c++) {
            hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(t, allowed, unit, (unsigned)c);
            hwloc_bitmap_or(p->cpuset, p->cpuset, core->cpuset);
        }
        hwloc_bitmap_and(p->cpuset, p->cpuset, allowed);
        p->ncores = last - first + 1;
        p->numa_node = numa_node_of(t, p->cpuset);
        hwloc_bitmap_list_snprintf(p->cpulist, sizeof p->cpulist, p->cpuset);
    }
    hwloc_bitmap_free(allowed);
    return 0;
}

int or_placement_bind_thread(const or_placement *p)
{
    hwloc_topology_t t;
    if (topology_get(&t))
        return -1;
    return hwloc_set_cpubind(t, p->cpuset, HWLOC_CPUBIND_THREAD) ? -1 : 0;
}

void or_placement_release(or_placement *p)
{
    hwloc_bitmap_free(p->cpuset);
    p->cpuset = NULL;
}

void or_placement_fini(void)
{
    pthread_mutex_lock(&topology_lock);
    if (topology)
        hwloc_topology_destroy(topology);
    topology = NULL;
    pthread_mutex_unlock(&topology_lock);
}
