/*
 * occl_ll.c - small calls on the calling thread (collectives/ll.c,
 * enqueue.c) never block the caller beyond OCCL_CALLER_WAIT_US, and never
 * deadlock a thread that drives several devices:
 *   1. a peer that comes 300 ms late: the caller's occlAllReduce returns
 *      long before it, the communicator's thread ends the call, the result
 *      is right;
 *   2. one thread, one all-reduce per local device, no group: each call
 *      waits for a device the same thread has not issued to yet, gives up,
 *      and the calls complete together;
 *   3. calls queued behind a kernel (a busy stream) and calls on the calling
 *      thread interleaved: results right, in order.
 * Run with 2 devices per process.
 */
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mpitest.h"
#include "occltest.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_kernel(const orKernelContext *ctx, void *args)
{
    (void)ctx;
    usleep(*(const unsigned *)args);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    int ndev = ci.deviceCount, nranks = ci.nranks * ndev;
    if (ndev != 2)
        mpitest_fail(__FILE__, __LINE__, "needs 2 devices per process (OPENREG_DEVICES=2)", "");
    occlUniqueId id;
    if (ci.rank == 0)
        CHECK_OCCL(occlGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    occlComm_t comm[2];
    orStream_t s[2];
    float *buf[2];
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OCCL(occlCommInitRank(&comm[d], nranks, id, ci.rank * 2 + d));
    }
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orStreamCreate(&s[d]));
        CHECK_OR(orMalloc((void **)&buf[d], 4 * sizeof(float)));
    }
    float ones[4] = {1, 1, 1, 1};

    /* 2 first: one thread issues to both of its devices in turn. */
    for (int round = 0; round < 20; round++) {
        for (int d = 0; d < 2; d++) {
            CHECK_OR(orSetDevice(d));
            CHECK_OR(orMemcpy(buf[d], ones, sizeof ones, orMemcpyHostToDevice));
        }
        for (int d = 0; d < 2; d++) {
            CHECK_OR(orSetDevice(d));
            CHECK_OCCL(occlAllReduce(buf[d], buf[d], 4, occlFloat32, occlSum, comm[d], s[d]));
        }
        for (int d = 0; d < 2; d++) {
            CHECK_OR(orSetDevice(d));
            CHECK_OR(orStreamSynchronize(s[d]));
            EXPECT_FLOATS(buf[d], 4, (float)nranks, "one thread, two devices: ");
        }
    }
    mpitest_barrier();

    /* 1: every rank but the first comes 300 ms late. */
    for (int d = 0; d < 2; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orMemcpy(buf[d], ones, sizeof ones, orMemcpyHostToDevice));
    }
    mpitest_barrier();
    if (ci.rank != 0)
        usleep(300000);
    double t0 = now_s();
    for (int d = 0; d < 2; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OCCL(occlAllReduce(buf[d], buf[d], 4, occlFloat32, occlSum, comm[d], s[d]));
    }
    double issued = now_s() - t0;
    if (ci.rank == 0 && issued > 0.15) {
        char detail[96];
        snprintf(detail, sizeof detail, "it took %.3f s", issued);
        mpitest_fail(__FILE__, __LINE__, "a call waited for a late peer on the calling thread: ", detail);
    }
    for (int d = 0; d < 2; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orStreamSynchronize(s[d]));
        EXPECT_FLOATS(buf[d], 4, (float)nranks, "a late peer: ");
    }
    mpitest_barrier();

    /* 3: a kernel ahead of every other call keeps its stream busy. */
    for (int d = 0; d < 2; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orMemcpy(buf[d], ones, sizeof ones, orMemcpyHostToDevice));
    }
    float want = 1;
    for (int k = 0; k < 10; k++) {
        CHECK_OCCL(occlGroupStart());
        for (int d = 0; d < 2; d++) {
            CHECK_OR(orSetDevice(d));
            unsigned us = 2000;
            if (k % 2 == 0)
                CHECK_OR(orLaunchKernel(sleep_kernel, (orDim3){1, 1, 1}, (orDim3){1, 1, 1}, &us,
                                        sizeof us, 0, s[d]));
            CHECK_OCCL(occlAllReduce(buf[d], buf[d], 4, occlFloat32, occlSum, comm[d], s[d]));
        }
        CHECK_OCCL(occlGroupEnd());
        want *= (float)nranks;
        if (k % 3 == 2)
            for (int d = 0; d < 2; d++) {
                CHECK_OR(orSetDevice(d));
                CHECK_OR(orStreamSynchronize(s[d]));
            }
    }
    for (int d = 0; d < 2; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orStreamSynchronize(s[d]));
        EXPECT_FLOATS(buf[d], 4, want, "busy streams and idle ones: ");
    }

    for (int d = 0; d < 2; d++) {
        CHECK_OCCL(occlCommDestroy(comm[d]));
        CHECK_OR(orStreamDestroy(s[d]));
        CHECK_OR(orFree(buf[d]));
    }
    if (ci.rank == 0)
        printf("PASS occl_ll: one thread and two devices, a late peer, busy streams (%d ranks)\n",
               nranks);
    /* The program started MPI, so it ends it: under Hydra the first process
     * to exit without MPI_Finalize has the others killed (SIGHUP), whatever
     * they were still checking (docs/cluster.md#5-mpi-rules). */
    MPI_Finalize();
    return 0;
}
