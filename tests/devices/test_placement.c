/*
 * Placement on fake hosts: the plan for every rank of a host, compared with
 * golden files in tests/devices/golden/. Set OR_UPDATE_GOLDEN=1 to rewrite
 * them (then read the diff: the files are the specification).
 */
#include <criterion/criterion.h>

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement.h"

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/devices/golden"
#endif

static hwloc_topology_t synthetic(const char *desc)
{
    hwloc_topology_t t;
    cr_assert_eq(hwloc_topology_init(&t), 0);
    cr_assert_eq(hwloc_topology_set_synthetic(t, desc), 0, "bad synthetic string %s", desc);
    cr_assert_eq(hwloc_topology_load(t), 0);
    return t;
}

/* The whole host's plan as text: one line per device of every rank. */
static char *plan_text(const char *desc, int nranks, int ndevices)
{
    hwloc_topology_t t = synthetic(desc);
    char *buf;
    size_t len;
    FILE *out = open_memstream(&buf, &len);
    fprintf(out, "# host \"%s\", %d rank(s) x %d device(s)\n", desc, nranks, ndevices);
    or_placement *p = calloc((size_t)ndevices, sizeof *p);
    for (int r = 0; r < nranks; r++) {
        cr_assert_eq(or_placement_plan(t, hwloc_topology_get_allowed_cpuset(t), r, nranks,
                                       ndevices, p),
                     0);
        for (int d = 0; d < ndevices; d++) {
            char nodes[64], numa_cpus[256];
            hwloc_bitmap_list_snprintf(nodes, sizeof nodes, p[d].nodeset);
            hwloc_bitmap_list_snprintf(numa_cpus, sizeof numa_cpus, p[d].numa_cpuset);
            fprintf(out, "rank %d device %d: cpus %s (%d cores), numa node %d, nodes %s, numa cpus %s\n",
                    r, d, p[d].cpulist, p[d].ncores, p[d].numa_node, nodes, numa_cpus);
            or_placement_release(&p[d]);
        }
    }
    free(p);
    fclose(out);
    hwloc_topology_destroy(t);
    return buf;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n = getdelim(&buf, &cap, '\0', f);
    fclose(f);
    if (n < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void check_golden(const char *name, const char *desc, int nranks, int ndevices)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.txt", GOLDEN_DIR, name);
    char *got = plan_text(desc, nranks, ndevices);
    const char *update = getenv("OR_UPDATE_GOLDEN");
    if (update && strcmp(update, "1") == 0) {
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f, "cannot write %s", path);
        fputs(got, f);
        fclose(f);
    }
    char *want = read_file(path);
    cr_assert_not_null(want, "missing golden file %s", path);
    cr_assert_str_eq(got, want, "plan differs from %s:\n--- got ---\n%s", path, got);
    free(got);
    free(want);
}

/* The example: 8 cores on 4 NUMA nodes, 4 devices of 2 cores, one node each. */
Test(placement, four_devices_on_four_numa_nodes)
{
    check_golden("pack2-numa2-core2_1x4", "pack:2 numa:2 core:2 pu:1", 1, 4);
}

/* 4 ranks x 2 devices on 8 cores: one core each, not all on core 0. */
Test(placement, four_ranks_two_devices_one_core_each)
{
    check_golden("pack2-numa2-core2_4x2", "pack:2 numa:2 core:2 pu:1", 4, 2);
}

/* Fewer devices than NUMA nodes: each takes whole nodes. */
Test(placement, fewer_devices_than_numa_nodes)
{
    check_golden("pack2-numa2-core2_2x1", "pack:2 numa:2 core:2 pu:1", 2, 1);
}

/* These 2-core machines: two devices get a core each... */
Test(placement, two_cores_two_devices)
{
    check_golden("core2_1x2", "pack:1 numa:1 core:2 pu:1", 1, 2);
}

/* ...and 4 ranks x 2 devices share the 2 cores round-robin. */
Test(placement, two_cores_oversubscribed)
{
    check_golden("core2_4x2", "pack:1 numa:1 core:2 pu:1", 4, 2);
}

/* 3 devices over 2 NUMA nodes of 6 hyperthreaded cores: 2 + 1, none straddles. */
Test(placement, uneven_devices_stay_inside_nodes)
{
    check_golden("pack2-core6-pu2_1x3", "pack:2 numa:1 core:6 pu:2", 1, 3);
}

/* 8 devices on 3 nodes of 4 cores: 3 + 3 + 2 devices, runs of 1-2 cores. */
Test(placement, eight_devices_three_nodes)
{
    check_golden("numa3-core4_1x8", "numa:3 core:4 pu:1", 1, 8);
}

/* 2 ranks x 3 devices on 16 cores / 4 nodes: 6 slots spread 2+2+1+1. */
Test(placement, two_ranks_three_devices)
{
    check_golden("pack2-numa2-core4-pu2_2x3", "pack:2 numa:2 core:4 pu:2", 2, 3);
}

/* A subset of the host (as a launcher's binding gives): only it is split. */
Test(placement, usable_subset)
{
    hwloc_topology_t t = synthetic("pack:2 numa:2 core:2 pu:1");
    hwloc_bitmap_t usable = hwloc_bitmap_alloc();
    hwloc_bitmap_set_range(usable, 4, 7); /* the second package */
    or_placement p[2];
    cr_assert_eq(or_placement_plan(t, usable, 0, 1, 2, p), 0);
    cr_assert_str_eq(p[0].cpulist, "4-5");
    cr_assert_str_eq(p[1].cpulist, "6-7");
    cr_assert_eq(p[0].numa_node, 2);
    cr_assert_eq(p[1].numa_node, 3);
    or_placement_release(&p[0]);
    or_placement_release(&p[1]);
    hwloc_bitmap_zero(usable);
    cr_assert_eq(or_placement_plan(t, usable, 0, 1, 2, p), -1, "no core to place on");
    hwloc_bitmap_free(usable);
    hwloc_topology_destroy(t);
}

/* Invariants on many shapes: every device has cores, its NUMA node holds
 * them when devices >= nodes, and devices are disjoint when slots <= cores. */
Test(placement, invariants)
{
    const char *hosts[] = {"pack:2 numa:2 core:2 pu:1", "numa:3 core:4 pu:1",
                           "pack:2 numa:1 core:6 pu:2", "pack:1 numa:1 core:2 pu:1",
                           "pack:4 numa:2 core:3 pu:1"};
    for (size_t h = 0; h < sizeof hosts / sizeof *hosts; h++) {
        hwloc_topology_t t = synthetic(hosts[h]);
        int ncores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
        int nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
        for (int nranks = 1; nranks <= 4; nranks++)
            for (int ndev = 1; ndev <= 8; ndev++) {
                int slots = nranks * ndev;
                hwloc_bitmap_t seen = hwloc_bitmap_alloc();
                for (int r = 0; r < nranks; r++) {
                    or_placement p[8];
                    cr_assert_eq(or_placement_plan(t, hwloc_topology_get_allowed_cpuset(t), r,
                                                   nranks, ndev, p),
                                 0);
                    for (int d = 0; d < ndev; d++) {
                        cr_assert_gt(p[d].ncores, 0, "%s %dx%d", hosts[h], nranks, ndev);
                        if (slots >= nnuma) {
                            hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(
                                t, (unsigned)p[d].numa_node);
                            cr_assert_not_null(node);
                            cr_assert(hwloc_bitmap_isincluded(p[d].cpuset, node->cpuset),
                                      "%s %dx%d: rank %d device %d (%s) straddles NUMA nodes",
                                      hosts[h], nranks, ndev, r, d, p[d].cpulist);
                        }
                        if (slots <= ncores) {
                            cr_assert(!hwloc_bitmap_intersects(seen, p[d].cpuset),
                                      "%s %dx%d: rank %d device %d overlaps another", hosts[h],
                                      nranks, ndev, r, d);
                            hwloc_bitmap_or(seen, seen, p[d].cpuset);
                        }
                        or_placement_release(&p[d]);
                    }
                }
                hwloc_bitmap_free(seen);
            }
        hwloc_topology_destroy(t);
    }
}
