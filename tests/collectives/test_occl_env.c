/*
 * test_occl_env.c - OCCL's numeric settings are parsed whole: a value that
 * is malformed, or out of range (near or past what a long long holds, whose
 * deadline would overflow), fails every call that needs it with
 * occlInvalidArgument and a reason naming the variable and its range; the
 * largest accepted timeout runs collectives (its deadline does not overflow).
 *
 * Criterion runs each test in a process of its own, so each reads its
 * setting afresh. One process, no MPI: two devices, occlCommInitAll.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "occl.h"

TestSuite(occl_env, .timeout = 60);

static void expect_refused(const char *value)
{
    cr_assert_eq(setenv("OCCL_TIMEOUT_MS", value, 1), 0);
    char want[160];
    snprintf(want, sizeof want, "OCCL_TIMEOUT_MS='%s' is not valid: expected an integer from 1 "
                                "to 1000000000000", value);
    occlUniqueId id;
    cr_assert_eq(occlGetUniqueId(&id), occlInvalidArgument, "OCCL_TIMEOUT_MS=%s accepted", value);
    cr_assert_not_null(strstr(occlGetLastError(NULL), want), "reason: %s", occlGetLastError(NULL));
    occlComm_t comms[2] = {NULL, NULL};
    cr_assert_eq(occlCommInitAll(comms, 2, NULL), occlInvalidArgument);
    cr_assert_not_null(strstr(occlGetLastError(NULL), want), "reason: %s", occlGetLastError(NULL));
    cr_assert_null(comms[0]);
    memset(&id, 0, sizeof id);
    cr_assert_eq(occlCommInitRank(&comms[0], 1, id, 0), occlInvalidArgument);
    cr_assert_not_null(strstr(occlGetLastError(NULL), want), "reason: %s", occlGetLastError(NULL));
}

Test(occl_env, timeout_llong_max) { expect_refused("9223372036854775807"); }
Test(occl_env, timeout_deadline_overflow) { expect_refused("18446744073709"); }
Test(occl_env, timeout_just_above_max) { expect_refused("1000000000001"); }
Test(occl_env, timeout_past_long_long) { expect_refused("18446744073709551616"); }
Test(occl_env, timeout_negative) { expect_refused("-1"); }
Test(occl_env, timeout_zero) { expect_refused("0"); }
Test(occl_env, timeout_word) { expect_refused("abc"); }
Test(occl_env, timeout_empty) { expect_refused(""); }
Test(occl_env, timeout_trailing_junk) { expect_refused("5s"); }
Test(occl_env, timeout_leading_space) { expect_refused(" 5"); }
Test(occl_env, timeout_sign) { expect_refused("+5"); }

/* An all-reduce on both devices: it completes, neither timing out at once
 * (an overflowed deadline) nor failing. */
static void expect_runs(const char *value)
{
    cr_assert_eq(setenv("OCCL_TIMEOUT_MS", value, 1), 0);
    occlComm_t comms[2];
    cr_assert_eq(occlCommInitAll(comms, 2, NULL), occlSuccess, "%s", occlGetLastError(NULL));
    float *buf[2];
    orStream_t s[2];
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orMalloc((void **)&buf[d], 64 * sizeof(float)), orSuccess);
        cr_assert_eq(orMemset(buf[d], 0, 64 * sizeof(float)), orSuccess);
        cr_assert_eq(orStreamCreate(&s[d]), orSuccess);
    }
    cr_assert_eq(occlGroupStart(), occlSuccess);
    for (int d = 0; d < 2; d++)
        cr_assert_eq(occlAllReduce(buf[d], buf[d], 64, occlFloat32, occlSum, comms[d], s[d]),
                     occlSuccess);
    cr_assert_eq(occlGroupEnd(), occlSuccess, "%s", occlGetLastError(NULL));
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orStreamSynchronize(s[d]), orSuccess);
        occlResult_t async;
        cr_assert_eq(occlCommGetAsyncError(comms[d], &async), occlSuccess);
        cr_assert_eq(async, occlSuccess, "%s", occlGetLastError(comms[d]));
        cr_assert_eq(occlCommDestroy(comms[d]), occlSuccess);
    }
}

Test(occl_env, timeout_max_runs) { expect_runs("1000000000000"); }
Test(occl_env, timeout_one_ms_accepted)
{
    cr_assert_eq(setenv("OCCL_TIMEOUT_MS", "1", 1), 0);
    occlUniqueId id;
    cr_assert_eq(occlGetUniqueId(&id), occlSuccess, "%s", occlGetLastError(NULL));
}
