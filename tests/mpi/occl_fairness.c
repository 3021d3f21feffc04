/*
 * occl_fairness.c - ranks waiting in a collective leave the cores to the
 * ranks that compute.
 *
 * The first half of the ranks runs a compute-bound kernel; the second half
 * waits for them in an 8-byte all-reduce (the low-latency path; with more
 * ranks than cores each computing rank shares its core with a waiting one).
 * The kernel's time must stay within 10% of its time while the other ranks
 * sleep in MPI, and the waiting ranks may take at most 10% of that time in
 * CPU. The machine may be busy with other work, which only adds time: each
 * side is measured up to eight times and the least times are compared.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "mpitest.h"
#include "occltest.h"

typedef struct {
    uint64_t iters;
    double *out;
} spin_args;

/* Dependent floating-point work: no memory traffic, no vectorizing away. */
static void spin_kernel(const orKernelContext *ctx, void *args)
{
    (void)ctx;
    const spin_args *a = args;
    double x = 1.0;
    for (uint64_t i = 0; i < a->iters; i++)
        x = x * 1.0000001 + 1e-9;
    *a->out = x;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double run_kernel(uint64_t iters, double *out, orStream_t s)
{
    spin_args a = {iters, out};
    double t0 = now_s();
    CHECK_OR(orLaunchKernel(spin_kernel, (orDim3){1, 1, 1}, (orDim3){1, 1, 1}, &a, sizeof a, 0, s));
    CHECK_OR(orStreamSynchronize(s));
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    if (ci.nranks < 4 || ci.nranks % 2)
        mpitest_fail(__FILE__, __LINE__, "needs an even number of ranks, at least 4", "");
    CHECK_OR(orSetDevice(0));
    int me = ci.rank;
    bool computes = me < ci.nranks / 2;
    occlComm_t comm = occltest_comm_world(&ci);
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    float *buf;
    double *out;
    CHECK_OR(orMalloc((void **)&buf, 2 * sizeof *buf));
    CHECK_OR(orMalloc((void **)&out, sizeof *out));

    /* About 0.3 s of kernel, measured alone on rank 0. */
    uint64_t iters = 1u << 20;
    if (me == 0) {
        double t;
        while ((t = run_kernel(iters, out, s)) < 0.05)
            iters *= 2;
        iters = (uint64_t)((double)iters * 0.3 / t);
    }
    mpitest_barrier(); /* MPI_Bcast spins: rank 0 measured beside sleeping ranks */
    MPI_Bcast(&iters, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);

    /* Each computing rank's least time alone and beside waiting ranks. */
    double min_alone = INFINITY, min_with = INFINITY, best = INFINITY, waiter_cpu = INFINITY;
    for (int attempt = 0; attempt < 8 && (best > 1.10 || waiter_cpu > 0.10); attempt++) {
        /* Alone: the other ranks sleep in MPI. */
        mpitest_barrier();
        double t_alone = computes ? run_kernel(iters, out, s) : 0;
        mpitest_barrier();
        /* With the other ranks waiting in the all-reduce for this one. */
        float one[2] = {1, 1};
        CHECK_OR(orMemcpy(buf, one, sizeof one, orMemcpyHostToDevice));
        mpitest_barrier();
        double t_with = 0, c0 = cpu_s(), w0 = now_s();
        if (computes)
            t_with = run_kernel(iters, out, s);
        CHECK_OCCL(occlAllReduce(buf, buf, 2, occlFloat32, occlSum, comm, s));
        CHECK_OR(orStreamSynchronize(s));
        double cpu = cpu_s() - c0, wall = now_s() - w0;
        float got[2];
        CHECK_OR(orMemcpy(got, buf, sizeof got, orMemcpyDeviceToHost));
        if (got[0] != (float)ci.nranks || got[1] != (float)ci.nranks)
            mpitest_fail(__FILE__, __LINE__, "the all-reduce is wrong", "");
        if (computes) {
            min_alone = fmin(min_alone, t_alone);
            min_with = fmin(min_with, t_with);
        }
        /* The slowest computing rank's ratio; the busiest waiting rank's share. */
        double ratio = computes ? min_with / min_alone : 0, share = computes ? 0 : cpu / wall;
        double worst[2], mine[2] = {ratio, share};
        MPI_Allreduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (me == 0)
            printf("attempt %d: rank 0's kernel alone %.3f s, with waiting ranks %.3f s; least "
                   "times' ratio x%.3f (slowest computing rank); waiting ranks used at most "
                   "%.1f%% of a core\n",
                   attempt + 1, t_alone, t_with, worst[0], 100 * worst[1]);
        best = worst[0];
        waiter_cpu = fmin(waiter_cpu, worst[1]);
    }
    if (me == 0) {
        printf("fairness: kernel x%.3f (rank 0: %.3f s alone, %.3f s beside waiting ranks), "
               "waiting ranks' CPU %.1f%%\n", best, min_alone, min_with, 100 * waiter_cpu);
        if (best > 1.10)
            mpitest_fail(__FILE__, __LINE__, "ranks waiting in a collective slowed a computing "
                                             "rank by more than 10%", "");
        if (waiter_cpu > 0.10)
            mpitest_fail(__FILE__, __LINE__, "a rank waiting in a collective used more than 10% "
                                             "of a core", "");
        printf("PASS occl_fairness\n");
    }
    CHECK_OCCL(occlCommDestroy(comm));
    CHECK_OR(orStreamDestroy(s));
    CHECK_OR(orFree(buf));
    CHECK_OR(orFree(out));
    MPI_Finalize();
    return 0;
}
