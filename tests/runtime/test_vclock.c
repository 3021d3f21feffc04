/*
 * test_vclock.c - OPENREG_TIME=virtual: every op is charged its closed form
 * (docs/virtual-time.md), exactly, in integer nanoseconds; dependencies take
 * the max; results are those of wall mode. Each test runs in its own
 * process, so the environment set before the first call is what it sees.
 */
#include "helpers.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "runtime_ext.h"

TestSuite(vclock, .timeout = 60);

/* The documented defaults (docs/virtual-time.md), restated: the test checks
 * the model users read, not the constants the code happens to hold. */
#define HOST_LINK_NS 5000ll
#define HOST_LINK_BPS 25000000000ll
#define LOCAL_NS 2000ll
#define PEER_NS 5000ll
#define PEER_BPS 25000000000ll
#define LAUNCH_NS 3000ll
#define A100_BPS 2039000000000ll /* memory bandwidth, bytes/s */
#define A100_GFLOPS 19500.0

static long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }
/* bytes at bps, in ns, rounded up */
static long long xfer_ns(long long bytes, long long bps) { return ceil_div(bytes * 1000000000ll, bps); }

static void virtual_a100(void)
{
    set_env("OPENREG_TIME", "virtual");
    set_env("OPENREG_DEVICE_PROFILE", "a100");
    set_env("OPENREG_DEVICE_MEM", "256M");
}

static orEvent_t timed_event(void)
{
    orEvent_t e;
    CHECK_OR(orEventCreateWithFlags(&e, orEventEnableTiming));
    return e;
}

static long long elapsed(orEvent_t a, orEvent_t b)
{
    long long ns = -1;
    CHECK_OR(orEventElapsedTimeNs(&ns, a, b));
    return ns;
}

Test(vclock, copy_host_to_device_is_latency_plus_bytes_over_bandwidth)
{
    virtual_a100();
    const size_t sizes[] = {1, 4096, 1 << 20, 3000001};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        void *h, *d;
        CHECK_OR(orMallocHost(&h, n));
        CHECK_OR(orMalloc(&d, n));
        memset(h, 0x5a, n);
        orStream_t s;
        CHECK_OR(orStreamCreate(&s));
        orEvent_t a = timed_event(), b = timed_event(), c = timed_event();
        CHECK_OR(orEventRecord(a, s));
        CHECK_OR(orMemcpyAsync(d, h, n, orMemcpyHostToDevice, s));
        CHECK_OR(orEventRecord(b, s));
        CHECK_OR(orMemcpyAsync(h, d, n, orMemcpyDeviceToHost, s));
        CHECK_OR(orEventRecord(c, s));
        CHECK_OR(orStreamSynchronize(s));
        long long want = HOST_LINK_NS + xfer_ns((long long)n, HOST_LINK_BPS);
        cr_assert_eq(elapsed(a, b), want, "H2D of %zu bytes: %lld ns, want %lld", n, elapsed(a, b),
                     want);
        cr_assert_eq(elapsed(b, c), want, "D2H of %zu bytes", n);
        float ms;
        CHECK_OR(orEventElapsedTime(&ms, a, b));
        cr_assert_eq(ms, (float)((double)want / 1e6), "orEventElapsedTime: %g ms", ms);
        CHECK_OR(orEventDestroy(a));
        CHECK_OR(orEventDestroy(b));
        CHECK_OR(orEventDestroy(c));
        CHECK_OR(orStreamDestroy(s));
        CHECK_OR(orFree(d));
        CHECK_OR(orFreeHost(h));
    }
}

Test(vclock, device_copy_and_memset_use_the_profile_memory_bandwidth)
{
    virtual_a100();
    size_t n = 2039000; /* exactly 1000 ns at 2039 GB/s */
    char *x, *y;
    CHECK_OR(orMalloc((void **)&x, n));
    CHECK_OR(orMalloc((void **)&y, n));
    orEvent_t a = timed_event(), b = timed_event(), c = timed_event();
    CHECK_OR(orEventRecord(a, NULL));
    CHECK_OR(orMemsetAsync(x, 7, n, NULL));
    CHECK_OR(orEventRecord(b, NULL));
    CHECK_OR(orMemcpyAsync(y, x, n, orMemcpyDeviceToDevice, NULL));
    CHECK_OR(orEventRecord(c, NULL));
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq(elapsed(a, b), LOCAL_NS + 1000);
    cr_assert_eq(elapsed(b, c), LOCAL_NS + 1000);
    /* Results are wall mode's: the bytes moved. */
    char probe[3];
    CHECK_OR(orMemcpy(probe, y + n - 3, 3, orMemcpyDeviceToHost));
    cr_assert(probe[0] == 7 && probe[2] == 7);
}

Test(vclock, peer_copy_uses_the_default_peer_link)
{
    virtual_a100();
    size_t n = 1 << 22;
    void *d0, *d1;
    CHECK_OR(orSetDevice(1));
    CHECK_OR(orMalloc(&d1, n));
    CHECK_OR(orSetDevice(0));
    CHECK_OR(orMalloc(&d0, n));
    orEvent_t a = timed_event(), b = timed_event();
    CHECK_OR(orEventRecord(a, NULL));
    CHECK_OR(orMemcpyPeerAsync(d1, 1, d0, 0, n, NULL));
    CHECK_OR(orEventRecord(b, NULL));
    CHECK_OR(orEventSynchronize(b));
    cr_assert_eq(elapsed(a, b), PEER_NS + xfer_ns((long long)n, PEER_BPS));
    cr_assert_eq(or_vclock_path_cost(0, 1, n), (uint64_t)(PEER_NS + xfer_ns((long long)n, PEER_BPS)));
    cr_assert_eq(or_vclock_path_cost(OR_VCLOCK_HOST, 1, n),
                 (uint64_t)(HOST_LINK_NS + xfer_ns((long long)n, HOST_LINK_BPS)));
}

static void fill_kernel(const orKernelContext *c, void *p)
{
    int *out = *(int **)p;
    out[c->blockIdx.x] = (int)c->blockIdx.x + 1;
}

Test(vclock, declared_kernel_costs_latency_plus_the_bound_of_flops_and_bytes)
{
    virtual_a100();
    int *out;
    CHECK_OR(orMalloc((void **)&out, 64 * sizeof(int)));
    orEvent_t a = timed_event(), b = timed_event(), c = timed_event();
    /* Compute-bound: 19.5 GFLOP at 19.5 TFLOP/s is 1 ms exactly. */
    orLaunchCost compute = {19.5e9, 1e6};
    orLaunchConfig cfg = {{64, 1, 1}, {1, 1, 1}, 0, NULL, &compute, "fill"};
    CHECK_OR(orEventRecord(a, NULL));
    CHECK_OR(orLaunchKernelEx(&cfg, fill_kernel, &out, sizeof out));
    CHECK_OR(orEventRecord(b, NULL));
    /* Memory-bound: 2.039 GB at 2039 GB/s is 1 ms. */
    orLaunchCost memory = {1e3, 2.039e9};
    cfg.cost = &memory;
    CHECK_OR(orLaunchKernelEx(&cfg, fill_kernel, &out, sizeof out));
    CHECK_OR(orEventRecord(c, NULL));
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq(elapsed(a, b), LAUNCH_NS + 1000000);
    cr_assert_eq(elapsed(b, c), LAUNCH_NS + 1000000);
    int host[64];
    CHECK_OR(orMemcpy(host, out, sizeof host, orMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++)
        cr_assert_eq(host[i], i + 1, "the kernel ran: out[%d] = %d", i, host[i]);
}

Test(vclock, undeclared_kernel_is_estimated_from_the_grid)
{
    virtual_a100();
    int *out;
    CHECK_OR(orMalloc((void **)&out, 100 * sizeof(int)));
    orEvent_t a = timed_event(), b = timed_event();
    CHECK_OR(orEventRecord(a, NULL));
    CHECK_OR(orLaunchKernel(fill_kernel, dim3(100, 1, 1), dim3(256, 1, 1), &out, sizeof out, 0,
                            NULL));
    CHECK_OR(orEventRecord(b, NULL));
    CHECK_OR(orDeviceSynchronize());
    /* 25600 threads, 2 FLOPs and 8 bytes each. */
    double threads = 100.0 * 256;
    long long compute = (long long)ceil(threads * 2 / A100_GFLOPS);
    long long memory = (long long)ceil(threads * 8 / 2039.0);
    cr_assert_eq(elapsed(a, b), LAUNCH_NS + (compute > memory ? compute : memory));
}

Test(vclock, random_numbers_are_charged_as_writing_them)
{
    virtual_a100();
    float *x;
    size_t n = 2039000 / 4; /* 2.039 MB: 1000 ns at 2039 GB/s */
    CHECK_OR(orMalloc((void **)&x, n * sizeof(float)));
    orEvent_t a = timed_event(), b = timed_event(), c = timed_event();
    CHECK_OR(orEventRecord(a, NULL));
    CHECK_OR(orRandGenerateUniform(x, n, 42, 0, NULL));
    CHECK_OR(orEventRecord(b, NULL));
    CHECK_OR(orRandGenerateNormal(x, n, 0.0f, 1.0f, 42, 0, NULL));
    CHECK_OR(orEventRecord(c, NULL));
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq(elapsed(a, b), LAUNCH_NS + 1000);
    cr_assert_eq(elapsed(b, c), LAUNCH_NS + 1000);
}

Test(vclock, bad_launch_cost_is_invalid_value)
{
    virtual_a100();
    int *out;
    CHECK_OR(orMalloc((void **)&out, 64 * sizeof(int)));
    orLaunchCost bad[] = {{-1, 0}, {0, -5}, {NAN, 0}, {0, INFINITY}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        orLaunchConfig cfg = {{1, 1, 1}, {1, 1, 1}, 0, NULL, &bad[i], NULL};
        EXPECT_OR(orLaunchKernelEx(&cfg, fill_kernel, &out, sizeof out), orErrorInvalidValue);
    }
    EXPECT_OR(orLaunchKernelEx(NULL, fill_kernel, &out, sizeof out), orErrorInvalidValue);
    orLaunchConfig zero_grid = {{0, 1, 1}, {1, 1, 1}, 0, NULL, NULL, NULL};
    EXPECT_OR(orLaunchKernelEx(&zero_grid, fill_kernel, &out, sizeof out), orErrorInvalidValue);
    long long ns;
    orEvent_t e = timed_event();
    EXPECT_OR(orEventElapsedTimeNs(NULL, e, e), orErrorInvalidValue);
    EXPECT_OR(orEventElapsedTimeNs(&ns, e, e), orErrorInvalidResourceHandle); /* never recorded */
}

Test(vclock, absurd_declared_costs_saturate_instead_of_wrapping)
{
    virtual_a100();
    int *out;
    CHECK_OR(orMalloc((void **)&out, sizeof(int)));
    orLaunchCost huge = {1e300, 1e300};
    orLaunchConfig cfg = {{1, 1, 1}, {1, 1, 1}, 0, NULL, &huge, NULL};
    orEvent_t ev[7];
    for (int i = 0; i < 7; i++) {
        ev[i] = timed_event();
        CHECK_OR(orEventRecord(ev[i], NULL));
        CHECK_OR(orLaunchKernelEx(&cfg, fill_kernel, &out, sizeof out));
    }
    CHECK_OR(orDeviceSynchronize());
    for (int i = 1; i < 7; i++)
        cr_assert_geq(elapsed(ev[i - 1], ev[i]), 0, "the clock went back after kernel %d", i);
    cr_assert_gt(elapsed(ev[0], ev[1]), 1000000000000000000ll); /* more than 1e18 ns */
}

Test(vclock, waiting_on_an_event_takes_the_max_of_both_streams)
{
    virtual_a100();
    int *out;
    void *h, *d;
    size_t n = 1 << 20;
    CHECK_OR(orMalloc((void **)&out, 64 * sizeof(int)));
    CHECK_OR(orMallocHost(&h, n));
    CHECK_OR(orMalloc(&d, n));
    orStream_t s1, s2;
    CHECK_OR(orStreamCreate(&s1));
    CHECK_OR(orStreamCreate(&s2));
    orEvent_t t0 = timed_event(), k1 = timed_event(), end = timed_event();
    CHECK_OR(orEventRecord(t0, s2)); /* both streams start at 0 */
    orLaunchCost ms1 = {19.5e9, 0}; /* 1 ms */
    orLaunchConfig cfg = {{1, 1, 1}, {1, 1, 1}, 0, s1, &ms1, "long"};
    CHECK_OR(orLaunchKernelEx(&cfg, fill_kernel, &out, sizeof out));
    CHECK_OR(orEventRecord(k1, s1));
    CHECK_OR(orMemcpyAsync(d, h, n, orMemcpyHostToDevice, s2)); /* shorter than the kernel */
    CHECK_OR(orStreamWaitEvent(s2, k1, 0));
    orLaunchCost half = {9.75e9, 0}; /* 0.5 ms */
    cfg.stream = s2;
    cfg.cost = &half;
    CHECK_OR(orLaunchKernelEx(&cfg, fill_kernel, &out, sizeof out));
    CHECK_OR(orEventRecord(end, s2));
    CHECK_OR(orStreamSynchronize(s2));
    long long copy = HOST_LINK_NS + xfer_ns((long long)n, HOST_LINK_BPS);
    cr_assert_lt(copy, LAUNCH_NS + 1000000);
    cr_assert_eq(elapsed(t0, end), (LAUNCH_NS + 1000000) + (LAUNCH_NS + 500000));
    /* Without the wait the copy and the kernel would have overlapped: the
     * other order of the max. */
    orEvent_t s2_now = timed_event();
    CHECK_OR(orEventRecord(s2_now, s2));
    CHECK_OR(orEventSynchronize(s2_now));
    cr_assert_eq(elapsed(t0, s2_now), elapsed(t0, end));
}

Test(vclock, host_synchronization_orders_later_work)
{
    virtual_a100();
    int *out;
    CHECK_OR(orMalloc((void **)&out, 64 * sizeof(int)));
    orStream_t s1, s2;
    CHECK_OR(orStreamCreate(&s1));
    CHECK_OR(orStreamCreate(&s2));
    orEvent_t t0 = timed_event(), after = timed_event();
    CHECK_OR(orEventRecord(t0, s1));
    orLaunchCost ms1 = {19.5e9, 0};
    orLaunchConfig cfg = {{1, 1, 1}, {1, 1, 1}, 0, s1, &ms1, NULL};
    CHECK_OR(orLaunchKernelEx(&cfg, fill_kernel, &out, sizeof out));
    CHECK_OR(orStreamSynchronize(s1));
    /* The host waited for s1: s2's work cannot start before it ended. */
    CHECK_OR(orEventRecord(after, s2));
    CHECK_OR(orEventSynchronize(after));
    cr_assert_eq(elapsed(t0, after), LAUNCH_NS + 1000000);
}

Test(vclock, device_synchronize_waits_for_the_latest_stream)
{
    virtual_a100();
    int *out;
    CHECK_OR(orMalloc((void **)&out, 64 * sizeof(int)));
    orStream_t s1, s2, s3;
    CHECK_OR(orStreamCreate(&s1));
    CHECK_OR(orStreamCreate(&s2));
    CHECK_OR(orStreamCreate(&s3));
    orEvent_t t0 = timed_event(), after = timed_event();
    CHECK_OR(orEventRecord(t0, s3));
    orLaunchCost c1 = {19.5e9, 0}, c2 = {2 * 19.5e9, 0};
    orLaunchConfig cfg = {{1, 1, 1}, {1, 1, 1}, 0, s1, &c1, NULL};
    CHECK_OR(orLaunchKernelEx(&cfg, fill_kernel, &out, sizeof out));
    cfg.stream = s2;
    cfg.cost = &c2;
    CHECK_OR(orLaunchKernelEx(&cfg, fill_kernel, &out, sizeof out));
    CHECK_OR(orDeviceSynchronize());
    CHECK_OR(orEventRecord(after, s3));
    CHECK_OR(orEventSynchronize(after));
    cr_assert_eq(elapsed(t0, after), LAUNCH_NS + 2000000);
    /* A synchronous copy: the host resumes when it ends. */
    int host[64];
    CHECK_OR(orMemcpy(host, out, sizeof host, orMemcpyDeviceToHost));
    orEvent_t later = timed_event();
    CHECK_OR(orEventRecord(later, s3));
    CHECK_OR(orEventSynchronize(later));
    cr_assert_eq(elapsed(after, later), HOST_LINK_NS + xfer_ns(sizeof host, HOST_LINK_BPS));
}

Test(vclock, transfers_on_one_link_share_it)
{
    virtual_a100();
    size_t n = 25000000; /* 1 ms on the host link */
    void *h, *d1, *d2, *d3;
    CHECK_OR(orMallocHost(&h, n));
    CHECK_OR(orMalloc(&d1, n));
    CHECK_OR(orMalloc(&d2, n));
    CHECK_OR(orMalloc(&d3, n));
    orStream_t s1, s2, s3;
    CHECK_OR(orStreamCreate(&s1));
    CHECK_OR(orStreamCreate(&s2));
    CHECK_OR(orStreamCreate(&s3));
    orEvent_t a = timed_event(), e1 = timed_event(), e2 = timed_event(), e3 = timed_event();
    CHECK_OR(orEventRecord(a, s1));
    CHECK_OR(orMemcpyAsync(d1, h, n, orMemcpyHostToDevice, s1));
    CHECK_OR(orEventRecord(e1, s1));
    CHECK_OR(orMemcpyAsync(d2, h, n, orMemcpyHostToDevice, s2)); /* same link: waits its turn */
    CHECK_OR(orEventRecord(e2, s2));
    CHECK_OR(orMemcpyAsync(h, d3, n, orMemcpyDeviceToHost, s3)); /* the other direction: free */
    CHECK_OR(orEventRecord(e3, s3));
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq(elapsed(a, e1), HOST_LINK_NS + 1000000);
    cr_assert_eq(elapsed(a, e2), HOST_LINK_NS + 2000000);
    cr_assert_eq(elapsed(a, e3), HOST_LINK_NS + 1000000);
}

/* A declared topology (docs/topology.md#synthetic-strings): three devices on
 * one switch, each link 100 GB/s with half of the 2 us device-to-device
 * latency, and a 20 GB/s, 1 us PCIe link from each device to the CPU. */
#define TOPO_SWITCH3 "devices:3 shape:switch intra:100GB/s,2us host:20GB/s,1us"
#define TOPO_PEER_NS 2000ll
#define TOPO_PEER_BPS 100000000000ll
#define TOPO_HOST_NS 1000ll
#define TOPO_HOST_BPS 20000000000ll

static void virtual_topology(const char *topo)
{
    virtual_a100();
    set_env("OPENREG_TOPO", topo);
    set_env("OPENREG_DEVICES", "3");
}

Test(vclock, copies_cost_the_declared_topology_path)
{
    virtual_topology(TOPO_SWITCH3);
    size_t n = 3000001;
    void *h, *d0, *d1;
    CHECK_OR(orMallocHost(&h, n));
    CHECK_OR(orSetDevice(1));
    CHECK_OR(orMalloc(&d1, n));
    CHECK_OR(orSetDevice(0));
    CHECK_OR(orMalloc(&d0, n));
    orEvent_t a = timed_event(), b = timed_event(), c = timed_event(), d = timed_event();
    CHECK_OR(orEventRecord(a, NULL));
    CHECK_OR(orMemcpyPeerAsync(d1, 1, d0, 0, n, NULL));
    CHECK_OR(orEventRecord(b, NULL));
    CHECK_OR(orMemcpyAsync(d0, h, n, orMemcpyHostToDevice, NULL));
    CHECK_OR(orEventRecord(c, NULL));
    CHECK_OR(orMemcpyAsync(h, d0, n, orMemcpyDeviceToHost, NULL));
    CHECK_OR(orEventRecord(d, NULL));
    CHECK_OR(orDeviceSynchronize());
    long long peer = TOPO_PEER_NS + xfer_ns((long long)n, TOPO_PEER_BPS);
    long long host = TOPO_HOST_NS + xfer_ns((long long)n, TOPO_HOST_BPS);
    cr_assert_eq(elapsed(a, b), peer, "peer copy: %lld ns, want %lld", elapsed(a, b), peer);
    cr_assert_eq(elapsed(b, c), host, "H2D: %lld ns, want %lld", elapsed(b, c), host);
    cr_assert_eq(elapsed(c, d), host, "D2H: %lld ns, want %lld", elapsed(c, d), host);
    cr_assert_eq(or_vclock_path_cost(0, 2, n), (uint64_t)peer);
    cr_assert_eq(or_vclock_path_cost(OR_VCLOCK_HOST, 2, n), (uint64_t)host);
}

/* 0 -> 1 and 2 -> 1 both use the switch's link to device 1 (not their first
 * hop, which differs): the second waits for the first. 1 -> 0 runs the other
 * way on every link and is free. */
Test(vclock, topology_transfers_share_every_link_of_their_path)
{
    virtual_topology(TOPO_SWITCH3);
    size_t n = 100000000; /* 1 ms at 100 GB/s */
    void *d[3], *e1p;
    for (int i = 2; i >= 0; i--) {
        CHECK_OR(orSetDevice(i));
        CHECK_OR(orMalloc(&d[i], n));
    }
    CHECK_OR(orSetDevice(1));
    CHECK_OR(orMalloc(&e1p, n));
    CHECK_OR(orSetDevice(0));
    orStream_t s1, s2, s3;
    CHECK_OR(orStreamCreate(&s1));
    CHECK_OR(orStreamCreate(&s2));
    CHECK_OR(orStreamCreate(&s3));
    orEvent_t a = timed_event(), e1 = timed_event(), e2 = timed_event(), e3 = timed_event();
    CHECK_OR(orEventRecord(a, s1));
    CHECK_OR(orMemcpyPeerAsync(d[1], 1, d[0], 0, n, s1));
    CHECK_OR(orEventRecord(e1, s1));
    CHECK_OR(orMemcpyPeerAsync(e1p, 1, d[2], 2, n, s2)); /* shares switch -> device 1 */
    CHECK_OR(orEventRecord(e2, s2));
    CHECK_OR(orMemcpyPeerAsync(d[0], 0, d[1], 1, n, s3)); /* the other direction: free */
    CHECK_OR(orEventRecord(e3, s3));
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq(elapsed(a, e1), TOPO_PEER_NS + 1000000);
    cr_assert_eq(elapsed(a, e2), TOPO_PEER_NS + 2000000, "second transfer into device 1: %lld",
                 elapsed(a, e2));
    cr_assert_eq(elapsed(a, e3), TOPO_PEER_NS + 1000000);
}

Test(vclock, collectives_can_charge_a_stream)
{
    virtual_a100();
    cr_assert(or_vclock_virtual());
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    orEvent_t a = timed_event(), b = timed_event();
    CHECK_OR(orEventRecord(a, s));
    uint64_t end = 0;
    CHECK_OR(or_stream_advance_vclock(s, 10000, 500, &end));
    cr_assert_eq(end, 10500);
    cr_assert_eq(or_stream_vclock(s), 10500);
    CHECK_OR(orEventRecord(b, s));
    CHECK_OR(orEventSynchronize(b));
    cr_assert_eq(elapsed(a, b), 10500);
    /* An earlier start than the clock does not go back in time. */
    CHECK_OR(or_stream_advance_vclock(s, 0, 100, &end));
    cr_assert_eq(end, 10600);
    cr_assert_eq(or_stream_advance_vclock((orStream_t)0x1234, 0, 1, &end),
                 orErrorInvalidResourceHandle);
}

/* A held task: what the program issues after it on its stream starts at the
 * end the task gives when it runs, however late it runs. */
typedef struct held_task {
    orStream_t s;
    uint64_t entry;
    _Atomic int go;
} held_task;

static void held_main(void *arg)
{
    held_task *t = arg;
    while (!atomic_load(&t->go)) /* the issuing thread is blocked meanwhile */
        usleep(1000);
    or_stream_release_vclock(t->s, t->entry + 70000);
}

static void *release_later(void *arg)
{
    usleep(50000);
    atomic_store(&((held_task *)arg)->go, 1);
    return NULL;
}

Test(vclock, a_held_task_sets_the_start_of_later_work)
{
    virtual_a100();
    orStream_t s, s2;
    CHECK_OR(orStreamCreate(&s));
    CHECK_OR(orStreamCreate(&s2));
    orEvent_t a = timed_event(), b = timed_event(), c = timed_event();
    CHECK_OR(or_stream_advance_vclock(s, 0, 1000, NULL));
    CHECK_OR(orEventRecord(a, s));
    held_task t = {s, 1, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, release_later, &t), 0);
    CHECK_OR(or_launch_host_func_held(s, held_main, &t, &t.entry));
    cr_assert_eq(t.entry, 1000); /* known before the task runs */
    CHECK_OR(orEventRecord(b, s)); /* waits for the release */
    cr_assert(atomic_load(&t.go));
    CHECK_OR(orStreamWaitEvent(s2, b, 0));
    CHECK_OR(orEventRecord(c, s2));
    CHECK_OR(orStreamSynchronize(s2));
    cr_assert_eq(elapsed(a, b), 70000);
    cr_assert_eq(elapsed(a, c), 70000);
    pthread_join(th, NULL);
    cr_assert_eq(or_launch_host_func_held(s, NULL, NULL, NULL), orErrorInvalidValue);
    cr_assert_eq(or_launch_host_func_held((orStream_t)0x1234, held_main, &t, NULL),
                 orErrorInvalidResourceHandle);
}

Test(vclock, cpu_profile_is_rated_as_one_core)
{
    set_env("OPENREG_TIME", "virtual");
    orDeviceProp p;
    CHECK_OR(orGetDeviceProperties(&p, 0));
    cr_assert_eq(p.computeRateGflops, 32.0);
    cr_assert_eq(p.memoryBandwidthGBs, 10.0);
}

Test(vclock, wall_mode_is_the_default)
{
    cr_assert_not(or_vclock_virtual());
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    cr_assert_eq(or_stream_vclock(s), 0);
    uint64_t end = 7;
    CHECK_OR(or_stream_advance_vclock(s, 100, 100, &end));
    cr_assert_eq(end, 0);
}
