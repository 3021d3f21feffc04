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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "occl_internal.h"

static bool waits_ready(occlComm_t comm);
#define NPAST (sizeof ((struct occlComm *)0)->past / sizeof *((struct occlComm *)0)->past)


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

/* Word by word: occl_fp_begin fills two of them at every call and then
 * copies one to the peers word by word; a word stored in pieces and read
 * whole at once costs a failed store-to-load forwarding. */
typedef union {
    struct {
        int32_t root;
        uint8_t coll, type, op, pad;
    } f;
    uint64_t word;
} fp_tail;
_Static_assert(offsetof(occl_fp, root) == 3 * sizeof(uint64_t) && offsetof(occl_fp, coll) == offsetof(occl_fp, root) + 4 &&
                   offsetof(occl_fp, type) == offsetof(occl_fp, coll) + 1 &&
                   offsetof(occl_fp, op) == offsetof(occl_fp, type) + 1 && sizeof(occl_fp) == 4 * sizeof(uint64_t),
               "occl_fp ends in one word: root, coll, type, op, pad");

static inline void fp_fill(occl_fp *fp, const occl_call *c, uint64_t seq)
{
    bool p2p = c->coll == OCCL_COLL_SEND || c->coll == OCCL_COLL_RECV;
    fp->comm_id = c->comm->id;
    fp->seq = seq;
    fp->count = c->count;
    fp_tail t = {.f = {rooted(c->coll) || p2p ? c->root : -1, (uint8_t)c->coll, (uint8_t)c->type, op_of(c), 0}};
    memcpy((unsigned char *)fp + offsetof(occl_fp, root), &t.word, sizeof t.word);
}

occl_fp occl_fp_of(const occl_call *c)
{
    occl_fp fp;
    fp_fill(&fp, c, 0);
    return fp;
}

/* The published fingerprint is a seqlock's payload: peers of the node read
 * it while this rank may be writing it, and the version tells them to
 * retry. Its words are copied with relaxed atomic accesses, so the
 * concurrent reads and writes are well defined (plain copies are a data
 * race in C11, which ThreadSanitizer reports). */
typedef uint64_t __attribute__((may_alias)) fp_word;
_Static_assert(sizeof(occl_fp) % sizeof(fp_word) == 0, "occl_fp is whole 64-bit words");

static void fp_publish(occl_fp *dst, const occl_fp *src)
{
    const fp_word *from = (const fp_word *)src;
    fp_word *to = (fp_word *)dst;
    for (size_t i = 0; i < sizeof *src / sizeof *to; i++)
        __atomic_store_n(&to[i], from[i], __ATOMIC_RELAXED);
}

static void fp_read(occl_fp *dst, const occl_fp *src)
{
    const fp_word *from = (const fp_word *)src;
    fp_word *to = (fp_word *)dst;
    for (size_t i = 0; i < sizeof *dst / sizeof *to; i++)
        to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

void occl_fp_begin(occlComm_t comm, const occl_call *c)
{
    uint64_t seq = comm->fp.seq + 1;
    fp_fill(&comm->fp, c, seq);
    fp_fill(&comm->past[seq % NPAST], c, seq);
    if (!comm->check_calls)
        return;
    occl_ctrl *ctrl = comm->ctrl;
    uint32_t v = atomic_load_explicit(&ctrl->current_version, memory_order_relaxed);
    atomic_store_explicit(&ctrl->current_version, v + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    fp_publish(&ctrl->current, &comm->fp);
    atomic_store_explicit(&ctrl->current_version, v + 2, memory_order_release);
}

/* Peer j's published collective (same node); false while it is being written. */
static bool read_current(const occl_ctrl *c, occl_fp *out)
{
    uint32_t v = atomic_load_explicit(&c->current_version, memory_order_acquire);
    if (v & 1)
        return false;
    fp_read(out, &c->current);
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&c->current_version, memory_order_relaxed) == v;
}

/* More than this without progress in a collective and a network peer is
 * told which call this rank waits in: rare in healthy runs, and a mismatch
 * in which both sides receive ends within milliseconds. */
#define WAIT_TELL_NS 2000000u

occl_fp_pair occl_fp_carried(occlComm_t comm, const occl_fp *fp)
{
    occl_fp_pair p = {*fp, {0}};
    if (fp->seq > 1)
        p.prev = comm->past[(fp->seq - 1) % NPAST];
    else if (!fp->seq) /* a Send: the collective it follows */
        p.prev = comm->fp;
    return p;
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

static void send_notice(occlComm_t comm, int j, const occl_notice *n)
{
    struct occl_notices_out *out = comm->notices_out;
    if (!out) {
        out = malloc(sizeof *out + (size_t)comm->nranks * sizeof *out->req);
        if (!out)
            return; /* the peer then fails at its timeout */
        out->msg = *n;
        for (int k = 0; k < comm->nranks; k++)
            out->req[k] = MPI_REQUEST_NULL;
        comm->notices_out = out;
    }
    if (out->req[j] != MPI_REQUEST_NULL)
        return;
    MPI_Isend(&out->msg, sizeof out->msg, MPI_BYTE, comm->peers[j].world_rank,
              occl_ctl_tag(comm, j), comm->job.ctl_comm, &out->req[j]);
}

occlResult_t occl_fp_mismatch(occlComm_t comm, int peer, const occl_fp *theirs,
                              const occl_fp *theirs_prev, const occl_fp *mine)
{
    occl_notice n = {.kind = OCCL_NOTICE_MISMATCH, .comm_id = comm->id};
    /* One side has finished the collective the other is still in: the root
     * cause is what it ran as that call. */
    const occl_fp *was = &comm->past[theirs->seq % NPAST];
    if (theirs->seq && mine->seq > theirs->seq && was->seq == theirs->seq &&
        theirs->comm_id == comm->id && !occl_fp_match(was, theirs))
        mine = was;
    else if (mine->seq && theirs_prev && theirs->seq == mine->seq + 1 &&
             theirs_prev->seq == mine->seq && !occl_fp_match(mine, theirs_prev))
        theirs = theirs_prev;
    else if (!theirs->seq && theirs_prev && mine->seq > theirs_prev->seq + 1 &&
             comm->past[(theirs_prev->seq + 1) % NPAST].seq == theirs_prev->seq + 1)
        mine = &comm->past[(theirs_prev->seq + 1) % NPAST]; /* what this rank ran where the Send came */
    else if (!mine->seq && theirs_prev && theirs->seq == comm->fp.seq + 2 &&
             theirs_prev->seq == comm->fp.seq + 1)
        theirs = theirs_prev; /* what the peer ran where this rank's Send or Recv is */
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
        for (int j = 0; j < comm->nranks; j++) {
            if (j == comm->rank || (!n.seq && j != peer))
                continue;
            if (comm->peers[j].ctrl)
                post_notice(comm, j, &n);
            else
                send_notice(comm, j, &n);
        }
    }
    return fail_with(comm, &n);
}

/* Take one message addressed to this rank from the communicator's control
 * context, if one has come: a mismatch notice, or a peer's "waiting"
 * message (tell_waiting). False when there was none. */
static bool take_notice(occlComm_t comm)
{
    int flag = 0;
    MPI_Status st;
    MPI_Message msg;
    MPI_Improbe(MPI_ANY_SOURCE, occl_ctl_tag(comm, comm->rank), comm->job.ctl_comm, &flag, &msg, &st);
    if (!flag)
        return false;
    /* Notices have one size; anything else is taken and dropped. */
    occl_notice n = {0};
    int bytes = 0;
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    void *buf = bytes == (int)sizeof n ? (void *)&n : malloc(bytes > 0 ? (size_t)bytes : 1);
    MPI_Mrecv(buf, buf ? bytes : 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    if (buf != &n)
        free(buf);
    /* A notice to an earlier communicator of this tag slot is stale. */
    if (buf == &n && n.comm_id == comm->id && n.kind == OCCL_NOTICE_MISMATCH) {
        comm->notice = n;
        comm->noticed = true;
    } else if (buf == &n && n.comm_id == comm->id && n.rank[0] >= 0 && n.rank[0] < comm->nranks &&
               waits_ready(comm)) {
        /* A peer waits for this rank in a collective, or in a Recv of
         * transfer n.seq: occl_fp_check_wait compares when this rank waits
         * for that peer. */
        struct occl_peer_wait *w = &comm->waits[n.rank[0]];
        if (n.fp[0].seq)
            w->heard = n.fp[0];
        if (n.sending) {
            w->heard_send = n.fp[0];
            w->heard_send_xfer = n.seq;
        } else {
            w->heard_recv = n.fp[0];
            w->heard_xfer = n.seq;
        }
    }
    return true;
}

occlResult_t occl_notice_check(occlComm_t comm, bool p2p, bool probe_net)
{
    if (!comm->noticed) {
        occl_ctrl *c = comm->ctrl;
        if (atomic_load_explicit(&c->notice_state, memory_order_acquire) == 2) {
            comm->notice = c->notice;
            comm->noticed = true;
        } else if (probe_net && comm->network) {
            /* Everything that has come (each peer has at most one "waiting"
             * message in flight to this rank, see tell_waiting), so the
             * latest of each is what is compared. */
            for (int k = 0; k < comm->nranks && !comm->noticed && take_notice(comm); k++)
                ;
        }
    }
    /* A network peer waits for this rank in this collective under another
     * fingerprint (whether or not this rank waits for that peer). */
    for (int j = 0; !comm->noticed && !p2p && comm->waits && comm->fp.seq && j < comm->nranks; j++) {
        const occl_fp *h = &comm->waits[j].heard;
        if (h->seq == comm->fp.seq && !occl_fp_match(&comm->fp, h))
            return occl_fp_mismatch(comm, j, h, NULL, &comm->fp);
    }
    if (!comm->noticed)
        return occlSuccess;
    /* A collective before the failed one goes on: its peers may have finished it. */
    if (!p2p && comm->notice.seq && comm->fp.seq < comm->notice.seq)
        return occlSuccess;
    return fail_with(comm, &comm->notice);
}

static bool waits_ready(occlComm_t comm)
{
    if (comm->waits)
        return true;
    comm->waits = calloc((size_t)comm->nranks, sizeof *comm->waits);
    for (int k = 0; comm->waits && k < comm->nranks; k++)
        comm->waits[k].req = MPI_REQUEST_NULL;
    return comm->waits != NULL;
}

/* Tell network peer j which call this rank waits in, once per call (a
 * Recv: once per transfer). The message is synchronous and the previous one
 * must have been received first: j takes these only when it waits itself
 * (occl_notice_check), and a rank that seldom waits would otherwise collect
 * them in MPI's unexpected queue for as long as the communicator lives - over
 * UCX's tcp each held message pins a receive buffer of several KiB, and a
 * long run's memory grew by hundreds of MB. */
static void tell_waiting(occlComm_t comm, int j, const occl_fp *mine, uint64_t xfer_seq, bool sending)
{
    struct occl_peer_wait *w = &comm->waits[j];
    uint64_t *told_xfer = sending ? &w->told_send_xfer : &w->told_xfer;
    if ((!mine->seq || w->told == mine->seq) && *told_xfer == xfer_seq)
        return;
    if (w->req != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&w->req, &done, MPI_STATUS_IGNORE);
        if (!done)
            return;
    }
    w->msg = (occl_notice){.kind = OCCL_NOTICE_WAITING, .sending = sending, .comm_id = comm->id,
                           .seq = xfer_seq, .rank = {comm->rank, j}, .fp = {*mine}};
    w->told = mine->seq;
    *told_xfer = xfer_seq;
    MPI_Issend(&w->msg, sizeof w->msg, MPI_BYTE, comm->peers[j].world_rank, occl_ctl_tag(comm, j),
               comm->job.ctl_comm, &w->req);
}

/* What a waiting rank reads of its peer (its current call, its mailbox,
 * its notices) is newer than the rank's last look at its own transfer with
 * that peer: the peer may have moved that transfer and left the call in
 * between. Only if the transfer still cannot move is the peer elsewhere. */
static occlResult_t found_waiting(occlComm_t comm, const occl_xfer *x, const occl_fp *theirs,
                                  const occl_fp *theirs_prev, const occl_fp *mine)
{
    if (occl_xfer_moved(comm, x))
        return occlSuccess; /* the next look takes it */
    return occl_fp_mismatch(comm, x->peer, theirs, theirs_prev, mine);
}

/* Ways a wait for peer j can never end:
 * - j is in the same collective (by sequence number) under another
 *   fingerprint: both may be waiting to receive (a Gather's root against a
 *   Scatter's);
 * - j is blocked in a Recv of a transfer this rank has not started (its
 *   number is past this rank's count of transfers to j): this rank starts
 *   no transfer to j before its own call ends, and that call waits for j.
 *   A stale report cannot pass: a Recv that ended took a started transfer;
 * - within a node, j has posted this rank the transfer it would take next,
 *   under another call's fingerprint, and waits for it to be taken (both
 *   send): nothing in this rank's call takes it (a receive from j would
 *   have compared it), and j's send ends only when it is taken.
 * The last two (and their network forms) reason about the order of a
 * pair's transfers; they are applied where a Send or Recv is on one side.
 * Two collectives are compared by sequence number alone: a pipelined
 * algorithm may leave a peer a step behind while this rank is a call
 * ahead, which is no mismatch. */
occlResult_t occl_fp_check_wait(occlComm_t comm, const occl_xfer *x, uint64_t waited_ns)
{
    int j = x->peer;
    occl_peer *p = &comm->peers[j];
    const occl_fp *mine = x->fp;
    occl_fp theirs;
    if (!comm->check_calls)
        return occlSuccess;
    if (p->ctrl) {
        if (mine->seq && read_current(p->ctrl, &theirs) && theirs.seq == mine->seq &&
            !occl_fp_match(mine, &theirs))
            return found_waiting(comm, x, &theirs, NULL, mine);
        occl_slot *in = &p->ctrl->slots[comm->rank]; /* j's mailbox for this rank */
        if (atomic_load_explicit(&in->seq, memory_order_acquire) == p->received + 1 &&
            x->kind == OCCL_XFER_SEND) {
            occl_fp_pair posted = in->fp; /* j cannot post again before this rank takes it */
            /* ... and j had not taken this rank's send when it posted: j's
             * acknowledgement is read after its post. */
            const occl_slot *taken = &p->ctrl->slots[comm->nranks + comm->rank];
            if ((!mine->seq || !posted.cur.seq) &&
                atomic_load_explicit(&taken->seq, memory_order_acquire) < x->seq)
                return found_waiting(comm, x, &posted.cur, &posted.prev, mine);
        }
        occl_slot *w = &p->ctrl->slots[comm->nranks + comm->rank]; /* j's slot for this rank */
        uint64_t blocked = atomic_load_explicit(&w->wait_seq, memory_order_acquire);
        if (blocked > p->sent) {
            theirs = w->fp.cur;
            atomic_thread_fence(memory_order_acquire);
            if (atomic_load_explicit(&w->wait_seq, memory_order_relaxed) == blocked)
                return found_waiting(comm, x, &theirs, NULL, mine);
        }
        return occlSuccess;
    }
    if (!waits_ready(comm))
        return occlSuccess;
    struct occl_peer_wait *w = &comm->waits[j];
    if (mine->seq && w->heard.seq == mine->seq && !occl_fp_match(mine, &w->heard))
        return found_waiting(comm, x, &w->heard, NULL, mine);
    /* j's Recv waits for a transfer this rank has not started, or for the
     * last one it started, which is of another call (over the network a
     * collective's and a Send's messages travel apart and never meet). */
    bool p2p_recv = w->heard_xfer && !w->heard_recv.seq;
    if (w->heard_xfer > p->sent && (p2p_recv || !mine->seq))
        return found_waiting(comm, x, &w->heard_recv, NULL, mine);
    if (w->heard_xfer && w->heard_xfer == p->sent && (p2p_recv || !p->last_sent.seq) &&
        !occl_fp_match(&w->heard_recv, &p->last_sent))
        return found_waiting(comm, x, &w->heard_recv, NULL, &p->last_sent);
    /* j waits in a send of the transfer this rank would take next, and no
     * receive of this rank's call waits for it (it would have taken it, or
     * compared it): as within a node. */
    if (w->heard_send_xfer && w->heard_send_xfer == p->received + 1 &&
        (!mine->seq || !w->heard_send.seq))
        return found_waiting(comm, x, &w->heard_send, NULL, mine);
    if (waited_ns >= WAIT_TELL_NS)
        tell_waiting(comm, j, mine, x->seq, x->kind == OCCL_XFER_SEND);
    return occlSuccess;
}

/* The low-latency path (ll.c) waits for peer j of its node to post the
 * collective `mine`: whether j is instead in that call on another path
 * (different count, hence size), or in a Send or Recv with this rank where
 * this rank runs the collective. A peer already past `mine` is not. */
occlResult_t occl_fp_check_ll(occlComm_t comm, int j, const occl_fp *mine)
{
    occl_peer *p = &comm->peers[j];
    occl_fp theirs;
    if (read_current(p->ctrl, &theirs) && theirs.seq == mine->seq && !occl_fp_match(mine, &theirs))
        return occl_fp_mismatch(comm, j, &theirs, NULL, mine);
    occl_slot *in = &p->ctrl->slots[comm->rank]; /* j's mailbox for this rank */
    if (atomic_load_explicit(&in->seq, memory_order_acquire) == p->received + 1) {
        occl_fp_pair posted = in->fp; /* j cannot post again before this rank takes it */
        if (posted.cur.seq == mine->seq || (!posted.cur.seq && posted.prev.seq < mine->seq))
            return occl_fp_mismatch(comm, j, &posted.cur, &posted.prev, mine);
    }
    occl_slot *w = &p->ctrl->slots[comm->nranks + comm->rank]; /* j's slot for this rank */
    uint64_t blocked = atomic_load_explicit(&w->wait_seq, memory_order_acquire);
    if (blocked > p->sent) { /* j's Recv waits for a transfer from this rank */
        occl_fp_pair recv = w->fp;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&w->wait_seq, memory_order_relaxed) == blocked &&
            recv.prev.seq < mine->seq)
            return occl_fp_mismatch(comm, j, &recv.cur, &recv.prev, mine);
    }
    return occlSuccess;
}

/* Sends still open (a peer that never took its message) keep the memory
 * they read until MPI completes them (occl_net_orphan). */
void occl_notice_release(occlComm_t comm)
{
    if (comm->waits) {
        MPI_Request *reqs = malloc((size_t)comm->nranks * sizeof *reqs);
        for (int j = 0; j < comm->nranks; j++) {
            if (comm->waits[j].req != MPI_REQUEST_NULL)
                MPI_Cancel(&comm->waits[j].req);
            if (reqs)
                reqs[j] = comm->waits[j].req;
        }
        if (reqs)
            occl_net_orphan(reqs, comm->nranks, comm->waits);
        free(reqs); /* without it, the messages are left to MPI: not freed */
        comm->waits = NULL;
    }
    struct occl_notices_out *out = comm->notices_out;
    if (out) {
        for (int j = 0; j < comm->nranks; j++)
            if (out->req[j] != MPI_REQUEST_NULL)
                MPI_Cancel(&out->req[j]);
        occl_net_orphan(out->req, comm->nranks, out);
        comm->notices_out = NULL;
    }
}
