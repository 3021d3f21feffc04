/*
 * occl_rma.c - one-sided calls on symmetric memory windows (occlPutSignal,
 * occlSignal, occlWaitSignal): a ring of puts with signals and waits (small
 * and over a MiB, the putting rank late, so a wait that did not wait would
 * read the old bytes), several puts counted by one wait (opCnt > 1), signals
 * without data, one rank waiting for all others in one call (several
 * descriptors), a put to oneself, the same pattern inside a group, every
 * bad input refused at the call with its result and reason, and a peer
 * whose window is smaller failing the put when it runs. Run within one
 * virtual node and across virtual nodes (the puts then go over MPI).
 */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "occltest.h"

#define CHUNK 300000 /* elements of the large put: 1.2 MB */
#define SMALL 37
#define REGIONS 4

static int rank_, nranks_;

static uint32_t value(int sender, int round, size_t i)
{
    return (uint32_t)sender << 24 | (uint32_t)round << 20 | (uint32_t)(i & 0xfffff);
}

static void fill(uint32_t *dev, size_t n, int sender, int round)
{
    uint32_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = value(sender, round, i);
    CHECK_OR(orMemcpy(dev, h, n * sizeof *h, orMemcpyHostToDevice));
    free(h);
}

/* Region `region` of the window holds n values of (sender, round). */
static void expect(const uint32_t *win, int region, size_t n, int sender, int round, const char *what)
{
    uint32_t *h = malloc(n * sizeof *h);
    CHECK_OR(orMemcpy(h, win + (size_t)region * CHUNK, n * sizeof *h, orMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (h[i] != value(sender, round, i)) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s: element %zu of region %d is %#x, expected %#x", what, i, region,
                     h[i], value(sender, round, i));
            mpitest_fail(__FILE__, __LINE__, msg, "");
        }
    free(h);
}

/* A call that must be refused with `want` and a reason containing `why`. */
#define REFUSED(call, want, why)                                                                   \
    do {                                                                                           \
        occlResult_t got_ = (call);                                                                \
        if (got_ != (want) || !strstr(occlGetLastError(NULL), (why))) {                            \
            char detail_[512];                                                                     \
            snprintf(detail_, sizeof detail_, "%s (%s), expected %s with '%s'",                    \
                     occlGetErrorString(got_), occlGetLastError(NULL), occlGetErrorString(want), \
                     (why));                                                                       \
            mpitest_fail(__FILE__, __LINE__, #call " -> ", detail_);                               \
        }                                                                                          \
    } while (0)

static void errors(occlComm_t comm, orStream_t s, occlWindow_t win, uint32_t *src, uint32_t *host)
{
    int next = (rank_ + 1) % nranks_, n = nranks_;
    size_t wbytes = (size_t)REGIONS * CHUNK * sizeof(uint32_t);
    /* PutSignal */
    REFUSED(occlPutSignal(src, SMALL, occlUint32, next, NULL, 0, 0, 0, 0, comm, s), occlInvalidArgument,
            "peerWin is NULL");
    uint32_t *other;
    occlWindow_t gone;
    CHECK_OR(orMalloc((void **)&other, 4096));
    CHECK_OCCL(occlCommWindowRegister(comm, other, 4096, &gone, OCCL_WIN_DEFAULT));
    CHECK_OCCL(occlCommWindowDeregister(comm, gone));
    REFUSED(occlPutSignal(src, SMALL, occlUint32, next, gone, 0, 0, 0, 0, comm, s), occlInvalidUsage,
            "is not a window of this communicator");
    /* At most 64 live windows per communicator (2 are live already). */
    occlWindow_t many[64];
    int live = 0;
    for (; live < 64; live++)
        if (occlCommWindowRegister(comm, other, 4096, &many[live], OCCL_WIN_DEFAULT) != occlSuccess)
            break;
    CHECK(live == 62 && many[62] == NULL);
    REFUSED(occlCommWindowRegister(comm, other, 4096, &many[63], OCCL_WIN_DEFAULT), occlSystemError,
            "64 windows of this communicator are registered already");
    while (live > 0)
        CHECK_OCCL(occlCommWindowDeregister(comm, many[--live]));
    REFUSED(occlPutSignal(src, SMALL, occlUint32, next, (occlWindow_t)&n, 0, 0, 0, 0, comm, s),
            occlInvalidUsage, "is not a window of this communicator");
    REFUSED(occlPutSignal(src, 1, occlUint32, next, win, wbytes - 2, 0, 0, 0, comm, s), occlInvalidArgument,
            "run past the end of the window");
    REFUSED(occlPutSignal(src, 1, occlUint32, next, win, wbytes + 4, 0, 0, 0, comm, s), occlInvalidArgument,
            "run past the end of the window");
    REFUSED(occlPutSignal(src, SIZE_MAX / 2, occlUint32, next, win, 0, 0, 0, 0, comm, s),
            occlInvalidArgument, "overflow");
    REFUSED(occlPutSignal(src, SMALL, occlUint32, n, win, 0, 0, 0, 0, comm, s), occlInvalidArgument,
            "peer");
    REFUSED(occlPutSignal(src, SMALL, occlUint32, -1, win, 0, 0, 0, 0, comm, s), occlInvalidArgument,
            "peer -1 is not in");
    REFUSED(occlPutSignal(src, SMALL, (occlDataType_t)occlNumTypes, next, win, 0, 0, 0, 0, comm, s),
            occlInvalidArgument, "unknown data type");
    REFUSED(occlPutSignal(src, SMALL, occlUint32, next, win, 0, 1, 0, 0, comm, s), occlInvalidArgument,
            "sigIdx 1 is not valid");
    REFUSED(occlPutSignal(src, SMALL, occlUint32, next, win, 0, -1, 0, 0, comm, s), occlInvalidArgument,
            "sigIdx -1 is not valid");
    REFUSED(occlPutSignal(src, SMALL, occlUint32, next, win, 0, 0, 1, 0, comm, s), occlInvalidArgument,
            "ctx 1 is not valid");
    REFUSED(occlPutSignal(src, SMALL, occlUint32, next, win, 0, 0, 0, 1, comm, s), occlInvalidArgument,
            "flags 0x1 are not valid");
    REFUSED(occlPutSignal(NULL, SMALL, occlUint32, next, win, 0, 0, 0, 0, comm, s), occlInvalidArgument,
            "localbuff is NULL");
    REFUSED(occlPutSignal(host, SMALL, occlUint32, next, win, 0, 0, 0, 0, comm, s), occlInvalidArgument,
            "localbuff");
    REFUSED(occlPutSignal(src, SMALL, occlUint32, next, win, 0, 0, 0, 0, NULL, s), occlInvalidArgument,
            "not a live communicator");
    /* Signal */
    REFUSED(occlSignal(n, 0, 0, 0, comm, s), occlInvalidArgument, "peer");
    REFUSED(occlSignal(-2, 0, 0, 0, comm, s), occlInvalidArgument, "peer -2 is not in");
    REFUSED(occlSignal(next, 1, 0, 0, comm, s), occlInvalidArgument, "sigIdx 1 is not valid");
    REFUSED(occlSignal(next, 0, 2, 0, comm, s), occlInvalidArgument, "ctx 2 is not valid");
    REFUSED(occlSignal(next, 0, 0, 4, comm, s), occlInvalidArgument, "flags 0x4 are not valid");
    REFUSED(occlSignal(next, 0, 0, 0, NULL, s), occlInvalidArgument, "not a live communicator");
    /* WaitSignal */
    occlWaitSignalDesc_t d[2] = {{1, next, 0, 0}, {1, next, 0, 0}};
    REFUSED(occlWaitSignal(-1, d, comm, s), occlInvalidArgument, "nDesc -1");
    REFUSED(occlWaitSignal(0, d, comm, s), occlInvalidArgument, "nDesc 0");
    REFUSED(occlWaitSignal(1, NULL, comm, s), occlInvalidArgument, "signalDescs is NULL");
    d[1].opCnt = 0;
    REFUSED(occlWaitSignal(2, d, comm, s), occlInvalidArgument, "descriptor 1: opCnt 0");
    d[1].opCnt = 1;
    d[1].peer = n;
    REFUSED(occlWaitSignal(2, d, comm, s), occlInvalidArgument, "descriptor 1: peer");
    d[1].peer = next;
    d[1].sigIdx = 1;
    REFUSED(occlWaitSignal(2, d, comm, s), occlInvalidArgument, "descriptor 1: sigIdx 1 is not valid");
    d[1].sigIdx = 0;
    d[1].ctx = 1;
    REFUSED(occlWaitSignal(2, d, comm, s), occlInvalidArgument, "descriptor 1: ctx 1 is not valid");
    REFUSED(occlWaitSignal(1, d, NULL, s), occlInvalidArgument, "not a live communicator");
    /* A bad call in a group fails the group, which runs none of it. */
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlSignal(next, 0, 0, 0, comm, s));
    REFUSED(occlSignal(next, 3, 0, 0, comm, s), occlInvalidArgument, "sigIdx 3");
    REFUSED(occlGroupEnd(), occlInvalidArgument, "sigIdx 3");
    /* numRmaCtx 0 turns one-sided calls off (NCCL: no RMA on that communicator). */
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.numRmaCtx = 0;
    occlComm_t off;
    CHECK_OCCL(occlCommSplit(comm, 0, rank_, &off, &cfg));
    occlWindow_t offwin;
    CHECK_OCCL(occlCommWindowRegister(off, other, 4096, &offwin, OCCL_WIN_DEFAULT));
    REFUSED(occlPutSignal(src, 1, occlUint32, next, offwin, 0, 0, 0, 0, off, s), occlInvalidArgument,
            "numRmaCtx is 0");
    REFUSED(occlSignal(next, 0, 0, 0, off, s), occlInvalidArgument, "numRmaCtx is 0");
    occlWaitSignalDesc_t one = {1, next, 0, 0};
    REFUSED(occlWaitSignal(1, &one, off, s), occlInvalidArgument, "numRmaCtx is 0");
    CHECK_OCCL(occlCommWindowDeregister(off, offwin));
    CHECK_OCCL(occlCommDestroy(off));
    CHECK_OR(orFree(other));
    /* Nothing was queued by any of it. */
    CHECK_OR(orStreamSynchronize(s));
    occlResult_t state;
    CHECK_OCCL(occlCommGetAsyncError(comm, &state));
    CHECK(state == occlSuccess);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    rank_ = ci.rank;
    nranks_ = ci.nranks;
    if (ci.nranks < 2)
        mpitest_fail(__FILE__, __LINE__, "needs at least 2 ranks", "");
    occlComm_t comm = occltest_comm_world(&ci);
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    int n = ci.nranks, me = ci.rank, next = (me + 1) % n, prev = (me + n - 1) % n;

    /* Two windows: puts go to the second, so a peer must find its window by
     * its ordinal, not take the first one it has. */
    size_t wbytes = (size_t)REGIONS * CHUNK * sizeof(uint32_t);
    uint32_t *first, *win, *src;
    CHECK_OR(orMalloc((void **)&first, 8192));
    CHECK_OR(orMalloc((void **)&win, wbytes));
    CHECK_OR(orMalloc((void **)&src, (size_t)REGIONS * CHUNK * sizeof(uint32_t)));
    CHECK_OR(orMemset(win, 0, wbytes));
    occlWindow_t w0, w;
    CHECK_OCCL(occlCommWindowRegister(comm, first, 8192, &w0, OCCL_WIN_DEFAULT));
    CHECK_OCCL(occlCommWindowRegister(comm, win, wbytes, &w, OCCL_WIN_COLL_SYMMETRIC));
    uint32_t host[SMALL];

    errors(comm, s, w, src, host);

    /* 1. A ring: each rank puts a large and a small block into the next
     * rank's window, one signal each, then waits for its previous rank's
     * two. Odd ranks put 200 ms late: the waits must wait. */
    fill(src, CHUNK, me, 1);
    fill(src + CHUNK, SMALL, me, 2);
    mpitest_barrier();
    if (me % 2)
        usleep(200000);
    CHECK_OCCL(occlPutSignal(src, CHUNK, occlUint32, next, w, 0, 0, 0, 0, comm, s));
    CHECK_OCCL(occlPutSignal(src + CHUNK, SMALL, occlUint32, next, w, CHUNK * sizeof(uint32_t), 0, 0, 0,
                             comm, s));
    occlWaitSignalDesc_t d = {2, prev, 0, 0};
    CHECK_OCCL(occlWaitSignal(1, &d, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    expect(win, 0, CHUNK, prev, 1, "ring, large");
    expect(win, 1, SMALL, prev, 2, "ring, small");

    /* 2. Three puts counted by one wait (opCnt 3), each in its own region. */
    mpitest_barrier();
    for (int k = 0; k < 3; k++)
        fill(src + (size_t)k * CHUNK, 1000 + k, me, 3 + k);
    if (me % 2 == 0)
        usleep(100000);
    for (int k = 0; k < 3; k++)
        CHECK_OCCL(occlPutSignal(src + (size_t)k * CHUNK, 1000 + k, occlUint32, next, w,
                                 (size_t)k * CHUNK * sizeof(uint32_t), 0, 0, 0, comm, s));
    d.opCnt = 3;
    CHECK_OCCL(occlWaitSignal(1, &d, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    for (int k = 0; k < 3; k++)
        expect(win, k, 1000 + k, prev, 3 + k, "opCnt 3");

    /* 3. Signals without data, then a put: the wait for 3 signals consumes
     * them all, the window holds the put's bytes. */
    mpitest_barrier();
    fill(src, SMALL, me, 7);
    CHECK_OCCL(occlSignal(next, 0, 0, 0, comm, s));
    CHECK_OCCL(occlSignal(next, 0, 0, 0, comm, s));
    CHECK_OCCL(occlPutSignal(src, SMALL, occlUint32, next, w, 3 * CHUNK * sizeof(uint32_t), 0, 0, 0, comm,
                             s));
    CHECK_OCCL(occlWaitSignal(1, &d, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    expect(win, 3, SMALL, prev, 7, "signals then a put");
    /* A put of 0 elements signals too. */
    CHECK_OCCL(occlPutSignal(NULL, 0, occlUint32, next, w, 0, 0, 0, 0, comm, s));
    d.opCnt = 1;
    CHECK_OCCL(occlWaitSignal(1, &d, comm, s));
    CHECK_OR(orStreamSynchronize(s));

    /* 4. Every other rank puts into rank 0's window, each in its region
     * (rank r at r-1, wrapping); rank 0 waits for all in one call of n-1
     * descriptors, the last one counting 2 (a put and a signal). */
    mpitest_barrier();
    if (me != 0) {
        fill(src, 500, me, 9);
        usleep((useconds_t)(50000 * me));
        CHECK_OCCL(occlPutSignal(src, 500, occlUint32, 0, w, (size_t)((me - 1) % REGIONS) * CHUNK * 4, 0,
                                 0, 0, comm, s));
        if (me == n - 1)
            CHECK_OCCL(occlSignal(0, 0, 0, 0, comm, s));
    } else {
        occlWaitSignalDesc_t all[8];
        for (int r = 1; r < n; r++)
            all[r - 1] = (occlWaitSignalDesc_t){r == n - 1 ? 2 : 1, r, 0, 0};
        CHECK_OCCL(occlWaitSignal(n - 1, all, comm, s));
    }
    CHECK_OR(orStreamSynchronize(s));
    if (me == 0)
        for (int r = 1; r < n && r <= REGIONS; r++)
            expect(win, (r - 1) % REGIONS, 500, r, 9, "fan-in");

    /* 5. A put to oneself. */
    fill(src, SMALL, me, 11);
    CHECK_OCCL(occlPutSignal(src, SMALL, occlUint32, me, w, 2 * CHUNK * sizeof(uint32_t), 0, 0, 0, comm, s));
    occlWaitSignalDesc_t self = {1, me, 0, 0};
    CHECK_OCCL(occlWaitSignal(1, &self, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    expect(win, 2, SMALL, me, 11, "to oneself");

    /* 6. The ring inside a group, in float64 (another element size). */
    mpitest_barrier();
    fill(src, 2 * SMALL, me, 12);
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlPutSignal(src, SMALL, occlFloat64, next, w, 0, 0, 0, 0, comm, s));
    CHECK_OCCL(occlWaitSignal(1, &d, comm, s));
    CHECK_OCCL(occlGroupEnd());
    CHECK_OR(orStreamSynchronize(s));
    expect(win, 0, 2 * SMALL, prev, 12, "group");

    /* The communicator still works for collectives. */
    CHECK_OCCL(occlAllReduce(src, src, 1000, occlUint32, occlSum, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    occlResult_t state;
    CHECK_OCCL(occlCommGetAsyncError(comm, &state));
    CHECK(state == occlSuccess);

    /* 7. Rank 1's window is smaller than the others': a put that fits rank
     * 0's window passes the call's check and fails when it runs, on rank 0
     * (its stream and communicator) when both share a node, else in rank
     * 1's wait, which takes the message. */
    int nodes[64];
    MPI_Allgather(&ci.node, 1, MPI_INT, nodes, 1, MPI_INT, MPI_COMM_WORLD);
    bool across = nodes[0] != nodes[1];
    occlComm_t bad;
    CHECK_OCCL(occlCommSplit(comm, 0, me, &bad, NULL));
    occlWindow_t bw;
    CHECK_OCCL(occlCommWindowRegister(bad, win, me == 1 ? 4096 : 8192, &bw, OCCL_WIN_DEFAULT));
    const char *why = NULL;
    if (me == 0) {
        CHECK_OCCL(occlPutSignal(src, 2048, occlUint32, 1, bw, 0, 0, 0, 0, bad, s));
        why = across ? NULL : "run past the end of rank 1's window #0 (4096 bytes)";
    } else if (me == 1 && across) {
        occlWaitSignalDesc_t one = {1, 0, 0, 0};
        CHECK_OCCL(occlWaitSignal(1, &one, bad, s));
        why = "past the end of this rank's window #0 (4096 bytes)";
    }
    if (why) {
        CHECK(orStreamSynchronize(s) != orSuccess);
        CHECK_OCCL(occlCommGetAsyncError(bad, &state));
        CHECK(state == occlInvalidUsage);
        if (!strstr(occlGetLastError(bad), why))
            mpitest_fail(__FILE__, __LINE__, "reason: ", occlGetLastError(bad));
    }
    CHECK_OR(orStreamSynchronize(s));
    mpitest_barrier();
    CHECK_OCCL(occlCommAbort(bad));

    mpitest_barrier();
    CHECK_OCCL(occlCommWindowDeregister(comm, w));
    CHECK_OCCL(occlCommWindowDeregister(comm, w0));
    CHECK_OCCL(occlCommDestroy(comm));
    CHECK_OR(orFree(win));
    CHECK_OR(orFree(first));
    CHECK_OR(orFree(src));
    CHECK_OR(orStreamDestroy(s));
    mpitest_barrier();
    if (me == 0)
        printf("occl_rma: %d ranks: ring, opCnt 3, signals, fan-in, self, group, errors, a smaller "
               "peer window: ok\n", n);
    MPI_Finalize();
    return 0;
}
