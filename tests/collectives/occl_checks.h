/*
 * occl_checks.h - asserts shared by OCCL's one-process unit tests: a call
 * that must succeed, and a call that must fail with a given code and a
 * reason (occlGetLastError) naming what was wrong.
 */
#ifndef OCCL_TEST_CHECKS_H
#define OCCL_TEST_CHECKS_H

#include <criterion/criterion.h>

#include <string.h>

#include "occl.h"

/* The call must succeed. */
#define CHECK_OCCL(call)                                                                       \
    do {                                                                                       \
        occlResult_t check_occl_r_ = (call);                                                   \
        cr_assert_eq(check_occl_r_, occlSuccess, "%s: %s (%s)", #call,                         \
                     occlGetErrorString(check_occl_r_), occlGetLastError(NULL));               \
    } while (0)

/* The call fails with `want` and its reason contains `text`. */
#define EXPECT_REASON(call, want, text)                                                        \
    do {                                                                                       \
        occlResult_t expect_r_ = (call);                                                       \
        cr_assert_eq(expect_r_, (want), "%s -> %d (%s)", #call, expect_r_,                     \
                     occlGetLastError(NULL));                                                  \
        cr_assert(strstr(occlGetLastError(NULL), (text)), "%s: reason '%s' lacks '%s'", #call, \
                  occlGetLastError(NULL), (text));                                             \
    } while (0)

/* The call fails with occlInvalidArgument and its reason contains `text`. */
#define EXPECT_BAD(call, text) EXPECT_REASON(call, occlInvalidArgument, text)

#endif
