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
#include <time.h>

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

/* MPICH's blocking calls spin while holding MPI's lock. A rank spinning in
 * MPI_Barrier starves its own proxy thread, which serves the other ranks'
 * copies into this rank's memory, so a peer still copying can wait for
 * seconds (minutes on a loaded machine). Tests wait as the runtime does:
 * test, then sleep, backing off up to 1 ms. */
static inline void mpitest_wait(MPI_Request *req)
{
    long ns = 1000;
    for (;;) {
        int done = 0;
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 1000000)
            ns *= 2;
    }
}

static inline void mpitest_barrier(void)
{
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    mpitest_wait(&req);
}

/* Exchange `bytes` bytes with peer (MPI_Sendrecv, waited for politely). */
static inline void mpitest_exchange(const void *send, void *recv, int bytes, int peer, int tag)
{
    MPI_Request req[2];
    MPI_Irecv(recv, bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[0]);
    MPI_Isend(send, bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[1]);
    mpitest_wait(&req[0]);
    mpitest_wait(&req[1]);
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

/* As CHECK, with a message formatted as printf's. */
#define FAIL(...)                                                                        \
    do {                                                                                 \
        char fail_detail_[600];                                                          \
        snprintf(fail_detail_, sizeof fail_detail_, __VA_ARGS__);                        \
        mpitest_fail(__FILE__, __LINE__, "check failed: ", fail_detail_);                \
    } while (0)

#endif
