/*
 * collectives/transport.c - point-to-point transfers between the ranks of a
 * communicator, progressed in sets with a deadline.
 *
 * Same virtual node: the sender posts (sequence, where, how many bytes) in
 * its mailbox for the receiver and waits for the receiver's acknowledgement;
 * the receiver reads the bytes straight from the sender's device memory,
 * copying or reducing them into its own, then acknowledges. No MPI, no
 * intermediate buffer, and the sender's buffer is never reused early.
 * Other nodes: MPI_Isend / MPI_Irecv, tagged with the pair's sequence.
 */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "occl_internal.h"

enum { XFER_START, XFER_WAIT, XFER_DONE };

static occl_slot *out_slot(occl_ctrl *c, int peer) { return &c->slots[peer]; }
static occl_slot *ack_slot(occl_ctrl *c, int nranks, int peer) { return &c->slots[nranks + peer]; }

/* Wake a rank that may sleep waiting for us (shared, not process-private:
 * the rank may be in another process of the node). */
static void ring_bell(occl_ctrl *c)
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

static occlResult_t start(occlComm_t comm, occl_xfer *x)
{
    occl_peer *p = &comm->peers[x->peer];
    x->nreq = 0;
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
        } else {
            size_t pieces = x->bytes ? (x->bytes + OCCL_MPI_PIECE - 1) / OCCL_MPI_PIECE : 1;
            if (pieces > 16)
                return occl_fail(occlInvalidArgument, "transfer of %zu bytes is too long", x->bytes);
            for (size_t k = 0; k < pieces; k++) {
                size_t off = k * OCCL_MPI_PIECE, n = x->bytes - off < OCCL_MPI_PIECE ? x->bytes - off : OCCL_MPI_PIECE;
                if (MPI_Isend((char *)x->buf + off, (int)n, MPI_BYTE, p->world_rank,
                              tag_of(comm, comm->rank, x->peer), comm->job.comm, &x->req[x->nreq++]) != MPI_SUCCESS)
                    return occl_fail(occlSystemError, "MPI_Isend to rank %d failed", x->peer);
            }
        }
    } else {
        x->seq = ++p->received;
        if (!same_node(comm, x->peer)) {
            void *dst = x->buf;
            if (x->reduce && x->bytes) {
                x->staging = malloc(x->bytes);
                if (!x->staging)
                    return occl_fail(occlSystemError, "out of memory for %zu bytes", x->bytes);
                dst = x->staging;
            }
            size_t pieces = x->bytes ? (x->bytes + OCCL_MPI_PIECE - 1) / OCCL_MPI_PIECE : 1;
            if (pieces > 16)
                return occl_fail(occlInvalidArgument, "transfer of %zu bytes is too long", x->bytes);
            for (size_t k = 0; k < pieces; k++) {
                size_t off = k * OCCL_MPI_PIECE, n = x->bytes - off < OCCL_MPI_PIECE ? x->bytes - off : OCCL_MPI_PIECE;
                if (MPI_Irecv((char *)dst + off, (int)n, MPI_BYTE, p->world_rank,
                              tag_of(comm, x->peer, comm->rank), comm->job.comm, &x->req[x->nreq++]) != MPI_SUCCESS)
                    return occl_fail(occlSystemError, "MPI_Irecv from rank %d failed", x->peer);
            }
        }
    }
    x->state = XFER_WAIT;
    return occlSuccess;
}

static void deliver(occl_xfer *x, const void *src)
{
    if (!x->bytes)
        return;
    if (x->reduce) {
        size_t n = x->bytes / occl_type_size(x->type);
        occl_reduce2(x->buf, x->with ? x->with : x->buf, src, n, x->type, x->op);
    } else if (x->buf != src) {
        memcpy(x->buf, src, x->bytes);
    }
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
    atomic_store_explicit(&s->seq, x->seq, memory_order_release);
    ring_bell(p->ctrl);
    x->state = XFER_WAIT;
    return true;
}

/* One attempt to move x forward; true if it did. */
static bool progress(occlComm_t comm, occl_xfer *x, occlResult_t *err)
{
    occl_peer *p = &comm->peers[x->peer];
    if (x->nreq) { /* a network transfer */
        int done = 0;
        MPI_Status st[16];
        if (MPI_Testall(x->nreq, x->req, &done, st) != MPI_SUCCESS) {
            *err = occl_fail(occlRemoteError, "MPI transfer with rank %d failed", x->peer);
            return false;
        }
        if (!done)
            return false;
        if (x->kind == OCCL_XFER_RECV && x->staging) {
            deliver(x, x->staging);
            free(x->staging);
            x->staging = NULL;
        }
        x->nreq = 0;
        x->state = XFER_DONE;
        return true;
    }
    if (x->kind == OCCL_XFER_SEND) {
        if (!same_node(comm, x->peer)) { /* empty network send already completed */
            x->state = XFER_DONE;
            return true;
        }
        occl_slot *ack = ack_slot(p->ctrl, comm->nranks, comm->rank);
        if (atomic_load_explicit(&ack->seq, memory_order_acquire) < x->seq)
            return false;
        x->state = XFER_DONE;
        return true;
    }
    if (!same_node(comm, x->peer)) {
        x->state = XFER_DONE;
        return true;
    }
    occl_slot *in = out_slot(p->ctrl, comm->rank);
    if (atomic_load_explicit(&in->seq, memory_order_acquire) < x->seq)
        return false;
    if (in->bytes != x->bytes) {
        *err = occl_fail(occlInvalidUsage, "rank %d sent %llu bytes where rank %d expects %zu: "
                                           "mismatched calls", x->peer,
                         (unsigned long long)in->bytes, comm->rank, x->bytes);
        return false;
    }
    if (x->bytes) {
        const void *src = or_mem_import(&in->ref);
        if (!src) {
            *err = occl_fail(occlInternalError, "cannot map rank %d's memory", x->peer);
            return false;
        }
        deliver(x, src);
    }
    atomic_store_explicit(&ack_slot(comm->ctrl, comm->nranks, x->peer)->seq, x->seq,
                          memory_order_release);
    ring_bell(p->ctrl);
    x->state = XFER_DONE;
    return true;
}

static void cancel(occl_xfer *x)
{
    for (int i = 0; i < x->nreq; i++) {
        MPI_Cancel(&x->req[i]);
        MPI_Request_free(&x->req[i]);
    }
    x->nreq = 0;
    free(x->staging);
    x->staging = NULL;
}

occlResult_t occl_xfers_run(occlComm_t comm, occl_xfer *x, int n)
{
    occlResult_t err = occlSuccess;
    for (int i = 0; i < n && err == occlSuccess; i++)
        err = start(comm, &x[i]);
    uint64_t deadline = occl_deadline();
    unsigned idle = 0;
    for (int left = n; err == occlSuccess && left > 0;) {
        bool moved = false;
        /* Read the bell before looking, so a ring after the look wakes us. */
        uint32_t bell = atomic_load(&comm->ctrl->doorbell);
        for (int i = 0; i < n && err == occlSuccess; i++) {
            if (x[i].state == XFER_START && post_send(comm, &x[i]))
                moved = true;
            if (x[i].state == XFER_WAIT && progress(comm, &x[i], &err)) {
                moved = true;
                left--;
            }
        }
        if (err != occlSuccess || left == 0)
            break;
        if (atomic_load(&comm->async_error) != occlSuccess) {
            err = occl_fail(occlInvalidUsage, "the communicator was aborted");
            break;
        }
        if (moved) {
            idle = 0;
            continue;
        }
        /* Peers may share our core: spin briefly, yield a little, then sleep
         * until a peer rings (network transfers are polled every 50 us). */
        bool network = false;
        for (int i = 0; i < n; i++)
            network |= x[i].state == XFER_WAIT && x[i].nreq > 0;
        if (++idle < 64) {
            or_cpu_relax();
        } else if (idle < 80) {
            sched_yield();
        } else {
            uint64_t now = or_now_ns();
            uint64_t nap = network ? 50000 : (deadline > now ? deadline - now : 0);
            if (nap > 100000000u)
                nap = 100000000u;
            sleep_on_bell(comm->ctrl, bell, nap);
        }
        if ((idle & 15) == 0 && or_now_ns() > deadline)
            err = occl_fail(occlTimeout, "rank %d: no progress with its peers within "
                                         "OCCL_TIMEOUT_MS", comm->rank);
    }
    if (err != occlSuccess)
        for (int i = 0; i < n; i++)
            cancel(&x[i]);
    return err;
}
