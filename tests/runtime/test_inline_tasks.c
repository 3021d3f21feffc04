/*
 * test_inline_tasks.c - inline tasks (runtime_ext.h): a task the calling
 * thread runs on an idle stream without queueing an op. The stream is busy
 * until its end, and the end takes no lock when nothing came meanwhile: an
 * op issued, an event recorded or a waiter come meanwhile must still be
 * moved on or woken by the end. Ordering is proven by data; every wait has
 * a deadline, so a lost wake-up fails a test instead of hanging it.
 */
#include "helpers.h"
#include "runtime_ext.h"

TestSuite(inline_tasks, .timeout = 60);

static orStream_t new_stream(void)
{
    orStream_t s = NULL;
    CHECK_OR(orStreamCreate(&s));
    return s;
}

/* A new stream, running inline task t. */
static orStream_t stream_running(or_inline_task *t)
{
    orStream_t s = new_stream();
    cr_assert(or_inline_task_begin(s, t), "an idle stream takes an inline task");
    return s;
}

Test(inline_tasks, only_on_an_idle_stream)
{
    orStream_t s = new_stream();
    or_inline_task t, u;
    cr_assert(or_inline_task_begin(s, &t), "an idle stream takes an inline task");
    cr_assert(!or_inline_task_begin(s, &u), "a second one while the first runs");
    EXPECT_CODE(orStreamQuery(s), orErrorNotReady);
    or_inline_task_end(&t);
    CHECK_OR(orStreamQuery(s));
    cr_assert(or_inline_task_begin(s, &u), "idle again after the end");
    cr_assert_gt(u.seq, t.seq);
    or_inline_task_end(&u);

    gate_t g = {0};
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &g));
    cr_assert(!or_inline_task_begin(s, &t), "not behind a queued op");
    gate_open(&g);
    CHECK_OR(orStreamSynchronize(s));
    CHECK_OR(orStreamDestroy(s));
}

/* ---- a waiter that comes while the task runs ---------------------------- */

typedef struct {
    orStream_t s;
    atomic_int entered, returned;
    int *value, seen;
} sync_arg;

static void *sync_main(void *p)
{
    sync_arg *a = p;
    atomic_store(&a->entered, 1);
    orError_t err = orStreamSynchronize(a->s);
    a->seen = err == orSuccess ? *a->value : -1;
    atomic_store(&a->returned, 1);
    return NULL;
}

Test(inline_tasks, synchronize_sleeps_until_the_end_wakes_it)
{
    or_inline_task t;
    orStream_t s = stream_running(&t);
    int value = 0;
    sync_arg a = {.s = s, .value = &value};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, sync_main, &a), 0);
    cr_assert(wait_atomic_ge(&a.entered, 1, DEADLINE_MS));
    sleep_ms(200); /* long past its spins and yields: asleep */
    cr_assert_eq(atomic_load(&a.returned), 0, "returned before the task ended");
    value = 42; /* the task's result */
    or_inline_task_end(&t);
    cr_assert(wait_atomic_ge(&a.returned, 1, DEADLINE_MS), "the end did not wake the synchronize");
    pthread_join(th, NULL);
    cr_assert_eq(a.seen, 42, "the synchronize returned without the task's result");
    CHECK_OR(orStreamDestroy(s));
}

/* ---- what is issued while the task runs -------------------------------- */

typedef struct {
    int *value;
    int seen;
    atomic_int ran;
} probe_t;

static void probe_fn(void *p)
{
    probe_t *pr = p;
    pr->seen = *pr->value;
    atomic_store(&pr->ran, 1);
}

Test(inline_tasks, op_issued_meanwhile_runs_after_it)
{
    or_inline_task t;
    orStream_t s = stream_running(&t);
    int value = 0;
    probe_t pr = {.value = &value};
    CHECK_OR(orLaunchHostFunc(s, probe_fn, &pr));
    sleep_ms(20);
    cr_assert_eq(atomic_load(&pr.ran), 0, "the op overtook the task");
    value = 7;
    or_inline_task_end(&t);
    cr_assert_eq(wait_stream_done(s, DEADLINE_MS), orSuccess, "the op was left behind the task's end");
    cr_assert_eq(atomic_load(&pr.ran), 1);
    cr_assert_eq(pr.seen, 7);
    CHECK_OR(orStreamDestroy(s));
}

Test(inline_tasks, event_recorded_meanwhile_completes_at_the_end)
{
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    or_inline_task t;
    orStream_t s = stream_running(&t);
    CHECK_OR(orEventRecord(e, s));
    EXPECT_CODE(orEventQuery(e), orErrorNotReady);
    or_inline_task_end(&t);
    double end = now_ms() + DEADLINE_MS;
    orError_t err;
    while ((err = orEventQuery(e)) == orErrorNotReady && now_ms() < end)
        sleep_ms(1);
    CR_ASSERT_OR_EQ(err, orSuccess, "the event recorded during the task");
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(s));
}

/* ---- many tasks against a thread that keeps synchronizing -------------- */

typedef struct {
    orStream_t s;
    atomic_int stop, syncs;
} syncer_arg;

static void *syncer_main(void *p)
{
    syncer_arg *a = p;
    while (!atomic_load(&a->stop)) {
        cr_assert_eq(orStreamSynchronize(a->s), orSuccess);
        atomic_fetch_add(&a->syncs, 1);
    }
    return NULL;
}

Test(inline_tasks, no_wake_up_lost_to_a_racing_synchronize)
{
    orStream_t s = new_stream();
    syncer_arg a = {.s = s};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, syncer_main, &a), 0);
    enum { TASKS = 100000 };
    int begun = 0;
    for (int i = 0; i < TASKS; i++) {
        or_inline_task t;
        if (or_inline_task_begin(s, &t)) {
            begun++;
            if (i % 64 == 0)
                sched_yield(); /* now and then a synchronize comes in the middle */
            or_inline_task_end(&t);
        }
    }
    cr_assert_eq(begun, TASKS, "a synchronize alone kept the stream from being idle");
    /* Its last synchronize must return: one that slept through an end would not. */
    int before = atomic_load(&a.syncs);
    cr_assert(wait_atomic_ge(&a.syncs, before + 1, DEADLINE_MS), "a synchronize was not woken");
    atomic_store(&a.stop, 1);
    pthread_join(th, NULL);
    cr_assert_gt(atomic_load(&a.syncs), 1);
    CHECK_OR(orStreamDestroy(s));
}

/* ---- handed over to another thread -------------------------------------- */

typedef struct {
    or_handed_task op;
    int *value;
} finisher_arg;

static void *finisher_main(void *p)
{
    finisher_arg *f = p;
    sleep_ms(20);
    or_handed_task_begin(f->op);
    *f->value = 9;
    or_handed_task_done(f->op);
    return NULL;
}

Test(inline_tasks, handed_over_it_ends_as_an_op)
{
    or_inline_task t;
    orStream_t s = stream_running(&t);
    int value = 0;
    probe_t pr = {.value = &value};
    or_handed_task op = or_inline_task_hand(&t);
    cr_assert_not_null(op);
    CHECK_OR(orLaunchHostFunc(s, probe_fn, &pr)); /* behind it */
    finisher_arg f = {op, &value};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, finisher_main, &f), 0);
    CHECK_OR(orStreamSynchronize(s));
    pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&pr.ran), 1);
    cr_assert_eq(pr.seen, 9, "the op behind the handed task ran before it ended");
    cr_assert(or_inline_task_begin(s, &t), "idle after the handed task and the op");
    or_inline_task_end(&t);
    CHECK_OR(orStreamDestroy(s));
}
