/*
 * collectives/rma.c - one-sided calls on symmetric memory windows:
 * occlPutSignal, occlSignal and occlWaitSignal (NCCL 2.31's ncclPutSignal,
 * ncclSignal, ncclWaitSignal), run in stream order on the communicator's
 * thread like the collectives.
 *
 * A window is named across ranks by its ordinal on the communicator (the
 * n-th window registered: every rank registers its windows in the same
 * order, as NCCL's collective registration requires). Each rank publishes
 * its live windows, and a signal counter per (context, sender, index), in
 * its control block.
 *
 * Within a virtual node the putting rank writes straight into the peer's
 * window (device memory is mapped in every process of the node), then adds
 * one to the peer's counter for it (a release: the bytes are visible to
 * whoever sees the count) and rings the peer's doorbell.
 * Across nodes a put is an MPI message, as a point-to-point call's (in the
 * job's control communicator, under the pair's tag): a header and the
 * bytes, copied at the call so that the call ends without waiting for the
 * target (a ring of puts followed by waits cannot deadlock). The target
 * takes a peer's messages, in the order sent, when it waits for that peer's
 * signals: it writes the bytes into its window, then counts the signal.
 * WaitSignal waits, descriptor by descriptor, until the counter has grown by
 * opCnt past what earlier waits consumed, backing off as transfers do (spin,
 * yield, sleep on the doorbell; network peers polled every 50 us).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group.h"
#define OCCL_LOG_SUBSYS OCCL_SUBSYS_P2P
#include "occl_internal.h"

/* A published window: the ordinal + 1 (0: the entry is free) is written
 * last and cleared first, so a reader that finds the same ordinal before
 * and after reading ref and bytes has read a whole entry. */
typedef struct rma_win_entry {
    _Atomic uint64_t index;
    or_mem_ref ref;
    uint64_t bytes;
} rma_win_entry;

typedef struct rma_area {
    /* Windows registered so far: a window of a lower ordinal that is not
     * among wins[] was deregistered; one of this ordinal or higher is still
     * to come (registration exchanges nothing, unlike NCCL's collective one,
     * so a put may reach a peer that has not yet registered its window). */
    _Atomic uint64_t registered;
    rma_win_entry wins[OCCL_RMA_WINDOWS];
    /* Signals received, by (ctx, sender, sigIdx): a peer of the node adds
     * to its own; this rank adds those that came over the network. */
    _Atomic uint64_t signals[];
} rma_area;

/* The header of a put over the network; the bytes follow it. */
typedef struct rma_msg {
    uint64_t comm_id; /* traffic a failed communicator of these tags left is dropped */
    uint64_t win;     /* the target window's ordinal + 1; 0: a signal alone */
    uint64_t offset;
    uint64_t bytes;
    int32_t sig, ctx;
    int32_t signal; /* count a signal after the bytes (the last piece of a put) */
    int32_t pad;
} rma_msg;

/* A put's message not yet taken by MPI (its buffer is freed when it is). */
typedef struct rma_send {
    MPI_Request req;
    void *buf;
} rma_send;

struct occl_rma_state {
    uint64_t *consumed; /* by (ctx, sender, sigIdx): signals earlier waits took */
    rma_send *sends;
    int nsends, cap;
};

size_t occl_rma_area_offset(int nranks)
{
    return (occl_ll_area_offset(nranks) + occl_ll_area_bytes() + 63) & ~(size_t)63;
}

static size_t nsignals(int nranks) { return (size_t)OCCL_RMA_CONTEXTS * (size_t)nranks * OCCL_RMA_SIGNALS; }

size_t occl_rma_area_bytes(int nranks)
{
    return sizeof(rma_area) + nsignals(nranks) * sizeof(uint64_t);
}

static rma_area *area_of(occl_ctrl *c, int nranks)
{
    return (rma_area *)((unsigned char *)c + occl_rma_area_offset(nranks));
}

static size_t signal_at(occlComm_t comm, int ctx, int sender, int sig)
{
    return ((size_t)ctx * (size_t)comm->nranks + (size_t)sender) * OCCL_RMA_SIGNALS + (size_t)sig;
}

static bool same_node(occlComm_t comm, int peer) { return comm->peers[peer].ctrl != NULL; }

/* Puts travel as the point-to-point calls' messages do, but in the job's
 * control communicator, so that a Recv or occlRecvAnySource's probe never
 * takes one for a Send (MPICH's tags have no bit to spare for a kind: the
 * pair's tag fills 28). There notices use tags below 2^18, and a pair's tag
 * starts at 2^20 (communicators spanning processes have a tag slot >= 1). */
static int rma_tag(occlComm_t comm, int src, int dst)
{
    return comm->tag_base | src << 10 | dst;
}

bool occl_rma_publish(occlComm_t comm, uint64_t index, const or_mem_ref *ref, uint64_t bytes)
{
    rma_area *a = area_of(comm->ctrl, comm->nranks);
    for (int i = 0; i < OCCL_RMA_WINDOWS; i++) {
        rma_win_entry *e = &a->wins[i];
        if (atomic_load_explicit(&e->index, memory_order_relaxed))
            continue;
        e->ref = *ref;
        e->bytes = bytes;
        atomic_store_explicit(&e->index, index + 1, memory_order_release);
        atomic_store_explicit(&a->registered, index + 1, memory_order_release);
        return true;
    }
    return false;
}

void occl_rma_withdraw(occlComm_t comm, uint64_t index)
{
    rma_area *a = area_of(comm->ctrl, comm->nranks);
    for (int i = 0; i < OCCL_RMA_WINDOWS; i++)
        if (atomic_load_explicit(&a->wins[i].index, memory_order_relaxed) == index + 1)
            atomic_store_explicit(&a->wins[i].index, 0, memory_order_release);
}

/* Peer's window of ordinal index, as published in its control block. */
static bool peer_window(occl_ctrl *pc, int nranks, uint64_t index, or_mem_ref *ref, uint64_t *bytes)
{
    rma_area *a = area_of(pc, nranks);
    for (int i = 0; i < OCCL_RMA_WINDOWS; i++) {
        rma_win_entry *e = &a->wins[i];
        if (atomic_load_explicit(&e->index, memory_order_acquire) != index + 1)
            continue;
        *ref = e->ref;
        *bytes = e->bytes;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&e->index, memory_order_relaxed) == index + 1)
            return true;
    }
    return false;
}

void occl_call_release(occl_call *c)
{
    free(c->rma.descs);
    c->rma.descs = NULL;
}

/* ---- checks at the call ------------------------------------------------------- */

static occlResult_t check_sig_ctx(occlComm_t comm, const char *name, const char *what, int sig, int ctx)
{
    int nctx = comm->config.cfg.numRmaCtx;
    if (nctx <= 0)
        return occl_fail(occlInvalidArgument, "%s: one-sided calls are disabled on this communicator "
                                              "(its config's numRmaCtx is 0)", name);
    if (ctx < 0 || ctx >= OCCL_RMA_CONTEXTS || ctx >= nctx)
        return occl_fail(occlInvalidArgument, "%s: %sctx %d is not valid (must be 0, as in NCCL 2.31)",
                         name, what, ctx);
    if (sig < 0 || sig >= OCCL_RMA_SIGNALS)
        return occl_fail(occlInvalidArgument, "%s: %ssigIdx %d is not valid (must be 0, as in NCCL "
                                              "2.31)", name, what, sig);
    return occlSuccess;
}

occlResult_t occl_rma_check(occl_call *c)
{
    occlComm_t comm = c->comm;
    const char *name = occl_coll_name(c->coll);
    if (c->coll == OCCL_COLL_WAITSIGNAL) {
        int n = c->rma.ndesc;
        const occlWaitSignalDesc_t *d = c->rma.descs; /* the caller's, until copied below */
        c->rma.descs = NULL;
        if (n <= 0)
            return occl_fail(occlInvalidArgument, "WaitSignal: nDesc %d (must be at least 1)", n);
        if (!d)
            return occl_fail(occlInvalidArgument, "WaitSignal: signalDescs is NULL");
        for (int i = 0; i < n; i++) {
            char what[48];
            snprintf(what, sizeof what, "descriptor %d: ", i);
            if (d[i].opCnt <= 0)
                return occl_fail(occlInvalidArgument, "WaitSignal: descriptor %d: opCnt %d (must be "
                                                      "at least 1)", i, d[i].opCnt);
            if (d[i].peer < 0 || d[i].peer >= comm->nranks)
                return occl_fail(occlInvalidArgument, "WaitSignal: descriptor %d: peer %d is not in "
                                                      "[0, %d)", i, d[i].peer, comm->nranks);
            occlResult_t res = check_sig_ctx(comm, name, what, d[i].sigIdx, d[i].ctx);
            if (res != occlSuccess)
                return res;
        }
        c->rma.descs = malloc((size_t)n * sizeof *d);
        if (!c->rma.descs)
            return occl_fail(occlSystemError, "WaitSignal: out of memory");
        memcpy(c->rma.descs, d, (size_t)n * sizeof *d);
        return occlSuccess;
    }
    return check_sig_ctx(comm, name, "", c->rma.sig, c->rma.ctx);
}

/* PutSignal's window and range, at the call: the window must be one of
 * comm's, and the range within it (windows are symmetric: the peer's is as
 * large; a peer whose window is smaller fails the call when it runs). */
static occlResult_t check_window(occl_call *c, occlWindow_t win)
{
    size_t wbytes;
    if (!win)
        return occl_fail(occlInvalidArgument, "PutSignal: peerWin is NULL");
    if (!occl_comm_valid(c->comm))
        return occlSuccess; /* enqueue reports the communicator */
    if (!occl_window_find(c->comm, win, &c->rma.win, &wbytes))
        return occl_fail(occlInvalidUsage, "PutSignal: peerWin %p is not a window of this "
                                           "communicator (or was deregistered)", (void *)win);
    if ((unsigned)c->type >= occlNumTypes)
        return occlSuccess; /* enqueue reports the type */
    size_t es = occl_type_size(c->type), bytes = c->count * es;
    if (c->count && bytes / es != c->count)
        return occl_fail(occlInvalidArgument, "PutSignal: %zu elements overflow", c->count);
    if (c->rma.offset > wbytes || bytes > wbytes - c->rma.offset)
        return occl_fail(occlInvalidArgument, "PutSignal: %zu bytes at offset %zu run past the end of "
                                              "the window (%zu bytes)", bytes, c->rma.offset, wbytes);
    return occlSuccess;
}

/* ---- running -------------------------------------------------------------------- */

static occlResult_t state_of(occlComm_t comm, struct occl_rma_state **out)
{
    if (!comm->rma) {
        struct occl_rma_state *st = calloc(1, sizeof *st);
        if (st && !(st->consumed = calloc(nsignals(comm->nranks), sizeof *st->consumed))) {
            free(st);
            st = NULL;
        }
        if (!st)
            return occl_fail(occlSystemError, "out of memory");
        comm->rma = st;
    }
    *out = comm->rma;
    return occlSuccess;
}

/* Free the buffers of the puts MPI has taken. */
static void sends_progress(struct occl_rma_state *st)
{
    int kept = 0;
    for (int i = 0; i < st->nsends; i++) {
        int done = 0;
        MPI_Test(&st->sends[i].req, &done, MPI_STATUS_IGNORE);
        if (done)
            free(st->sends[i].buf);
        else
            st->sends[kept++] = st->sends[i];
    }
    st->nsends = kept;
}

/* Peer's window of ordinal index, once the peer has registered it. */
static occlResult_t await_window(occlComm_t comm, int peer, uint64_t index, or_mem_ref *ref,
                                 uint64_t *bytes)
{
    occl_ctrl *pc = comm->peers[peer].ctrl;
    rma_area *a = area_of(pc, comm->nranks);
    uint64_t deadline = occl_deadline();
    for (occl_idle idle = {0};;) {
        uint32_t bell = atomic_load(&comm->ctrl->doorbell);
        /* Read before the look: a window registered after it is found next time. */
        uint64_t registered = atomic_load_explicit(&a->registered, memory_order_acquire);
        if (peer_window(pc, comm->nranks, index, ref, bytes))
            return occlSuccess;
        if (registered > index)
            return occl_fail(occlInvalidUsage, "PutSignal: rank %d has no window #%llu (deregistered; "
                                               "windows must be registered and deregistered in the "
                                               "same order on every rank)",
                             peer, (unsigned long long)index);
        if (atomic_load(&comm->async_error) != occlSuccess)
            return occl_fail(occlInvalidUsage, "PutSignal: the communicator was aborted or revoked");
        occl_idle_wait(comm, &idle, bell, true, deadline); /* nobody rings for a registration */
        if ((idle.looks & 15) == 0 && or_now_ns() > deadline)
            return occl_fail(occlTimeout, "rank %d: PutSignal: rank %d did not register its window "
                                          "#%llu within OCCL_TIMEOUT_MS", comm->rank, peer,
                             (unsigned long long)index);
    }
}

static occlResult_t put_local(occlComm_t comm, const occl_call *c, size_t bytes)
{
    int peer = c->root;
    occl_ctrl *pc = comm->peers[peer].ctrl;
    if (c->coll == OCCL_COLL_PUTSIGNAL) {
        or_mem_ref ref;
        uint64_t wbytes = 0;
        occlResult_t res = await_window(comm, peer, c->rma.win, &ref, &wbytes);
        if (res != occlSuccess)
            return res;
        if (c->rma.offset > wbytes || bytes > wbytes - c->rma.offset)
            return occl_fail(occlInvalidUsage, "PutSignal: %zu bytes at offset %zu run past the end "
                                               "of rank %d's window #%llu (%llu bytes)", bytes,
                             c->rma.offset, peer, (unsigned long long)c->rma.win,
                             (unsigned long long)wbytes);
        if (bytes) {
            unsigned char *dst = or_mem_import(&ref);
            if (!dst)
                return occl_fail(occlInternalError, "cannot map rank %d's window", peer);
            memcpy(dst + c->rma.offset, c->sendbuff, bytes);
        }
    }
    rma_area *a = area_of(pc, comm->nranks);
    atomic_fetch_add_explicit(&a->signals[signal_at(comm, c->rma.ctx, comm->rank, c->rma.sig)], 1,
                              memory_order_release);
    occl_ring_bell(pc);
    return occlSuccess;
}

static occlResult_t put_net(occlComm_t comm, struct occl_rma_state *st, const occl_call *c, size_t bytes)
{
    int peer = c->root;
    size_t done = 0;
    do { /* pieces MPI counts can express; the last one carries the signal */
        size_t len = bytes - done;
        if (len > OCCL_MPI_PIECE - sizeof(rma_msg))
            len = OCCL_MPI_PIECE - sizeof(rma_msg);
        if (st->nsends == st->cap) {
            int cap = st->cap ? 2 * st->cap : 8;
            rma_send *grown = realloc(st->sends, (size_t)cap * sizeof *grown);
            if (!grown)
                return occl_fail(occlSystemError, "out of memory");
            st->sends = grown;
            st->cap = cap;
        }
        rma_msg *m = malloc(sizeof *m + len);
        if (!m)
            return occl_fail(occlSystemError, "%s: out of memory for %zu bytes", occl_coll_name(c->coll),
                             len);
        *m = (rma_msg){comm->id, c->coll == OCCL_COLL_PUTSIGNAL ? c->rma.win + 1 : 0,
                       c->rma.offset + done, len, c->rma.sig, c->rma.ctx, done + len == bytes, 0};
        if (len)
            memcpy(m + 1, (const unsigned char *)c->sendbuff + done, len);
        rma_send *s = &st->sends[st->nsends];
        if (MPI_Isend(m, (int)(sizeof *m + len), MPI_BYTE, comm->peers[peer].world_rank,
                      rma_tag(comm, comm->rank, peer), comm->job.ctl_comm, &s->req) != MPI_SUCCESS) {
            free(m);
            return occl_fail(occlRemoteError, "%s: MPI_Isend to rank %d failed", occl_coll_name(c->coll),
                             peer);
        }
        s->buf = m;
        st->nsends++;
        done += len;
    } while (done < bytes);
    return occlSuccess;
}

/* Take the next put from network peer j, if one has come: its bytes into
 * this rank's window, then its signal. */
static occlResult_t take_net(occlComm_t comm, int j, bool *moved)
{
    int flag = 0, count = 0;
    MPI_Message msg;
    MPI_Status status;
    if (MPI_Improbe(comm->peers[j].world_rank, rma_tag(comm, j, comm->rank), comm->job.ctl_comm, &flag,
                    &msg, &status) != MPI_SUCCESS)
        return occl_fail(occlRemoteError, "WaitSignal: MPI_Improbe for rank %d failed", j);
    if (!flag)
        return occlSuccess;
    *moved = true;
    MPI_Get_count(&status, MPI_BYTE, &count);
    rma_msg *m = malloc(count > 0 ? (size_t)count : 1);
    if (!m)
        return occl_fail(occlSystemError, "WaitSignal: out of memory for %d bytes", count);
    if (MPI_Mrecv(m, m ? count : 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        free(m);
        return occl_fail(occlRemoteError, "WaitSignal: MPI transfer with rank %d failed", j);
    }
    occlResult_t res = occlSuccess;
    if ((size_t)count < sizeof *m || m->comm_id != comm->id || m->bytes != (size_t)count - sizeof *m) {
        OCCL_INFO("rank %d: dropped %d stale bytes of one-sided traffic from rank %d", comm->rank,
                  count, j);
    } else {
        void *user = NULL;
        size_t wbytes = 0;
        if (m->win && !occl_window_by_index(comm, m->win - 1, &user, &wbytes))
            res = occl_fail(occlInvalidUsage, "WaitSignal: rank %d put into window #%llu, which this "
                                              "rank does not have (windows must be registered in the "
                                              "same order on every rank)", j,
                            (unsigned long long)(m->win - 1));
        else if (m->win && (m->offset > wbytes || m->bytes > wbytes - m->offset))
            res = occl_fail(occlInvalidUsage, "WaitSignal: rank %d put %llu bytes at offset %llu, past "
                                              "the end of this rank's window #%llu (%zu bytes)", j,
                            (unsigned long long)m->bytes, (unsigned long long)m->offset,
                            (unsigned long long)(m->win - 1), wbytes);
        else if (m->sig < 0 || m->sig >= OCCL_RMA_SIGNALS || m->ctx < 0 || m->ctx >= OCCL_RMA_CONTEXTS)
            res = occl_fail(occlInternalError, "WaitSignal: rank %d's put has sigIdx %d ctx %d", j,
                            m->sig, m->ctx);
        if (res == occlSuccess) {
            if (m->win && m->bytes)
                memcpy((unsigned char *)user + m->offset, m + 1, m->bytes);
            if (m->signal)
                atomic_fetch_add_explicit(&area_of(comm->ctrl, comm->nranks)
                                               ->signals[signal_at(comm, m->ctx, j, m->sig)],
                                          1, memory_order_release);
        }
    }
    free(m);
    return res;
}

static occlResult_t wait_signals(occlComm_t comm, struct occl_rma_state *st, const occl_call *c)
{
    rma_area *mine = area_of(comm->ctrl, comm->nranks);
    uint64_t deadline = occl_deadline();
    for (int d = 0; d < c->rma.ndesc; d++) {
        const occlWaitSignalDesc_t *w = &c->rma.descs[d];
        size_t k = signal_at(comm, w->ctx, w->peer, w->sigIdx);
        bool network = !same_node(comm, w->peer);
        for (occl_idle idle = {0};;) {
            uint32_t bell = atomic_load(&comm->ctrl->doorbell); /* before the look */
            uint64_t have = atomic_load_explicit(&mine->signals[k], memory_order_acquire) - st->consumed[k];
            if (have >= (uint64_t)w->opCnt) {
                st->consumed[k] += (uint64_t)w->opCnt;
                break;
            }
            bool moved = false;
            if (network) {
                occlResult_t res = take_net(comm, w->peer, &moved);
                if (res != occlSuccess)
                    return res;
            }
            if (st->nsends)
                sends_progress(st);
            if (moved) {
                idle.looks = 0;
                continue;
            }
            if (atomic_load(&comm->async_error) != occlSuccess)
                return occl_fail(occlInvalidUsage, "WaitSignal: the communicator was aborted or revoked");
            occl_idle_wait(comm, &idle, bell, network, deadline);
            if ((idle.looks & 15) == 0 && or_now_ns() > deadline)
                return occl_fail(occlTimeout, "rank %d: WaitSignal: %llu of %d signals from rank %d "
                                              "(sigIdx %d, ctx %d) came within OCCL_TIMEOUT_MS",
                                 comm->rank, (unsigned long long)have, w->opCnt, w->peer, w->sigIdx,
                                 w->ctx);
        }
    }
    return occlSuccess;
}

occlResult_t occl_rma_run(occl_call *c)
{
    occlComm_t comm = c->comm;
    struct occl_rma_state *st = NULL;
    occlResult_t res = state_of(comm, &st);
    if (res != occlSuccess)
        return res;
    if (st->nsends)
        sends_progress(st);
    if (c->coll == OCCL_COLL_WAITSIGNAL)
        return wait_signals(comm, st, c);
    size_t bytes = c->coll == OCCL_COLL_PUTSIGNAL ? c->count * occl_type_size(c->type) : 0;
    return same_node(comm, c->root) ? put_local(comm, c, bytes) : put_net(comm, st, c, bytes);
}

void occl_rma_release(occlComm_t comm)
{
    struct occl_rma_state *st = comm->rma;
    if (st) {
        sends_progress(st);
        /* Puts no peer took (it never waited for them): MPI may still move
         * them, so their buffers stay until it has. */
        for (int i = 0; i < st->nsends; i++)
            occl_net_orphan(&st->sends[i].req, 1, st->sends[i].buf);
        if (st->nsends)
            OCCL_INFO("rank %d: %d one-sided message%s not taken by the target at destroy",
                      comm->rank, st->nsends, st->nsends > 1 ? "s" : "");
        free(st->sends);
        free(st->consumed);
        free(st);
        comm->rma = NULL;
    }
    /* Puts to this rank that no wait took: dropped, so that a later
     * communicator with these tags does not meet them. */
    for (int j = 0; comm->network && j < comm->nranks; j++) {
        if (j == comm->rank || same_node(comm, j))
            continue;
        for (;;) {
            int flag = 0, count = 0;
            MPI_Message msg;
            MPI_Status status;
            if (MPI_Improbe(comm->peers[j].world_rank, rma_tag(comm, j, comm->rank), comm->job.ctl_comm,
                            &flag, &msg, &status) != MPI_SUCCESS || !flag)
                break;
            MPI_Get_count(&status, MPI_BYTE, &count);
            void *sink = malloc(count > 0 ? (size_t)count : 1);
            MPI_Mrecv(sink, sink ? count : 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
            free(sink);
        }
    }
}

/* ---- the calls -------------------------------------------------------------------- */

/* enqueue.c's path for every call; rma.c's checks run inside it. */
occlResult_t occl_enqueue_call(occl_call *c);

occlResult_t occlPutSignal(const void *localbuff, size_t count, occlDataType_t datatype, int peer,
                           occlWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, occlComm_t comm, orStream_t stream)
{
    occl_call c = {OCCL_COLL_PUTSIGNAL, comm, localbuff, NULL, count, datatype, {0}, false, NULL, peer,
                   stream, -1, NULL, NULL, {0, peerWinOffset, sigIdx, ctx, 0, NULL}, {0}};
    occlResult_t res = occlSuccess;
    if (flags)
        res = occl_fail(occlInvalidArgument, "PutSignal: flags 0x%x are not valid (must be 0, as in "
                                             "NCCL 2.31)", flags);
    if (res == occlSuccess)
        res = check_window(&c, peerWin);
    if (res != occlSuccess)
        return occl_group_fail(res);
    return occl_enqueue_call(&c);
}

occlResult_t occlSignal(int peer, int sigIdx, int ctx, unsigned int flags, occlComm_t comm,
                        orStream_t stream)
{
    occl_call c = {OCCL_COLL_SIGNAL, comm, NULL, NULL, 0, occlInt8, {0}, false, NULL, peer,
                   stream, -1, NULL, NULL, {0, 0, sigIdx, ctx, 0, NULL}, {0}};
    if (flags)
        return occl_group_fail(occl_fail(occlInvalidArgument, "Signal: flags 0x%x are not valid (must "
                                                              "be 0, as in NCCL 2.31)", flags));
    return occl_enqueue_call(&c);
}

occlResult_t occlWaitSignal(int nDesc, occlWaitSignalDesc_t *signalDescs, occlComm_t comm,
                            orStream_t stream)
{
    occl_call c = {OCCL_COLL_WAITSIGNAL, comm, NULL, NULL, 0, occlInt8, {0}, false, NULL, 0,
                   stream, -1, NULL, NULL, {0, 0, 0, 0, nDesc, signalDescs}, {0}};
    return occl_enqueue_call(&c);
}
