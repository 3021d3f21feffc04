/*
 * test_streams.c - stream lifetime, handle validation, in-order execution,
 * cross-stream and cross-device event waits, and priorities. Ordering is
 * always proven by data (values written by earlier steps), not by timing.
 */
#include "helpers.h"

/* A hang (e.g. a wait that never completes) fails the test instead of the run. */
TestSuite(streams, .timeout = 60);

static orStream_t new_stream(void)
{
    orStream_t s = NULL;
    CHECK_OR(orStreamCreate(&s));
    cr_assert_not_null(s);
    return s;
}

/* ---- creation and priorities ------------------------------------------ */

Test(streams, create_destroy)
{
    orStream_t a = new_stream(), b = new_stream();
    cr_assert_neq(a, b);
    CHECK_OR(orStreamQuery(a));
    CHECK_OR(orStreamSynchronize(a));
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orStreamDestroy(b));
}

Test(streams, create_null)
{
    EXPECT_OR(orStreamCreate(NULL), orErrorInvalidValue);
    EXPECT_OR(orStreamCreateWithPriority(NULL, 0, 0), orErrorInvalidValue);
}

Test(streams, create_with_priority_flags)
{
    orStream_t s = (orStream_t)0x77;
    EXPECT_OR(orStreamCreateWithPriority(&s, 2, 0), orErrorInvalidValue);
    EXPECT_OR(orStreamCreateWithPriority(&s, 0x80000000u, 0), orErrorInvalidValue);
    cr_assert_eq(s, (orStream_t)0x77, "output written on failure");
    CHECK_OR(orStreamCreateWithPriority(&s, orStreamNonBlocking, 0));
    CHECK_OR(orStreamDestroy(s));
    CHECK_OR(orStreamCreateWithPriority(&s, orStreamDefault, 0));
    CHECK_OR(orStreamDestroy(s));
}

Test(streams, priority_clamped)
{
    const int asked[] = {-100, -3, -2, -1, 0, 1, 100};
    const int want[] = {-2, -2, -2, -1, 0, 0, 0};
    for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++) {
        orStream_t s;
        int p = 42;
        CHECK_OR(orStreamCreateWithPriority(&s, 0, asked[i]));
        CHECK_OR(orStreamGetPriority(s, &p));
        cr_assert_eq(p, want[i], "asked %d, got %d", asked[i], p);
        CHECK_OR(orStreamDestroy(s));
    }
}

Test(streams, get_priority_default_and_errors)
{
    int p = 42;
    CHECK_OR(orStreamGetPriority(NULL, &p));
    cr_assert_eq(p, 0, "default stream priority");
    orStream_t s = new_stream();
    p = 42;
    CHECK_OR(orStreamGetPriority(s, &p));
    cr_assert_eq(p, 0, "orStreamCreate gives priority 0");
    EXPECT_OR(orStreamGetPriority(s, NULL), orErrorInvalidValue);
    p = 42;
    EXPECT_OR(orStreamGetPriority((orStream_t)0x1234, &p), orErrorInvalidResourceHandle);
    CHECK_OR(orStreamDestroy(s));
    EXPECT_OR(orStreamGetPriority(s, &p), orErrorInvalidResourceHandle);
    cr_assert_eq(p, 42);
}

/* ---- bad handles ---------------------------------------------------------- */

static void noop_fn(void *p)
{
    (void)p;
}

static void noop_kernel(const orKernelContext *c, void *a)
{
    (void)c;
    (void)a;
}

/* Every stream-taking call must reject s with orErrorInvalidResourceHandle. */
static void expect_bad_stream(orStream_t s, const char *what)
{
    int p = 42;
    char h[16] = {0};
    void *d = NULL;
    orEvent_t e;
    CHECK_OR(orMalloc(&d, sizeof h));
    CHECK_OR(orEventCreate(&e));
    cr_log_info("bad stream: %s", what);
    EXPECT_OR(orStreamSynchronize(s), orErrorInvalidResourceHandle);
    EXPECT_OR(orStreamQuery(s), orErrorInvalidResourceHandle);
    EXPECT_OR(orStreamGetPriority(s, &p), orErrorInvalidResourceHandle);
    EXPECT_OR(orStreamWaitEvent(s, e, 0), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventRecord(e, s), orErrorInvalidResourceHandle);
    EXPECT_OR(orLaunchHostFunc(s, noop_fn, NULL), orErrorInvalidResourceHandle);
    EXPECT_OR(orLaunchKernel(noop_kernel, dim3(1, 1, 1), dim3(1, 1, 1), NULL, 0, 0, s),
              orErrorInvalidResourceHandle);
    EXPECT_OR(orMemcpyAsync(d, h, sizeof h, orMemcpyHostToDevice, s),
              orErrorInvalidResourceHandle);
    EXPECT_OR(orMemsetAsync(d, 0, sizeof h, s), orErrorInvalidResourceHandle);
    EXPECT_OR(orStreamDestroy(s), orErrorInvalidResourceHandle);
    cr_assert_eq(p, 42);
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orFree(d));
}

Test(streams, destroyed_handle)
{
    orStream_t s = new_stream();
    CHECK_OR(orLaunchHostFunc(s, noop_fn, NULL));
    CHECK_OR(orStreamDestroy(s));
    expect_bad_stream(s, "destroyed");
}

Test(streams, destroy_null_is_default_stream)
{
    EXPECT_OR(orStreamDestroy(NULL), orErrorInvalidResourceHandle);
    CHECK_OR(orStreamSynchronize(NULL)); /* the default stream is still there */
}

Test(streams, event_handle_as_stream)
{
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    expect_bad_stream((orStream_t)e, "event cast to stream");
    CHECK_OR(orEventQuery(e)); /* the event itself is unharmed */
    CHECK_OR(orEventDestroy(e));
}

Test(streams, made_up_handles)
{
    expect_bad_stream((orStream_t)0x1234, "0x1234");
    expect_bad_stream((orStream_t)(uintptr_t)-1, "all ones");
    /* Readable memory that is not a stream. */
    uint64_t junk[64];
    memset(junk, 0x5a, sizeof junk);
    expect_bad_stream((orStream_t)junk, "stack junk");
    uint64_t *heap = calloc(64, sizeof *heap);
    expect_bad_stream((orStream_t)heap, "zeroed heap");
    free(heap);
}

/* ---- query and synchronize -------------------------------------------- */

Test(streams, query_not_ready_while_blocked)
{
    set_env("OPENREG_DEVICE_THREADS", "2");
    orStream_t s = new_stream();
    gate_t g = {0};
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &g));
    cr_assert(wait_atomic_ge(&g.entered, 1, DEADLINE_MS), "host function never started");
    EXPECT_CODE(orStreamQuery(s), orErrorNotReady);
    gate_open(&g);
    CHECK_OR(orStreamSynchronize(s));
    CHECK_OR(orStreamQuery(s));
    CHECK_OR(orStreamDestroy(s));
}

Test(streams, query_not_ready_for_queued_work)
{
    /* Work queued behind a blocked op also counts as pending. */
    orStream_t s = new_stream();
    gate_t g = {0};
    sleep_flag_t f = {.sleep_ms = 0};
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &g));
    CHECK_OR(orLaunchHostFunc(s, sleep_flag_fn, &f));
    EXPECT_CODE(orStreamQuery(s), orErrorNotReady);
    gate_open(&g);
    CHECK_OR(orStreamSynchronize(s));
    cr_assert_eq(atomic_load(&f.flag), 1);
    CHECK_OR(orStreamDestroy(s));
}

Test(streams, not_ready_is_not_an_error)
{
    /* orErrorNotReady is a status, not an error: polling must not leave a
     * stale last error behind (as CUDA's queries). */
    orStream_t s = new_stream();
    gate_t g = {0};
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &g));
    orError_t r = orStreamQuery(s);
    orError_t last = orGetLastError();
    gate_open(&g);
    CHECK_OR(orStreamSynchronize(s));
    CR_ASSERT_OR_EQ(r, orErrorNotReady, "orStreamQuery");
    CR_ASSERT_OR_EQ(last, orSuccess, "orGetLastError after orStreamQuery");
    CHECK_OR(orStreamDestroy(s));
}

Test(streams, synchronize_waits)
{
    orStream_t s = new_stream();
    sleep_flag_t f = {.sleep_ms = 30};
    CHECK_OR(orLaunchHostFunc(s, sleep_flag_fn, &f));
    CHECK_OR(orStreamSynchronize(s));
    cr_assert_eq(atomic_load(&f.flag), 1);
    CHECK_OR(orStreamDestroy(s));
}

Test(streams, default_stream_synchronize_and_query)
{
    sleep_flag_t f = {.sleep_ms = 30};
    CHECK_OR(orLaunchHostFunc(NULL, sleep_flag_fn, &f));
    CHECK_OR(orStreamSynchronize(NULL));
    cr_assert_eq(atomic_load(&f.flag), 1);
    CHECK_OR(orStreamQuery(NULL));
}

/* ---- in-order execution --------------------------------------------- */

Test(streams, pipeline_runs_in_order)
{
    enum { N = 1024 };
    orStream_t s = new_stream();
    int *pin = NULL, *out = NULL, *d = NULL;
    CHECK_OR(orMallocHost((void **)&pin, N * sizeof(int)));
    CHECK_OR(orMallocHost((void **)&out, N * sizeof(int)));
    CHECK_OR(orMalloc((void **)&d, N * sizeof(int)));
    for (int i = 0; i < N; i++) {
        pin[i] = 1;
        out[i] = -1;
    }
    /* Step 1 is slow: if later steps overtook it they would see pin[0] == 1. */
    sleep_store_t st = {.sleep_ms = 20, .dst = &pin[0], .value = 1000};
    CHECK_OR(orLaunchHostFunc(s, sleep_store_fn, &st));
    CHECK_OR(orMemcpyAsync(d, pin, N * sizeof(int), orMemcpyHostToDevice, s));
    CHECK_OR(launch_axpb(d, N, 2, 3, s));
    CHECK_OR(orMemcpyAsync(out, d, N * sizeof(int), orMemcpyDeviceToHost, s));
    CHECK_OR(orStreamSynchronize(s));
    cr_assert_eq(out[0], 2003, "step order broken: out[0] = %d", out[0]);
    for (int i = 1; i < N; i++)
        cr_assert_eq(out[i], 5, "element %d", i);
    CHECK_OR(orStreamDestroy(s));
    CHECK_OR(orFree(d));
    CHECK_OR(orFreeHost(pin));
    CHECK_OR(orFreeHost(out));
}

typedef struct {
    int log[256];
    atomic_int n;
} order_log;

typedef struct {
    order_log *log;
    int id;
} log_entry;

static void log_fn(void *p)
{
    log_entry *e = p;
    int i = atomic_fetch_add(&e->log->n, 1);
    if (i < 256)
        e->log->log[i] = e->id;
}

static void log_kernel(const orKernelContext *c, void *p)
{
    log_fn(*(log_entry **)p);
}

Test(streams, many_ops_keep_order)
{
    set_env("OPENREG_DEVICE_THREADS", "4");
    enum { N = 200 };
    orStream_t s = new_stream();
    order_log log = {.n = 0};
    log_entry ents[N];
    for (int i = 0; i < N; i++) {
        ents[i] = (log_entry){&log, i};
        if (i % 2) {
            CHECK_OR(orLaunchHostFunc(s, log_fn, &ents[i]));
        } else {
            log_entry *ep = &ents[i];
            CHECK_OR(orLaunchKernel(log_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &ep, sizeof ep, 0,
                                    s));
        }
    }
    CHECK_OR(orStreamSynchronize(s));
    cr_assert_eq(atomic_load(&log.n), N);
    for (int i = 0; i < N; i++)
        cr_assert_eq(log.log[i], i, "position %d ran op %d", i, log.log[i]);
    CHECK_OR(orStreamDestroy(s));
}

Test(streams, stream_of_other_device_usable)
{
    /* A stream of device 1 works while device 0 is current; its ops run on device 1. */
    CHECK_OR(orSetDevice(1));
    orStream_t s1 = new_stream();
    int *d1 = NULL;
    CHECK_OR(orMalloc((void **)&d1, 64 * sizeof(int)));
    CHECK_OR(orSetDevice(0));
    int h[64], back[64];
    for (int i = 0; i < 64; i++)
        h[i] = i;
    CHECK_OR(orMemcpyAsync(d1, h, sizeof h, orMemcpyHostToDevice, s1));
    CHECK_OR(launch_axpb(d1, 64, 1, 100, s1));
    CHECK_OR(orMemcpyAsync(back, d1, sizeof h, orMemcpyDeviceToHost, s1));
    CHECK_OR(orStreamSynchronize(s1));
    for (int i = 0; i < 64; i++)
        cr_assert_eq(back[i], i + 100);
    CHECK_OR(orStreamDestroy(s1));
    CHECK_OR(orFree(d1));
}

typedef struct {
    atomic_int *arrived;
    int ok;
} meet_arg;

static void meet_fn(void *p)
{
    meet_arg *m = p;
    atomic_fetch_add(m->arrived, 1);
    m->ok = wait_atomic_ge(m->arrived, 2, 3000);
}

Test(streams, different_streams_run_concurrently)
{
    /* Each host function waits for the other to start: only possible if the
     * two streams' work runs at the same time. */
    set_env("OPENREG_DEVICE_THREADS", "2");
    orStream_t a = new_stream(), b = new_stream();
    atomic_int arrived = 0;
    meet_arg ma = {&arrived, 0}, mb = {&arrived, 0};
    CHECK_OR(orLaunchHostFunc(a, meet_fn, &ma));
    CHECK_OR(orLaunchHostFunc(b, meet_fn, &mb));
    CHECK_OR(orStreamSynchronize(a));
    CHECK_OR(orStreamSynchronize(b));
    cr_assert(ma.ok && mb.ok, "streams were serialized");
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orStreamDestroy(b));
}

/* ---- event waits across streams and devices -------------------------- */

/* Stream a runs a slow host function that writes 77 into *pin and records e;
 * stream b waits for e and copies pin into device memory and back to out. */
static void cross_stream_copy(orStream_t a, orStream_t b, orEvent_t e, int *pin, int *dev_b,
                              int *out)
{
    static sleep_store_t st;
    *pin = 1;
    *out = -1;
    st = (sleep_store_t){.sleep_ms = 40, .dst = pin, .value = 77};
    CHECK_OR(orLaunchHostFunc(a, sleep_store_fn, &st));
    CHECK_OR(orEventRecord(e, a));
    CHECK_OR(orStreamWaitEvent(b, e, 0));
    CHECK_OR(orMemcpyAsync(dev_b, pin, sizeof(int), orMemcpyHostToDevice, b));
    CHECK_OR(orMemcpyAsync(out, dev_b, sizeof(int), orMemcpyDeviceToHost, b));
    CHECK_OR(orStreamSynchronize(b));
}

Test(streams, wait_event_across_streams)
{
    orStream_t a = new_stream(), b = new_stream();
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    int *pin = NULL, *out = NULL, *d = NULL;
    CHECK_OR(orMallocHost((void **)&pin, sizeof(int)));
    CHECK_OR(orMallocHost((void **)&out, sizeof(int)));
    CHECK_OR(orMalloc((void **)&d, sizeof(int)));
    cross_stream_copy(a, b, e, pin, d, out);
    cr_assert_eq(*out, 77, "stream b did not wait for a's write: %d", *out);
    CHECK_OR(orStreamSynchronize(a));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orStreamDestroy(b));
    CHECK_OR(orFree(d));
    CHECK_OR(orFreeHost(pin));
    CHECK_OR(orFreeHost(out));
}

Test(streams, wait_event_across_devices)
{
    orStream_t a = new_stream(); /* device 0 */
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    int *pin = NULL, *out = NULL, *d1 = NULL;
    CHECK_OR(orMallocHost((void **)&pin, sizeof(int)));
    CHECK_OR(orMallocHost((void **)&out, sizeof(int)));
    CHECK_OR(orSetDevice(1));
    orStream_t b = new_stream(); /* device 1 */
    CHECK_OR(orMalloc((void **)&d1, sizeof(int)));
    cross_stream_copy(a, b, e, pin, d1, out);
    cr_assert_eq(*out, 77, "device 1 stream did not wait for device 0's event: %d", *out);
    CHECK_OR(orStreamSynchronize(a));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orStreamDestroy(b));
    CHECK_OR(orFree(d1));
    CHECK_OR(orFreeHost(pin));
    CHECK_OR(orFreeHost(out));
}

Test(streams, wait_event_recorded_on_other_device)
{
    /* Event created on device 0, recorded on a device-1 stream, waited on by device 0. */
    orStream_t b = new_stream(); /* device 0 */
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    int *pin = NULL, *out = NULL, *d0 = NULL;
    CHECK_OR(orMallocHost((void **)&pin, sizeof(int)));
    CHECK_OR(orMallocHost((void **)&out, sizeof(int)));
    CHECK_OR(orMalloc((void **)&d0, sizeof(int)));
    CHECK_OR(orSetDevice(1));
    orStream_t a = new_stream(); /* device 1 */
    CHECK_OR(orSetDevice(0));
    cross_stream_copy(a, b, e, pin, d0, out);
    cr_assert_eq(*out, 77, "device 0 stream did not wait for device 1's record: %d", *out);
    CHECK_OR(orStreamSynchronize(a));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orStreamDestroy(b));
    CHECK_OR(orFree(d0));
    CHECK_OR(orFreeHost(pin));
    CHECK_OR(orFreeHost(out));
}

Test(streams, wait_event_default_stream)
{
    /* The default stream can wait, and be waited on. */
    orStream_t a = new_stream();
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    int *pin = NULL, *out = NULL, *d = NULL;
    CHECK_OR(orMallocHost((void **)&pin, sizeof(int)));
    CHECK_OR(orMallocHost((void **)&out, sizeof(int)));
    CHECK_OR(orMalloc((void **)&d, sizeof(int)));
    cross_stream_copy(a, NULL, e, pin, d, out);
    cr_assert_eq(*out, 77);
    cross_stream_copy(NULL, a, e, pin, d, out);
    cr_assert_eq(*out, 77);
    CHECK_OR(orDeviceSynchronize());
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orFree(d));
    CHECK_OR(orFreeHost(pin));
    CHECK_OR(orFreeHost(out));
}

Test(streams, wait_captures_record_at_call_time)
{
    set_env("OPENREG_DEVICE_THREADS", "4");
    orStream_t a = new_stream(), b = new_stream();
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    int x = 0;
    sleep_store_t st = {.sleep_ms = 20, .dst = &x, .value = 1};
    gate_t g = {0};
    sleep_flag_t done = {.sleep_ms = 0};
    CHECK_OR(orLaunchHostFunc(a, sleep_store_fn, &st));
    CHECK_OR(orEventRecord(e, a));
    CHECK_OR(orStreamWaitEvent(b, e, 0)); /* refers to the record above */
    CHECK_OR(orLaunchHostFunc(a, gate_fn, &g));
    CHECK_OR(orEventRecord(e, a)); /* a later record b must not wait for */
    CHECK_OR(orLaunchHostFunc(b, sleep_flag_fn, &done));
    orError_t r = wait_stream_done(b, DEADLINE_MS / 2);
    int finished = atomic_load(&done.flag);
    gate_open(&g);
    CR_ASSERT_OR_EQ(r, orSuccess, "stream b waited for the later record");
    cr_assert_eq(finished, 1);
    cr_assert_eq(x, 1, "stream b ran before the first record completed");
    CHECK_OR(orStreamSynchronize(a));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orStreamDestroy(b));
}

Test(streams, wait_not_released_by_later_record_elsewhere)
{
    /* b waits for record #1 (on blocked stream a). Record #2 on idle stream c
     * completes at once, but must not release b's wait on record #1. */
    set_env("OPENREG_DEVICE_THREADS", "4");
    orStream_t a = new_stream(), b = new_stream(), c = new_stream();
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    gate_t g = {0};
    sleep_flag_t done = {.sleep_ms = 0};
    CHECK_OR(orLaunchHostFunc(a, gate_fn, &g));
    CHECK_OR(orEventRecord(e, a));
    CHECK_OR(orStreamWaitEvent(b, e, 0));
    CHECK_OR(orLaunchHostFunc(b, sleep_flag_fn, &done));
    CHECK_OR(orEventRecord(e, c));
    CHECK_OR(orStreamSynchronize(c));
    sleep_ms(50); /* time for a wrongly released b to run */
    int early = atomic_load(&done.flag);
    int gate_was_open = atomic_load(&g.open);
    gate_open(&g);
    CHECK_OR(orStreamSynchronize(b));
    cr_assert_eq(gate_was_open, 0);
    cr_assert_eq(early, 0, "b ran before the record it waits for completed");
    cr_assert_eq(atomic_load(&done.flag), 1);
    CHECK_OR(orStreamSynchronize(a));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orStreamDestroy(b));
    CHECK_OR(orStreamDestroy(c));
}

Test(streams, wait_on_never_recorded_event_is_noop)
{
    orStream_t b = new_stream();
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    sleep_flag_t f = {.sleep_ms = 0};
    CHECK_OR(orStreamWaitEvent(b, e, 0));
    CHECK_OR(orLaunchHostFunc(b, sleep_flag_fn, &f));
    CR_ASSERT_OR_EQ(wait_stream_done(b, DEADLINE_MS), orSuccess, "stream stuck");
    cr_assert_eq(atomic_load(&f.flag), 1);
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(b));
}

Test(streams, wait_event_errors)
{
    orStream_t s = new_stream();
    orEvent_t e, dead;
    CHECK_OR(orEventCreate(&e));
    CHECK_OR(orEventCreate(&dead));
    CHECK_OR(orEventDestroy(dead));
    EXPECT_OR(orStreamWaitEvent(s, e, 1), orErrorInvalidValue);
    EXPECT_OR(orStreamWaitEvent(s, e, 0x100), orErrorInvalidValue);
    EXPECT_OR(orStreamWaitEvent(s, NULL, 0), orErrorInvalidResourceHandle);
    EXPECT_OR(orStreamWaitEvent(s, dead, 0), orErrorInvalidResourceHandle);
    EXPECT_OR(orStreamWaitEvent(s, (orEvent_t)0x1234, 0), orErrorInvalidResourceHandle);
    EXPECT_OR(orStreamWaitEvent(s, (orEvent_t)s, 0), orErrorInvalidResourceHandle);
    EXPECT_OR(orStreamWaitEvent((orStream_t)e, e, 0), orErrorInvalidResourceHandle);
    CHECK_OR(orStreamWaitEvent(s, e, 0));
    CHECK_OR(orStreamWaitEvent(NULL, e, 0));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(s));
}

/* ---- priorities ---------------------------------------------------------- */

Test(streams, high_priority_runs_first)
{
    /* One compute thread: when both streams become ready at once (the event
     * completes), the high-priority one must be served first although its
     * work was queued last. */
    set_env("OPENREG_DEVICE_THREADS", "1");
    orStream_t blocker = new_stream(), low, high;
    CHECK_OR(orStreamCreateWithPriority(&low, 0, 0));
    CHECK_OR(orStreamCreateWithPriority(&high, 0, -2));
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    gate_t g = {0}; /* holds the only worker until everything is queued */
    CHECK_OR(orLaunchHostFunc(blocker, gate_fn, &g));
    CHECK_OR(orEventRecord(e, blocker));
    CHECK_OR(orStreamWaitEvent(low, e, 0));
    CHECK_OR(orStreamWaitEvent(high, e, 0));

    order_log log = {.n = 0};
    log_entry L[2] = {{&log, 10}, {&log, 11}}, H[2] = {{&log, 20}, {&log, 21}};
    for (int i = 0; i < 2; i++) {
        log_entry *lp = &L[i];
        CHECK_OR(orLaunchKernel(log_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &lp, sizeof lp, 0, low));
    }
    for (int i = 0; i < 2; i++) {
        log_entry *hp = &H[i];
        CHECK_OR(
            orLaunchKernel(log_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &hp, sizeof hp, 0, high));
    }
    gate_open(&g);
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq(atomic_load(&log.n), 4);
    cr_assert_eq(log.log[0], 20, "order %d %d %d %d", log.log[0], log.log[1], log.log[2],
                 log.log[3]);
    cr_assert_eq(log.log[1], 21, "order %d %d %d %d", log.log[0], log.log[1], log.log[2],
                 log.log[3]);
    cr_assert_eq(log.log[2], 10);
    cr_assert_eq(log.log[3], 11);
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(blocker));
    CHECK_OR(orStreamDestroy(low));
    CHECK_OR(orStreamDestroy(high));
}

Test(streams, high_priority_host_functions_first)
{
    set_env("OPENREG_DEVICE_THREADS", "1");
    orStream_t blocker = new_stream(), low, high;
    CHECK_OR(orStreamCreateWithPriority(&low, 0, 0));
    CHECK_OR(orStreamCreateWithPriority(&high, 0, -2));
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    gate_t g = {0}; /* holds the only worker until everything is queued */
    CHECK_OR(orLaunchHostFunc(blocker, gate_fn, &g));
    CHECK_OR(orEventRecord(e, blocker));
    CHECK_OR(orStreamWaitEvent(low, e, 0));
    CHECK_OR(orStreamWaitEvent(high, e, 0));
    order_log log = {.n = 0};
    log_entry l = {&log, 1}, h = {&log, 2};
    CHECK_OR(orLaunchHostFunc(low, log_fn, &l));
    CHECK_OR(orLaunchHostFunc(high, log_fn, &h));
    gate_open(&g);
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq(atomic_load(&log.n), 2);
    cr_assert_eq(log.log[0], 2, "low-priority host function ran first");
    cr_assert_eq(log.log[1], 1);
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(blocker));
    CHECK_OR(orStreamDestroy(low));
    CHECK_OR(orStreamDestroy(high));
}

/* ---- destroy drains ---------------------------------------------------- */

Test(streams, destroy_finishes_pending_work)
{
    orStream_t s = new_stream();
    sleep_flag_t f = {.sleep_ms = 40};
    int *pin = NULL;
    CHECK_OR(orMallocHost((void **)&pin, 64 * sizeof(int)));
    memset(pin, 0, 64 * sizeof(int));
    CHECK_OR(orLaunchHostFunc(s, sleep_flag_fn, &f));
    CHECK_OR(launch_axpb(pin, 64, 1, 5, s));
    CHECK_OR(orStreamDestroy(s));
    cr_assert_eq(atomic_load(&f.flag), 1, "destroy returned before the host function ran");
    for (int i = 0; i < 64; i++)
        cr_assert_eq(pin[i], 5, "queued kernel did not run before destroy returned");
    CHECK_OR(orFreeHost(pin));
}

Test(streams, destroy_honours_pending_wait)
{
    /* The destroyed stream's queued work still waits for its event. */
    orStream_t a = new_stream(), b = new_stream();
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    int x = 0, seen = -1;
    sleep_store_t st = {.sleep_ms = 30, .dst = &x, .value = 9};
    CHECK_OR(orLaunchHostFunc(a, sleep_store_fn, &st));
    CHECK_OR(orEventRecord(e, a));
    CHECK_OR(orStreamWaitEvent(b, e, 0));
    CHECK_OR(orMemcpyAsync(&seen, &x, sizeof x, orMemcpyHostToHost, b));
    CHECK_OR(orStreamDestroy(b));
    cr_assert_eq(seen, 9);
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orEventDestroy(e));
}
