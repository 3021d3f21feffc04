/*
 * A collective waiting for its peers holds no device worker. Run with one
 * worker per device (OPENREG_DEVICE_THREADS=1), where a collective running
 * on the worker would block everything else on the device:
 *
 *  1. Two communicators reached in opposite orders: even ranks issue an
 *     all-reduce on A (stream a) and then, a little later, on B (stream b);
 *     odd ranks issue B first, then A. Each rank's worker reaches its first
 *     task first. Both complete with the right sums, well within the
 *     timeout (FSDP's all-gathers and TP's all-reduces on two groups are
 *     this pattern).
 *  2. The device's other streams go on while a collective waits: rank 0's
 *     all-reduce waits for rank 1, which joins only after rank 0 has
 *     finished a memset and a copy on another stream and found the
 *     all-reduce still pending.
 */
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "occltest.h"

#define N (1 << 16)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill(float *buf, float v)
{
    static float host[N];
    for (int i = 0; i < N; i++)
        host[i] = v;
    CHECK_OR(orMemcpy(buf, host, sizeof host, orMemcpyHostToDevice));
}

int main(void)
{
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    if (ci.nranks < 2)
        mpitest_fail(__FILE__, __LINE__, "needs at least 2 ranks", "");
    occlComm_t A = occltest_comm_world(&ci), B = occltest_comm_world(&ci);
    orStream_t a, b;
    CHECK_OR(orStreamCreate(&a));
    CHECK_OR(orStreamCreate(&b));
    float *x, *y;
    CHECK_OR(orMalloc((void **)&x, N * sizeof *x));
    CHECK_OR(orMalloc((void **)&y, N * sizeof *y));
    float n = (float)ci.nranks, sum = n * (n + 1) / 2; /* rank r gives r + 1 */

    /* 1. Opposite orders on two communicators. */
    fill(x, (float)(ci.rank + 1));
    fill(y, (float)(2 * (ci.rank + 1)));
    mpitest_barrier();
    double t0 = now_s();
    bool even = ci.rank % 2 == 0;
    for (int k = 0; k < 2; k++) { /* x on A (stream a), y on B (stream b) */
        bool on_a = (k == 0) == even;
        float *buf = on_a ? x : y;
        CHECK_OCCL(occlAllReduce(buf, buf, N, occlFloat32, occlSum, on_a ? A : B, on_a ? a : b));
        if (k == 0)
            usleep(200 * 1000); /* the worker has reached the first task by now */
    }
    CHECK_OR(orStreamSynchronize(a));
    CHECK_OR(orStreamSynchronize(b));
    double took = now_s() - t0;
    EXPECT_FLOATS(x, N, sum, "opposite orders: the all-reduce on A: ");
    EXPECT_FLOATS(y, N, 2 * sum, "opposite orders: the all-reduce on B: ");
    printf("rank %d: two communicators in opposite orders: done in %.2f s\n", ci.rank, took);

    /* 2. Other streams go on while a collective waits. */
    fill(x, (float)(ci.rank + 1));
    mpitest_barrier();
    if (ci.rank != 1) {
        CHECK_OCCL(occlAllReduce(x, x, N, occlFloat32, occlSum, A, a));
        if (ci.rank == 0) {
            CHECK_OR(orMemsetAsync(y, 0, N * sizeof *y, b));
            CHECK_OR(orMemcpyAsync(y + N / 2, y, N / 2 * sizeof *y, orMemcpyDeviceToDevice, b));
            CHECK_OR(orStreamSynchronize(b));
            if (orStreamQuery(a) != orErrorNotReady)
                mpitest_fail(__FILE__, __LINE__, "the all-reduce completed without rank 1", "");
            printf("rank 0: a memset and a copy ran while the all-reduce waited\n");
        }
    }
    mpitest_barrier(); /* rank 1 joins after rank 0's other stream is done */
    if (ci.rank == 1)
        CHECK_OCCL(occlAllReduce(x, x, N, occlFloat32, occlSum, A, a));
    CHECK_OR(orStreamSynchronize(a));
    EXPECT_FLOATS(x, N, sum, "while other streams ran: the all-reduce: ");

    CHECK_OR(orFree(x));
    CHECK_OR(orFree(y));
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orStreamDestroy(b));
    CHECK_OCCL(occlCommDestroy(A));
    CHECK_OCCL(occlCommDestroy(B));
    mpitest_barrier();
    if (ci.rank == 0)
        printf("occl_orders: ok on %d ranks\n", ci.nranks);
    return 0;
}
