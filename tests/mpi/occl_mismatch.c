/*
 * Collective fingerprints: calls that do not match across ranks fail on
 * every rank with occlInvalidUsage and a message naming both sides, never
 * with mixed data and never at the timeout (the job runs with an
 * OCCL_TIMEOUT_MS far longer than a case may take).
 *
 * Each case runs on a fresh communicator: rank 0 issues one call, every
 * other rank another.
 *  1. Every ordered pair of different calls among AllReduce, Broadcast,
 *     Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter and
 *     Send/Recv (rank 0 sends to, or receives from, every other rank).
 *  2. One field apart: the datatype (float32 and int32, same bytes), the op
 *     (sum and max), the root, the count.
 *  3. The same two calls in swapped order: rank 0 all-reduces then
 *     broadcasts, the others broadcast then all-reduce.
 *  4. A Send of float32 met by a Recv of int32 of the same bytes.
 *  5. AllReduce, AlltoAll and Send/Recv with counts 64 and 4096 floats:
 *     between nodes the smaller goes with its call's header, the larger
 *     after it.
 *  6. A call that matches still runs, with the right result, after all of
 *     the failed communicators were aborted.
 * Each case then runs one matching all-reduce on every rank. On every rank,
 * within a few seconds: the stream reports the failure or (a rank whose
 * part was done before a peer found the mismatch: a Reduce's leaf)
 * occlCommGetAsyncError does; it gives occlInvalidUsage, and
 * occlGetLastError names "mismatched calls", rank 0's call and the other
 * side's. Across nodes a call that only sends may finish (MPI takes small
 * messages eagerly), on either side (rank 0's Send, a Reduce's leaf):
 * then the mismatch shows at the all-reduce after it, and the message names
 * that all-reduce in place of that side's call.
 */
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "occltest.h"

enum { ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, GATHER, SCATTER, P2P, NCALLS };
static const char *const names[NCALLS] = {"AllReduce", "Broadcast", "Reduce", "AllGather",
                                          "ReduceScatter", "AlltoAll", "Gather", "Scatter", "P2P"};

typedef struct call {
    int kind;
    occlDataType_t type;
    occlRedOp_t op;
    int root;
    size_t count;
} call;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void issue(const call *c, occlComm_t comm, int rank, int nranks, void *send, void *recv,
                  orStream_t s)
{
    occlResult_t r = occlSuccess;
    switch (c->kind) {
    case ALLREDUCE: r = occlAllReduce(send, recv, c->count, c->type, c->op, comm, s); break;
    case BROADCAST: r = occlBroadcast(send, recv, c->count, c->type, c->root, comm, s); break;
    case REDUCE: r = occlReduce(send, recv, c->count, c->type, c->op, c->root, comm, s); break;
    case ALLGATHER: r = occlAllGather(send, recv, c->count, c->type, comm, s); break;
    case REDUCESCATTER: r = occlReduceScatter(send, recv, c->count, c->type, c->op, comm, s); break;
    case ALLTOALL: r = occlAlltoAll(send, recv, c->count, c->type, comm, s); break;
    case GATHER: r = occlGather(send, recv, c->count, c->type, c->root, comm, s); break;
    case SCATTER: r = occlScatter(send, recv, c->count, c->type, c->root, comm, s); break;
    case P2P: /* rank 0 sends to every rank; the others receive from it */
        CHECK_OCCL(occlGroupStart());
        for (int j = 0; j < nranks; j++)
            if (rank == 0 && j != 0)
                CHECK_OCCL(occlSend(send, c->count, c->type, j, comm, s));
        if (rank != 0)
            r = occlRecv(recv, c->count, c->type, 0, comm, s);
        CHECK_OCCL(occlGroupEnd());
        break;
    }
    if (r != occlSuccess)
        FAIL("%s could not be issued: %s (%s)", names[c->kind], occlGetErrorString(r), occlGetLastError(NULL));
}

/* What the message says of a call ("AllReduce float32 sum count 64"). */
static void describe(const call *c, int rank, char *buf, size_t size)
{
    static const char *const ops[] = {"sum", "prod", "max", "min", "avg"};
    const char *type = c->type == occlFloat32 ? "float32" : "int32";
    if (c->kind == P2P) {
        snprintf(buf, size, "%s %s count %zu", rank == 0 ? "Send" : "Recv", type, c->count);
        return;
    }
    int len = snprintf(buf, size, "%s %s", names[c->kind], type);
    if (c->kind == ALLREDUCE || c->kind == REDUCE || c->kind == REDUCESCATTER)
        len += snprintf(buf + len, size - (size_t)len, " %s", ops[c->op]);
    if (c->kind == BROADCAST || c->kind == REDUCE || c->kind == GATHER || c->kind == SCATTER)
        len += snprintf(buf + len, size - (size_t)len, " root %d", c->root);
    snprintf(buf + len, size - (size_t)len, " count %zu", c->count);
}

static int cases_run;

static call basic(int kind)
{
    return (call){kind, occlFloat32, occlSum, 0, 64};
}

/* Rank 0 issues `first` calls of a, the others of b (a and b: arrays). */
static void expect_mismatch(const orClusterInfo *ci, const call *a, const call *b, int ncalls,
                            const char *what)
{
    int me = ci->rank;
    const call *mine = me == 0 ? a : b;
    occlComm_t comm = occltest_comm_world(ci);
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    size_t most = 64;
    for (int k = 0; k < ncalls; k++) {
        most = a[k].count > most ? a[k].count : most;
        most = b[k].count > most ? b[k].count : most;
    }
    size_t bytes = most * 4 * (size_t)ci->nranks * 2;
    void *send, *recv;
    CHECK_OR(orMalloc(&send, bytes));
    CHECK_OR(orMalloc(&recv, bytes));
    CHECK_OR(orMemset(send, 1, bytes));
    double t0 = now_s();
    for (int k = 0; k < ncalls; k++)
        issue(&mine[k], comm, me, ci->nranks, send, recv, s);
    call after = basic(ALLREDUCE);
    issue(&after, comm, me, ci->nranks, send, recv, s);
    orError_t err = orStreamSynchronize(s);
    occlResult_t async = occlSuccess;
    do {
        CHECK_OCCL(occlCommGetAsyncError(comm, &async));
        if (async == occlSuccess)
            usleep(1000);
    } while (async == occlSuccess && now_s() - t0 < 20.0);
    double took = now_s() - t0;
    const char *msg = occlGetLastError(comm);
    if (async != occlInvalidUsage)
        FAIL("%s: stream %s, communicator %s (%s) after %.1f s; expected a mismatch", what,
             orGetErrorName(err), occlGetErrorString(async), msg, took);
    char da[128], db[128], dafter[128];
    describe(&a[0], 0, da, sizeof da);
    describe(&b[0], 1, db, sizeof db);
    describe(&after, 0, dafter, sizeof dafter);
    char want_a[160], want_after[160];
    snprintf(want_a, sizeof want_a, "rank 0 %s", da);
    snprintf(want_after, sizeof want_after, "rank 0 %s", dafter);
    /* Across nodes either side's call may have finished by sending eagerly
     * (a Send, a Reduce's leaf): that side is then named by the all-reduce
     * after it. One side must still be the call that mismatched. */
    bool orig_a = strstr(msg, want_a) != NULL, orig_b = strstr(msg, db) != NULL;
    bool later_a = ci->nnodes > 1 && strstr(msg, want_after);
    bool later_b = false;
    for (int r = 1; r < ci->nranks && ci->nnodes > 1 && !later_b; r++) {
        char want[160];
        snprintf(want, sizeof want, "rank %d %s", r, dafter);
        later_b = strstr(msg, want) != NULL;
    }
    if (!strstr(msg, "mismatched calls") || !(orig_a || later_a) || !(orig_b || later_b) ||
        !(orig_a || orig_b))
        FAIL("%s: the message \"%s\" does not name \"%s\" and \"%s\"", what, msg, want_a, db);
    CHECK_OCCL(occlCommAbort(comm));
    CHECK_OR(orStreamDestroy(s));
    CHECK_OR(orFree(send));
    CHECK_OR(orFree(recv));
    mpitest_barrier();
    cases_run++;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    if (ci.nranks < 2)
        FAIL("needs at least 2 ranks (has %d)", ci.nranks);
    CHECK_OR(orSetDevice(0));
    char what[128];

    /* 1. Every ordered pair of different calls. */
    for (int i = 0; i < NCALLS; i++)
        for (int j = 0; j < NCALLS; j++) {
            if (i == j)
                continue;
            call a = basic(i), b = basic(j);
            snprintf(what, sizeof what, "%s against %s", names[i], names[j]);
            expect_mismatch(&ci, &a, &b, 1, what);
        }

    /* 2. One field apart. */
    for (int i = 0; i < P2P; i++) {
        call a = basic(i), b = basic(i);
        b.type = occlInt32;
        snprintf(what, sizeof what, "%s float32 against int32", names[i]);
        expect_mismatch(&ci, &a, &b, 1, what);
        b = basic(i);
        b.count = 32;
        snprintf(what, sizeof what, "%s count 64 against 32", names[i]);
        expect_mismatch(&ci, &a, &b, 1, what);
        if (i == ALLREDUCE || i == REDUCE || i == REDUCESCATTER) {
            b = basic(i);
            b.op = occlMax;
            snprintf(what, sizeof what, "%s sum against max", names[i]);
            expect_mismatch(&ci, &a, &b, 1, what);
        }
        if (i == BROADCAST || i == REDUCE || i == GATHER || i == SCATTER) {
            b = basic(i);
            b.root = 1;
            snprintf(what, sizeof what, "%s root 0 against root 1", names[i]);
            expect_mismatch(&ci, &a, &b, 1, what);
        }
    }

    /* 3. Swapped order. */
    {
        call a[2] = {basic(ALLREDUCE), basic(BROADCAST)}, b[2] = {basic(BROADCAST), basic(ALLREDUCE)};
        expect_mismatch(&ci, a, b, 2, "all-reduce then broadcast against the reverse");
    }

    /* 4. A Send and a Recv of different types, same bytes. */
    {
        call a = basic(P2P), b = basic(P2P);
        b.type = occlInt32;
        expect_mismatch(&ci, &a, &b, 1, "Send float32 against Recv int32");
    }

    /* 5. Counts on either side of the size whose bytes go with the call's
     * header between nodes (one side sends the header alone). */
    const int straddled[] = {ALLREDUCE, ALLTOALL, P2P};
    for (size_t k = 0; k < sizeof straddled / sizeof straddled[0]; k++) {
        int i = straddled[k];
        call a = basic(i), b = basic(i);
        b.count = 4096;
        snprintf(what, sizeof what, "%s count 64 against 4096", names[i]);
        expect_mismatch(&ci, &a, &b, 1, what);
        snprintf(what, sizeof what, "%s count 4096 against 64", names[i]);
        expect_mismatch(&ci, &b, &a, 1, what);
    }

    /* 6. Matching calls still work afterwards. */
    occlComm_t comm = occltest_comm_world(&ci);
    float *buf;
    CHECK_OR(orMalloc((void **)&buf, 256 * sizeof *buf));
    float host[256];
    for (int i = 0; i < 256; i++)
        host[i] = (float)(ci.rank + 1);
    CHECK_OR(orMemcpy(buf, host, sizeof host, orMemcpyHostToDevice));
    CHECK_OCCL(occlAllReduce(buf, buf, 256, occlFloat32, occlSum, comm, NULL));
    CHECK_OR(orDeviceSynchronize());
    CHECK_OR(orMemcpy(host, buf, sizeof host, orMemcpyDeviceToHost));
    float want = (float)ci.nranks * (float)(ci.nranks + 1) / 2.0f;
    for (int i = 0; i < 256; i++)
        if (host[i] != want)
            FAIL("all-reduce after the mismatches: element %d is %g, expected %g", i, host[i], want);
    CHECK_OCCL(occlCommDestroy(comm));
    CHECK_OR(orFree(buf));
    if (ci.rank == 0)
        printf("occl_mismatch: %d mismatched cases failed as they should on %d ranks\n", cases_run,
               ci.nranks);
    MPI_Finalize();
    return 0;
}
