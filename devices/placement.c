/* devices/placement.c - split the host's cores among its devices. */
#include "placement.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static hwloc_topology_t topology;
static pthread_mutex_t topology_lock = PTHREAD_MUTEX_INITIALIZER;

hwloc_topology_t or_placement_topology(void)
{
    pthread_mutex_lock(&topology_lock);
    if (!topology) {
        hwloc_topology_t t;
        if (hwloc_topology_init(&t) == 0 && hwloc_topology_load(t) == 0)
            topology = t;
        else
            hwloc_topology_destroy(t);
    }
    hwloc_topology_t t = topology;
    pthread_mutex_unlock(&topology_lock);
    return t;
}

/* Cores grouped by NUMA node, in the topology's logical order. */
typedef struct core_group {
    hwloc_obj_t numa; /* NULL: cores outside any NUMA node's cpuset */
    hwloc_obj_t *cores;
    int ncores;
    int nslots; /* device slots given to this group */
} core_group;

static hwloc_obj_t numa_of(hwloc_topology_t t, hwloc_obj_t core)
{
    hwloc_obj_t node = NULL;
    while ((node = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, node)))
        if (node->cpuset && hwloc_bitmap_isincluded(core->cpuset, node->cpuset))
            return node;
    return NULL;
}

static int group_cores(hwloc_topology_t t, hwloc_const_cpuset_t usable, core_group **out,
                       int *total)
{
    hwloc_obj_type_t unit = HWLOC_OBJ_CORE;
    int n = hwloc_get_nbobjs_inside_cpuset_by_type(t, usable, unit);
    if (n <= 0) { /* some virtual machines expose PUs only */
        unit = HWLOC_OBJ_PU;
        n = hwloc_get_nbobjs_inside_cpuset_by_type(t, usable, unit);
    }
    if (n <= 0)
        return -1;
    core_group *groups = calloc((size_t)n, sizeof *groups);
    hwloc_obj_t *cores = calloc((size_t)n, sizeof *cores);
    if (!groups || !cores) {
        free(groups);
        free(cores);
        return -1;
    }
    int ngroups = 0;
    for (int i = 0; i < n; i++) {
        hwloc_obj_t core = hwloc_get_obj_inside_cpuset_by_type(t, usable, unit, (unsigned)i);
        hwloc_obj_t numa = numa_of(t, core);
        if (ngroups == 0 || groups[ngroups - 1].numa != numa) {
            groups[ngroups].numa = numa;
            groups[ngroups].cores = &cores[i];
            ngroups++;
        }
        cores[i] = core;
        groups[ngroups - 1].ncores++;
    }
    *out = groups;
    *total = n;
    return ngroups;
}

/* Slots per group in proportion to cores (largest remainder), every group at
 * least one when there are enough slots, so no slot has to straddle nodes. */
static void share_slots(core_group *g, int ngroups, int ncores, int nslots)
{
    int given = 0;
    double *rem = calloc((size_t)ngroups, sizeof *rem);
    for (int k = 0; k < ngroups; k++) {
        double exact = (double)nslots * g[k].ncores / ncores;
        g[k].nslots = (int)exact;
        if (nslots >= ngroups && g[k].nslots == 0)
            g[k].nslots = 1;
        if (rem)
            rem[k] = exact - (int)exact;
        given += g[k].nslots;
    }
    while (given < nslots) { /* hand out the rest by largest remainder */
        int best = 0;
        for (int k = 1; k < ngroups; k++)
            if (rem && rem[k] > rem[best])
                best = k;
        g[best].nslots++;
        if (rem)
            rem[best] = -1;
        given++;
    }
    while (given > nslots) { /* the minimum of one overshot: take from the largest */
        int big = 0;
        for (int k = 1; k < ngroups; k++)
            if (g[k].nslots > g[big].nslots)
                big = k;
        g[big].nslots--;
        given--;
    }
    free(rem);
}

static void add_cores(or_placement *p, hwloc_obj_t *cores, int first, int count)
{
    for (int c = first; c < first + count; c++)
        hwloc_bitmap_or(p->cpuset, p->cpuset, cores[c]->cpuset);
    p->ncores += count;
}

static void add_group(or_placement *p, const core_group *g, hwloc_const_cpuset_t usable)
{
    if (!g->numa)
        return;
    hwloc_bitmap_set(p->nodeset, g->numa->os_index);
    hwloc_bitmap_t cpus = hwloc_bitmap_dup(g->numa->cpuset);
    hwloc_bitmap_and(cpus, cpus, usable);
    hwloc_bitmap_or(p->numa_cpuset, p->numa_cpuset, cpus);
    hwloc_bitmap_free(cpus);
    if (p->numa_node < 0)
        p->numa_node = (int)g->numa->os_index;
}

int or_placement_plan(hwloc_topology_t topo, hwloc_const_cpuset_t usable, int local_rank,
                      int local_nranks, int ndevices, or_placement *out)
{
    core_group *groups;
    int ncores;
    int ngroups = group_cores(topo, usable, &groups, &ncores);
    if (ngroups < 0)
        return -1;
    int nslots = local_nranks * ndevices;
    if (nslots >= ngroups)
        share_slots(groups, ngroups, ncores, nslots);

    for (int d = 0; d < ndevices; d++) {
        int slot = local_rank * ndevices + d;
        or_placement *p = &out[d];
        memset(p, 0, sizeof *p);
        p->cpuset = hwloc_bitmap_alloc();
        p->numa_cpuset = hwloc_bitmap_alloc();
        p->nodeset = hwloc_bitmap_alloc();
        p->numa_node = -1;
        if (nslots < ngroups) {
            /* Fewer slots than NUMA nodes: each takes a run of whole nodes. */
            int first = slot * ngroups / nslots, last = (slot + 1) * ngroups / nslots;
            for (int k = first; k < last; k++) {
                add_cores(p, groups[k].cores, 0, groups[k].ncores);
                add_group(p, &groups[k], usable);
            }
        } else {
            int k = 0, base = 0;
            while (slot >= base + groups[k].nslots)
                base += groups[k++].nslots;
            const core_group *g = &groups[k];
            int j = slot - base;
            if (g->nslots <= g->ncores)
                add_cores(p, g->cores, j * g->ncores / g->nslots,
                          (j + 1) * g->ncores / g->nslots - j * g->ncores / g->nslots);
            else /* more slots than cores: share them round-robin */
                add_cores(p, g->cores, j % g->ncores, 1);
            add_group(p, g, usable);
        }
        if (hwloc_bitmap_iszero(p->numa_cpuset))
            hwloc_bitmap_copy(p->numa_cpuset, p->cpuset);
        hwloc_bitmap_list_snprintf(p->cpulist, sizeof p->cpulist, p->cpuset);
    }
    free(groups[0].cores);
    free(groups);
    return 0;
}

int or_placement_compute(int local_rank, int local_nranks, int ndevices, or_placement *out)
{
    hwloc_topology_t t = or_placement_topology();
    if (!t)
        return -1;
    hwloc_const_cpuset_t host = hwloc_topology_get_allowed_cpuset(t);
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    /* A launcher that bound this rank to part of the host already decided
     * which cores are ours: split only those, among our own devices. */
    bool bound = hwloc_topology_is_thissystem(t) &&
                 hwloc_get_cpubind(t, mine, HWLOC_CPUBIND_PROCESS) == 0 &&
                 !hwloc_bitmap_iszero(mine) && !hwloc_bitmap_isincluded(host, mine);
    int rc = bound ? or_placement_plan(t, mine, 0, 1, ndevices, out)
                   : or_placement_plan(t, host, local_rank, local_nranks, ndevices, out);
    hwloc_bitmap_free(mine);
    return rc;
}

int or_placement_bind_thread(const or_placement *p, or_bind_mode mode, int worker)
{
    hwloc_topology_t t = or_placement_topology();
    if (!t || mode == OR_BIND_NONE)
        return t ? 0 : -1;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (mode == OR_BIND_NUMA) {
        hwloc_bitmap_copy(set, p->numa_cpuset);
    } else if (worker < 0) {
        hwloc_bitmap_copy(set, p->cpuset);
    } else {
        /* Worker k on the k-th core of the device (round-robin), one core each. */
        int ncores = hwloc_get_nbobjs_inside_cpuset_by_type(t, p->cpuset, HWLOC_OBJ_CORE);
        hwloc_obj_type_t unit = ncores > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
        if (ncores <= 0)
            ncores = hwloc_get_nbobjs_inside_cpuset_by_type(t, p->cpuset, HWLOC_OBJ_PU);
        hwloc_obj_t core =
            ncores > 0 ? hwloc_get_obj_inside_cpuset_by_type(t, p->cpuset, unit,
                                                             (unsigned)(worker % ncores))
                       : NULL;
        hwloc_bitmap_copy(set, core ? core->cpuset : p->cpuset);
        hwloc_bitmap_and(set, set, p->cpuset);
    }
    int rc = hwloc_set_cpubind(t, set, HWLOC_CPUBIND_THREAD);
    hwloc_bitmap_free(set);
    return rc ? -1 : 0;
}

int or_placement_bind_memory(const or_placement *p, void *addr, size_t len)
{
    hwloc_topology_t t = or_placement_topology();
    if (!t || hwloc_bitmap_iszero(p->nodeset))
        return -1;
    return hwloc_set_area_membind(t, addr, len, p->nodeset, HWLOC_MEMBIND_BIND,
                                  HWLOC_MEMBIND_BYNODESET)
               ? -1
               : 0;
}

void or_placement_release(or_placement *p)
{
    hwloc_bitmap_free(p->cpuset);
    hwloc_bitmap_free(p->numa_cpuset);
    hwloc_bitmap_free(p->nodeset);
    p->cpuset = p->numa_cpuset = p->nodeset = NULL;
}

void or_placement_fini(void)
{
    pthread_mutex_lock(&topology_lock);
    if (topology)
        hwloc_topology_destroy(topology);
    topology = NULL;
    pthread_mutex_unlock(&topology_lock);
}
