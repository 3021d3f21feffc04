/*
 * collectives/fingerprint.c - every call, as its peers must see it alike.
 *
 * A collective carries its communicator's sequence number, the collective,
 * datatype, op, root and count; a Send or Recv its datatype and count. Each
 * transfer takes its call's fingerprint along (in the mailbox post within a
 * node; over the network, a call's first message to each peer is a header
 * holding it), and the receiving end compares it with its own call's before
 * it touches any byte. Calls issued in different orders, or with different
 * types, ops, roots or counts, thus fail with occlInvalidUsage instead of
 * mixing data: the rank that finds the mismatch names both sides, and tells
 * the other ranks of the call with a notice (in their control block within
 * its node, by MPI on the job's control communicator across nodes), so that
 * every rank waiting in that call fails with the same message at once rather
 * than at OCCL_TIMEOUT_MS. A communicator whose calls were found mismatched
 * stays failed (occlCommGetAsyncError): its ranks no longer agree on what
 * comes next.
 *
 * The check costs a 48-byte copy and compare per transfer (docs/occl.md has
 * the measured cost); OCCL_CHECK_CALLS=0 turns it off.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "occl_internal.h"

static bool rooted(occl_coll c)
{
    return c == OCCL_COLL_BROADCAST || c == OCCL_COLL_REDUCE || c == OCCL_COLL_GATHER ||
           c == OCCL_COLL_SCATTER;
}

static bool reduces(occl_coll c)
{
    return c == OCCL_COLL_ALLREDUCE || c == OCCL_COLL_REDUCE || c == OCCL_COLL_REDUCESCATTER;
}

static uint8_t op_of(const occl_call *c)
{
    if (!reduces(c->coll))
        return OCCL_FP_NO_OP;
    if (c->avg)
        return occlAvg;
    if (c->device_scalar)
        return occlNumOps;
    switch (c->op.kind) {
    case OCCL_RED_SUM: return occlSum;
    case OCCL_RED_PROD: return occlProd;
    case OCCL_RED_MAX: return occlMax;
    case OCCL_RED_MIN: return occlMin;
    default: return occlNumOps; /* a PreMulSum: its scalar may differ per rank */
    }
}

occl_fp occl_fp_of(const occl_call *c)
{
    bool p2p = c->coll == OCCL_COLL_SEND || c->coll == OCCL_COLL_RECV;
    return (occl_fp){.comm_id = c->comm->id,
                     .seq = 0,
                     .count = c->count,
                     .root = rooted(c->coll) || p2p ? c->root : -1,
                     .coll = (uint8_t)c->coll,
                     .type = (uint8_t)c->type,
                     .op = op_of(c)};
}

void occl_fp_begin(occlComm_t comm, const occl_call *c)
{
    uint64_t seq = comm->fp.seq + 1;
    comm->fp = occl_fp_of(c);
    comm->fp.seq = seq;
}

bool occl_fp_match(const occl_fp *mine, const occl_fp *theirs)
{
    if (mine->comm_id != theirs->comm_id || mine->type != theirs->type || mine->count != theirs->count)
        return false;
    if (!mine->seq || !theirs->seq) /* a Send meets only a Recv */
        return !mine->seq && !theirs->seq && theirs->coll == OCCL_COLL_SEND &&
               mine->coll == OCCL_COLL_RECV;
    return mine->seq == theirs->seq && mine->coll == theirs->coll && mine->op == theirs->op &&
           mine->root == theirs->root;
}

/* "rank 0 AllReduce float32 sum count 1024 #17", "rank 1 Send int32 count 8 to rank 0" */
static int describe(char *buf, size_t size, int rank, const occl_fp *fp, uint64_t comm_id)
{
    const char *type = occl_type_name((occlDataType_t)fp->type);
    const char *coll = occl_coll_name((occl_coll)fp->coll);
    if (fp->comm_id != comm_id)
        return snprintf(buf, size, "rank %d a call of another communicator", rank);
    if (!fp->seq)
        return snprintf(buf, size, "rank %d %s %s count %llu %s rank %d", rank, coll, type,
                        (unsigned long long)fp->count, fp->coll == OCCL_COLL_SEND ? "to" : "from",
                        fp->root);
    int len = snprintf(buf, size, "rank %d %s %s", rank, coll, type);
    if (fp->op != OCCL_FP_NO_OP && len < (int)size)
        len += snprintf(buf + len, size - (size_t)len, " %s", occl_op_name((occlRedOp_t)fp->op));
    if (rooted((occl_coll)fp->coll) && len < (int)size)
        len += snprintf(buf + len, size - (size_t)len, " root %d", fp->root);
    if (len < (int)size)
        len += snprintf(buf + len, size - (size_t)len, " count %llu #%llu",
                        (unsigned long long)fp->count, (unsigned long long)fp->seq);
    return len;
}

static occlResult_t fail_with(occlComm_t comm, const occl_notice *n)
{
    char a[96], b[96];
    describe(a, sizeof a, n->rank[0], &n->fp[0], comm->id);
    describe(b, sizeof b, n->rank[1], &n->fp[1], comm->id);
    return occl_fail(occlInvalidUsage, "mismatched calls: %s, %s", a, b);
}

/* Within the node: into the peer's control block, unless a notice is there. */
static void post_notice(occlComm_t comm, int j, const occl_notice *n)
{
    occl_ctrl *c = comm->peers[j].ctrl;
    uint32_t empty = 0;
    if (!atomic_compare_exchange_strong(&c->notice_state, &empty, 1))
        return;
    c->notice = *n;
    atomic_store_explicit(&c->notice_state, 2, memory_order_release);
    occl_ring_bell(c);
}

static void send_notice(occlComm_t comm, int j)
{
    if (!comm->notice_reqs) {
        comm->notice_reqs = malloc((size_t)comm->nranks * sizeof *comm->notice_reqs);
        if (!comm->notice_reqs)
            return; /* the peer then fails at its timeout */
        for (int k = 0; k < comm->nranks; k++)
            comm->notice_reqs[k] = MPI_REQUEST_NULL;
    }
    if (comm->notice_reqs[j] != MPI_REQUEST_NULL)
        return;
    MPI_Isend(&comm->notice_out, sizeof comm->notice_out, MPI_BYTE, comm->peers[j].world_rank,
              comm->tag_slot, comm->job.ctl_comm, &comm->notice_reqs[j]);
}

occlResult_t occl_fp_mismatch(occlComm_t comm, int peer, const occl_fp *theirs, const occl_fp *mine)
{
    occl_notice n = {.comm_id = comm->id};
    /* The earliest collective either side is in fails; between a Send and a
     * Recv only the pair does. */
    n.seq = mine->seq && theirs->seq ? (mine->seq < theirs->seq ? mine->seq : theirs->seq)
                                     : (mine->seq ? mine->seq : theirs->seq);
    bool peer_first = peer < comm->rank;
    n.rank[0] = peer_first ? peer : comm->rank;
    n.rank[1] = peer_first ? comm->rank : peer;
    n.fp[0] = peer_first ? *theirs : *mine;
    n.fp[1] = peer_first ? *mine : *theirs;
    if (!comm->noticed) {
        comm->noticed = true;
        comm->notice = n;
        comm->notice_out = n;
        for (int j = 0; j < comm->nranks; j++) {
            if (j == comm->rank || (!n.seq && j != peer))
                continue;
            if (comm->peers[j].ctrl)
                post_notice(comm, j, &n);
            else
                send_notice(comm, j);
        }
    }
    return fail_with(comm, &n);
}

occlResult_t occl_notice_check(occlComm_t comm, bool p2p, bool probe_net)
{
    if (!comm->noticed) {
        occl_ctrl *c = comm->ctrl;
        if (atomic_load_explicit(&c->notice_state, memory_order_acquire) == 2) {
            comm->notice = c->notice;
            comm->noticed = true;
        } else if (probe_net && comm->network) {
            int flag = 0;
            MPI_Status st;
            MPI_Iprobe(MPI_ANY_SOURCE, comm->tag_slot, comm->job.ctl_comm, &flag, &st);
            if (flag) {
                /* Notices have one size; anything else is taken and dropped. */
                occl_notice n = {0};
                int bytes = 0;
                MPI_Get_count(&st, MPI_BYTE, &bytes);
                void *buf = bytes == (int)sizeof n ? (void *)&n : malloc(bytes > 0 ? (size_t)bytes : 1);
                if (buf) {
                    MPI_Recv(buf, bytes, MPI_BYTE, st.MPI_SOURCE, comm->tag_slot, comm->job.ctl_comm,
                             MPI_STATUS_IGNORE);
                    if (buf != &n)
                        free(buf);
                }
                /* A notice to an earlier communicator of this tag slot is stale. */
                if (buf == &n && n.comm_id == comm->id) {
                    comm->notice = n;
                    comm->noticed = true;
                }
            }
        }
    }
    if (!comm->noticed)
        return occlSuccess;
    /* A collective before the failed one goes on: its peers may have finished it. */
    if (!p2p && comm->notice.seq && comm->fp.seq < comm->notice.seq)
        return occlSuccess;
    return fail_with(comm, &comm->notice);
}

void occl_notice_release(occlComm_t comm)
{
    if (!comm->notice_reqs)
        return;
    for (int j = 0; j < comm->nranks; j++) {
        if (comm->notice_reqs[j] == MPI_REQUEST_NULL)
            continue;
        int done = 0;
        MPI_Test(&comm->notice_reqs[j], &done, MPI_STATUS_IGNORE);
        if (!done) {
            MPI_Cancel(&comm->notice_reqs[j]);
            MPI_Request_free(&comm->notice_reqs[j]);
        }
    }
    free(comm->notice_reqs);
    comm->notice_reqs = NULL;
}
