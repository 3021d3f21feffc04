/*
 * test_errors.c - error names and strings, and per-thread last-error state.
 */
#include "helpers.h"

/* A hang (e.g. a wait that never completes) fails the test instead of the run. */
TestSuite(errors, .timeout = 60);

#include <limits.h>

typedef struct {
    orError_t code;
    const char *name;
    const char *text;
} error_row;

#define ERROR_ROW(name, value, text) {name, #name, text},
static const error_row all_errors[] = {OR_ERROR_LIST(ERROR_ROW)};
#undef ERROR_ROW
#define N_ERRORS (sizeof all_errors / sizeof all_errors[0])

Test(errors, every_code_has_its_name_and_string)
{
    for (size_t i = 0; i < N_ERRORS; i++) {
        const char *name = orGetErrorName(all_errors[i].code);
        const char *text = orGetErrorString(all_errors[i].code);
        cr_assert_not_null(name, "name of %d", (int)all_errors[i].code);
        cr_assert_not_null(text, "string of %d", (int)all_errors[i].code);
        cr_assert_str_eq(name, all_errors[i].name);
        cr_assert_str_eq(text, all_errors[i].text);
    }
}

Test(errors, values_are_stable)
{
    /* Values are part of the ABI: spot-check the documented numbers. */
    cr_assert_eq(orSuccess, 0);
    cr_assert_eq(orErrorNotReady, 2);
    cr_assert_eq(orErrorInvalidValue, 3);
    cr_assert_eq(orErrorInitialization, 12);
    cr_assert_eq(orErrorNotPermitted, 15);
    cr_assert_eq(orErrorHostMemoryNotRegistered, 16);
    cr_assert_eq(orErrorIllegalAddress, 17);
    for (size_t i = 0; i < N_ERRORS; i++)
        cr_assert_eq((size_t)all_errors[i].code, i, "codes are dense from 0");
}

Test(errors, named_example)
{
    cr_assert_str_eq(orGetErrorName(orErrorInvalidValue), "orErrorInvalidValue");
    cr_assert_str_eq(orGetErrorString(orErrorInvalidValue), "invalid argument");
}

Test(errors, unknown_codes)
{
    const int unknown[] = {(int)N_ERRORS, 18, 100, 9999, -1, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        orError_t code = (orError_t)unknown[i];
        cr_assert_str_eq(orGetErrorName(code), "unrecognized error code", "code %d", unknown[i]);
        cr_assert_str_eq(orGetErrorString(code), "unrecognized error code", "code %d",
                         unknown[i]);
    }
}

Test(errors, last_error_starts_clear)
{
    cr_assert_eq(orPeekAtLastError(), orSuccess);
    cr_assert_eq(orGetLastError(), orSuccess);
}

Test(errors, get_resets_peek_does_not)
{
    cr_assert_eq(orGetDeviceCount(NULL), orErrorInvalidValue);
    cr_assert_eq(orPeekAtLastError(), orErrorInvalidValue);
    cr_assert_eq(orPeekAtLastError(), orErrorInvalidValue, "peek must not reset");
    cr_assert_eq(orGetLastError(), orErrorInvalidValue);
    cr_assert_eq(orGetLastError(), orSuccess, "get must reset");
    cr_assert_eq(orPeekAtLastError(), orSuccess);
}

Test(errors, latest_failure_wins)
{
    cr_assert_eq(orGetDeviceCount(NULL), orErrorInvalidValue);
    cr_assert_eq(orSetDevice(-1), orErrorInvalidDevice);
    cr_assert_eq(orGetLastError(), orErrorInvalidDevice);
    cr_assert_eq(orGetLastError(), orSuccess);
}

Test(errors, success_does_not_clear_last_error)
{
    int n = 0;
    cr_assert_eq(orSetDevice(1000), orErrorInvalidDevice);
    /* Only failing calls record; a success in between leaves the code in place. */
    CHECK_OR(orGetDeviceCount(&n));
    cr_assert_eq(orGetLastError(), orErrorInvalidDevice);
}

Test(errors, expect_macro_sees_each_failure)
{
    int dev = 0;
    EXPECT_OR(orGetDevice(NULL), orErrorInvalidValue);
    EXPECT_OR(orSetDevice(-5), orErrorInvalidDevice);
    CHECK_OR(orGetDevice(&dev));
    cr_assert_eq(dev, 0, "failed orSetDevice must not change the device");
}

/* ---- per-thread state ---------------------------------------------------- */

typedef struct {
    orError_t make;      /* error to provoke in the thread, orSuccess for none */
    orError_t seen_first; /* thread's last error before doing anything */
    orError_t seen_after; /* thread's last error after its own call */
    pthread_barrier_t *barrier;
} thread_errs;

static orError_t provoke(orError_t which)
{
    switch (which) {
    case orErrorInvalidValue:
        return orGetDeviceCount(NULL);
    case orErrorInvalidDevice:
        return orSetDevice(-1);
    default:
        return orSuccess;
    }
}

static void *error_thread(void *p)
{
    thread_errs *t = p;
    t->seen_first = orPeekAtLastError();
    provoke(t->make);
    if (t->barrier)
        pthread_barrier_wait(t->barrier); /* both threads have failed ... */
    if (t->barrier)
        pthread_barrier_wait(t->barrier); /* ... before either reads */
    t->seen_after = orGetLastError();
    return NULL;
}

Test(errors, last_error_is_per_thread)
{
    /* Main thread fails first; a new thread must not see that. */
    cr_assert_eq(orGetDeviceCount(NULL), orErrorInvalidValue);
    thread_errs t = {.make = orErrorInvalidDevice};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, error_thread, &t), 0);
    pthread_join(th, NULL);
    cr_assert_eq(t.seen_first, orSuccess, "new thread inherited %s",
                 orGetErrorName(t.seen_first));
    cr_assert_eq(t.seen_after, orErrorInvalidDevice);
    /* ... and the thread's error did not overwrite the main thread's. */
    cr_assert_eq(orGetLastError(), orErrorInvalidValue);
}

Test(errors, concurrent_threads_keep_their_own_error)
{
    pthread_barrier_t b;
    pthread_barrier_init(&b, NULL, 2);
    thread_errs t1 = {.make = orErrorInvalidValue, .barrier = &b};
    thread_errs t2 = {.make = orErrorInvalidDevice, .barrier = &b};
    pthread_t a, c;
    cr_assert_eq(pthread_create(&a, NULL, error_thread, &t1), 0);
    cr_assert_eq(pthread_create(&c, NULL, error_thread, &t2), 0);
    pthread_join(a, NULL);
    pthread_join(c, NULL);
    pthread_barrier_destroy(&b);
    cr_assert_eq(t1.seen_after, orErrorInvalidValue);
    cr_assert_eq(t2.seen_after, orErrorInvalidDevice);
    cr_assert_eq(orPeekAtLastError(), orSuccess, "main thread did not fail");
}

Test(errors, clean_thread_sees_success)
{
    thread_errs t = {.make = orSuccess};
    pthread_t th;
    cr_assert_eq(orSetDevice(99), orErrorInvalidDevice);
    cr_assert_eq(pthread_create(&th, NULL, error_thread, &t), 0);
    pthread_join(th, NULL);
    cr_assert_eq(t.seen_first, orSuccess);
    cr_assert_eq(t.seen_after, orSuccess);
}
