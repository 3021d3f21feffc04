/*
 * collectives/transport.c - point-to-point transfers between the ranks of a
 * communicator, progressed in sets with a deadline.
 *
 * Same virtual node: the sender posts (sequence, where, how many bytes) in
 * its mailbox for the receiver and waits for the receiver's acknowledgement;
 * the receiver reads the bytes straight from the sender's device memory,
 * copying or reducing them into its own, then acknowledges. No MPI, no
 * intermediate buffer, and the sender's buffer is never reused early.
 * Other nodes: MPI_Isend / MPI_Irecv in pieces (a quarter of the transfer,
 * at least 1 MiB), point-to-point calls' in an MPI communicator of their
 * own; a transfer of up to OCCL_NET_INLINE bytes that opens its call with
 * the peer goes in one message with the call's header. A receive that
 * reduces keeps OCCL_NET_DEPTH pieces posted into the communicator's staging
 * memory and reduces each as it lands, so the network fills the next piece
 * while the current one is reduced.
 * A receive from any source (occlRecvAnySource) first looks for the peer
 * whose next transfer to this rank is a point-to-point send, in the mailboxes
 * and with MPI_Iprobe, then receives from it as from a named peer.
 */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define OCCL_LOG_SUBSYS OCCL_SUBSYS_NET
#include "occl_internal.h"
#include "plugin.h"

/* XFER_QUEUED: a network receive that waits until the receive before it from
 * the same peer has posted all its pieces (see occl_xfers_run); XFER_HEADER:
 * a network receive that waits for its call's header from the peer. */
enum { XFER_START, XFER_WAIT, XFER_DONE, XFER_QUEUED, XFER_HEADER };

static occl_slot *out_slot(occl_ctrl *c, int peer) { return &c->slots[peer]; }
static occl_slot *ack_slot(occl_ctrl *c, int nranks, int peer) { return &c->slots[nranks + peer]; }

/* Wake a rank that may sleep waiting for us (shared, not process-private:
 * the rank may be in another process of the node). */
void occl_ring_bell(occl_ctrl *c)
{
    atomic_fetch_add(&c->doorbell, 1);
    if (atomic_load(&c->sleepers))
        syscall(SYS_futex, (uint32_t *)&c->doorbell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void sleep_on_bell(occl_ctrl *c, uint32_t seen, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    atomic_fetch_add(&c->sleepers, 1);
    syscall(SYS_futex, (uint32_t *)&c->doorbell, FUTEX_WAIT, seen, &ts, NULL, 0);
    atomic_fetch_sub(&c->sleepers, 1);
}

static bool same_node(occlComm_t comm, int peer)
{
    return comm->peers[peer].ctrl != NULL;
}

/* MPI keeps the messages of one sender and tag in order, and both sides of
 * a pair post their transfers in the same order, so a tag needs only to name
 * the communicator and the pair. */
static int tag_of(occlComm_t comm, int src, int dst)
{
    return comm->tag_base | (src << 10) | dst;
}

/* A collective's traffic and point-to-point calls' go in separate MPI
 * contexts: a receive from any source probes the second only. */
static MPI_Comm net_comm(occlComm_t comm, const occl_xfer *x)
{
    return x->p2p ? comm->job.p2p_comm : comm->job.comm;
}

/* Pieces of a network transfer: a quarter of it, at least OCCL_NET_PIECE
 * (so a receive that reduces overlaps the reduction of one piece with the
 * arrival of the next, while each piece's MPI hand-shake, which waits for
 * the sender's process to be scheduled, stays rare), at most
 * OCCL_MPI_PIECE, a multiple of 64 bytes (whole elements of every type).
 * Both ends compute the same split from the byte count. */
static size_t piece_of(size_t bytes)
{
    size_t piece = ((bytes / OCCL_NET_SPLIT) + 127) & ~(size_t)63;
    if (piece < OCCL_NET_PIECE)
        piece = OCCL_NET_PIECE;
    return piece < OCCL_MPI_PIECE ? piece : OCCL_MPI_PIECE;
}

static size_t piece_len(const occl_xfer *x, int k)
{
    size_t off = (size_t)k * x->piece;
    return x->bytes - off < x->piece ? x->bytes - off : x->piece;
}

/* Receive piece k of a reducing network receive into its staging slot. */
static occlResult_t post_piece(occlComm_t comm, occl_xfer *x, int k)
{
    void *dst = (char *)x->staging + (size_t)(k % OCCL_NET_DEPTH) * x->piece;
    if (MPI_Irecv(dst, (int)piece_len(x, k), MPI_BYTE, comm->peers[x->peer].world_rank,
                  tag_of(comm, x->peer, comm->rank), net_comm(comm, x),
                  &x->req[k % OCCL_NET_DEPTH]) != MPI_SUCCESS)
        return occl_fail(occlRemoteError, "MPI_Irecv from rank %d failed", x->peer);
    x->next_post = k + 1;
    return occlSuccess;
}

enum { NO_MOVE, MOVED, FINISHED };

static occlResult_t post_net(occlComm_t comm, occl_xfer *x);

uint64_t occl_comm_net_headers(occlComm_t comm, uint64_t *with_bytes, uint64_t *synchronous)
{
    if (with_bytes)
        *with_bytes = atomic_load(&comm->net_headers_inline);
    if (synchronous)
        *synchronous = atomic_load(&comm->net_headers_sync);
    return atomic_load(&comm->net_headers);
}

static void deliver_at(occl_xfer *x, size_t off, const void *src, size_t bytes)
{
    if (!bytes)
        return;
    unsigned char *dst = (unsigned char *)x->buf + off;
    if (x->reduce) {
        size_t n = bytes / occl_type_size(x->type);
        const unsigned char *with = x->with ? (const unsigned char *)x->with + off : dst;
        occl_reduce2(dst, with, src, n, x->type, x->op);
    } else if (dst != src) {
        memcpy(dst, src, bytes);
    }
}

/* Send the message that opens x's call with its peer (the header, alone or
 * with the bytes): eagerly or synchronously, as x->eager says (see start). */
static occlResult_t send_opening(occlComm_t comm, occl_xfer *x, void *msg, size_t len, MPI_Request *req)
{
    int rank = comm->peers[x->peer].world_rank, tag = tag_of(comm, comm->rank, x->peer);
    int rc = x->eager ? MPI_Isend(msg, (int)len, MPI_BYTE, rank, tag, net_comm(comm, x), req)
                      : MPI_Issend(msg, (int)len, MPI_BYTE, rank, tag, net_comm(comm, x), req);
    if (rc != MPI_SUCCESS)
        return occl_fail(occlRemoteError, "MPI_%s to rank %d failed", x->eager ? "Isend" : "Issend",
                         x->peer);
    return occlSuccess;
}

/* The message that opens x's call with its peer: the header, with the bytes
 * when they are few (a small call costs one message per peer and direction,
 * not two). It lives on the heap, owned by x until MPI completes its send:
 * a cancelled send may still be read by MPI later (see cancel). */
static occlResult_t send_header(occlComm_t comm, occl_xfer *x, bool with_bytes)
{
    size_t len = sizeof x->hdr + (with_bytes ? x->bytes : 0);
    unsigned char *msg = malloc(len);
    if (!msg)
        return occl_fail(occlSystemError, "out of memory");
    memcpy(msg, &x->hdr, sizeof x->hdr);
    if (with_bytes && x->bytes)
        memcpy(msg + sizeof x->hdr, x->buf, x->bytes);
    /* With the bytes, the only request; alone, after the pieces' (post_net). */
    occlResult_t res = send_opening(comm, x, msg, len, &x->req[with_bytes ? 0 : x->npieces]);
    if (res != occlSuccess) {
        free(msg);
        return res;
    }
    x->opening = msg;
    if (!with_bytes) {
        x->with_hdr = true;
        return occlSuccess;
    }
    occl_count(&comm->net_headers_inline, 1);
    x->nreq = 1;
    x->next_post = x->npieces = 1;
    x->state = XFER_WAIT;
    return occlSuccess;
}

static occlResult_t start(occlComm_t comm, occl_xfer *x)
{
    occl_peer *p = &comm->peers[x->peer];
    x->nreq = 0;
    x->mapped = NULL;
    if (x->kind == OCCL_XFER_SEND) {
        x->seq = ++p->sent;
        if (same_node(comm, x->peer)) {
            /* The pair's mailbox holds one transfer: it is posted once the
             * previous one to this peer was consumed (see post_send). */
            if (x->bytes && or_mem_export(x->buf, x->bytes, &x->ref) != orSuccess)
                return occl_fail(occlInvalidArgument, "send buffer %p (%zu bytes) is not device "
                                                      "memory of this rank", x->buf, x->bytes);
            x->state = XFER_START;
            return occlSuccess;
        }
    } else {
        x->seq = ++p->received;
        if (same_node(comm, x->peer)) {
            if (comm->check_calls && x->p2p) { /* for a peer that may wait for us */
                occl_slot *a = ack_slot(comm->ctrl, comm->nranks, x->peer);
                a->fp = occl_fp_carried(comm, x->fp); /* prev: the collective it follows */
                atomic_store_explicit(&a->wait_seq, x->seq, memory_order_release);
            }
            x->state = XFER_WAIT;
            return occlSuccess;
        }
    }
    /* Over the network, in pieces sent in order under one tag: MPI keeps
     * them in order, so piece k matches piece k. */
    x->piece = piece_of(x->bytes);
    x->npieces = x->bytes ? (int)((x->bytes + x->piece - 1) / x->piece) : 1;
    if (x->npieces > OCCL_NET_MAX_PIECES)
        return occl_fail(occlInvalidArgument, "transfer of %zu bytes is too long", x->bytes);
    x->next_post = x->next_done = 0;
    x->with_hdr = false;
    if (comm->check_calls && x->kind == OCCL_XFER_SEND)
        p->last_sent = *x->fp; /* for a peer that says it waits for this transfer */
    /* A call's first message each way is its header (a Send's, every time),
     * with the bytes when they are few (send_inline); the receiver posts no
     * byte before the header has matched its own. */
    if (comm->check_calls &&
        (!x->fp->seq || (x->kind == OCCL_XFER_SEND ? p->hdr_sent : p->hdr_received) != x->fp->seq)) {
        if (x->kind == OCCL_XFER_RECV) {
            x->state = XFER_HEADER;
            return occlSuccess;
        }
        /* Synchronous: the transfer ends only once the peer's receive has
         * taken the header, so a Send across nodes waits for its Recv as one
         * within a node does, and a call that met another is never left
         * looking finished on this side alone. Unless the call receives
         * from the peer too (eager): that receive's header check stands for
         * it. */
        x->hdr = occl_fp_carried(comm, x->fp);
        p->hdr_sent = x->fp->seq;
        occl_count(&comm->net_headers, 1);
        if (!x->eager)
            occl_count(&comm->net_headers_sync, 1);
        if (x->bytes <= OCCL_NET_INLINE)
            return send_header(comm, x, true);
        occlResult_t res = send_header(comm, x, false);
        if (res != occlSuccess)
            return res;
    }
    return post_net(comm, x);
}

/* Post a network transfer's pieces (a reducing receive: the first ones). */
static occlResult_t post_net(occlComm_t comm, occl_xfer *x)
{
    occl_peer *p = &comm->peers[x->peer];
    if (x->kind == OCCL_XFER_RECV && x->reduce && x->bytes) {
        int depth = x->npieces < OCCL_NET_DEPTH ? x->npieces : OCCL_NET_DEPTH;
        x->staging = occl_staging_take(comm, (size_t)depth * x->piece);
        if (!x->staging)
            return occl_fail(occlSystemError, "out of memory for %zu bytes",
                             (size_t)depth * x->piece);
        for (int k = 0; k < depth; k++) {
            occlResult_t res = post_piece(comm, x, k);
            if (res != occlSuccess)
                return res;
            x->nreq++;
        }
        x->state = XFER_WAIT;
        return occlSuccess;
    }
    int tag = x->kind == OCCL_XFER_SEND ? tag_of(comm, comm->rank, x->peer)
                                        : tag_of(comm, x->peer, comm->rank);
    for (int k = 0; k < x->npieces; k++) {
        char *at = (char *)x->buf + (size_t)k * x->piece;
        int len = (int)(x->bytes ? piece_len(x, k) : 0);
        int rc = x->kind == OCCL_XFER_SEND
                     ? MPI_Isend(at, len, MPI_BYTE, p->world_rank, tag, net_comm(comm, x), &x->req[k])
                     : MPI_Irecv(at, len, MPI_BYTE, p->world_rank, tag, net_comm(comm, x), &x->req[k]);
        /* MPI refuses a transfer when its connection to the peer has failed
         * (the peer exited, or the network): as a failed MPI_Test. */
        if (rc != MPI_SUCCESS)
            return occl_fail(occlRemoteError, "MPI_%s rank %d failed",
                             x->kind == OCCL_XFER_SEND ? "Isend to" : "Irecv from", x->peer);
        x->nreq++;
    }
    x->nreq += x->with_hdr; /* last in req[] */
    x->next_post = x->npieces;
    x->state = XFER_WAIT;
    return occlSuccess;
}

/* Take a probed message of `bytes` bytes and drop it. */
static void discard(MPI_Message *msg, int bytes)
{
    char *sink = malloc(bytes > 0 ? (size_t)bytes : 1);
    MPI_Mrecv(sink, sink ? bytes : 0, MPI_BYTE, msg, MPI_STATUS_IGNORE);
    free(sink);
}

/* Drop the next message from source with tag in mc, if one has come. */
static bool discard_next(int source, int tag, MPI_Comm mc)
{
    int flag = 0, bytes = 0;
    MPI_Message msg;
    MPI_Status st;
    if (MPI_Improbe(source, tag, mc, &flag, &msg, &st) != MPI_SUCCESS || !flag)
        return false;
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    discard(&msg, bytes);
    return true;
}

/* A network receive waiting for its call's header: take it when it has
 * come, compare, then post the receive of the bytes. */
static int progress_header(occlComm_t comm, occl_xfer *x, occlResult_t *err)
{
    occl_peer *p = &comm->peers[x->peer];
    int flag = 0, bytes = 0;
    MPI_Message msg;
    MPI_Status st;
    if (MPI_Improbe(p->world_rank, tag_of(comm, x->peer, comm->rank), net_comm(comm, x), &flag, &msg,
                    &st) != MPI_SUCCESS) {
        *err = occl_fail(occlRemoteError, "MPI_Improbe for rank %d failed", x->peer);
        return NO_MOVE;
    }
    if (!flag)
        return NO_MOVE;
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    if (bytes < (int)sizeof x->hdr || (size_t)bytes > sizeof x->hdr + OCCL_NET_INLINE) {
        /* Every call's first message to a peer is a header, alone or with
         * its bytes (OCCL_CHECK_CALLS is alike on every rank), so this is
         * what a failed call of an earlier communicator with these tags left
         * behind: dropped. */
        discard(&msg, bytes);
        OCCL_INFO("rank %d: dropped %d stale bytes from rank %d", comm->rank, bytes, x->peer);
        return MOVED;
    }
    _Alignas(64) unsigned char in[sizeof x->hdr + OCCL_NET_INLINE];
    if (MPI_Mrecv(in, bytes, MPI_BYTE, &msg, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        *err = occl_fail(occlRemoteError, "MPI transfer with rank %d failed", x->peer);
        return NO_MOVE;
    }
    memcpy(&x->hdr, in, sizeof x->hdr);
    if (x->hdr.cur.comm_id != comm->id) { /* likewise, a header */
        OCCL_INFO("rank %d: dropped a stale header from rank %d", comm->rank, x->peer);
        return MOVED;
    }
    if (!occl_fp_match(x->fp, &x->hdr.cur)) {
        *err = occl_fp_mismatch(comm, x->peer, &x->hdr.cur, &x->hdr.prev, x->fp);
        return NO_MOVE;
    }
    /* Matched calls agree on the bytes, so on whether they came with the
     * header (send_inline). */
    size_t with = (size_t)bytes - sizeof x->hdr, expect = x->bytes <= OCCL_NET_INLINE ? x->bytes : 0;
    if (with != expect) {
        *err = occl_fail(occlInvalidUsage, "rank %d sent %zu bytes with its header where rank %d "
                                           "expects %zu: mismatched calls", x->peer, with, comm->rank, expect);
        return NO_MOVE;
    }
    if (x->fp->seq)
        p->hdr_received = x->fp->seq;
    if (x->bytes > OCCL_NET_INLINE) {
        *err = post_net(comm, x);
        return MOVED;
    }
    deliver_at(x, 0, in + sizeof x->hdr, x->bytes);
    x->state = XFER_DONE;
    return FINISHED;
}

/* Post an intra-node send once the pair's mailbox is free. */
static bool post_send(occlComm_t comm, occl_xfer *x)
{
    occl_peer *p = &comm->peers[x->peer];
    occl_slot *ack = ack_slot(p->ctrl, comm->nranks, comm->rank);
    if (atomic_load_explicit(&ack->seq, memory_order_acquire) < x->seq - 1)
        return false;
    occl_slot *s = out_slot(comm->ctrl, x->peer);
    s->ref = x->ref;
    s->bytes = x->bytes;
    s->p2p = x->p2p;
    if (comm->check_calls)
        s->fp = occl_fp_carried(comm, x->fp);
    atomic_store_explicit(&s->seq, x->seq, memory_order_release);
    occl_ring_bell(p->ctrl);
    x->state = XFER_WAIT;
    return true;
}

/* Tell the sender of x that its bytes are no longer needed. */
static void acknowledge(occlComm_t comm, const occl_xfer *x)
{
    atomic_store_explicit(&ack_slot(comm->ctrl, comm->nranks, x->peer)->seq, x->seq,
                          memory_order_release);
    occl_ring_bell(comm->peers[x->peer].ctrl);
}

/* A network transfer: test its outstanding pieces in order; a reducing
 * receive reduces each arrived piece and posts the one OCCL_NET_DEPTH
 * further, so the network fills the next pieces while this one reduces. */
static int progress_net(occlComm_t comm, occl_xfer *x, occlResult_t *err)
{
    bool staged = x->staging != NULL;
    int moved = NO_MOVE;
    if (!staged) {
        int done = 0;
        MPI_Status st[OCCL_NET_MAX_PIECES + 1];
        if (MPI_Testall(x->npieces + x->with_hdr, x->req, &done, st) != MPI_SUCCESS) {
            *err = occl_fail(occlRemoteError, "MPI transfer with rank %d failed", x->peer);
            return NO_MOVE;
        }
        if (!done)
            return NO_MOVE;
        free(x->opening);
        x->opening = NULL;
        x->nreq = 0;
        x->state = XFER_DONE;
        return FINISHED;
    }
    while (x->next_done < x->npieces) {
        int k = x->next_done, done = 0;
        MPI_Request *req = &x->req[k % OCCL_NET_DEPTH];
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            *err = occl_fail(occlRemoteError, "MPI transfer with rank %d failed", x->peer);
            return NO_MOVE;
        }
        if (!done)
            break;
        x->nreq--;
        deliver_at(x, (size_t)k * x->piece,
                   (char *)x->staging + (size_t)(k % OCCL_NET_DEPTH) * x->piece, piece_len(x, k));
        x->next_done = k + 1;
        moved = MOVED;
        if (x->next_post < x->npieces) {
            if ((*err = post_piece(comm, x, x->next_post)) != occlSuccess)
                return NO_MOVE;
            x->nreq++;
        }
    }
    if (x->next_done < x->npieces)
        return moved;
    occl_staging_give(comm, x->staging);
    x->staging = NULL;
    x->state = XFER_DONE;
    return FINISHED;
}

/* One attempt to move x forward. */
static int progress(occlComm_t comm, occl_xfer *x, occlResult_t *err)
{
    occl_peer *p = &comm->peers[x->peer];
    if (!same_node(comm, x->peer))
        return progress_net(comm, x, err);
    if (x->kind == OCCL_XFER_SEND) {
        occl_slot *ack = ack_slot(p->ctrl, comm->nranks, comm->rank);
        if (atomic_load_explicit(&ack->seq, memory_order_acquire) < x->seq)
            return NO_MOVE;
        x->state = XFER_DONE;
        return FINISHED;
    }
    occl_slot *in = out_slot(p->ctrl, comm->rank);
    if (atomic_load_explicit(&in->seq, memory_order_acquire) < x->seq)
        return NO_MOVE;
    if (comm->check_calls && !occl_fp_match(x->fp, &in->fp.cur)) {
        *err = occl_fp_mismatch(comm, x->peer, &in->fp.cur, &in->fp.prev, x->fp);
        return NO_MOVE;
    }
    if (in->bytes != x->bytes) {
        *err = occl_fail(occlInvalidUsage, "rank %d sent %llu bytes where rank %d expects %zu: "
                                           "mismatched calls", x->peer,
                         (unsigned long long)in->bytes, comm->rank, x->bytes);
        return NO_MOVE;
    }
    if (x->bytes) {
        const void *src = or_mem_import(&in->ref);
        if (!src) {
            *err = occl_fail(occlInternalError, "cannot map rank %d's memory", x->peer);
            return NO_MOVE;
        }
        if (x->hold) {
            x->mapped = src; /* read by the caller; acknowledged at release */
            if (x->early_ack)
                acknowledge(comm, x);
            x->state = XFER_DONE;
            return FINISHED;
        }
        deliver_at(x, 0, src, x->bytes);
    }
    acknowledge(comm, x);
    x->state = XFER_DONE;
    return FINISHED;
}

void occl_xfer_release(occlComm_t comm, occl_xfer *x)
{
    if (!(x->hold && x->early_ack)) /* else acknowledged when mapped */
        acknowledge(comm, x);
    x->mapped = NULL;
}

/* Sends given up before MPI completed them, with the memory they read. MPI
 * may still read it: a send cannot be taken back once posted (UCX queues
 * one for a connection not yet up, and packs it when the connection comes),
 * and MPI_Request_free leaves it running. So that memory is freed only once
 * its requests complete, looked at whenever a transfer is cancelled or a
 * communicator freed; what is still open at exit stays reachable from
 * here, not leaked. */
typedef struct occl_orphan {
    void *mem;
    struct occl_orphan *next;
    int n;
    MPI_Request req[];
} occl_orphan;
static pthread_mutex_t orphans_lock = PTHREAD_MUTEX_INITIALIZER;
static occl_orphan *orphans;

/* Test o's requests; whether all have completed. */
static bool orphan_done(occl_orphan *o)
{
    bool all = true;
    for (int k = 0; k < o->n; k++) {
        int done = 0;
        if (o->req[k] != MPI_REQUEST_NULL &&
            (MPI_Test(&o->req[k], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done))
            all = false;
    }
    return all;
}

int occl_net_orphans_reap(void)
{
    int finalized = 0, left = 0;
    MPI_Finalized(&finalized);
    pthread_mutex_lock(&orphans_lock);
    for (occl_orphan **at = &orphans; *at;) {
        occl_orphan *o = *at;
        if (!finalized && orphan_done(o)) {
            *at = o->next;
            free(o->mem);
            free(o);
            continue;
        }
        left++;
        at = &o->next;
    }
    pthread_mutex_unlock(&orphans_lock);
    return left;
}

void occl_net_orphan(MPI_Request *reqs, int n, void *mem)
{
    int open = 0;
    for (int k = 0; k < n; k++) {
        int done = 0;
        if (reqs[k] != MPI_REQUEST_NULL &&
            (MPI_Test(&reqs[k], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done))
            open++;
    }
    if (!open) {
        free(mem);
        return;
    }
    occl_orphan *o = malloc(sizeof *o + (size_t)open * sizeof *o->req);
    if (o) {
        *o = (occl_orphan){mem, NULL, 0};
        for (int k = 0; k < n; k++)
            if (reqs[k] != MPI_REQUEST_NULL)
                o->req[o->n++] = reqs[k];
    }
    for (int k = 0; k < n; k++) {
        /* Kept by nobody without o: leaking mem beats MPI reading freed memory. */
        if (!o && reqs[k] != MPI_REQUEST_NULL)
            MPI_Request_free(&reqs[k]);
        reqs[k] = MPI_REQUEST_NULL;
    }
    if (!o)
        return;
    pthread_mutex_lock(&orphans_lock);
    o->next = orphans;
    orphans = o;
    pthread_mutex_unlock(&orphans_lock);
    occl_net_orphans_reap();
}

static void cancel(occlComm_t comm, occl_xfer *x)
{
    if (x->nreq) {
        /* Outstanding: a staged receive's pieces not yet reduced, or every
         * piece posted of another transfer (the header alone last). */
        int first = x->staging ? x->next_done : 0;
        int last = x->staging ? x->next_post : x->nreq;
        int opening = !x->opening ? -1 : x->with_hdr ? x->npieces : 0;
        for (int k = first; k < last; k++) {
            MPI_Request *req = &x->req[x->staging ? k % OCCL_NET_DEPTH : k];
            if (*req == MPI_REQUEST_NULL)
                continue;
            int done = 0;
            if (MPI_Test(req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done)
                continue;
            MPI_Cancel(req);
            if (k == opening) {
                occl_net_orphan(req, 1, x->opening);
                x->opening = NULL;
            } else {
                MPI_Request_free(req);
            }
        }
    }
    free(x->opening); /* its send completed */
    x->opening = NULL;
    x->nreq = 0;
    if (x->staging)
        occl_staging_give(comm, x->staging);
    x->staging = NULL;
}

/* Nothing moved for w->looks looks in a row. Peers may share our core:
 * spin briefly, yield, then sleep until a peer rings the bell read before
 * the last look (network traffic is polled every 50 us; with fingerprints
 * on, a wait looks at its peers' calls every 10 ms, every millisecond in a
 * communicator spanning nodes). A wait within the node yields a few looks:
 * its peers ring when they move. A wait for the network yields for
 * OCCL_NET_YIELD_US: nobody rings for a message, a peer on another host
 * answers within tens of microseconds once it has a core, and a nap that
 * ends 50 us later than the answer would make a small call's time the
 * nap's. */
enum { IDLE_SPIN = OCCL_IDLE_SPIN, IDLE_SLEEP = OCCL_IDLE_SLEEP };
bool occl_idle_sleeping(const occl_idle *w, bool network)
{
    return w->looks >= IDLE_SLEEP && (!network || or_now_ns() - w->since >= OCCL_NET_YIELD_US * 1000ull);
}

void occl_idle_wait(occlComm_t comm, occl_idle *w, uint32_t bell, bool network, uint64_t deadline)
{
    if (++w->looks < IDLE_SPIN) {
        or_cpu_relax();
        return;
    }
    if (w->looks == IDLE_SPIN)
        w->since = or_now_ns();
    if (!occl_idle_sleeping(w, network)) {
        sched_yield();
        return;
    }
    uint64_t now = or_now_ns();
    uint64_t nap = network ? 50000 : (deadline > now ? deadline - now : 0);
    uint64_t cap = !comm->check_calls ? 100000000u : comm->network ? 1000000u : 10000000u;
    sleep_on_bell(comm->ctrl, bell, nap < cap ? nap : cap);
}

/* A collective's network send may go without waiting for the peer to take
 * its header when the same set also receives from that peer: the check of
 * the peer's header on this side ends the call with an error if the calls
 * differ, as a synchronous send would (see start). */
static void mark_eager(occlComm_t comm, occl_xfer *x, int n)
{
    for (int i = 0; i < n; i++) {
        x[i].eager = false;
        if (!comm->check_calls || x[i].kind != OCCL_XFER_SEND || x[i].p2p || !x[i].fp->seq ||
            x[i].state != XFER_START || same_node(comm, x[i].peer))
            continue;
        for (int j = 0; j < n && !x[i].eager; j++)
            x[i].eager = x[j].kind == OCCL_XFER_RECV && x[j].peer == x[i].peer && !x[j].resume &&
                         x[j].fp->seq == x[i].fp->seq;
    }
}

/* The set failed: cancel what it has open. */
static occlResult_t xfers_fail(occlComm_t comm, occl_xfer_set *set, occlResult_t err)
{
    for (int i = 0; i < set->n; i++)
        if (set->x[i].state != XFER_QUEUED)
            cancel(comm, &set->x[i]);
    free(set->before);
    set->before = NULL;
    return err;
}

occlResult_t occl_xfers_begin(occlComm_t comm, occl_xfer_set *set, occl_xfer *x, int n)
{
    occlResult_t err = occlSuccess;
    /* A network receive that reduces posts its later pieces as it goes, and
     * MPI matches a peer's messages (one tag per pair) in the order receives
     * are posted: a later receive from that peer is queued until the one
     * before it has posted all its pieces. Both ends list a pair's transfers
     * in the same order, so the messages meet their receives. */
    *set = (occl_xfer_set){x, n, n, NULL, n > 0 && x[0].p2p, 0, 0, {0}};
    if (comm->noticed) /* the communicator's calls were found mismatched */
        err = occl_notice_check(comm, set->p2p, false);
    for (int i = 0; i < n && err == occlSuccess; i++) {
        if (!x[i].fp)
            x[i].fp = &comm->fp;
        if (x[i].resume) { /* posted by an earlier run: only its end is left */
            x[i].post_only = false;
            x[i].state = XFER_WAIT;
            continue;
        }
        x[i].state = XFER_START;
        if (x[i].kind != OCCL_XFER_RECV || same_node(comm, x[i].peer))
            continue;
        for (int j = i - 1; j >= 0; j--)
            if (x[j].kind == OCCL_XFER_RECV && x[j].peer == x[i].peer) {
                if (!set->before && !(set->before = malloc((size_t)n * sizeof *set->before)))
                    err = occl_fail(occlSystemError, "out of memory");
                else
                    set->before[i] = j;
                x[i].state = XFER_QUEUED;
                break;
            }
    }
    if (err != occlSuccess) { /* the loop above has not set every fp: nothing started */
        free(set->before);
        set->before = NULL;
        return err;
    }
    mark_eager(comm, x, n);
    for (int i = 0; i < n && err == occlSuccess; i++)
        if (x[i].state == XFER_START)
            err = start(comm, &x[i]);
    set->deadline = occl_deadline();
    return err == occlSuccess ? occlSuccess : xfers_fail(comm, set, err);
}

occlResult_t occl_xfers_wait(occlComm_t comm, occl_xfer_set *set, uint64_t give_up_ns)
{
    occlResult_t err = occlSuccess;
    occl_xfer *x = set->x;
    int n = set->n;
    occl_idle *idle = &set->idle;
    while (err == occlSuccess && set->left > 0) {
        bool moved = false;
        /* Read the bell before looking, so a ring after the look wakes us. */
        uint32_t bell = atomic_load(&comm->ctrl->doorbell);
        for (int i = 0; i < n && err == occlSuccess; i++) {
            if (x[i].state == XFER_QUEUED) {
                const occl_xfer *b = &x[set->before[i]];
                if (b->state == XFER_QUEUED || b->state == XFER_HEADER ||
                    (b->state == XFER_WAIT && b->next_post < b->npieces))
                    continue;
                err = start(comm, &x[i]);
                moved = true;
            }
            if (x[i].state == XFER_START && post_send(comm, &x[i])) {
                moved = true;
                if (x[i].post_only) {
                    x[i].state = XFER_DONE;
                    set->left--;
                    continue;
                }
            }
            if (x[i].state == XFER_HEADER) {
                int m = progress_header(comm, &x[i], &err);
                moved |= m != NO_MOVE;
                set->left -= m == FINISHED;
            }
            if (x[i].state == XFER_WAIT) {
                int m = progress(comm, &x[i], &err);
                moved |= m != NO_MOVE;
                set->left -= m == FINISHED;
            }
        }
        if (err != occlSuccess || set->left == 0)
            break;
        if (atomic_load(&comm->async_error) != occlSuccess) {
            err = occl_fail(occlInvalidUsage, "the communicator was aborted");
            break;
        }
        if (moved) {
            idle->looks = 0;
            continue;
        }
        bool network = false;
        for (int i = 0; i < n; i++)
            network |= (x[i].state == XFER_WAIT && x[i].nreq > 0) || x[i].state == XFER_HEADER;
        if (idle->looks == 0)
            set->idle_since = or_now_ns();
        /* Waiting long enough to sleep: a peer may have found this call
         * mismatched, or be in another call and waiting for us too. */
        if (comm->check_calls && occl_idle_sleeping(idle, network)) {
            err = occl_notice_check(comm, set->p2p, true);
            uint64_t waited = or_now_ns() - set->idle_since;
            for (int i = 0; i < n && err == occlSuccess; i++)
                if (x[i].state != XFER_DONE)
                    err = occl_fp_check_wait(comm, &x[i], waited);
            if (err != occlSuccess)
                break;
        }
        /* Before a sleep: the thread that takes the rest over sleeps instead. */
        if (give_up_ns && occl_idle_sleeping(idle, network) && or_now_ns() >= give_up_ns)
            return occlInProgress;
        occl_idle_wait(comm, idle, bell, network, set->deadline);
        if ((idle->looks & 15) == 0 && or_now_ns() > set->deadline)
            err = occl_fail(occlTimeout, "rank %d: no progress with its peers within "
                                         "OCCL_TIMEOUT_MS", comm->rank);
    }
    if (err != occlSuccess)
        return xfers_fail(comm, set, err);
    free(set->before);
    set->before = NULL;
    return occlSuccess;
}

static occlResult_t xfers_run(occlComm_t comm, occl_xfer *x, int n)
{
    occl_xfer_set set;
    occlResult_t err = occl_xfers_begin(comm, &set, x, n);
    return err == occlSuccess ? occl_xfers_wait(comm, &set, 0) : err;
}

/* What x's next look would find moved: within the node its peer's post or
 * acknowledgement, across nodes a message or its requests' completion,
 * seen without taking them (occl_fp_check_wait looks once more so). */
bool occl_xfer_moved(occlComm_t comm, const occl_xfer *x)
{
    occl_peer *p = &comm->peers[x->peer];
    if (x->state == XFER_DONE)
        return true;
    if (x->state == XFER_QUEUED) /* moves after the receive before it */
        return false;
    if (same_node(comm, x->peer)) {
        if (x->kind == OCCL_XFER_RECV)
            return atomic_load_explicit(&out_slot(p->ctrl, comm->rank)->seq, memory_order_acquire) >= x->seq;
        uint64_t acked = atomic_load_explicit(&ack_slot(p->ctrl, comm->nranks, comm->rank)->seq,
                                              memory_order_acquire);
        return acked >= (x->state == XFER_START ? x->seq - 1 : x->seq); /* its mailbox free, or taken */
    }
    if (x->state == XFER_HEADER) {
        int flag = 0;
        MPI_Iprobe(p->world_rank, tag_of(comm, x->peer, comm->rank), net_comm(comm, x), &flag,
                   MPI_STATUS_IGNORE);
        return flag != 0;
    }
    /* A staged receive moves with its next piece; another transfer once
     * all its requests are complete (progress_net). */
    int first = x->staging ? x->next_done : 0;
    int last = x->staging ? x->next_done + 1 : x->npieces + x->with_hdr;
    for (int k = first; k < last; k++) {
        MPI_Request req = x->req[x->staging ? k % OCCL_NET_DEPTH : k];
        int flag = 0;
        if (req != MPI_REQUEST_NULL &&
            (MPI_Request_get_status(req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag))
            return false;
    }
    return true;
}

/* Whether peer j's next transfer to this rank is a posted point-to-point send. */
static bool p2p_arrived(occlComm_t comm, int j, occlResult_t *err)
{
    occl_peer *p = &comm->peers[j];
    if (same_node(comm, j)) {
        occl_slot *in = out_slot(p->ctrl, comm->rank);
        return atomic_load_explicit(&in->seq, memory_order_acquire) > p->received && in->p2p;
    }
    int flag = 0;
    if (MPI_Iprobe(p->world_rank, tag_of(comm, j, comm->rank), comm->job.p2p_comm, &flag,
                   MPI_STATUS_IGNORE) != MPI_SUCCESS)
        *err = occl_fail(occlRemoteError, "MPI_Iprobe for rank %d failed", j);
    return flag != 0;
}

occlResult_t occl_xfer_probe(occlComm_t comm, int *peer)
{
    int n = comm->nranks;
    bool network = false;
    for (int j = 0; j < n; j++)
        network |= j != comm->rank && !same_node(comm, j);
    uint64_t deadline = occl_deadline();
    occlResult_t err = occlSuccess;
    for (occl_idle idle = {0};;) {
        uint32_t bell = atomic_load(&comm->ctrl->doorbell);
        /* Round robin from the peer after the last one found: a rank that
         * sends all the time cannot starve the others. */
        for (int k = 1; k <= n && err == occlSuccess; k++) {
            int j = (comm->probe_from + k) % n;
            if (j != comm->rank && p2p_arrived(comm, j, &err)) {
                comm->probe_from = j;
                *peer = j;
                return occlSuccess;
            }
        }
        if (err != occlSuccess)
            return err;
        if (atomic_load(&comm->async_error) != occlSuccess)
            return occl_fail(occlInvalidUsage, "the communicator was aborted");
        if (comm->check_calls && occl_idle_sleeping(&idle, network) &&
            (err = occl_notice_check(comm, true, true)) != occlSuccess)
            return err;
        occl_idle_wait(comm, &idle, bell, network, deadline);
        if ((idle.looks & 15) == 0 && or_now_ns() > deadline)
            return occl_fail(occlTimeout, "rank %d: RecvAnySource: no rank sent to it within "
                                          "OCCL_TIMEOUT_MS", comm->rank);
    }
}

void occl_xfer_drain(occlComm_t comm)
{
    /* Notices and waits addressed to this rank, then transfers. */
    while (discard_next(MPI_ANY_SOURCE, occl_ctl_tag(comm, comm->rank), comm->job.ctl_comm))
        ;
    for (int j = 0; j < comm->nranks; j++) {
        if (j == comm->rank || same_node(comm, j))
            continue;
        int src = comm->peers[j].world_rank, tag = tag_of(comm, j, comm->rank);
        while (discard_next(src, tag, comm->job.comm) || discard_next(src, tag, comm->job.p2p_comm))
            ;
    }
}

occlResult_t occl_xfers_run(occlComm_t comm, occl_xfer *x, int n)
{
    if (comm->prof) /* an NCCL profiler plugin sees the transfers (profiler.c) */
        return occl_prof_xfers_run(comm, x, n, xfers_run);
    return xfers_run(comm, x, n);
}
