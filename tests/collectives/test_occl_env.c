/*
 * test_occl_env.c - OCCL's numeric settings are parsed whole: a value that
 * is malformed, or out of range (near or past what a long long holds, whose
 * deadline would overflow), fails every call that needs it with
 * occlInvalidArgument and a reason naming the variable and its range; the
 * largest accepted timeout runs collectives (its deadline does not overflow).
 * OCCL_PROTO (NCCL_PROTO's syntax) is refused the same way when not valid,
 * and in virtual time the protocol it holds is the one charged.
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

/* OCCL_PROTO: NCCL_PROTO's syntax; a value that is not valid stops every
 * call that needs the settings, naming the variable and what is wrong. */
static void expect_proto_refused(const char *value, const char *reason)
{
    cr_assert_eq(setenv("OCCL_PROTO", value, 1), 0);
    char want[200];
    snprintf(want, sizeof want, "OCCL_PROTO='%s' is not valid: %s", value, reason);
    occlUniqueId id;
    cr_assert_eq(occlGetUniqueId(&id), occlInvalidArgument, "OCCL_PROTO=%s accepted", value);
    cr_assert_not_null(strstr(occlGetLastError(NULL), want), "reason: %s", occlGetLastError(NULL));
    occlComm_t comms[2] = {NULL, NULL};
    cr_assert_eq(occlCommInitAll(comms, 2, NULL), occlInvalidArgument);
    cr_assert_not_null(strstr(occlGetLastError(NULL), want), "reason: %s", occlGetLastError(NULL));
}

Test(occl_env, proto_unknown_name)
{
    expect_proto_refused("LL,fast", "unknown protocol 'fast' (known: LL, LL128, Simple)");
}
Test(occl_env, proto_unknown_collective) { expect_proto_refused("allgathr:LL", "unknown collective 'allgathr'"); }
Test(occl_env, proto_none_left) { expect_proto_refused("^LL,LL128,Simple", "'^LL,LL128,Simple' leaves no protocol"); }
Test(occl_env, proto_list_runs)
{
    cr_assert_eq(setenv("OCCL_PROTO", "^LL128;allreduce:simple,ll", 1), 0);
    expect_runs("1000");
}

/* In virtual time a protocol held by OCCL_PROTO is what the ring all-reduce
 * is charged: two devices of one process (the default peer path, 5 us and
 * 25 GB/s, PCI class), 64 floats, so 2 steps of a 128-byte block:
 *   LL      6600 + 2 (5000 + 1000 + ceil(256 B / 25 GB/s))      = 18622 ns
 *   LL128  14000 + 2 (5000 + 2500 + ceil(137 B / 25 GB/s))      = 29012 ns
 *   Simple  8400 + 2 (5000 + 5700 + ceil(128 B / 25 GB/s))      = 29812 ns
 * (NCCL's baseLat and PCI hwLat; LL's flags double the bytes, LL128 adds
 * 8 per 120); with every protocol allowed the planner takes LL. */
static long long virtual_allreduce_ns(const char *proto)
{
    cr_assert_eq(setenv("OPENREG_TIME", "virtual", 1), 0);
    cr_assert_eq(setenv("OPENREG_DEVICE_PROFILE", "a100", 1), 0);
    cr_assert_eq(setenv("OCCL_ALGO", "ring", 1), 0);
    if (proto)
        cr_assert_eq(setenv("OCCL_PROTO", proto, 1), 0);
    occlComm_t comms[2];
    cr_assert_eq(occlCommInitAll(comms, 2, NULL), occlSuccess, "%s", occlGetLastError(NULL));
    float *buf[2];
    orStream_t s[2];
    orEvent_t a[2], b[2];
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orMalloc((void **)&buf[d], 64 * sizeof(float)), orSuccess);
        cr_assert_eq(orStreamCreate(&s[d]), orSuccess);
        cr_assert_eq(orEventCreateWithFlags(&a[d], orEventEnableTiming), orSuccess);
        cr_assert_eq(orEventCreateWithFlags(&b[d], orEventEnableTiming), orSuccess);
        cr_assert_eq(orEventRecord(a[d], s[d]), orSuccess);
    }
    cr_assert_eq(occlGroupStart(), occlSuccess);
    for (int d = 0; d < 2; d++)
        cr_assert_eq(occlAllReduce(buf[d], buf[d], 64, occlFloat32, occlSum, comms[d], s[d]), occlSuccess);
    cr_assert_eq(occlGroupEnd(), occlSuccess, "%s", occlGetLastError(NULL));
    long long t[2];
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orEventRecord(b[d], s[d]), orSuccess);
        cr_assert_eq(orStreamSynchronize(s[d]), orSuccess);
        cr_assert_eq(orEventElapsedTimeNs(&t[d], a[d], b[d]), orSuccess);
    }
    cr_assert_eq(t[0], t[1]);
    for (int d = 0; d < 2; d++)
        cr_assert_eq(occlCommDestroy(comms[d]), occlSuccess);
    return t[0];
}

Test(occl_env, proto_ll_charged_in_virtual_time) { cr_assert_eq(virtual_allreduce_ns("LL"), 18622); }
Test(occl_env, proto_ll128_charged_in_virtual_time) { cr_assert_eq(virtual_allreduce_ns("LL128"), 29012); }
Test(occl_env, proto_simple_charged_in_virtual_time) { cr_assert_eq(virtual_allreduce_ns("Simple"), 29812); }
Test(occl_env, proto_planner_takes_the_fastest) { cr_assert_eq(virtual_allreduce_ns(NULL), 18622); }
