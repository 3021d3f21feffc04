/*
 * The device model seen through the public API: profiles, placement on this
 * host and on fake ones, and the binding of worker threads read back from
 * inside kernels.
 */
#include <criterion/criterion.h>

#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "openreg.h"
#include "profile.h"

TestSuite(device_model, .timeout = 60);

#define CHECK_OR(call)                                                                   \
    do {                                                                                 \
        orError_t check_or_err_ = (call);                                                \
        cr_assert_eq(check_or_err_, orSuccess, "%s -> %s", #call,                        \
                     orGetErrorName(check_or_err_));                                     \
    } while (0)

static orDeviceProp props(int d)
{
    orDeviceProp p;
    CHECK_OR(orGetDeviceProperties(&p, d));
    return p;
}

Test(device_model, profile_table_and_names_agree)
{
    const or_device_profile *const *t = or_profiles();
    size_t i = 0;
    for (; t[i]; i++) {
        cr_assert_not_null(or_profile_names[i]);
        cr_assert_str_eq(t[i]->name, or_profile_names[i]);
        cr_assert_str_eq(or_profile_find(t[i]->name)->name, t[i]->name);
        cr_assert_not_null(strstr(OR_PROFILE_NAMES_TEXT, t[i]->name));
    }
    cr_assert_null(or_profile_names[i]);
    cr_assert_null(or_profile_find("tpu"));
}

Test(device_model, default_profile_is_cpu)
{
    orDeviceProp p = props(0);
    cr_assert_str_eq(p.name, "openreg cpu");
    /* The cpu profile's declared rates scale with the device's cores. */
    hwloc_bitmap_t cpus = hwloc_bitmap_alloc();
    cr_assert_eq(hwloc_bitmap_list_sscanf(cpus, p.cpuList), 0);
    int cores = hwloc_bitmap_weight(cpus);
    hwloc_bitmap_free(cpus);
    cr_assert_float_eq(p.computeRateGflops, OR_CPU_GFLOPS_PER_CORE * cores, 1e-9);
    cr_assert_float_eq(p.memoryBandwidthGBs, OR_CPU_GBS_PER_CORE * cores, 1e-9);
}

Test(device_model, a100_profile)
{
    /* The profile's own 80 GiB; memcheck cannot reserve that much. */
    if (getenv("OPENREG_TEST_UNDER_VALGRIND"))
        cr_skip_test("80 GiB of address space is more than valgrind can map");
    setenv("OPENREG_DEVICE_PROFILE", "a100", 1);
    setenv("OPENREG_DEVICES", "1", 1);
    orDeviceProp p = props(0);
    cr_assert_str_eq(p.name, "openreg a100");
    cr_assert_eq(p.totalGlobalMem, (size_t)80 << 30, "A100 80GB");
    cr_assert_float_eq(p.memoryBandwidthGBs, 2039.0, 1e-9);
    cr_assert_float_eq(p.computeRateGflops, 19500.0, 1e-9);
    cr_assert_eq(p.asyncEngineCount, 3);
    size_t free_b, total;
    CHECK_OR(orMemGetInfo(&free_b, &total));
    cr_assert_eq(total, (size_t)80 << 30);
}

Test(device_model, profile_figures)
{
    /* The datasheet figures, as the table holds them (no memory mapped). */
    const or_device_profile *a100 = or_profile_find("a100"), *h100 = or_profile_find("h100");
    cr_assert_eq(a100->memory, (size_t)80 << 30);
    cr_assert_eq(h100->memory, (size_t)80 << 30);
    cr_assert_eq(or_profile_find("v100")->memory, (size_t)32 << 30);
    cr_assert_eq(or_profile_find("cpu")->memory, 0, "cpu: a share of the host");
}

Test(device_model, h100_profile_with_memory_override)
{
    setenv("OPENREG_DEVICE_PROFILE", "h100", 1);
    setenv("OPENREG_DEVICE_MEM", "256M", 1);
    orDeviceProp p = props(0);
    cr_assert_str_eq(p.name, "openreg h100");
    cr_assert_eq(p.totalGlobalMem, (size_t)256 << 20, "OPENREG_DEVICE_MEM wins over the profile");
    cr_assert_float_eq(p.memoryBandwidthGBs, 3350.0, 1e-9);
}

/* The fake host: 8 cores on 4 NUMA nodes, 4 devices. */
Test(device_model, synthetic_host_four_devices)
{
    setenv("HWLOC_SYNTHETIC", "pack:2 numa:2 core:2 pu:1", 1);
    setenv("OPENREG_DEVICES", "4", 1);
    hwloc_topology_t t;
    cr_assert_eq(hwloc_topology_init(&t), 0);
    cr_assert_eq(hwloc_topology_load(t), 0); /* the same fake host */
    hwloc_bitmap_t seen = hwloc_bitmap_alloc(), cpus = hwloc_bitmap_alloc();
    const char *want[] = {"0-1", "2-3", "4-5", "6-7"};
    for (int d = 0; d < 4; d++) {
        orDeviceProp p = props(d);
        cr_assert_str_eq(p.cpuList, want[d]);
        cr_assert_eq(p.multiProcessorCount, 2, "one compute thread per core");
        cr_assert_eq(hwloc_bitmap_list_sscanf(cpus, p.cpuList), 0);
        cr_assert(!hwloc_bitmap_intersects(seen, cpus), "device %d overlaps", d);
        hwloc_bitmap_or(seen, seen, cpus);
        hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(t, (unsigned)p.numaNode);
        cr_assert_not_null(node, "device %d: NUMA node %d", d, p.numaNode);
        cr_assert(hwloc_bitmap_isincluded(cpus, node->cpuset),
                  "device %d: NUMA node %d does not hold cpus %s", d, p.numaNode, p.cpuList);
    }
    hwloc_bitmap_free(seen);
    hwloc_bitmap_free(cpus);
    hwloc_topology_destroy(t);
}

Test(device_model, oversubscribed_devices_share_cores)
{
    setenv("OPENREG_DEVICES", "16", 1);
    int n;
    CHECK_OR(orGetDeviceCount(&n));
    cr_assert_eq(n, 16);
    for (int d = 0; d < n; d++)
        cr_assert_gt(strlen(props(d).cpuList), 0);
    /* Every device still runs work. */
    for (int d = 0; d < n; d++) {
        CHECK_OR(orSetDevice(d));
        int *p;
        CHECK_OR(orMalloc((void **)&p, sizeof *p));
        CHECK_OR(orMemset(p, 0x11, sizeof *p));
        int v = 0;
        CHECK_OR(orMemcpy(&v, p, sizeof v, orMemcpyDeviceToHost));
        cr_assert_eq(v, 0x11111111);
        CHECK_OR(orFree(p));
    }
}

/* ---- binding, read back from the worker threads ------------------------- */

#define MAX_BLOCKS 64

typedef struct {
    cpu_set_t seen[MAX_BLOCKS];
} affinity_args;

static void record_affinity(const orKernelContext *ctx, void *argp)
{
    affinity_args *a = *(affinity_args **)argp;
    pthread_getaffinity_np(pthread_self(), sizeof(cpu_set_t), &a->seen[ctx->blockIdx.x]);
}

/* The affinity of every worker that ran a block, per block. */
static affinity_args *observe(int device, unsigned blocks)
{
    affinity_args *a = calloc(1, sizeof *a);
    CHECK_OR(orSetDevice(device));
    CHECK_OR(orLaunchKernel(record_affinity, (orDim3){blocks, 1, 1}, (orDim3){1, 1, 1}, &a,
                            sizeof a, 0, NULL));
    CHECK_OR(orDeviceSynchronize());
    return a;
}

static void cpuset_of_list(const char *list, cpu_set_t *out)
{
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    cr_assert_eq(hwloc_bitmap_list_sscanf(b, list), 0);
    CPU_ZERO(out);
    unsigned i;
    hwloc_bitmap_foreach_begin(i, b) CPU_SET(i, out);
    hwloc_bitmap_foreach_end();
    hwloc_bitmap_free(b);
}

Test(device_model, core_binding_read_back)
{
    setenv("OPENREG_DEVICE_THREADS", "2", 1);
    for (int d = 0; d < 2; d++) {
        orDeviceProp p = props(d);
        cpu_set_t dev;
        cpuset_of_list(p.cpuList, &dev);
        affinity_args *a = observe(d, MAX_BLOCKS);
        for (int b = 0; b < MAX_BLOCKS; b++) {
            cr_assert_eq(CPU_COUNT(&a->seen[b]), 1, "device %d block %d: bound to %d cpus", d,
                         b, CPU_COUNT(&a->seen[b]));
            cpu_set_t both;
            CPU_AND(&both, &a->seen[b], &dev);
            cr_assert_eq(CPU_COUNT(&both), 1, "device %d block %d: bound outside %s", d, b,
                         p.cpuList);
        }
        free(a);
    }
}

Test(device_model, numa_binding_read_back)
{
    setenv("OPENREG_BIND", "numa", 1);
    hwloc_topology_t t;
    hwloc_topology_init(&t);
    hwloc_topology_load(t);
    orDeviceProp p = props(0);
    hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(t, (unsigned)p.numaNode);
    cr_assert_not_null(node);
    cpu_set_t want;
    char list[256];
    hwloc_bitmap_t allowed = hwloc_bitmap_dup(node->cpuset);
    hwloc_bitmap_and(allowed, allowed, hwloc_topology_get_allowed_cpuset(t));
    hwloc_bitmap_list_snprintf(list, sizeof list, allowed);
    cpuset_of_list(list, &want);
    affinity_args *a = observe(0, 8);
    for (int b = 0; b < 8; b++)
        cr_assert(CPU_EQUAL(&a->seen[b], &want), "block %d: not bound to NUMA node cpus %s", b,
                  list);
    free(a);
    hwloc_bitmap_free(allowed);
    hwloc_topology_destroy(t);
}

Test(device_model, no_binding_read_back)
{
    setenv("OPENREG_BIND", "none", 1);
    cpu_set_t process;
    cr_assert_eq(sched_getaffinity(0, sizeof process, &process), 0);
    affinity_args *a = observe(1, 8);
    for (int b = 0; b < 8; b++)
        cr_assert(CPU_EQUAL(&a->seen[b], &process), "block %d: bound although OPENREG_BIND=none",
                  b);
    free(a);
}
