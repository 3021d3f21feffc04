/*
 * test_concurrency.c - many host threads using the runtime at once: private
 * streams on alternating devices, a shared stream and event, and concurrent
 * allocation. Every iteration checks data, so lost or reordered work shows.
 */
#include "helpers.h"

/* A hang (e.g. a wait that never completes) fails the test instead of the run. */
TestSuite(concurrency, .timeout = 300);

#define N_THREADS 8

typedef struct {
    int id;
    int iterations;
    int failures;
    char msg[256];
    pthread_barrier_t *start;
} worker;

#define FAIL(w, ...)                                                                     \
    do {                                                                                 \
        if (!(w)->failures++)                                                            \
            snprintf((w)->msg, sizeof (w)->msg, __VA_ARGS__);                            \
    } while (0)

#define TRY(w, call)                                                                     \
    do {                                                                                 \
        orError_t try_err_ = (call);                                                     \
        if (try_err_ != orSuccess) {                                                     \
            FAIL(w, "thread %d: %s -> %s", (w)->id, #call, orGetErrorName(try_err_));     \
            goto out;                                                                    \
        }                                                                                \
    } while (0)

static void report(worker *w, int n)
{
    for (int i = 0; i < n; i++)
        cr_expect_eq(w[i].failures, 0, "%s", w[i].msg);
    for (int i = 0; i < n; i++)
        cr_assert_eq(w[i].failures, 0);
}

static void run_workers(void *(*fn)(void *), worker *w, int n, int iterations)
{
    pthread_t th[N_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
        w[i] = (worker){.id = i, .iterations = iterations, .start = &start};
        cr_assert_eq(pthread_create(&th[i], NULL, fn, &w[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    report(w, n);
}

/* ---- private streams, alternating devices ------------------------------ */

#define PIPE_N 1024

static void *pipeline_worker(void *p)
{
    worker *w = p;
    int dev = w->id % 2, cur = -1;
    orStream_t s[2] = {NULL, NULL};
    int *pin = NULL, *out = NULL, *d = NULL;
    pthread_barrier_wait(w->start);
    TRY(w, orSetDevice(dev));
    TRY(w, orGetDevice(&cur));
    if (cur != dev) {
        FAIL(w, "thread %d: on device %d, expected %d", w->id, cur, dev);
        goto out;
    }
    TRY(w, orStreamCreate(&s[0]));
    TRY(w, orStreamCreateWithPriority(&s[1], orStreamNonBlocking, -1));
    TRY(w, orMallocHost((void **)&pin, PIPE_N * sizeof(int)));
    TRY(w, orMallocHost((void **)&out, PIPE_N * sizeof(int)));
    TRY(w, orMalloc((void **)&d, PIPE_N * sizeof(int)));
    for (int it = 0; it < w->iterations; it++) {
        orStream_t st = s[it % 2];
        int seed = w->id * 1000 + it;
        for (int i = 0; i < PIPE_N; i++) {
            pin[i] = seed + i;
            out[i] = -1;
        }
        TRY(w, orMemcpyAsync(d, pin, PIPE_N * sizeof(int), orMemcpyHostToDevice, st));
        TRY(w, launch_axpb(d, PIPE_N, 3, w->id, st));
        TRY(w, orMemcpyAsync(out, d, PIPE_N * sizeof(int), orMemcpyDeviceToHost, st));
        TRY(w, orStreamSynchronize(st));
        for (int i = 0; i < PIPE_N; i++)
            if (out[i] != 3 * (seed + i) + w->id) {
                FAIL(w, "thread %d iteration %d element %d: %d, expected %d", w->id, it, i,
                     out[i], 3 * (seed + i) + w->id);
                goto out;
            }
    }
out:
    if (d)
        orFree(d);
    if (pin)
        orFreeHost(pin);
    if (out)
        orFreeHost(out);
    for (int i = 0; i < 2; i++)
        if (s[i])
            orStreamDestroy(s[i]);
    return NULL;
}

Test(concurrency, threads_with_private_streams)
{
    worker w[N_THREADS];
    run_workers(pipeline_worker, w, N_THREADS, 200);
    size_t fr, tot;
    for (int d = 0; d < 2; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orMemGetInfo(&fr, &tot));
        cr_assert_eq(fr, tot, "device %d leaked memory", d);
    }
}

/* ---- a shared stream and event ----------------------------------------- */

static orStream_t shared_stream;
static orEvent_t shared_event;
static int shared_counter; /* plain int: only safe if the stream serializes */

static void bump(void *p)
{
    int v = *(volatile int *)&shared_counter;
    *(volatile int *)&shared_counter = v + 1;
}

static void *shared_worker(void *p)
{
    worker *w = p;
    pthread_barrier_wait(w->start);
    for (int it = 0; it < w->iterations; it++) {
        TRY(w, orLaunchHostFunc(shared_stream, bump, NULL));
        if (it % 10 == 9) {
            TRY(w, orEventRecord(shared_event, shared_stream));
            orError_t q = orEventQuery(shared_event);
            if (q != orSuccess && q != orErrorNotReady)
                FAIL(w, "thread %d: orEventQuery -> %s", w->id, orGetErrorName(q));
            TRY(w, orEventSynchronize(shared_event));
        }
        if (it % 25 == 24)
            TRY(w, orStreamSynchronize(shared_stream));
    }
out:
    return NULL;
}

Test(concurrency, threads_share_stream_and_event)
{
    CHECK_OR(orStreamCreate(&shared_stream));
    CHECK_OR(orEventCreate(&shared_event));
    worker w[N_THREADS];
    run_workers(shared_worker, w, N_THREADS, 200);
    CHECK_OR(orStreamSynchronize(shared_stream));
    cr_assert_eq(shared_counter, N_THREADS * 200, "lost or overlapping host functions: %d",
                 shared_counter);
    CHECK_OR(orEventQuery(shared_event));
    CHECK_OR(orEventDestroy(shared_event));
    CHECK_OR(orStreamDestroy(shared_stream));
}

/* ---- concurrent allocation ----------------------------------------------- */

static void *alloc_worker(void *p)
{
    worker *w = p;
    enum { LIVE = 8 };
    unsigned char *live[LIVE] = {0};
    size_t sizes[LIVE] = {0};
    unsigned char buf[8192];
    unsigned seed = (unsigned)w->id * 7919u + 1;
    pthread_barrier_wait(w->start);
    TRY(w, orSetDevice(w->id % 2));
    for (int it = 0; it < w->iterations; it++) {
        int k = it % LIVE;
        if (live[k]) {
            /* Still holds this thread's pattern: no one else got the same bytes. */
            TRY(w, orMemcpy(buf, live[k], sizes[k], orMemcpyDeviceToHost));
            for (size_t i = 0; i < sizes[k]; i++)
                if (buf[i] != (unsigned char)(w->id * 16 + k)) {
                    FAIL(w, "thread %d: allocation %d byte %zu overwritten", w->id, k, i);
                    goto out;
                }
            TRY(w, orFree(live[k]));
            live[k] = NULL;
        }
        seed = seed * 1103515245u + 12345u;
        sizes[k] = 1 + (seed >> 8) % sizeof buf;
        TRY(w, orMalloc((void **)&live[k], sizes[k]));
        if ((uintptr_t)live[k] % 256) {
            FAIL(w, "thread %d: unaligned allocation", w->id);
            goto out;
        }
        TRY(w, orMemset(live[k], w->id * 16 + k, sizes[k]));
    }
out:
    for (int k = 0; k < LIVE; k++)
        if (live[k])
            orFree(live[k]);
    return NULL;
}

Test(concurrency, concurrent_malloc_free)
{
    worker w[N_THREADS];
    run_workers(alloc_worker, w, N_THREADS, 300);
    size_t fr, tot;
    for (int d = 0; d < 2; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orMemGetInfo(&fr, &tot));
        cr_assert_eq(fr, tot, "device %d: %zu of %zu free after all frees", d, fr, tot);
    }
}

/* ---- concurrent create/destroy of handles -------------------------------- */

static void *handle_worker(void *p)
{
    worker *w = p;
    pthread_barrier_wait(w->start);
    for (int it = 0; it < w->iterations; it++) {
        orStream_t s = NULL;
        orEvent_t e = NULL;
        sleep_flag_t f = {.sleep_ms = 0};
        TRY(w, orStreamCreate(&s));
        TRY(w, orEventCreate(&e));
        TRY(w, orLaunchHostFunc(s, sleep_flag_fn, &f));
        TRY(w, orEventRecord(e, s));
        TRY(w, orEventSynchronize(e));
        if (!atomic_load(&f.flag)) {
            FAIL(w, "thread %d: event completed before the host function", w->id);
            goto out;
        }
        TRY(w, orEventDestroy(e));
        TRY(w, orStreamDestroy(s));
        /* The stale handles must be rejected, not confused with live ones. */
        orError_t r = orStreamQuery(s);
        if (r != orErrorInvalidResourceHandle && r != orSuccess) {
            FAIL(w, "thread %d: stale stream query -> %s", w->id, orGetErrorName(r));
            goto out;
        }
    }
out:
    return NULL;
}

Test(concurrency, concurrent_stream_event_lifetimes)
{
    worker w[N_THREADS];
    run_workers(handle_worker, w, N_THREADS, 100);
}

/* ---- lookups while slots are reused ------------------------------------------ */

/* Handles are looked up without a lock (src/handle.c): a stale handle must
 * be refused, and a live one found, while other threads free slots and take
 * them again. Churners create and destroy events, so the destroyed events'
 * slots are reused throughout; the checker queries those stale handles and
 * a live event the whole time. */
typedef struct {
    orEvent_t stale[64];
    orEvent_t live;
    atomic_int stop;
    atomic_long stale_found, live_lost, looks;
} reuse_state;

static void *reuse_churner(void *p)
{
    reuse_state *st = p;
    while (!atomic_load(&st->stop)) {
        orEvent_t e[8];
        for (int i = 0; i < 8; i++)
            if (orEventCreate(&e[i]) != orSuccess)
                e[i] = NULL;
        for (int i = 0; i < 8; i++)
            if (e[i])
                orEventDestroy(e[i]);
    }
    return NULL;
}

static void *reuse_checker(void *p)
{
    reuse_state *st = p;
    for (int round = 0; round < 2000; round++) {
        for (int i = 0; i < 64; i++)
            if (orEventQuery(st->stale[i]) != orErrorInvalidResourceHandle)
                atomic_fetch_add(&st->stale_found, 1);
        if (orEventQuery(st->live) != orSuccess)
            atomic_fetch_add(&st->live_lost, 1);
        atomic_fetch_add(&st->looks, 65);
    }
    atomic_store(&st->stop, 1);
    return NULL;
}

Test(concurrency, stale_handles_refused_while_slots_are_reused)
{
    static reuse_state st;
    for (int i = 0; i < 64; i++)
        CHECK_OR(orEventCreate(&st.stale[i]));
    CHECK_OR(orEventCreate(&st.live));
    for (int i = 0; i < 64; i++)
        CHECK_OR(orEventDestroy(st.stale[i]));
    pthread_t churn[3], check;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pthread_create(&churn[i], NULL, reuse_churner, &st), 0);
    cr_assert_eq(pthread_create(&check, NULL, reuse_checker, &st), 0);
    pthread_join(check, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(churn[i], NULL);
    orGetLastError(); /* the refused queries' error */
    cr_assert_eq(atomic_load(&st.stale_found), 0, "a destroyed event's handle was found live");
    cr_assert_eq(atomic_load(&st.live_lost), 0, "a live event's handle was refused");
    cr_assert_eq(atomic_load(&st.looks), 2000 * 65);
    CHECK_OR(orEventDestroy(st.live));
}
