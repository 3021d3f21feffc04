/*
 * test_events.c - event creation flags, record/query/synchronize, elapsed
 * time and its errors, re-recording, and destroying events still in use.
 */
#include "helpers.h"

/* A hang (e.g. a wait that never completes) fails the test instead of the run. */
TestSuite(events, .timeout = 60);

static orEvent_t new_event(unsigned flags)
{
    orEvent_t e = NULL;
    CHECK_OR(orEventCreateWithFlags(&e, flags));
    cr_assert_not_null(e);
    return e;
}

static orStream_t new_stream(void)
{
    orStream_t s = NULL;
    CHECK_OR(orStreamCreate(&s));
    return s;
}

Test(events, create_destroy)
{
    orEvent_t a, b;
    CHECK_OR(orEventCreate(&a));
    CHECK_OR(orEventCreateWithFlags(&b, orEventEnableTiming));
    cr_assert_neq(a, b);
    CHECK_OR(orEventDestroy(a));
    CHECK_OR(orEventDestroy(b));
    CHECK_OR(orEventCreateWithFlags(&a, orEventDisableTiming));
    CHECK_OR(orEventDestroy(a));
}

Test(events, create_errors)
{
    orEvent_t e = (orEvent_t)0x77;
    EXPECT_OR(orEventCreate(NULL), orErrorInvalidValue);
    EXPECT_OR(orEventCreateWithFlags(NULL, 0), orErrorInvalidValue);
    EXPECT_OR(orEventCreateWithFlags(&e, 0x2), orErrorInvalidValue);
    EXPECT_OR(orEventCreateWithFlags(&e, 0x1 | 0x100), orErrorInvalidValue);
    EXPECT_OR(orEventCreateWithFlags(&e, 0x80000000u), orErrorInvalidValue);
    cr_assert_eq(e, (orEvent_t)0x77, "output written on failure");
}

Test(events, never_recorded_is_complete)
{
    orEvent_t e = new_event(0);
    CHECK_OR(orEventQuery(e));
    double t0 = now_ms();
    CHECK_OR(orEventSynchronize(e));
    cr_assert_lt(now_ms() - t0, DEADLINE_MS / 2, "synchronize on a never-recorded event waited");
    CHECK_OR(orEventDestroy(e));
}

Test(events, synchronize_waits_for_record)
{
    orStream_t s = new_stream();
    orEvent_t e = new_event(0);
    sleep_flag_t f = {.sleep_ms = 30};
    CHECK_OR(orLaunchHostFunc(s, sleep_flag_fn, &f));
    CHECK_OR(orEventRecord(e, s));
    CHECK_OR(orEventSynchronize(e));
    cr_assert_eq(atomic_load(&f.flag), 1, "event completed before earlier work");
    CHECK_OR(orEventQuery(e));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(s));
}

Test(events, record_on_default_stream)
{
    orEvent_t e = new_event(0);
    sleep_flag_t f = {.sleep_ms = 30};
    CHECK_OR(orLaunchHostFunc(NULL, sleep_flag_fn, &f));
    CHECK_OR(orEventRecord(e, NULL));
    CHECK_OR(orEventSynchronize(e));
    cr_assert_eq(atomic_load(&f.flag), 1);
    CHECK_OR(orEventDestroy(e));
}

Test(events, query_not_ready_while_blocked)
{
    orStream_t s = new_stream();
    orEvent_t e = new_event(0);
    gate_t g = {0};
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &g));
    CHECK_OR(orEventRecord(e, s));
    EXPECT_CODE(orEventQuery(e), orErrorNotReady);
    cr_assert(wait_atomic_ge(&g.entered, 1, DEADLINE_MS));
    EXPECT_CODE(orEventQuery(e), orErrorNotReady);
    gate_open(&g);
    CHECK_OR(orEventSynchronize(e));
    CHECK_OR(orEventQuery(e));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(s));
}

Test(events, not_ready_is_not_an_error)
{
    /* orErrorNotReady is a status, not an error: polling must not leave a
     * stale last error behind (as CUDA's queries). */
    orStream_t s = new_stream();
    orEvent_t e = new_event(0);
    gate_t g = {0};
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &g));
    CHECK_OR(orEventRecord(e, s));
    orError_t r = orEventQuery(e);
    orError_t last = orGetLastError();
    gate_open(&g);
    CHECK_OR(orEventSynchronize(e));
    CR_ASSERT_OR_EQ(r, orErrorNotReady, "orEventQuery");
    CR_ASSERT_OR_EQ(last, orSuccess, "orGetLastError after orEventQuery");
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(s));
}

/* ---- elapsed time --------------------------------------------------- */

Test(events, elapsed_time)
{
    orStream_t s = new_stream();
    orEvent_t a = new_event(orEventEnableTiming), b = new_event(orEventEnableTiming);
    CHECK_OR(orEventRecord(a, s));
    CHECK_OR(orLaunchHostFunc(s, sleep_fn, (void *)(intptr_t)20));
    CHECK_OR(orEventRecord(b, s));
    CHECK_OR(orEventSynchronize(b));
    float ms = -1;
    CHECK_OR(orEventElapsedTime(&ms, a, b));
    cr_assert_geq(ms, 15.0f, "elapsed %f ms", ms);
    cr_assert_lt(ms, 5000.0f, "elapsed %f ms", ms);
    ms = -1;
    CHECK_OR(orEventElapsedTime(&ms, a, a));
    cr_assert_eq(ms, 0.0f);
    CHECK_OR(orEventDestroy(a));
    CHECK_OR(orEventDestroy(b));
    CHECK_OR(orStreamDestroy(s));
}

Test(events, elapsed_time_uses_latest_record)
{
    orStream_t s = new_stream();
    orEvent_t a = new_event(orEventEnableTiming), b = new_event(orEventEnableTiming);
    CHECK_OR(orEventRecord(a, s));
    CHECK_OR(orEventRecord(b, s));
    CHECK_OR(orLaunchHostFunc(s, sleep_fn, (void *)(intptr_t)30));
    CHECK_OR(orEventRecord(b, s)); /* b moves 30 ms later */
    CHECK_OR(orStreamSynchronize(s));
    float ms = -1;
    CHECK_OR(orEventElapsedTime(&ms, a, b));
    cr_assert_geq(ms, 25.0f, "elapsed %f ms: the old record was used", ms);
    CHECK_OR(orEventDestroy(a));
    CHECK_OR(orEventDestroy(b));
    CHECK_OR(orStreamDestroy(s));
}

Test(events, elapsed_time_errors)
{
    orStream_t s = new_stream();
    orEvent_t t1 = new_event(orEventEnableTiming), t2 = new_event(orEventEnableTiming);
    orEvent_t plain = new_event(0), fresh = new_event(orEventEnableTiming);
    orEvent_t dead = new_event(orEventEnableTiming);
    CHECK_OR(orEventDestroy(dead));
    orEvent_t dflt;
    CHECK_OR(orEventCreate(&dflt)); /* orEventCreate disables timing */
    CHECK_OR(orEventRecord(t1, s));
    CHECK_OR(orEventRecord(t2, s));
    CHECK_OR(orEventRecord(plain, s));
    CHECK_OR(orEventRecord(dflt, s));
    CHECK_OR(orStreamSynchronize(s));

    float ms = 123.0f;
    EXPECT_OR(orEventElapsedTime(NULL, t1, t2), orErrorInvalidValue);
    EXPECT_OR(orEventElapsedTime(&ms, plain, t2), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventElapsedTime(&ms, t1, plain), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventElapsedTime(&ms, dflt, t2), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventElapsedTime(&ms, t1, fresh), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventElapsedTime(&ms, fresh, t2), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventElapsedTime(&ms, dead, t2), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventElapsedTime(&ms, t1, dead), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventElapsedTime(&ms, NULL, t2), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventElapsedTime(&ms, (orEvent_t)0x1234, t2), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventElapsedTime(&ms, t1, (orEvent_t)s), orErrorInvalidResourceHandle);
    cr_assert_eq(ms, 123.0f, "output written on failure");
    CHECK_OR(orEventElapsedTime(&ms, t1, t2));
    cr_assert_geq(ms, 0.0f);

    orEvent_t evs[] = {t1, t2, plain, fresh, dflt};
    for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
        CHECK_OR(orEventDestroy(evs[i]));
    CHECK_OR(orStreamDestroy(s));
}

Test(events, elapsed_time_not_ready)
{
    orStream_t s = new_stream();
    orEvent_t a = new_event(orEventEnableTiming), b = new_event(orEventEnableTiming);
    gate_t g = {0};
    CHECK_OR(orEventRecord(a, s));
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &g));
    CHECK_OR(orEventRecord(b, s));
    cr_assert(wait_atomic_ge(&g.entered, 1, DEADLINE_MS));
    float ms = 123.0f;
    EXPECT_CODE(orEventElapsedTime(&ms, a, b), orErrorNotReady);
    EXPECT_CODE(orEventElapsedTime(&ms, b, a), orErrorNotReady);
    CR_ASSERT_OR_EQ(orGetLastError(), orSuccess, "orErrorNotReady is not recorded");
    cr_assert_eq(ms, 123.0f);
    gate_open(&g);
    CHECK_OR(orEventSynchronize(b));
    CHECK_OR(orEventElapsedTime(&ms, a, b));
    CHECK_OR(orEventDestroy(a));
    CHECK_OR(orEventDestroy(b));
    CHECK_OR(orStreamDestroy(s));
}

/* ---- re-recording ------------------------------------------------------- */

Test(events, rerecord_refers_to_latest)
{
    orStream_t s = new_stream();
    orEvent_t e = new_event(0);
    CHECK_OR(orEventRecord(e, s));
    CHECK_OR(orEventSynchronize(e));
    CHECK_OR(orEventQuery(e));

    gate_t g = {0};
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &g));
    CHECK_OR(orEventRecord(e, s)); /* the completed first record no longer counts */
    EXPECT_CODE(orEventQuery(e), orErrorNotReady);
    gate_open(&g);
    CHECK_OR(orEventSynchronize(e));
    cr_assert_eq(atomic_load(&g.entered), 1);
    CHECK_OR(orEventQuery(e));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(s));
}

Test(events, rerecord_on_other_stream)
{
    set_env("OPENREG_DEVICE_THREADS", "4");
    orStream_t a = new_stream(), b = new_stream();
    orEvent_t e = new_event(0);
    gate_t g = {0};
    CHECK_OR(orLaunchHostFunc(a, gate_fn, &g));
    CHECK_OR(orEventRecord(e, a));
    EXPECT_CODE(orEventQuery(e), orErrorNotReady);
    CHECK_OR(orEventRecord(e, b)); /* b is idle: the latest record completes at once */
    /* Well before the gate's own deadline, while a's record is still pending. */
    double end = now_ms() + DEADLINE_MS / 2;
    orError_t r;
    while ((r = orEventQuery(e)) == orErrorNotReady && now_ms() < end)
        sleep_ms(1);
    gate_open(&g);
    CR_ASSERT_OR_EQ(r, orSuccess, "query followed the older record");
    CHECK_OR(orStreamSynchronize(a));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orStreamDestroy(b));
}

/* ---- destroy and bad handles ---------------------------------------------- */

Test(events, destroy_with_pending_record)
{
    orStream_t s = new_stream();
    orEvent_t e = new_event(orEventEnableTiming);
    gate_t g = {0};
    sleep_flag_t f = {.sleep_ms = 0};
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &g));
    CHECK_OR(orEventRecord(e, s));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orLaunchHostFunc(s, sleep_flag_fn, &f));
    gate_open(&g);
    CHECK_OR(orStreamSynchronize(s));
    cr_assert_eq(atomic_load(&f.flag), 1, "stream broken by destroyed event");
    CHECK_OR(orStreamDestroy(s));
}

Test(events, destroy_with_waiting_stream_keeps_dependency)
{
    orStream_t a = new_stream(), b = new_stream();
    orEvent_t e = new_event(0);
    int x = 0, seen = -1;
    sleep_store_t st = {.sleep_ms = 40, .dst = &x, .value = 5};
    CHECK_OR(orLaunchHostFunc(a, sleep_store_fn, &st));
    CHECK_OR(orEventRecord(e, a));
    CHECK_OR(orStreamWaitEvent(b, e, 0));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orMemcpyAsync(&seen, &x, sizeof x, orMemcpyHostToHost, b));
    CHECK_OR(orStreamSynchronize(b));
    cr_assert_eq(seen, 5, "dependency dropped with the event");
    CHECK_OR(orStreamSynchronize(a));
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orStreamDestroy(b));
}

static void expect_bad_event(orEvent_t e, const char *what)
{
    orStream_t s = new_stream();
    orEvent_t good = new_event(orEventEnableTiming);
    CHECK_OR(orEventRecord(good, s));
    CHECK_OR(orStreamSynchronize(s));
    float ms = 123.0f;
    cr_log_info("bad event: %s", what);
    EXPECT_OR(orEventRecord(e, s), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventRecord(e, NULL), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventQuery(e), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventSynchronize(e), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventElapsedTime(&ms, e, good), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventElapsedTime(&ms, good, e), orErrorInvalidResourceHandle);
    EXPECT_OR(orStreamWaitEvent(s, e, 0), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventDestroy(e), orErrorInvalidResourceHandle);
    cr_assert_eq(ms, 123.0f);
    CHECK_OR(orEventDestroy(good));
    CHECK_OR(orStreamDestroy(s));
}

Test(events, destroyed_handle)
{
    orEvent_t e = new_event(0);
    CHECK_OR(orEventDestroy(e));
    expect_bad_event(e, "destroyed");
}

Test(events, null_handle)
{
    expect_bad_event(NULL, "NULL");
}

Test(events, stream_handle_as_event)
{
    orStream_t s = new_stream();
    expect_bad_event((orEvent_t)s, "stream cast to event");
    CHECK_OR(orStreamQuery(s)); /* the stream itself is unharmed */
    CHECK_OR(orStreamDestroy(s));
}

Test(events, made_up_handles)
{
    expect_bad_event((orEvent_t)0x1234, "0x1234");
    uint64_t junk[64];
    memset(junk, 0xa5, sizeof junk);
    expect_bad_event((orEvent_t)junk, "stack junk");
}

Test(events, record_bad_stream)
{
    orEvent_t e = new_event(0);
    orStream_t s = new_stream();
    CHECK_OR(orStreamDestroy(s));
    EXPECT_OR(orEventRecord(e, s), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventRecord(e, (orStream_t)0x1234), orErrorInvalidResourceHandle);
    EXPECT_OR(orEventRecord(e, (orStream_t)e), orErrorInvalidResourceHandle);
    CHECK_OR(orEventQuery(e)); /* still never recorded */
    CHECK_OR(orEventDestroy(e));
}
