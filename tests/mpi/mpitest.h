/*
 * mpitest.h - checks for multi-rank test programs. A failed check prints the
 * rank and the call, then aborts the whole job, so no rank waits forever for
 * a dead peer; the program's exit status is the test's result.
 */
#ifndef OR_MPITEST_H
#define OR_MPITEST_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "openreg.h"

static int mpitest_rank(void)
{
    int init = 0, rank = 0;
    MPI_Initialized(&init);
    if (init)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

static void mpitest_fail(const char *file, int line, const char *what, const char *detail)
{
    fprintf(stderr, "FAIL rank %d %s:%d: %s%s\n", mpitest_rank(), file, line, what, detail);
    fflush(stderr);
    int init = 0;
    MPI_Initialized(&init);
    if (init)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define CHECK_OR(call)                                                                   \
    do {                                                                                 \
        orError_t check_err_ = (call);                                                   \
        if (check_err_ != orSuccess)                                                     \
            mpitest_fail(__FILE__, __LINE__, #call " -> ", orGetErrorName(check_err_));   \
    } while (0)

#define EXPECT_OR(call, want)                                                            \
    do {                                                                                 \
        orError_t expect_err_ = (call);                                                  \
        if (expect_err_ != (want))                                                       \
            mpitest_fail(__FILE__, __LINE__, #call " -> ", orGetErrorName(expect_err_));  \
    } while (0)

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond))                                                                     \
            mpitest_fail(__FILE__, __LINE__, "check failed: ", #cond);                    \
    } while (0)

#endif
