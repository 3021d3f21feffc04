/*
 * test_devices.c - device count, current device (per thread), properties,
 * device-wide synchronization and the stream priority range.
 */
#include "helpers.h"

/* A hang (e.g. a wait that never completes) fails the test instead of the run. */
TestSuite(devices, .timeout = 60);

#include <ctype.h>

Test(devices, default_count_is_two)
{
    int n = -1;
    CHECK_OR(orGetDeviceCount(&n));
    cr_assert_eq(n, 2);
}

Test(devices, count_from_env)
{
    set_env("OPENREG_DEVICES", "3");
    int n = -1;
    CHECK_OR(orGetDeviceCount(&n));
    cr_assert_eq(n, 3);
    CHECK_OR(orSetDevice(2));
    EXPECT_OR(orSetDevice(3), orErrorInvalidDevice);
}

Test(devices, count_null)
{
    EXPECT_OR(orGetDeviceCount(NULL), orErrorInvalidValue);
}

Test(devices, set_and_get)
{
    int d = -1;
    CHECK_OR(orGetDevice(&d));
    cr_assert_eq(d, 0, "a thread starts on device 0");
    CHECK_OR(orSetDevice(1));
    CHECK_OR(orGetDevice(&d));
    cr_assert_eq(d, 1);
    CHECK_OR(orSetDevice(0));
    CHECK_OR(orGetDevice(&d));
    cr_assert_eq(d, 0);
}

Test(devices, set_invalid_keeps_current)
{
    CHECK_OR(orSetDevice(1));
    EXPECT_OR(orSetDevice(-1), orErrorInvalidDevice);
    EXPECT_OR(orSetDevice(2), orErrorInvalidDevice);
    EXPECT_OR(orSetDevice(1 << 30), orErrorInvalidDevice);
    int d = -1;
    CHECK_OR(orGetDevice(&d));
    cr_assert_eq(d, 1);
}

Test(devices, get_null)
{
    EXPECT_OR(orGetDevice(NULL), orErrorInvalidValue);
}

typedef struct {
    int set_to;    /* -1: do not set */
    int seen_start;
    int seen_end;
    orError_t err;
} dev_thread;

static void *device_thread(void *p)
{
    dev_thread *t = p;
    t->seen_start = -1;
    t->err = orGetDevice(&t->seen_start);
    if (t->err == orSuccess && t->set_to >= 0)
        t->err = orSetDevice(t->set_to);
    if (t->err == orSuccess)
        t->err = orGetDevice(&t->seen_end);
    return NULL;
}

Test(devices, current_device_is_per_thread)
{
    CHECK_OR(orSetDevice(1));
    dev_thread t = {.set_to = -1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, device_thread, &t), 0);
    pthread_join(th, NULL);
    CR_ASSERT_OR_EQ(t.err, orSuccess, "thread calls");
    cr_assert_eq(t.seen_start, 0, "new thread must start on device 0, not the creator's");

    /* A thread switching device does not move the main thread. */
    CHECK_OR(orSetDevice(0));
    dev_thread u = {.set_to = 1};
    cr_assert_eq(pthread_create(&th, NULL, device_thread, &u), 0);
    pthread_join(th, NULL);
    CR_ASSERT_OR_EQ(u.err, orSuccess, "thread calls");
    cr_assert_eq(u.seen_end, 1);
    int d = -1;
    CHECK_OR(orGetDevice(&d));
    cr_assert_eq(d, 0);
}

/* Counts the CPUs in an hwloc list string like "0-3,8,10-11"; -1 if malformed. */
static int cpulist_count(const char *s)
{
    int total = 0;
    if (!*s)
        return -1;
    while (*s) {
        if (!isdigit((unsigned char)*s))
            return -1;
        long a = strtol(s, (char **)&s, 10), b = a;
        if (*s == '-') {
            s++;
            if (!isdigit((unsigned char)*s))
                return -1;
            b = strtol(s, (char **)&s, 10);
        }
        if (b < a)
            return -1;
        total += (int)(b - a + 1);
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return total;
}

Test(devices, cpulist_parser_self_check)
{
    cr_assert_eq(cpulist_count("0"), 1);
    cr_assert_eq(cpulist_count("0-1"), 2);
    cr_assert_eq(cpulist_count("0-3,8,10-11"), 7);
    cr_assert_eq(cpulist_count("x"), -1);
    cr_assert_eq(cpulist_count(""), -1);
}

static void check_fixed_props(const orDeviceProp *p)
{
    cr_assert_gt(strlen(p->name), 0, "name non-empty");
    cr_assert_lt(strlen(p->name), sizeof p->name);
    cr_assert_geq(p->numaNode, 0, "numaNode on Linux");
    cr_assert_gt(cpulist_count(p->cpuList), 0, "cpuList '%s' is not an hwloc list", p->cpuList);
    cr_assert_eq(p->sharedMemPerBlock, 49152);
    cr_assert_eq(p->maxThreadsPerBlock, 1024);
    cr_assert_eq(p->maxThreadsDim[0], 1024);
    cr_assert_eq(p->maxThreadsDim[1], 1024);
    cr_assert_eq(p->maxThreadsDim[2], 64);
    cr_assert_eq(p->maxGridSize[0], 2147483647);
    cr_assert_eq(p->maxGridSize[1], 65535);
    cr_assert_eq(p->maxGridSize[2], 65535);
    cr_assert_geq(p->asyncEngineCount, 1);
}

Test(devices, properties_defaults)
{
    for (int d = 0; d < 2; d++) {
        orDeviceProp p;
        memset(&p, 0, sizeof p);
        CHECK_OR(orGetDeviceProperties(&p, d));
        check_fixed_props(&p);
        assert_host_share(p.totalGlobalMem, 2);
        cr_assert_geq(p.multiProcessorCount, 1);
    }
}

Test(devices, properties_follow_env)
{
    set_env("OPENREG_DEVICE_MEM", "256M");
    set_env("OPENREG_DEVICE_THREADS", "3");
    orDeviceProp p;
    memset(&p, 0, sizeof p);
    CHECK_OR(orGetDeviceProperties(&p, 1));
    check_fixed_props(&p);
    cr_assert_eq(p.totalGlobalMem, (size_t)256 << 20);
    cr_assert_eq(p.multiProcessorCount, 3);
}

Test(devices, properties_auto_threads_match_cpulist)
{
    set_env("OPENREG_DEVICE_THREADS", "0");
    orDeviceProp p;
    memset(&p, 0, sizeof p);
    CHECK_OR(orGetDeviceProperties(&p, 0));
    /* Auto means one compute thread per core of the device's cpuset. */
    cr_assert_eq(p.multiProcessorCount, cpulist_count(p.cpuList), "threads %d, cpuList %s",
                 p.multiProcessorCount, p.cpuList);
}

Test(devices, properties_errors_leave_output)
{
    orDeviceProp p;
    memset(&p, 0xab, sizeof p);
    orDeviceProp before = p;
    EXPECT_OR(orGetDeviceProperties(NULL, 0), orErrorInvalidValue);
    EXPECT_OR(orGetDeviceProperties(&p, -1), orErrorInvalidDevice);
    EXPECT_OR(orGetDeviceProperties(&p, 2), orErrorInvalidDevice);
    cr_assert_eq(memcmp(&p, &before, sizeof p), 0, "props written on failure");
}

Test(devices, synchronize_waits_for_all_streams)
{
    enum { N = 3 };
    orStream_t s[N];
    sleep_flag_t flags[N + 1];
    for (int i = 0; i < N; i++) {
        CHECK_OR(orStreamCreate(&s[i]));
        flags[i].sleep_ms = 30 + 10 * i;
        atomic_init(&flags[i].flag, 0);
        CHECK_OR(orLaunchHostFunc(s[i], sleep_flag_fn, &flags[i]));
    }
    flags[N].sleep_ms = 30;
    atomic_init(&flags[N].flag, 0);
    CHECK_OR(orLaunchHostFunc(NULL, sleep_flag_fn, &flags[N])); /* default stream too */
    CHECK_OR(orDeviceSynchronize());
    for (int i = 0; i <= N; i++)
        cr_assert_eq(atomic_load(&flags[i].flag), 1, "stream %d not drained", i);
    for (int i = 0; i < N; i++)
        CHECK_OR(orStreamDestroy(s[i]));
}

Test(devices, synchronize_waits_for_device_work_of_kernels)
{
    /* Kernel results are visible right after orDeviceSynchronize. */
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    int *pinned = NULL;
    CHECK_OR(orMallocHost((void **)&pinned, 1024 * sizeof(int)));
    for (int i = 0; i < 1024; i++)
        pinned[i] = i;
    CHECK_OR(orLaunchHostFunc(s, sleep_fn, (void *)(intptr_t)20));
    CHECK_OR(launch_axpb(pinned, 1024, 2, 1, s)); /* kernels may touch pinned memory */
    CHECK_OR(orDeviceSynchronize());
    for (int i = 0; i < 1024; i++)
        cr_assert_eq(pinned[i], 2 * i + 1);
    CHECK_OR(orStreamDestroy(s));
    CHECK_OR(orFreeHost(pinned));
}

Test(devices, synchronize_is_per_device)
{
    /* A blocked stream on device 1 must not hold up orDeviceSynchronize on 0. */
    gate_t g = {0};
    orStream_t s1;
    CHECK_OR(orSetDevice(1));
    CHECK_OR(orStreamCreate(&s1));
    CHECK_OR(orLaunchHostFunc(s1, gate_fn, &g));
    CHECK_OR(orSetDevice(0));
    double t0 = now_ms();
    CHECK_OR(orDeviceSynchronize());
    double took = now_ms() - t0;
    gate_open(&g);
    CHECK_OR(orStreamSynchronize(s1));
    cr_assert_lt(took, DEADLINE_MS / 2, "device 0 sync waited for device 1 (%.0f ms)", took);
    CHECK_OR(orStreamDestroy(s1));
}

Test(devices, priority_range)
{
    int least = 99, greatest = 99;
    CHECK_OR(orDeviceGetStreamPriorityRange(&least, &greatest));
    cr_assert_eq(least, 0);
    cr_assert_eq(greatest, -2);
    least = 99;
    CHECK_OR(orDeviceGetStreamPriorityRange(&least, NULL));
    cr_assert_eq(least, 0);
    greatest = 99;
    CHECK_OR(orDeviceGetStreamPriorityRange(NULL, &greatest));
    cr_assert_eq(greatest, -2);
    CHECK_OR(orDeviceGetStreamPriorityRange(NULL, NULL));
}
