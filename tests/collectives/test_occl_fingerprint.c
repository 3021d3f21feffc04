/*
 * test_occl_fingerprint.c - calls compared across ranks, within one process
 * (two devices, occlCommInitAll): an all-reduce with sum on one rank and max
 * on the other fails on both with occlInvalidUsage and a message naming both
 * sides, and neither buffer is touched; with OCCL_CHECK_CALLS=0 the same
 * calls run unchecked (each rank gets its own op's result: what the check
 * prevents). OCCL_CHECK_CALLS other than 0 or 1 is refused with its reason.
 * tests/mpi/occl_mismatch.c covers every pair of calls across processes and
 * nodes.
 *
 * Criterion runs each test in a process of its own, so each reads its
 * setting afresh.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "occl.h"

TestSuite(occl_fingerprint, .timeout = 60);

typedef struct pair {
    occlComm_t comm[2];
    float *buf[2];
    orStream_t s[2];
} pair;

/* Rank d's buffer holds d + 1 everywhere; rank 0 sums, rank 1 takes the max. */
static void run_sum_against_max(pair *p)
{
    cr_assert_eq(occlCommInitAll(p->comm, 2, NULL), occlSuccess, "%s", occlGetLastError(NULL));
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orMalloc((void **)&p->buf[d], 64 * sizeof(float)), orSuccess);
        float host[64];
        for (int i = 0; i < 64; i++)
            host[i] = (float)(d + 1);
        cr_assert_eq(orMemcpy(p->buf[d], host, sizeof host, orMemcpyHostToDevice), orSuccess);
        cr_assert_eq(orStreamCreate(&p->s[d]), orSuccess);
    }
    cr_assert_eq(occlGroupStart(), occlSuccess);
    for (int d = 0; d < 2; d++)
        cr_assert_eq(occlAllReduce(p->buf[d], p->buf[d], 64, occlFloat32, d ? occlMax : occlSum,
                                   p->comm[d], p->s[d]),
                     occlSuccess);
    cr_assert_eq(occlGroupEnd(), occlSuccess, "%s", occlGetLastError(NULL));
}

static float first_element(pair *p, int d)
{
    float v;
    cr_assert_eq(orSetDevice(d), orSuccess);
    cr_assert_eq(orMemcpy(&v, p->buf[d], sizeof v, orMemcpyDeviceToHost), orSuccess);
    return v;
}

Test(occl_fingerprint, sum_against_max_fails_on_both)
{
    pair p;
    run_sum_against_max(&p);
    for (int d = 0; d < 2; d++) {
        cr_assert_neq(orStreamSynchronize(p.s[d]), orSuccess, "rank %d's call succeeded", d);
        occlResult_t async;
        cr_assert_eq(occlCommGetAsyncError(p.comm[d], &async), occlSuccess);
        cr_assert_eq(async, occlInvalidUsage, "rank %d: %s", d, occlGetErrorString(async));
        const char *msg = occlGetLastError(p.comm[d]);
        cr_assert_not_null(strstr(msg, "mismatched calls: rank 0 AllReduce float32 sum count 64 #1, "
                                        "rank 1 AllReduce float32 max count 64 #1"),
                           "rank %d: %s", d, msg);
        /* Nothing was reduced into either buffer. */
        cr_assert_eq(first_element(&p, d), (float)(d + 1));
    }
    for (int d = 0; d < 2; d++)
        cr_assert_eq(occlCommAbort(p.comm[d]), occlSuccess);
}

Test(occl_fingerprint, unchecked_when_turned_off)
{
    cr_assert_eq(setenv("OCCL_CHECK_CALLS", "0", 1), 0);
    pair p;
    run_sum_against_max(&p);
    for (int d = 0; d < 2; d++)
        cr_assert_eq(orStreamSynchronize(p.s[d]), orSuccess, "%s", occlGetLastError(p.comm[d]));
    /* Each rank applied its own op to both inputs. */
    cr_assert_eq(first_element(&p, 0), 3.0f);
    cr_assert_eq(first_element(&p, 1), 2.0f);
    for (int d = 0; d < 2; d++)
        cr_assert_eq(occlCommDestroy(p.comm[d]), occlSuccess);
}

static void expect_refused(const char *value)
{
    cr_assert_eq(setenv("OCCL_CHECK_CALLS", value, 1), 0);
    char want[160];
    snprintf(want, sizeof want, "OCCL_CHECK_CALLS='%s' is not valid: expected 0", value);
    occlUniqueId id;
    cr_assert_eq(occlGetUniqueId(&id), occlInvalidArgument, "OCCL_CHECK_CALLS=%s accepted", value);
    cr_assert_not_null(strstr(occlGetLastError(NULL), want), "reason: %s", occlGetLastError(NULL));
    occlComm_t comms[2] = {NULL, NULL};
    cr_assert_eq(occlCommInitAll(comms, 2, NULL), occlInvalidArgument);
    cr_assert_null(comms[0]);
}

Test(occl_fingerprint, setting_two) { expect_refused("2"); }
Test(occl_fingerprint, setting_word) { expect_refused("on"); }
Test(occl_fingerprint, setting_empty) { expect_refused(""); }
