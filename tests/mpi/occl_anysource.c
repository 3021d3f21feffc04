/*
 * occlRecvAnySource: a receive that takes whichever rank's send comes first.
 *
 *  1. Fan-in: rank 0 receives once from every other rank, not knowing the
 *     order; each buffer holds the data of the rank reported for it, and
 *     every rank is reported once (small and multi-piece sizes).
 *  2. Per sender, in order: two sends of one rank arrive in the order sent.
 *  3. A collective's traffic is never taken for a send: rank 0 receives
 *     from any source and then all-reduces; rank 1 sends late, the other
 *     ranks are already in the all-reduce (their traffic to rank 0 waits).
 *     Rank 0 gets rank 1's data, and the all-reduce is right.
 *  4. Within one process: a communicator over this rank's own devices
 *     (occlCommInitAll), device 1 sends, device 0 receives from any source.
 *  5. Misuse: in a group, a NULL peer, a communicator of one rank.
 *
 * With the argument "timeout": rank 0 receives from any source while no
 * rank sends; the receive fails with occlTimeout within OCCL_TIMEOUT_MS
 * (plus slack), and says why.
 */
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "occltest.h"

/* What rank r sends as its message k: distinct per rank, message and element. */
static float value(int r, int k, size_t i) { return (float)(r * 100 + k) + (float)(i % 1000) / 1000.0f; }

static void fill(float *dev, size_t n, int r, int k)
{
    float *h = malloc(n * sizeof *h);
    if (!h)
        FAIL("out of memory");
    for (size_t i = 0; i < n; i++)
        h[i] = value(r, k, i);
    CHECK_OR(orMemcpy(dev, h, n * sizeof *h, orMemcpyHostToDevice));
    free(h);
}

static void expect(const float *dev, size_t n, int r, int k, const char *what)
{
    float *h = malloc(n * sizeof *h);
    if (!h)
        FAIL("out of memory");
    CHECK_OR(orMemcpy(h, dev, n * sizeof *h, orMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (h[i] != value(r, k, i))
            FAIL("%s: element %zu is %g, rank %d's message %d has %g", what, i, h[i], r, k,
                 value(r, k, i));
    free(h);
}

/* 1. Every other rank sends to rank 0, which takes them as they come. */
static void fan_in(const orClusterInfo *ci, occlComm_t comm, orStream_t s, size_t n)
{
    int R = ci->nranks;
    float *buf;
    CHECK_OR(orMalloc((void **)&buf, (size_t)R * n * sizeof *buf));
    if (ci->rank == 0) {
        int *from = calloc((size_t)R, sizeof *from);
        for (int i = 0; i < R - 1; i++)
            CHECK_OCCL(occlRecvAnySource(buf + (size_t)i * n, n, occlFloat32, &from[i], comm, s));
        CHECK_OR(orStreamSynchronize(s));
        bool *seen = calloc((size_t)R, sizeof *seen);
        for (int i = 0; i < R - 1; i++) {
            if (from[i] < 1 || from[i] >= R || seen[from[i]])
                FAIL("receive %d of %zu floats reports rank %d", i, n, from[i]);
            seen[from[i]] = true;
            expect(buf + (size_t)i * n, n, from[i], 0, "fan-in");
        }
        free(seen);
        free(from);
    } else {
        fill(buf, n, ci->rank, 0);
        CHECK_OCCL(occlSend(buf, n, occlFloat32, 0, comm, s));
        CHECK_OR(orStreamSynchronize(s));
    }
    CHECK_OR(orFree(buf));
}

/* 2. Rank 1's two sends reach rank 0's two receives in the order sent. */
static void in_order(const orClusterInfo *ci, occlComm_t comm, orStream_t s)
{
    size_t n = 1000;
    float *buf;
    CHECK_OR(orMalloc((void **)&buf, 2 * n * sizeof *buf));
    int from[2];
    if (ci->rank == 0) {
        CHECK_OCCL(occlRecvAnySource(buf, n, occlFloat32, &from[0], comm, s));
        CHECK_OCCL(occlRecvAnySource(buf + n, n, occlFloat32, &from[1], comm, s));
        CHECK_OR(orStreamSynchronize(s));
        for (int k = 0; k < 2; k++) {
            if (from[k] != 1)
                FAIL("receive %d reports rank %d, only rank 1 sent", k, from[k]);
            expect(buf + (size_t)k * n, n, 1, k, "in order");
        }
    } else if (ci->rank == 1) {
        fill(buf, n, 1, 0);
        fill(buf + n, n, 1, 1);
        CHECK_OCCL(occlSend(buf, n, occlFloat32, 0, comm, s));
        CHECK_OCCL(occlSend(buf + n, n, occlFloat32, 0, comm, s));
        CHECK_OR(orStreamSynchronize(s));
    }
    CHECK_OR(orFree(buf));
}

/* 3. The ranks other than 0 and 1 reach the all-reduce while rank 0 still
 * waits for a send: their traffic to it must wait for its all-reduce. */
static void collective_ahead(const orClusterInfo *ci, occlComm_t comm, orStream_t s)
{
    size_t n = 4096;
    float *msg, *sum;
    CHECK_OR(orMalloc((void **)&msg, n * sizeof *msg));
    CHECK_OR(orMalloc((void **)&sum, n * sizeof *sum));
    fill(sum, n, ci->rank, 0);
    int from = -1;
    if (ci->rank == 0) {
        CHECK_OCCL(occlRecvAnySource(msg, n, occlFloat32, &from, comm, s));
    } else if (ci->rank == 1) {
        usleep(300 * 1000); /* the others are in the all-reduce by now */
        fill(msg, n, 1, 7);
        CHECK_OCCL(occlSend(msg, n, occlFloat32, 0, comm, s));
    }
    CHECK_OCCL(occlAllReduce(sum, sum, n, occlFloat32, occlMax, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    if (ci->rank == 0) {
        if (from != 1)
            FAIL("the receive reports rank %d; only rank 1 sent", from);
        expect(msg, n, 1, 7, "collective ahead: the message");
    }
    expect(sum, n, ci->nranks - 1, 0, "collective ahead: the all-reduce (max)");
    CHECK_OR(orFree(msg));
    CHECK_OR(orFree(sum));
}

/* 4. Device 1 sends to device 0 of the same process. */
static void in_process(const orClusterInfo *ci)
{
    if (ci->deviceCount < 2)
        return;
    int devs[2] = {0, 1};
    occlComm_t comms[2];
    CHECK_OCCL(occlCommInitAll(comms, 2, devs));
    size_t n = 3000;
    float *buf[2];
    orStream_t st[2];
    for (int d = 0; d < 2; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orStreamCreate(&st[d]));
        CHECK_OR(orMalloc((void **)&buf[d], n * sizeof(float)));
    }
    CHECK_OR(orSetDevice(1));
    fill(buf[1], n, 1, 3);
    int from = -1;
    CHECK_OR(orSetDevice(0));
    CHECK_OCCL(occlRecvAnySource(buf[0], n, occlFloat32, &from, comms[0], st[0]));
    CHECK_OR(orSetDevice(1));
    CHECK_OCCL(occlSend(buf[1], n, occlFloat32, 0, comms[1], st[1]));
    for (int d = 0; d < 2; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orStreamSynchronize(st[d]));
    }
    CHECK_OR(orSetDevice(0));
    if (from != 1)
        FAIL("in one process: the receive reports rank %d", from);
    expect(buf[0], n, 1, 3, "in one process");
    for (int d = 0; d < 2; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orFree(buf[d]));
        CHECK_OR(orStreamDestroy(st[d]));
        CHECK_OCCL(occlCommDestroy(comms[d]));
    }
    CHECK_OR(orSetDevice(0));
}

static void expect_fail(occlResult_t got, occlResult_t want, const char *reason, const char *what)
{
    const char *last = occlGetLastError(NULL);
    if (got != want || !strstr(last, reason))
        FAIL("%s: got %s (%s), expected %s with \"%s\"", what, occlGetErrorString(got), last,
             occlGetErrorString(want), reason);
}

/* 5. Misuse, on every rank (nothing is sent). */
static void misuse(const orClusterInfo *ci, occlComm_t comm, orStream_t s)
{
    float *buf;
    CHECK_OR(orMalloc((void **)&buf, 16 * sizeof *buf));
    int from = 5;
    CHECK_OCCL(occlGroupStart());
    occlResult_t res = occlRecvAnySource(buf, 16, occlFloat32, &from, comm, s);
    occlResult_t end = occlGroupEnd();
    expect_fail(res, occlInvalidUsage, "not in a group", "RecvAnySource in a group");
    expect_fail(end, occlInvalidUsage, "not in a group", "the group's end");
    expect_fail(occlRecvAnySource(buf, 16, occlFloat32, NULL, comm, s), occlInvalidArgument,
                "peer is NULL", "RecvAnySource with a NULL peer");
    /* Each rank alone in a communicator: nobody can send to it. */
    occlComm_t alone;
    CHECK_OCCL(occlCommSplit(comm, ci->rank, 0, &alone, NULL));
    from = 5;
    expect_fail(occlRecvAnySource(buf, 16, occlFloat32, &from, alone, s), occlInvalidUsage,
                "no other rank", "RecvAnySource on a communicator of one rank");
    if (from != -1)
        FAIL("a refused receive left peer at %d, not -1", from);
    CHECK_OCCL(occlCommDestroy(alone));
    CHECK_OR(orFree(buf));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Nobody sends: rank 0's receive times out, the others wait for it. */
static void times_out(const orClusterInfo *ci, occlComm_t comm, orStream_t s)
{
    const char *env = getenv("OCCL_TIMEOUT_MS");
    double limit = env ? atof(env) / 1000.0 : 0;
    if (limit <= 0 || limit > 10)
        FAIL("run with OCCL_TIMEOUT_MS of at most 10000 (has %s)", env ? env : "none");
    if (ci->rank == 0) {
        float *buf;
        CHECK_OR(orMalloc((void **)&buf, 16 * sizeof *buf));
        int from = 5;
        double t0 = now_s();
        CHECK_OCCL(occlRecvAnySource(buf, 16, occlFloat32, &from, comm, s));
        orError_t err = orStreamSynchronize(s);
        double took = now_s() - t0;
        occlResult_t async = occlSuccess;
        CHECK_OCCL(occlCommGetAsyncError(comm, &async));
        if (err != orErrorTimeout || async != occlTimeout)
            FAIL("stream: %s, communicator: %s; expected a timeout", orGetErrorName(err),
                 occlGetErrorString(async));
        if (!strstr(occlGetLastError(comm), "RecvAnySource"))
            FAIL("the reason does not name the call: %s", occlGetLastError(comm));
        if (from != -1)
            FAIL("a receive that found no sender reports rank %d", from);
        if (took < limit - 0.05 || took > limit + 5)
            FAIL("timed out after %.2f s with OCCL_TIMEOUT_MS at %.2f s", took, limit);
        printf("rank 0: RecvAnySource timed out after %.2f s (%s)\n", took, occlGetLastError(comm));
        CHECK_OR(orFree(buf));
    }
    mpitest_barrier();
    CHECK_OCCL(occlCommAbort(comm));
}

int main(int argc, char **argv)
{
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    if (ci.nranks < 2)
        FAIL("needs at least 2 ranks");
    occlComm_t comm = occltest_comm_world(&ci);
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    if (argc > 1 && strcmp(argv[1], "timeout") == 0) {
        times_out(&ci, comm, s);
    } else {
        /* A barrier after each part: a rank done with its sends of one part
         * would otherwise send the next part's while rank 0 still takes the
         * first part's, and its receive from any source may take either (as
         * MPI's would). */
        fan_in(&ci, comm, s, 1000);
        mpitest_barrier();
        fan_in(&ci, comm, s, (size_t)3 << 20); /* 12 MiB: several network pieces */
        mpitest_barrier();
        in_order(&ci, comm, s);
        mpitest_barrier();
        if (ci.nranks >= 3)
            collective_ahead(&ci, comm, s);
        in_process(&ci);
        misuse(&ci, comm, s);
        mpitest_barrier();
        CHECK_OCCL(occlCommDestroy(comm));
    }
    CHECK_OR(orStreamDestroy(s));
    if (ci.rank == 0)
        printf("occl_anysource: %d ranks x %d devices, %d nodes: OK\n", ci.nranks, ci.deviceCount,
               ci.nnodes);
    return 0;
}
