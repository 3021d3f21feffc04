/*
 * test_occl_args.c - OCCL's argument checks and single-process use: every
 * bad argument of every call returns its code and leaves a reason in
 * occlGetLastError; the success paths of the communicator queries, of
 * occlCommInitAll and occlCommInitRank in one process, of a collective
 * launched on both devices in a group, and of the communicator's lifetime,
 * scratch memory included.
 *
 * One process, no MPI: two devices (the default), one communicator rank
 * each. A call that passes the checks starts a collective that waits for the
 * other rank, so every call expected to fail is made alone (or in a group
 * that fails), and every valid one is matched on both communicators.
 */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "occl_checks.h"

#define N 64 /* elements of every device buffer */

static occlComm_t comms[2];
static orStream_t streams[2];
static float *sendbufs[2], *recvbufs[2];

static void setup(void)
{
    /* A collective left waiting by a bug fails in seconds, not minutes. */
    cr_assert_eq(setenv("OCCL_TIMEOUT_MS", "10000", 1), 0);
    int ndev = 0;
    cr_assert_eq(orGetDeviceCount(&ndev), orSuccess);
    cr_assert_geq(ndev, 2, "the tests need two devices");
    cr_assert_eq(occlCommInitAll(comms, 2, NULL), occlSuccess, "occlCommInitAll: %s",
                 occlGetLastError(NULL));
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orStreamCreate(&streams[d]), orSuccess);
        cr_assert_eq(orMalloc((void **)&sendbufs[d], N * sizeof(float)), orSuccess);
        cr_assert_eq(orMalloc((void **)&recvbufs[d], N * sizeof(float)), orSuccess);
    }
    cr_assert_eq(orSetDevice(0), orSuccess);
}

static void teardown(void)
{
    for (int d = 0; d < 2; d++) {
        if (comms[d])
            occlCommDestroy(comms[d]);
        orSetDevice(d);
        orStreamDestroy(streams[d]);
        orFree(sendbufs[d]);
        orFree(recvbufs[d]);
    }
}

TestSuite(occl_args, .init = setup, .fini = teardown, .timeout = 60);

/* The call returns `want`; a failure also leaves a reason in
 * occlGetLastError. Another failure is made first, so a reason left over
 * from an earlier call does not pass for this one's. */
#define EXPECT_OCCL(call, want, comm, what)                                                    \
    do {                                                                                       \
        occlResult_t expect_want_ = (want);                                                    \
        char expect_before_[256];                                                              \
        occlGetVersion(NULL);                                                                  \
        snprintf(expect_before_, sizeof expect_before_, "%s", occlGetLastError(NULL));         \
        occlResult_t expect_got_ = (call);                                                     \
        cr_assert_eq(expect_got_, expect_want_, "%s: %s -> %d (%s), expected %d (%s)", (what), \
                     #call, expect_got_, occlGetErrorString(expect_got_), expect_want_,        \
                     occlGetErrorString(expect_want_));                                        \
        if (expect_want_ != occlSuccess) {                                                     \
            const char *expect_msg_ = occlGetLastError(comm);                                  \
            cr_assert(expect_msg_ && expect_msg_[0], "%s: %s: occlGetLastError is empty",      \
                      (what), #call);                                                          \
            cr_assert_str_neq(expect_msg_, expect_before_,                                     \
                              "%s: %s: occlGetLastError was not updated", (what), #call);      \
        }                                                                                      \
    } while (0)

/* ---- every call through one signature ----------------------------------------------- */

enum { ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, GATHER, SCATTER, SEND,
       RECV, NCALLS };
static const char *const call_names[NCALLS] = {"AllReduce", "Broadcast", "Reduce", "AllGather",
                                               "ReduceScatter", "AlltoAll", "Gather", "Scatter",
                                               "Send", "Recv"};

static bool takes_op(int c) { return c == ALLREDUCE || c == REDUCE || c == REDUCESCATTER; }
static bool takes_root(int c)
{
    return c == BROADCAST || c == REDUCE || c == GATHER || c == SCATTER || c == SEND || c == RECV;
}
static bool has_send(int c) { return c != RECV; }
static bool has_recv(int c) { return c != SEND; }

static occlResult_t call(int c, const void *send, void *recv, size_t count, occlDataType_t t,
                         occlRedOp_t op, int root, occlComm_t comm, orStream_t s)
{
    switch (c) {
    case ALLREDUCE: return occlAllReduce(send, recv, count, t, op, comm, s);
    case BROADCAST: return occlBroadcast(send, recv, count, t, root, comm, s);
    case REDUCE: return occlReduce(send, recv, count, t, op, root, comm, s);
    case ALLGATHER: return occlAllGather(send, recv, count, t, comm, s);
    case REDUCESCATTER: return occlReduceScatter(send, recv, count, t, op, comm, s);
    case ALLTOALL: return occlAlltoAll(send, recv, count, t, comm, s);
    case GATHER: return occlGather(send, recv, count, t, root, comm, s);
    case SCATTER: return occlScatter(send, recv, count, t, root, comm, s);
    case SEND: return occlSend(send, count, t, root, comm, s);
    default: return occlRecv(recv, count, t, root, comm, s);
    }
}

/* Rank 0's call with valid arguments except those given: root 0 for the
 * rooted collectives (so both buffers are significant), peer 1 for Send/Recv. */
static int root_for(int c) { return c == SEND || c == RECV ? 1 : 0; }

/* ---- versions and errors ---------------------------------------------------------------- */

Test(occl_args, version)
{
    int v = -1;
    EXPECT_OCCL(occlGetVersion(&v), occlSuccess, NULL, "version");
    cr_assert_eq(v, OCCL_VERSION_CODE);
    cr_assert_eq(v, OCCL_MAJOR * 10000 + OCCL_MINOR * 100 + OCCL_PATCH);
    occlResult_t r = occlGetVersion(NULL);
    cr_assert_eq(r, occlInvalidArgument);
    cr_assert(occlGetLastError(NULL)[0]);
}

Test(occl_args, error_strings)
{
    for (int r = 0; r < occlNumResults; r++) {
        const char *s = occlGetErrorString((occlResult_t)r);
        cr_assert(s && s[0], "no text for result %d", r);
        for (int q = 0; q < r; q++)
            cr_assert_str_neq(s, occlGetErrorString((occlResult_t)q), "results %d and %d read "
                              "the same", q, r);
    }
    const char *unknown = occlGetErrorString(occlNumResults);
    cr_assert(unknown && unknown[0]);
    unknown = occlGetErrorString((occlResult_t)-1);
    cr_assert(unknown && unknown[0]);
}

/* ---- communicators ---------------------------------------------------------------- */

Test(occl_args, comm_queries)
{
    for (int d = 0; d < 2; d++) {
        int count = -1, device = -1, rank = -1;
        CHECK_OCCL(occlCommCount(comms[d], &count));
        CHECK_OCCL(occlCommDevice(comms[d], &device));
        CHECK_OCCL(occlCommUserRank(comms[d], &rank));
        cr_assert_eq(count, 2);
        cr_assert_eq(device, d);
        cr_assert_eq(rank, d);
        occlResult_t async = occlInternalError;
        CHECK_OCCL(occlCommGetAsyncError(comms[d], &async));
        cr_assert_eq(async, occlSuccess);
    }
}

Test(occl_args, comm_queries_bad)
{
    unsigned char foreign_mem[4096] __attribute__((aligned(64))) = {0};
    occlComm_t foreign = (occlComm_t)(void *)foreign_mem;
    occlComm_t bad[2] = {NULL, foreign};
    for (int i = 0; i < 2; i++) {
        int out = -1;
        occlResult_t async;
        const char *what = i ? "foreign comm" : "NULL comm";
        EXPECT_OCCL(occlCommCount(bad[i], &out), occlInvalidArgument, bad[i], what);
        EXPECT_OCCL(occlCommDevice(bad[i], &out), occlInvalidArgument, bad[i], what);
        EXPECT_OCCL(occlCommUserRank(bad[i], &out), occlInvalidArgument, bad[i], what);
        EXPECT_OCCL(occlCommGetAsyncError(bad[i], &async), occlInvalidArgument, bad[i], what);
        EXPECT_OCCL(occlCommFinalize(bad[i]), occlInvalidArgument, bad[i], what);
        EXPECT_OCCL(occlCommDestroy(bad[i]), occlInvalidArgument, bad[i], what);
        EXPECT_OCCL(occlCommAbort(bad[i]), occlInvalidArgument, bad[i], what);
        cr_assert_eq(out, -1);
    }
    EXPECT_OCCL(occlCommCount(comms[0], NULL), occlInvalidArgument, comms[0], "NULL count");
    EXPECT_OCCL(occlCommDevice(comms[0], NULL), occlInvalidArgument, comms[0], "NULL device");
    EXPECT_OCCL(occlCommUserRank(comms[0], NULL), occlInvalidArgument, comms[0], "NULL rank");
    EXPECT_OCCL(occlCommGetAsyncError(comms[0], NULL), occlInvalidArgument, comms[0],
                "NULL asyncError");
    for (size_t i = 0; i < sizeof foreign_mem; i++)
        cr_assert_eq(foreign_mem[i], 0, "a call wrote into a foreign communicator");
}

Test(occl_args, init_all_devlist)
{
    occlComm_t c[2] = {NULL, NULL};
    int devlist[2] = {1, 0};
    CHECK_OCCL(occlCommInitAll(c, 2, devlist));
    for (int i = 0; i < 2; i++) {
        int device = -1, rank = -1, count = -1;
        CHECK_OCCL(occlCommDevice(c[i], &device));
        CHECK_OCCL(occlCommUserRank(c[i], &rank));
        CHECK_OCCL(occlCommCount(c[i], &count));
        cr_assert_eq(device, devlist[i]);
        cr_assert_eq(rank, i);
        cr_assert_eq(count, 2);
    }
    int one = 1;
    occlComm_t solo = NULL;
    CHECK_OCCL(occlCommInitAll(&solo, 1, &one));
    int count = -1, device = -1;
    CHECK_OCCL(occlCommCount(solo, &count));
    CHECK_OCCL(occlCommDevice(solo, &device));
    cr_assert_eq(count, 1);
    cr_assert_eq(device, 1);
    CHECK_OCCL(occlCommDestroy(solo));
    CHECK_OCCL(occlCommDestroy(c[0]));
    CHECK_OCCL(occlCommDestroy(c[1]));
}

Test(occl_args, init_all_bad)
{
    occlComm_t c[3] = {NULL, NULL, NULL};
    int dup[2] = {0, 0}, dup_later[3] = {1, 0, 1}, high[2] = {0, 2}, negative[2] = {-1, 0};
    EXPECT_OCCL(occlCommInitAll(c, 2, dup), occlInvalidArgument, NULL, "duplicate device");
    EXPECT_OCCL(occlCommInitAll(c, 3, dup_later), occlInvalidArgument, NULL, "duplicate device");
    EXPECT_OCCL(occlCommInitAll(c, 2, high), occlInvalidArgument, NULL, "device out of range");
    EXPECT_OCCL(occlCommInitAll(c, 2, negative), occlInvalidArgument, NULL, "negative device");
    EXPECT_OCCL(occlCommInitAll(c, 3, NULL), occlInvalidArgument, NULL, "more devices than exist");
    EXPECT_OCCL(occlCommInitAll(c, 0, NULL), occlInvalidArgument, NULL, "ndev 0");
    EXPECT_OCCL(occlCommInitAll(c, -1, NULL), occlInvalidArgument, NULL, "ndev -1");
    EXPECT_OCCL(occlCommInitAll(NULL, 2, NULL), occlInvalidArgument, NULL, "comms NULL");
    for (int i = 0; i < 3; i++)
        cr_assert_null(c[i], "a failed occlCommInitAll stored communicator %d", i);
}

Test(occl_args, unique_id_and_init_rank_bad)
{
    EXPECT_OCCL(occlGetUniqueId(NULL), occlInvalidArgument, NULL, "NULL id");
    occlUniqueId good, forged;
    CHECK_OCCL(occlGetUniqueId(&good));
    occlComm_t c = NULL;

    memset(&forged, 0, sizeof forged);
    EXPECT_OCCL(occlCommInitRank(&c, 2, forged, 0), occlInvalidArgument, NULL, "zero id");
    memset(&forged, 0xff, sizeof forged);
    EXPECT_OCCL(occlCommInitRank(&c, 2, forged, 0), occlInvalidArgument, NULL, "all-ones id");
    for (size_t i = 0; i < sizeof forged.internal; i++)
        forged.internal[i] = (char)(i * 37 + 11);
    EXPECT_OCCL(occlCommInitRank(&c, 2, forged, 0), occlInvalidArgument, NULL, "made-up id");
    forged = good;
    forged.internal[0] ^= 0x5a;
    EXPECT_OCCL(occlCommInitRank(&c, 2, forged, 0), occlInvalidArgument, NULL, "altered id");

    EXPECT_OCCL(occlCommInitRank(NULL, 2, good, 0), occlInvalidArgument, NULL, "NULL comm");
    EXPECT_OCCL(occlCommInitRank(&c, 0, good, 0), occlInvalidArgument, NULL, "nranks 0");
    EXPECT_OCCL(occlCommInitRank(&c, -2, good, 0), occlInvalidArgument, NULL, "nranks -2");
    EXPECT_OCCL(occlCommInitRank(&c, 2, good, -1), occlInvalidArgument, NULL, "rank -1");
    EXPECT_OCCL(occlCommInitRank(&c, 2, good, 2), occlInvalidArgument, NULL, "rank == nranks");
    cr_assert_null(c, "a failed init stored a communicator");
}

Test(occl_args, init_rank_bad_in_group)
{
    /* Checked at the call, and the group fails as a whole (as NCCL's
     * ncclGroupEnd returns the error of a call made in the group). */
    occlUniqueId forged;
    CHECK_OCCL(occlGetUniqueId(&forged));
    forged.internal[0] ^= 0x5a;
    occlUniqueId good;
    CHECK_OCCL(occlGetUniqueId(&good));
    occlComm_t c = NULL, solo = NULL;
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlCommInitRank(&solo, 1, good, 0));
    EXPECT_OCCL(occlCommInitRank(&c, 2, forged, 0), occlInvalidArgument, NULL, "altered id in a group");
    occlResult_t end = occlGroupEnd();
    cr_assert_neq(end, occlSuccess, "occlGroupEnd after a failed init in the group -> %d (%s)",
                  end, occlGetErrorString(end));
    cr_assert_null(c, "a failed init stored a communicator");
    cr_assert_null(solo, "the valid init of a failed group was carried out");
}

Test(occl_args, init_rank_needs_every_rank_without_mpi)
{
    /* Without MPI, all ranks of a communicator must be in this process. */
    occlUniqueId id;
    CHECK_OCCL(occlGetUniqueId(&id));
    occlComm_t c = NULL;
    EXPECT_OCCL(occlCommInitRank(&c, 2, id, 0), occlInvalidUsage, NULL, "one of two ranks");
    cr_assert_null(c);
}

Test(occl_args, init_rank_duplicate_rank_in_group)
{
    occlUniqueId id;
    CHECK_OCCL(occlGetUniqueId(&id));
    occlComm_t c[2] = {NULL, NULL};
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        CHECK_OCCL(occlCommInitRank(&c[d], 2, id, 0));
    }
    EXPECT_OCCL(occlGroupEnd(), occlInvalidUsage, NULL, "rank 0 twice, rank 1 never");
    cr_assert_null(c[0]);
    cr_assert_null(c[1]);
}

Test(occl_args, init_rank_mismatched_nranks_in_group)
{
    occlUniqueId id;
    CHECK_OCCL(occlGetUniqueId(&id));
    occlComm_t c[2] = {NULL, NULL};
    CHECK_OCCL(occlGroupStart());
    cr_assert_eq(orSetDevice(0), orSuccess);
    CHECK_OCCL(occlCommInitRank(&c[0], 2, id, 0));
    cr_assert_eq(orSetDevice(1), orSuccess);
    CHECK_OCCL(occlCommInitRank(&c[1], 3, id, 1));
    EXPECT_OCCL(occlGroupEnd(), occlInvalidUsage, NULL, "one id, 2 ranks and 3 ranks");
    cr_assert_null(c[0]);
    cr_assert_null(c[1]);
}

Test(occl_args, init_rank_in_group_one_process)
{
    /* Both ranks of a new communicator from one thread, then a collective on it. */
    occlUniqueId id;
    CHECK_OCCL(occlGetUniqueId(&id));
    occlComm_t c[2] = {NULL, NULL};
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        CHECK_OCCL(occlCommInitRank(&c[d], 2, id, 1 - d)); /* rank 1 on device 0 */
    }
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        int rank = -1, device = -1;
        CHECK_OCCL(occlCommUserRank(c[d], &rank));
        CHECK_OCCL(occlCommDevice(c[d], &device));
        cr_assert_eq(rank, 1 - d);
        cr_assert_eq(device, d);
    }
    int32_t host[N];
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < N; i++)
            host[i] = (1 - d) * 1000 + i;
        cr_assert_eq(orMemcpy(sendbufs[d], host, sizeof host, orMemcpyHostToDevice), orSuccess);
    }
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlAllGather(sendbufs[d], recvbufs[d], N / 2, occlInt32, c[d], streams[d]));
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orStreamSynchronize(streams[d]), orSuccess);
        cr_assert_eq(orMemcpy(host, recvbufs[d], sizeof host, orMemcpyDeviceToHost), orSuccess);
        for (int i = 0; i < N; i++)
            cr_assert_eq(host[i], (i / (N / 2)) * 1000 + i % (N / 2), "device %d element %d", d, i);
    }
    CHECK_OCCL(occlCommDestroy(c[0]));
    CHECK_OCCL(occlCommDestroy(c[1]));
}

/* ---- collectives: bad arguments ------------------------------------------------------ */

Test(occl_args, null_and_foreign_comm)
{
    unsigned char foreign_mem[4096] __attribute__((aligned(64))) = {0};
    occlComm_t bad[2] = {NULL, (occlComm_t)(void *)foreign_mem};
    for (int i = 0; i < 2; i++)
        for (int c = 0; c < NCALLS; c++) {
            char what[64];
            snprintf(what, sizeof what, "%s, %s comm", call_names[c], i ? "foreign" : "NULL");
            EXPECT_OCCL(call(c, sendbufs[0], recvbufs[0], 4, occlFloat, occlSum, root_for(c),
                             bad[i], streams[0]),
                        occlInvalidArgument, bad[i], what);
        }
    for (size_t i = 0; i < sizeof foreign_mem; i++)
        cr_assert_eq(foreign_mem[i], 0, "a call wrote into a foreign communicator");
}

Test(occl_args, null_buffers)
{
    for (int c = 0; c < NCALLS; c++) {
        char what[64];
        if (has_send(c)) {
            snprintf(what, sizeof what, "%s, NULL sendbuff", call_names[c]);
            EXPECT_OCCL(call(c, NULL, recvbufs[0], 4, occlFloat, occlSum, root_for(c), comms[0],
                             streams[0]),
                        occlInvalidArgument, comms[0], what);
        }
        if (has_recv(c)) {
            snprintf(what, sizeof what, "%s, NULL recvbuff", call_names[c]);
            EXPECT_OCCL(call(c, sendbufs[0], NULL, 4, occlFloat, occlSum, root_for(c), comms[0],
                             streams[0]),
                        occlInvalidArgument, comms[0], what);
        }
    }
}

Test(occl_args, count_overflow)
{
    /* Byte counts that overflow size_t, and element counts times nranks that do. */
    size_t huge[] = {SIZE_MAX / 2, SIZE_MAX / 2 + 1, SIZE_MAX / 4 + 1, SIZE_MAX};
    for (int c = 0; c < NCALLS; c++)
        for (size_t k = 0; k < sizeof huge / sizeof *huge; k++) {
            char what[96];
            snprintf(what, sizeof what, "%s, count %zu", call_names[c], huge[k]);
            EXPECT_OCCL(call(c, sendbufs[0], recvbufs[0], huge[k], occlFloat, occlSum, root_for(c),
                             comms[0], streams[0]),
                        occlInvalidArgument, comms[0], what);
        }
    /* One-byte elements: no byte overflow, but nranks blocks of them overflow. */
    int blocks[] = {ALLGATHER, REDUCESCATTER, ALLTOALL, GATHER, SCATTER};
    for (size_t k = 0; k < sizeof blocks / sizeof *blocks; k++)
        EXPECT_OCCL(call(blocks[k], sendbufs[0], recvbufs[0], SIZE_MAX / 2 + 1, occlInt8, occlSum,
                         0, comms[0], streams[0]),
                    occlInvalidArgument, comms[0], call_names[blocks[k]]);
}

/* The last failure's reason contains `text`. */
static void expect_reason(const char *text, const char *what)
{
    const char *why = occlGetLastError(NULL);
    cr_assert(strstr(why, text), "%s: the reason \"%s\" lacks \"%s\"", what, why, text);
}

Test(occl_args, buffer_smaller_than_count)
{
    /* N floats allocated; a million asked for. */
    for (int c = 0; c < NCALLS; c++) {
        EXPECT_OCCL(call(c, sendbufs[0], recvbufs[0], (size_t)1 << 20, occlFloat, occlSum,
                         root_for(c), comms[0], streams[0]),
                    occlInvalidArgument, comms[0], call_names[c]);
        expect_reason("runs past the end of its device allocation", call_names[c]);
    }
}

Test(occl_args, root_and_peer_out_of_range)
{
    int bad_roots[] = {-1, 2, 1000, -1000};
    for (int c = 0; c < NCALLS; c++) {
        if (!takes_root(c))
            continue;
        for (size_t k = 0; k < sizeof bad_roots / sizeof *bad_roots; k++) {
            char what[64];
            snprintf(what, sizeof what, "%s, root/peer %d", call_names[c], bad_roots[k]);
            EXPECT_OCCL(call(c, sendbufs[0], recvbufs[0], 4, occlFloat, occlSum, bad_roots[k],
                             comms[0], streams[0]),
                        occlInvalidArgument, comms[0], what);
        }
    }
}

Test(occl_args, peer_is_self)
{
    EXPECT_OCCL(occlSend(sendbufs[0], 4, occlFloat, 0, comms[0], streams[0]), occlInvalidUsage,
                comms[0], "Send to self");
    EXPECT_OCCL(occlRecv(recvbufs[1], 4, occlFloat, 1, comms[1], streams[1]), occlInvalidUsage,
                comms[1], "Recv from self");
}

Test(occl_args, unknown_type)
{
    occlDataType_t bad_types[] = {occlNumTypes, (occlDataType_t)-1, (occlDataType_t)1000};
    for (int c = 0; c < NCALLS; c++)
        for (size_t k = 0; k < sizeof bad_types / sizeof *bad_types; k++) {
            char what[64];
            snprintf(what, sizeof what, "%s, type %d", call_names[c], (int)bad_types[k]);
            EXPECT_OCCL(call(c, sendbufs[0], recvbufs[0], 4, bad_types[k], occlSum, root_for(c),
                             comms[0], streams[0]),
                        occlInvalidArgument, comms[0], what);
        }
}

Test(occl_args, unknown_op)
{
    occlRedOp_t bad_ops[] = {(occlRedOp_t)(occlNumOps + 7), occlNumOps, occlMaxRedOp,
                             (occlRedOp_t)-1};
    for (int c = 0; c < NCALLS; c++) {
        if (!takes_op(c))
            continue;
        for (size_t k = 0; k < sizeof bad_ops / sizeof *bad_ops; k++) {
            char what[64];
            snprintf(what, sizeof what, "%s, op %d", call_names[c], (int)bad_ops[k]);
            EXPECT_OCCL(call(c, sendbufs[0], recvbufs[0], 4, occlFloat, bad_ops[k], 0, comms[0],
                             streams[0]),
                        occlInvalidArgument, comms[0], what);
        }
    }
}

Test(occl_args, host_memory)
{
    float *heap = calloc(N, sizeof(float));
    float stack[N] = {0};
    cr_assert_not_null(heap);
    float *hosts[2] = {heap, stack};
    for (int h = 0; h < 2; h++)
        for (int c = 0; c < NCALLS; c++) {
            char what[64];
            if (has_send(c)) {
                snprintf(what, sizeof what, "%s, %s sendbuff", call_names[c], h ? "stack" : "heap");
                EXPECT_OCCL(call(c, hosts[h], recvbufs[0], 4, occlFloat, occlSum, root_for(c),
                                 comms[0], streams[0]),
                            occlInvalidArgument, comms[0], what);
                expect_reason("sendbuff (", what);
                expect_reason("bytes) is host memory (or freed device memory), not device memory",
                              what);
            }
            if (has_recv(c)) {
                snprintf(what, sizeof what, "%s, %s recvbuff", call_names[c], h ? "stack" : "heap");
                EXPECT_OCCL(call(c, sendbufs[0], hosts[h], 4, occlFloat, occlSum, root_for(c),
                                 comms[0], streams[0]),
                            occlInvalidArgument, comms[0], what);
                expect_reason("recvbuff (", what);
                expect_reason("bytes) is host memory (or freed device memory), not device memory",
                              what);
            }
        }
    free(heap);
}

Test(occl_args, pinned_host_and_freed_memory)
{
    float *pinned, *freed;
    cr_assert_eq(orMallocHost((void **)&pinned, N * sizeof *pinned), orSuccess);
    cr_assert_eq(orMalloc((void **)&freed, N * sizeof *freed), orSuccess);
    cr_assert_eq(orFree(freed), orSuccess);
    EXPECT_OCCL(occlAllReduce(pinned, recvbufs[0], 4, occlFloat, occlSum, comms[0], streams[0]),
                occlInvalidArgument, comms[0], "pinned sendbuff");
    expect_reason("sendbuff (16 bytes) is pinned host memory (orMallocHost), not device memory",
                  "pinned sendbuff");
    EXPECT_OCCL(occlBroadcast(sendbufs[0], freed, 4, occlFloat, 0, comms[0], streams[0]),
                occlInvalidArgument, comms[0], "freed recvbuff");
    expect_reason("recvbuff (16 bytes) is host memory (or freed device memory)", "freed recvbuff");
    cr_assert_eq(orFreeHost(pinned), orSuccess);
}

Test(occl_args, buffer_of_other_device)
{
    for (int c = 0; c < NCALLS; c++) {
        char what[64];
        if (has_send(c)) {
            snprintf(what, sizeof what, "%s, sendbuff on device 1", call_names[c]);
            EXPECT_OCCL(call(c, sendbufs[1], recvbufs[0], 4, occlFloat, occlSum, root_for(c),
                             comms[0], streams[0]),
                        occlInvalidUsage, comms[0], what);
        }
        if (has_recv(c)) {
            snprintf(what, sizeof what, "%s, recvbuff on device 1", call_names[c]);
            EXPECT_OCCL(call(c, sendbufs[0], recvbufs[1], 4, occlFloat, occlSum, root_for(c),
                             comms[0], streams[0]),
                        occlInvalidUsage, comms[0], what);
        }
    }
}

Test(occl_args, stream_of_other_device)
{
    for (int c = 0; c < NCALLS; c++) {
        char what[64];
        snprintf(what, sizeof what, "%s, stream of device 1", call_names[c]);
        EXPECT_OCCL(call(c, sendbufs[0], recvbufs[0], 4, occlFloat, occlSum, root_for(c), comms[0],
                         streams[1]),
                    occlInvalidUsage, comms[0], what);
    }
    /* The NULL stream is the current device's: device 1's here. */
    cr_assert_eq(orSetDevice(1), orSuccess);
    for (int c = 0; c < NCALLS; c++) {
        char what[64];
        snprintf(what, sizeof what, "%s, NULL stream with device 1 current", call_names[c]);
        EXPECT_OCCL(call(c, sendbufs[0], recvbufs[0], 4, occlFloat, occlSum, root_for(c), comms[0],
                         NULL),
                    occlInvalidUsage, comms[0], what);
    }
    cr_assert_eq(orSetDevice(0), orSuccess);
}

Test(occl_args, destroyed_stream)
{
    orStream_t gone;
    cr_assert_eq(orStreamCreate(&gone), orSuccess);
    cr_assert_eq(orStreamDestroy(gone), orSuccess);
    for (int c = 0; c < NCALLS; c++)
        EXPECT_OCCL(call(c, sendbufs[0], recvbufs[0], 4, occlFloat, occlSum, root_for(c), comms[0],
                         gone),
                    occlInvalidArgument, comms[0], call_names[c]);
}

/* A call repeated with the same arguments is not looked up again
 * (enqueue.c): its stream destroyed, or its buffer freed, in between must
 * still be found. A one-rank communicator, whose calls end on their own. */
Test(occl_args, repeated_call_after_stream_destroyed_or_buffer_freed)
{
    occlComm_t solo;
    int dev0 = 0;
    CHECK_OCCL(occlCommInitAll(&solo, 1, &dev0));
    orStream_t s;
    float *buf;
    cr_assert_eq(orStreamCreate(&s), orSuccess);
    cr_assert_eq(orMalloc((void **)&buf, N * sizeof *buf), orSuccess);
    for (int i = 0; i < 3; i++)
        CHECK_OCCL(occlAllReduce(sendbufs[0], recvbufs[0], 4, occlFloat, occlSum, solo, s));
    cr_assert_eq(orStreamSynchronize(s), orSuccess);
    cr_assert_eq(orStreamDestroy(s), orSuccess);
    EXPECT_OCCL(occlAllReduce(sendbufs[0], recvbufs[0], 4, occlFloat, occlSum, solo, s),
                occlInvalidArgument, solo, "the same call on its destroyed stream");
    expect_reason("invalid stream", "the same call on its destroyed stream");

    for (int i = 0; i < 3; i++)
        CHECK_OCCL(occlBroadcast(sendbufs[0], buf, 4, occlFloat, 0, solo, streams[0]));
    cr_assert_eq(orStreamSynchronize(streams[0]), orSuccess);
    cr_assert_eq(orFree(buf), orSuccess);
    EXPECT_OCCL(occlBroadcast(sendbufs[0], buf, 4, occlFloat, 0, solo, streams[0]), occlInvalidArgument,
                solo, "the same call on its freed recvbuff");
    expect_reason("recvbuff (16 bytes) is host memory (or freed device memory)",
                  "the same call on its freed recvbuff");
    CHECK_OCCL(occlCommDestroy(solo));
}

/* ---- groups ------------------------------------------------------------------------ */

Test(occl_args, group_end_without_start)
{
    EXPECT_OCCL(occlGroupEnd(), occlInvalidUsage, NULL, "occlGroupEnd without occlGroupStart");
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlGroupEnd());
    CHECK_OCCL(occlGroupEnd());
    EXPECT_OCCL(occlGroupEnd(), occlInvalidUsage, NULL, "one occlGroupEnd too many");
}

/* AllReduce (sum) of float inputs d*100 + i on both devices; checks the result. */
static void allreduce_round(const char *what)
{
    float host[N];
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < N; i++)
            host[i] = (float)(d * 100 + i);
        cr_assert_eq(orMemcpy(sendbufs[d], host, sizeof host, orMemcpyHostToDevice), orSuccess);
        for (int i = 0; i < N; i++)
            host[i] = -1.0f;
        cr_assert_eq(orMemcpy(recvbufs[d], host, sizeof host, orMemcpyHostToDevice), orSuccess);
    }
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlAllReduce(sendbufs[d], recvbufs[d], N, occlFloat, occlSum, comms[d],
                                 streams[d]));
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        orError_t err = orStreamSynchronize(streams[d]);
        occlResult_t async = occlInternalError;
        CHECK_OCCL(occlCommGetAsyncError(comms[d], &async));
        cr_assert_eq(err, orSuccess, "%s: device %d's stream: %s", what, d, orGetErrorName(err));
        cr_assert_eq(async, occlSuccess, "%s: comm %d: %s (%s)", what, d,
                     occlGetErrorString(async), occlGetLastError(comms[d]));
        cr_assert_eq(orMemcpy(host, recvbufs[d], sizeof host, orMemcpyDeviceToHost), orSuccess);
        for (int i = 0; i < N; i++)
            cr_assert_eq(host[i], (float)(100 + 2 * i), "%s: device %d element %d: %g", what, d, i,
                         host[i]);
    }
}

Test(occl_args, group_with_bad_call_launches_nothing)
{
    /* Valid calls on both communicators, then a bad one: the group fails
     * as a whole, and no call of it runs (a stray AllReduce would pair with
     * the next one and spoil it). */
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlAllReduce(sendbufs[d], recvbufs[d], N, occlFloat, occlSum, comms[d],
                                 streams[d]));
    EXPECT_OCCL(occlBroadcast(sendbufs[0], recvbufs[0], N, occlFloat, 7, comms[0], streams[0]),
                occlInvalidArgument, comms[0], "bad root inside a group");
    /* occlGroupEnd reports the group's first failure again. */
    occlResult_t end = occlGroupEnd();
    cr_assert_eq(end, occlInvalidArgument, "occlGroupEnd of a failed group -> %d (%s)", end,
                 occlGetErrorString(end));
    cr_assert(occlGetLastError(NULL)[0]);
    allreduce_round("after a failed group");
}

Test(occl_args, group_one_comm_two_streams)
{
    /* One communicator's calls in a group on two streams: refused at
     * occlGroupEnd, and nothing of the group runs. comms[0] comes first. */
    orStream_t other;
    cr_assert_eq(orSetDevice(0), orSuccess);
    cr_assert_eq(orStreamCreate(&other), orSuccess);
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlAllReduce(sendbufs[0], recvbufs[0], N, occlFloat, occlSum, comms[0], streams[0]));
    CHECK_OCCL(occlAllReduce(sendbufs[0], recvbufs[0], N, occlFloat, occlSum, comms[0], other));
    for (int k = 0; k < 2; k++)
        CHECK_OCCL(occlAllReduce(sendbufs[1], recvbufs[1], N, occlFloat, occlSum, comms[1], streams[1]));
    EXPECT_OCCL(occlGroupEnd(), occlInvalidUsage, NULL, "two streams for one communicator");
    cr_assert_eq(orStreamDestroy(other), orSuccess);
    allreduce_round("after a refused group");
}

Test(occl_args, group_one_comm_two_streams_listed_second)
{
    /* The same, with the valid communicator's calls first in the group. */
    orStream_t other;
    cr_assert_eq(orSetDevice(0), orSuccess);
    cr_assert_eq(orStreamCreate(&other), orSuccess);
    CHECK_OCCL(occlGroupStart());
    for (int k = 0; k < 2; k++)
        CHECK_OCCL(occlAllReduce(sendbufs[1], recvbufs[1], N, occlFloat, occlSum, comms[1], streams[1]));
    CHECK_OCCL(occlAllReduce(sendbufs[0], recvbufs[0], N, occlFloat, occlSum, comms[0], streams[0]));
    CHECK_OCCL(occlAllReduce(sendbufs[0], recvbufs[0], N, occlFloat, occlSum, comms[0], other));
    EXPECT_OCCL(occlGroupEnd(), occlInvalidUsage, NULL, "two streams for one communicator");
    cr_assert_eq(orStreamDestroy(other), orSuccess);
    allreduce_round("after a refused group");
}

/* ---- reduction operators ------------------------------------------------------------ */

Test(occl_args, redop_bad)
{
    unsigned char foreign_mem[4096] __attribute__((aligned(64))) = {0};
    occlComm_t foreign = (occlComm_t)(void *)foreign_mem;
    float scalar = 2.0f;
    float *dev_scalar = sendbufs[0];
    occlRedOp_t op = occlSum;

    EXPECT_OCCL(occlRedOpCreatePreMulSum(NULL, &scalar, occlFloat, occlScalarHostImmediate, comms[0]),
                occlInvalidArgument, comms[0], "NULL op");
    EXPECT_OCCL(occlRedOpCreatePreMulSum(&op, NULL, occlFloat, occlScalarHostImmediate, comms[0]),
                occlInvalidArgument, comms[0], "NULL scalar");
    EXPECT_OCCL(occlRedOpCreatePreMulSum(&op, &scalar, occlNumTypes, occlScalarHostImmediate,
                                         comms[0]),
                occlInvalidArgument, comms[0], "unknown type");
    EXPECT_OCCL(occlRedOpCreatePreMulSum(&op, &scalar, occlFloat, (occlScalarResidence_t)7, comms[0]),
                occlInvalidArgument, comms[0], "unknown residence");
    EXPECT_OCCL(occlRedOpCreatePreMulSum(&op, &scalar, occlFloat, occlScalarDevice, comms[0]),
                occlInvalidArgument, comms[0], "device residence, host scalar");
    EXPECT_OCCL(occlRedOpCreatePreMulSum(&op, &scalar, occlFloat, occlScalarHostImmediate, NULL),
                occlInvalidArgument, NULL, "NULL comm");
    EXPECT_OCCL(occlRedOpCreatePreMulSum(&op, &scalar, occlFloat, occlScalarHostImmediate, foreign),
                occlInvalidArgument, foreign, "foreign comm");
    cr_assert_eq(op, occlSum, "a failed create stored an op");

    /* Destroying what was never made. */
    EXPECT_OCCL(occlRedOpDestroy(occlSum, comms[0]), occlInvalidArgument, comms[0], "built-in op");
    EXPECT_OCCL(occlRedOpDestroy(occlAvg, comms[0]), occlInvalidArgument, comms[0], "built-in op");
    EXPECT_OCCL(occlRedOpDestroy((occlRedOp_t)(occlNumOps + 3), comms[0]), occlInvalidArgument,
                comms[0], "op never created");
    EXPECT_OCCL(occlRedOpDestroy((occlRedOp_t)-1, comms[0]), occlInvalidArgument, comms[0], "op -1");
    EXPECT_OCCL(occlRedOpDestroy(occlMaxRedOp, comms[0]), occlInvalidArgument, comms[0], "occlMaxRedOp");

    /* A created op: only for its type and communicator, and only until destroyed. */
    occlRedOp_t made, made_dev;
    CHECK_OCCL(occlRedOpCreatePreMulSum(&made, &scalar, occlFloat, occlScalarHostImmediate, comms[0]));
    CHECK_OCCL(occlRedOpCreatePreMulSum(&made_dev, dev_scalar, occlFloat, occlScalarDevice, comms[0]));
    cr_assert_geq((int)made, (int)occlNumOps);
    cr_assert_geq((int)made_dev, (int)occlNumOps);
    cr_assert_neq(made, made_dev);
    EXPECT_OCCL(occlAllReduce(sendbufs[0], recvbufs[0], 4, occlDouble, made, comms[0], streams[0]),
                occlInvalidArgument, comms[0], "op used with another type");
    EXPECT_OCCL(occlRedOpDestroy(made, NULL), occlInvalidArgument, NULL, "destroy with NULL comm");
    EXPECT_OCCL(occlRedOpDestroy(made, foreign), occlInvalidArgument, foreign, "destroy with foreign comm");
    CHECK_OCCL(occlRedOpDestroy(made, comms[0]));
    EXPECT_OCCL(occlRedOpDestroy(made, comms[0]), occlInvalidArgument, comms[0], "destroyed twice");
    EXPECT_OCCL(occlAllReduce(sendbufs[0], recvbufs[0], 4, occlFloat, made, comms[0], streams[0]),
                occlInvalidArgument, comms[0], "destroyed op used");
    EXPECT_OCCL(occlRedOpDestroy(made_dev, comms[1]), occlInvalidArgument, comms[1],
                "op of another communicator");
    CHECK_OCCL(occlRedOpDestroy(made_dev, comms[0]));
}

/* ---- success paths ---------------------------------------------------------------- */

Test(occl_args, allreduce_two_devices)
{
    allreduce_round("AllReduce");
    allreduce_round("AllReduce again");
    /* Default streams: each call made with its device current. */
    float host[N];
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < N; i++)
            host[i] = (float)(d + 1) * (float)(i % 5 + 1);
        cr_assert_eq(orMemcpy(sendbufs[d], host, sizeof host, orMemcpyHostToDevice), orSuccess);
    }
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        CHECK_OCCL(occlAllReduce(sendbufs[d], sendbufs[d], N, occlFloat, occlProd, comms[d], NULL));
    }
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orStreamSynchronize(NULL), orSuccess);
        cr_assert_eq(orMemcpy(host, sendbufs[d], sizeof host, orMemcpyDeviceToHost), orSuccess);
        for (int i = 0; i < N; i++)
            cr_assert_eq(host[i], 2.0f * (float)((i % 5 + 1) * (i % 5 + 1)), "device %d element %d", d, i);
    }
    for (int d = 0; d < 2; d++) {
        occlResult_t async = occlInternalError;
        CHECK_OCCL(occlCommGetAsyncError(comms[d], &async));
        cr_assert_eq(async, occlSuccess);
    }
}

Test(occl_args, premulsum_two_devices)
{
    /* Host-immediate scalar 3 (changed after creation: no effect) on device 0's
     * communicator, device-resident scalar 3 on device 1's. */
    int32_t hs = 3, ds = 3, host[N];
    int32_t *dev_scalar = (int32_t *)recvbufs[1] + N - 1; /* the last element, unused below */
    cr_assert_eq(orMemcpy(dev_scalar, &ds, sizeof ds, orMemcpyHostToDevice), orSuccess);
    occlRedOp_t ops[2];
    CHECK_OCCL(occlRedOpCreatePreMulSum(&ops[0], &hs, occlInt32, occlScalarHostImmediate, comms[0]));
    CHECK_OCCL(occlRedOpCreatePreMulSum(&ops[1], dev_scalar, occlInt32, occlScalarDevice, comms[1]));
    hs = 1000;
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < N; i++)
            host[i] = d ? -i : 2 * i + 1;
        cr_assert_eq(orMemcpy(sendbufs[d], host, sizeof host, orMemcpyHostToDevice), orSuccess);
    }
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlAllReduce(sendbufs[d], recvbufs[d], N - 1, occlInt32, ops[d], comms[d],
                                 streams[d]));
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orStreamSynchronize(streams[d]), orSuccess);
        cr_assert_eq(orMemcpy(host, recvbufs[d], (N - 1) * sizeof(int32_t), orMemcpyDeviceToHost),
                     orSuccess);
        for (int i = 0; i < N - 1; i++)
            cr_assert_eq(host[i], 3 * (i + 1), "device %d element %d: %d", d, i, host[i]);
    }
    CHECK_OCCL(occlRedOpDestroy(ops[0], comms[0]));
    CHECK_OCCL(occlRedOpDestroy(ops[1], comms[1]));
}

Test(occl_args, buffers_not_significant_may_be_null)
{
    /* As NCCL: Broadcast's sendbuff and Scatter's sendbuff matter at the root
     * only, Reduce's and Gather's recvbuff too. Root is rank 1 here. */
    int32_t host[N];
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < N; i++)
            host[i] = d * 1000 + i;
        cr_assert_eq(orMemcpy(sendbufs[d], host, sizeof host, orMemcpyHostToDevice), orSuccess);
    }
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlBroadcast(NULL, recvbufs[0], 8, occlInt32, 1, comms[0], streams[0]));
    CHECK_OCCL(occlBroadcast(sendbufs[1], recvbufs[1], 8, occlInt32, 1, comms[1], streams[1]));
    CHECK_OCCL(occlGroupEnd());
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlReduce(sendbufs[0], NULL, 8, occlInt32, occlSum, 1, comms[0], streams[0]));
    CHECK_OCCL(occlReduce(sendbufs[1], (int32_t *)recvbufs[1] + 8, 8, occlInt32, occlSum, 1, comms[1],
                          streams[1]));
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++)
        cr_assert_eq(orStreamSynchronize(streams[d]), orSuccess);
    cr_assert_eq(orMemcpy(host, recvbufs[0], 8 * sizeof(int32_t), orMemcpyDeviceToHost), orSuccess);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(host[i], 1000 + i, "Broadcast element %d", i);
    cr_assert_eq(orMemcpy(host, recvbufs[1], 16 * sizeof(int32_t), orMemcpyDeviceToHost), orSuccess);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(host[8 + i], 1000 + 2 * i, "Reduce element %d", i);
}

Test(occl_args, count_zero_is_a_no_op)
{
    float host[N], before[2][N];
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < N; i++)
            host[i] = (float)(d * 7 + i);
        cr_assert_eq(orMemcpy(sendbufs[d], host, sizeof host, orMemcpyHostToDevice), orSuccess);
        for (int i = 0; i < N; i++)
            before[d][i] = (float)(-i);
        cr_assert_eq(orMemcpy(recvbufs[d], before[d], sizeof host, orMemcpyHostToDevice), orSuccess);
    }
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < NCALLS; c++)
            CHECK_OCCL(call(c, sendbufs[d], recvbufs[d], 0, occlFloat, occlSum,
                            c == SEND || c == RECV ? 1 - d : 0, comms[d], streams[d]));
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orStreamSynchronize(streams[d]), orSuccess);
        cr_assert_eq(orMemcpy(host, recvbufs[d], sizeof host, orMemcpyDeviceToHost), orSuccess);
        cr_assert_arr_eq(host, before[d], sizeof host, "count 0 wrote device %d's recvbuff", d);
    }
    allreduce_round("after count 0 calls");
}

Test(occl_args, finalize_then_destroy)
{
    allreduce_round("before finalize");
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlCommFinalize(comms[d]));
    for (int d = 0; d < 2; d++) {
        occlResult_t async = occlInternalError;
        CHECK_OCCL(occlCommGetAsyncError(comms[d], &async));
        cr_assert_eq(async, occlSuccess);
        int count = -1;
        CHECK_OCCL(occlCommCount(comms[d], &count));
        cr_assert_eq(count, 2);
    }
    /* A finalized communicator takes no more work. */
    for (int c = 0; c < NCALLS; c++)
        EXPECT_OCCL(call(c, sendbufs[0], recvbufs[0], 4, occlFloat, occlSum, root_for(c), comms[0],
                         streams[0]),
                    occlInvalidUsage, comms[0], call_names[c]);
    for (int d = 0; d < 2; d++) {
        CHECK_OCCL(occlCommDestroy(comms[d]));
        comms[d] = NULL;
    }
}

Test(occl_args, destroy_without_finalize)
{
    allreduce_round("before destroy");
    for (int d = 0; d < 2; d++) {
        CHECK_OCCL(occlCommDestroy(comms[d]));
        comms[d] = NULL;
    }
}

/* A destroyed (or aborted) communicator is refused by every call, without
 * its freed memory being used. */
static void expect_dead(occlComm_t dead, const char *what)
{
    for (int c = 0; c < NCALLS; c++) {
        char label[96];
        snprintf(label, sizeof label, "%s, %s", call_names[c], what);
        EXPECT_OCCL(call(c, sendbufs[0], recvbufs[0], 4, occlFloat, occlSum, root_for(c), dead,
                         streams[0]),
                    occlInvalidArgument, dead, label);
    }
    int out = -1;
    occlResult_t async;
    occlRedOp_t op;
    float scalar = 2;
    occlComm_t child = NULL;
    EXPECT_OCCL(occlCommCount(dead, &out), occlInvalidArgument, dead, what);
    EXPECT_OCCL(occlCommDevice(dead, &out), occlInvalidArgument, dead, what);
    EXPECT_OCCL(occlCommUserRank(dead, &out), occlInvalidArgument, dead, what);
    EXPECT_OCCL(occlCommGetAsyncError(dead, &async), occlInvalidArgument, dead, what);
    EXPECT_OCCL(occlRedOpCreatePreMulSum(&op, &scalar, occlFloat, occlScalarHostImmediate, dead),
                occlInvalidArgument, dead, what);
    EXPECT_OCCL(occlCommSplit(dead, 0, 0, &child, NULL), occlInvalidArgument, dead, what);
    EXPECT_OCCL(occlCommFinalize(dead), occlInvalidArgument, dead, what);
    EXPECT_OCCL(occlCommDestroy(dead), occlInvalidArgument, dead, what);
    EXPECT_OCCL(occlCommAbort(dead), occlInvalidArgument, dead, what);
    cr_assert_eq(out, -1);
}

Test(occl_args, destroyed_comm)
{
    allreduce_round("before destroy");
    occlComm_t dead[2] = {comms[0], comms[1]};
    for (int d = 0; d < 2; d++) {
        CHECK_OCCL(occlCommDestroy(comms[d]));
        comms[d] = NULL;
    }
    expect_dead(dead[0], "destroyed comm");
    expect_dead(dead[1], "destroyed comm");
}

Test(occl_args, aborted_comm)
{
    allreduce_round("before abort");
    occlComm_t dead[2] = {comms[0], comms[1]};
    for (int d = 0; d < 2; d++) {
        CHECK_OCCL(occlCommAbort(comms[d]));
        comms[d] = NULL;
    }
    expect_dead(dead[0], "aborted comm");
    expect_dead(dead[1], "aborted comm");
}

/* ---- scratch ------------------------------------------------------------------------ */

static size_t free_mem(int d)
{
    size_t free_bytes = 0, total = 0;
    cr_assert_eq(orSetDevice(d), orSuccess);
    cr_assert_eq(orMemGetInfo(&free_bytes, &total), orSuccess);
    return free_bytes;
}

/* ReduceScatter of `count` floats per rank on both devices, checked. */
static void reduce_scatter_round(float *big_send[2], float *big_recv[2], size_t count)
{
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlReduceScatter(big_send[d], big_recv[d], count, occlFloat, occlSum, comms[d],
                                     streams[d]));
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orStreamSynchronize(streams[d]), orSuccess);
        float got[2];
        cr_assert_eq(orMemcpy(got, big_recv[d], sizeof got, orMemcpyDeviceToHost), orSuccess);
        cr_assert_eq(got[0], 3.0f, "device %d: %g", d, got[0]); /* 1 + 2 */
    }
}

/* Scratch is kept from call to call (a second call of the same size takes
 * no more device memory, a larger one grows it) and given back when the
 * communicator is finalized, destroyed or aborted. */
static void scratch_pool(int how)
{
    const size_t count = (size_t)1 << 20; /* 4 MiB per rank, 8 MiB of input */
    float *big_send[2], *big_recv[2];
    size_t before[2];
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orMalloc((void **)&big_send[d], 4 * count * sizeof(float)), orSuccess);
        cr_assert_eq(orMalloc((void **)&big_recv[d], 2 * count * sizeof(float)), orSuccess);
        float *host = malloc(4 * count * sizeof(float));
        cr_assert_not_null(host);
        for (size_t i = 0; i < 4 * count; i++)
            host[i] = (float)(d + 1);
        cr_assert_eq(orMemcpy(big_send[d], host, 4 * count * sizeof(float), orMemcpyHostToDevice),
                     orSuccess);
        free(host);
        before[d] = free_mem(d);
    }
    reduce_scatter_round(big_send, big_recv, count);
    size_t kept[2];
    for (int d = 0; d < 2; d++) {
        kept[d] = free_mem(d);
        cr_assert_leq(kept[d] + 2 * count * sizeof(float), before[d],
                      "device %d: no scratch kept after a call (%zu then %zu bytes free)", d,
                      before[d], kept[d]);
    }
    reduce_scatter_round(big_send, big_recv, count);
    for (int d = 0; d < 2; d++)
        cr_assert_eq(free_mem(d), kept[d], "device %d: a second call of the same size took memory", d);
    reduce_scatter_round(big_send, big_recv, 2 * count);
    for (int d = 0; d < 2; d++)
        cr_assert_leq(free_mem(d) + 2 * count * sizeof(float), kept[d],
                      "device %d: scratch did not grow for a larger call", d);
    for (int d = 0; d < 2; d++) {
        if (how == 0)
            CHECK_OCCL(occlCommFinalize(comms[d]));
        else if (how == 1)
            CHECK_OCCL(occlCommDestroy(comms[d]));
        else
            CHECK_OCCL(occlCommAbort(comms[d]));
        if (how)
            comms[d] = NULL;
    }
    /* Destroy and abort also free the communicator's control block. */
    for (int d = 0; d < 2; d++)
        cr_assert(how ? free_mem(d) >= before[d] : free_mem(d) == before[d],
                  "device %d: scratch not given back (%s)", d,
                  how == 0 ? "finalize" : how == 1 ? "destroy" : "abort");
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orFree(big_send[d]), orSuccess);
        cr_assert_eq(orFree(big_recv[d]), orSuccess);
    }
    cr_assert_eq(orSetDevice(0), orSuccess);
}

Test(occl_args, scratch_kept_then_freed_at_finalize) { scratch_pool(0); }
Test(occl_args, scratch_kept_then_freed_at_destroy) { scratch_pool(1); }
Test(occl_args, scratch_kept_then_freed_at_abort) { scratch_pool(2); }

/* No device memory left for a call's scratch: the call fails with
 * occlUnhandledDeviceError (asynchronously, as it runs), its stream reports
 * the failure, and the communicator is then aborted. */
Test(occl_args, no_device_memory_for_scratch)
{
    const size_t count = (size_t)1 << 18; /* ReduceScatter: 2 MiB of scratch per rank */
    float *big_send[2], *big_recv[2];
    void *hog[2];
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orMalloc((void **)&big_send[d], 2 * count * sizeof(float)), orSuccess);
        cr_assert_eq(orMalloc((void **)&big_recv[d], count * sizeof(float)), orSuccess);
        size_t left = free_mem(d);
        cr_assert_eq(orSetDevice(d), orSuccess);
        /* Leave less than the scratch needs (memory is reserved lazily). */
        cr_assert_eq(orMalloc(&hog[d], left - ((size_t)1 << 20)), orSuccess);
    }
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlReduceScatter(big_send[d], big_recv[d], count, occlFloat, occlSum, comms[d],
                                     streams[d]));
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        orError_t err = orStreamSynchronize(streams[d]);
        cr_assert_neq(err, orSuccess, "device %d: the stream did not report the failure", d);
        occlResult_t async = occlSuccess;
        CHECK_OCCL(occlCommGetAsyncError(comms[d], &async));
        cr_assert_eq(async, occlUnhandledDeviceError, "device %d: %s", d, occlGetErrorString(async));
        cr_assert(strstr(occlGetLastError(comms[d]), "scratch") != NULL, "device %d: reason '%s'",
                  d, occlGetLastError(comms[d]));
    }
    for (int d = 0; d < 2; d++) {
        CHECK_OCCL(occlCommAbort(comms[d]));
        comms[d] = NULL;
        cr_assert_eq(orFree(hog[d]), orSuccess);
        cr_assert_eq(orFree(big_send[d]), orSuccess);
        cr_assert_eq(orFree(big_recv[d]), orSuccess);
    }
    cr_assert_eq(orSetDevice(0), orSuccess);
}
