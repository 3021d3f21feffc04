/*
 * occl_net_caller.c - a small all-reduce across nodes runs on the thread
 * that issues it, and the communicator's thread takes it over when a peer is
 * late (collectives/algorithms.c, occl_net_small_run; enqueue.c). Every rank
 * its own node; run with OCCL_CALLER_WAIT_US=20000, a wait that a loaded
 * machine does not outlast between two calls that finish:
 *   1. 500 8-byte all-reduces issued back to back: the communicator's
 *      thread runs fewer than half of them (all of them if the calling
 *      thread ran none);
 *   2. rank 1 comes 150 ms late to one: the others' call is handed over
 *      (the communicator's thread runs it), after the caller waited, and
 *      the caller is back before rank 1 came;
 *   3. results, on the calling thread and across OCCL_NET_INLINE (where the
 *      communicator's thread runs the call): sum, max, prod and avg of
 *      float32, int32 and float64; in place; a PreMulSum; counts 1, 7,
 *      1024 and 1025 floats (4 KiB and one more).
 * The debug counter occl_comm_runner_calls counts the calls the
 * communicator's thread ran.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mpitest.h"
#include "occl_internal.h" /* occl_comm_runner_calls: the debug counter */
#include "occltest.h"

enum { STREAM_CALLS = 500, LATE_US = 150000 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Rank r's element i, and what a reduction of all n ranks' makes of it. */
static double input(int r, size_t i) { return (double)((r + 1) * ((int)(i % 5) + 1)); }

static double expected(occlRedOp_t op, int n, size_t i)
{
    double acc = input(0, i);
    for (int r = 1; r < n; r++) {
        double v = input(r, i);
        acc = op == occlMax ? fmax(acc, v) : op == occlProd ? acc * v : acc + v;
    }
    return op == occlAvg ? acc / n : acc;
}

static size_t type_size(occlDataType_t t) { return t == occlFloat64 ? 8 : 4; }

static void put(void *host, occlDataType_t t, size_t i, double v)
{
    if (t == occlFloat32)
        ((float *)host)[i] = (float)v;
    else if (t == occlInt32)
        ((int32_t *)host)[i] = (int32_t)v;
    else
        ((double *)host)[i] = v;
}

static double get(const void *host, occlDataType_t t, size_t i)
{
    return t == occlFloat32 ? ((const float *)host)[i]
           : t == occlInt32 ? ((const int32_t *)host)[i]
                            : ((const double *)host)[i];
}

/* One all-reduce of count elements of type t with op (a PreMulSum by
 * `scale` when scale != 0), in place or not, checked on every element. */
static void check_one(occlComm_t comm, orStream_t s, const orClusterInfo *ci, occlDataType_t t, occlRedOp_t op,
                      size_t count, bool in_place, double scale)
{
    size_t bytes = count * type_size(t);
    void *host = malloc(bytes), *in, *out;
    if (!host)
        FAIL("out of memory");
    for (size_t i = 0; i < count; i++)
        put(host, t, i, input(ci->rank, i));
    CHECK_OR(orMalloc(&in, bytes));
    CHECK_OR(orMalloc(&out, bytes));
    CHECK_OR(orMemcpy(in, host, bytes, orMemcpyHostToDevice));
    CHECK_OR(orMemset(out, 0, bytes));
    occlRedOp_t use = op;
    union {
        float f;
        int32_t i;
        double d;
    } scalar; /* of type t */
    put(&scalar, t, 0, scale);
    if (scale != 0)
        CHECK_OCCL(occlRedOpCreatePreMulSum(&use, &scalar, t, occlScalarHostImmediate, comm));
    CHECK_OCCL(occlAllReduce(in, in_place ? in : out, count, t, use, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    if (scale != 0)
        CHECK_OCCL(occlRedOpDestroy(use, comm));
    CHECK_OR(orMemcpy(host, in_place ? in : out, bytes, orMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i++) {
        double want = scale != 0 ? scale * expected(occlSum, ci->nranks, i) : expected(op, ci->nranks, i);
        if (t == occlInt32)
            want = (double)(int32_t)want;
        double got = get(host, t, i);
        if (fabs(got - want) > 1e-6 * fabs(want))
            FAIL("AllReduce of %zu x type %d op %d%s%s: element %zu is %g, expected %g", count, (int)t, (int)op,
                 in_place ? " in place" : "", scale != 0 ? " (PreMulSum)" : "", i, got, want);
    }
    CHECK_OR(orFree(in));
    CHECK_OR(orFree(out));
    free(host);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    if (ci.deviceCount != 1 || ci.nranks < 2 || ci.nnodes != ci.nranks || !getenv("OCCL_CALLER_WAIT_US")) {
        char detail[96];
        snprintf(detail, sizeof detail, "%d ranks of %d devices on %d nodes", ci.nranks, ci.deviceCount,
                 ci.nnodes);
        mpitest_fail(__FILE__, __LINE__,
                     "needs 2 ranks or more of one device, each its own node, and OCCL_CALLER_WAIT_US: ", detail);
    }
    occlComm_t comm = occltest_comm_world(&ci);
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    float h[2] = {(float)(ci.rank + 1), (float)(ci.rank + 1)}, *in, *out;
    CHECK_OR(orMalloc((void **)&in, sizeof h));
    CHECK_OR(orMalloc((void **)&out, sizeof h));
    CHECK_OR(orMemcpy(in, h, sizeof h, orMemcpyHostToDevice));
    float sum = (float)(ci.nranks * (ci.nranks + 1) / 2);
    char detail[160];

    /* 1: a stream of small calls, on the calling thread. */
    mpitest_barrier();
    uint64_t before = occl_comm_runner_calls(comm);
    for (int k = 0; k < STREAM_CALLS; k++)
        CHECK_OCCL(occlAllReduce(in, out, 2, occlFloat32, occlSum, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    EXPECT_FLOATS(out, 2, sum, "8-byte all-reduces: ");
    uint64_t ran = occl_comm_runner_calls(comm) - before;
    snprintf(detail, sizeof detail, "rank %d: the communicator's thread ran %llu of %d calls", ci.rank,
             (unsigned long long)ran, STREAM_CALLS);
    if (ran >= STREAM_CALLS / 2)
        mpitest_fail(__FILE__, __LINE__, "small all-reduces across nodes not run on the calling thread: ",
                     detail);
    unsigned long long stream_ran = ran;

    /* 2: a late peer: the call is handed over. */
    mpitest_barrier();
    if (ci.rank == 1)
        usleep(LATE_US);
    before = occl_comm_runner_calls(comm);
    double t0 = now_s();
    CHECK_OCCL(occlAllReduce(in, out, 2, occlFloat32, occlSum, comm, s));
    double issued = now_s() - t0;
    CHECK_OR(orStreamSynchronize(s));
    EXPECT_FLOATS(out, 2, sum, "an all-reduce with a late peer: ");
    ran = occl_comm_runner_calls(comm) - before;
    snprintf(detail, sizeof detail, "rank %d: issued in %.1f ms, %llu call(s) on the communicator's thread",
             ci.rank, issued * 1e3, (unsigned long long)ran);
    if (ci.rank != 1 && (ran != 1 || issued < 0.015 || issued > 0.100))
        mpitest_fail(__FILE__, __LINE__,
                     "a call whose peer is 150 ms late should wait about 20 ms on the calling thread, "
                     "then be handed over: ",
                     detail);
    double late_issue = issued;

    /* 3: results. */
    const occlDataType_t types[] = {occlFloat32, occlInt32, occlFloat64};
    const occlRedOp_t ops[] = {occlSum, occlMax, occlProd, occlAvg};
    const size_t counts[] = {1, 7, 1024, 1025};
    for (size_t a = 0; a < sizeof types / sizeof *types; a++)
        for (size_t b = 0; b < sizeof ops / sizeof *ops; b++)
            for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                if (ops[b] == occlAvg && types[a] == occlInt32)
                    continue; /* integer averages round: checked elsewhere */
                check_one(comm, s, &ci, types[a], ops[b], counts[c], c % 2 == 1, 0);
            }
    check_one(comm, s, &ci, occlFloat32, occlSum, 7, false, 0.5);
    check_one(comm, s, &ci, occlFloat64, occlSum, 1025, true, 0.25);

    CHECK_OR(orFree(in));
    CHECK_OR(orFree(out));
    CHECK_OR(orStreamDestroy(s));
    CHECK_OCCL(occlCommDestroy(comm));
    if (ci.rank == 0)
        printf("occl net caller: %llu of %d small calls on the communicator's thread; a call with a peer "
               "150 ms late issued in %.1f ms and handed over; results exact\n",
               stream_ran, STREAM_CALLS, late_issue * 1e3);
    MPI_Finalize();
    return 0;
}
