/*
 * src/stream.c - streams: in-order queues of ops, run by the device's workers.
 *
 * A stream is "ready" when its head op can start: it sits on its device's
 * ready list (one FIFO per priority) until a worker takes it. While the head
 * executes the stream is busy, so its ops never overlap. Event waits never
 * occupy a worker: they are resolved when the stream reaches them, or the
 * stream parks on the event until the record completes.
 *
 * A small write into another node's memory is posted: the worker copies its
 * bytes into the request message, hands that to the proxy and completes the
 * op, without waiting for the owner's acknowledgement.
 * Later posted writes of the stream start at once (the owner applies one
 * rank's writes in the order sent, proxy.c); any other op, an event record
 * and every synchronization wait until the stream's posted writes are
 * acknowledged, so what follows a write in stream order still finds it in
 * place, and a refused write is reported as before.
 */
#include "internal.h"
#include "fault.h"
#include "proxy.h"
#include "runtime_ext.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void or_stream_init(or_stream *s, or_device *dev, int priority, unsigned flags)
{
    memset(s, 0, sizeof *s);
    s->dev = dev;
    s->priority = priority;
    s->flags = flags;
    atomic_init(&s->wake_seq, UINT64_MAX);
    or_lock_acquire(&dev->lock);
    s->next = dev->streams;
    if (dev->streams)
        dev->streams->prev = s;
    dev->streams = s;
    or_lock_release(&dev->lock);
}

orError_t or_stream_resolve(orStream_t handle, or_stream **out)
{
    if (!handle) {
        *out = &or_current_device()->default_stream;
        return orSuccess;
    }
    or_stream *s = or_handle_lookup(OR_HANDLE_STREAM, (uintptr_t)handle);
    if (!s)
        return orErrorInvalidResourceHandle;
    *out = s;
    return orSuccess;
}

or_op *or_op_new(or_op_kind kind, size_t payload)
{
    or_op *op = malloc(sizeof *op + payload);
    if (!op)
        return NULL;
    memset(op, 0, sizeof *op);
    op->kind = kind;
    atomic_init(&op->refs, 1);
    return op;
}

void or_op_release(or_op *op)
{
    if (atomic_fetch_sub(&op->refs, 1) != 1)
        return;
    if (op->kind == OR_OP_EVENT_RECORD || op->kind == OR_OP_EVENT_WAIT)
        or_event_release(op->u.event.event);
    free(op);
}

/* ---- scheduling (all under dev->lock) ------------------------------------ */

static int priority_level(const or_stream *s) { return OR_PRIORITY_LEAST - s->priority; }

static void mark_done_locked(or_stream *s, uint64_t seq)
{
    atomic_store(&s->done_seq, seq); /* sequentially consistent: see want_wake */
    if (seq >= atomic_load(&s->wake_seq)) {
        atomic_store(&s->wake_seq, UINT64_MAX); /* the woken re-register what they still need */
        or_notifier_signal(&s->done);
    }
}

static void pop_head_locked(or_stream *s, or_op *op)
{
    s->head = op->next;
    if (!s->head)
        s->tail = NULL;
    mark_done_locked(s, op->seq);
}

/* A waiter asks to be woken when done_seq reaches seq; it registers before
 * each look at done_seq and pop_head_locked stores done_seq before it reads
 * wake_seq, so one of the two sees the other. */
static void want_wake(or_stream *s, uint64_t seq)
{
    uint64_t cur = atomic_load(&s->wake_seq);
    while (seq < cur && !atomic_compare_exchange_weak(&s->wake_seq, &cur, seq))
        ;
    /* An inline task ends without the lock: told, it takes the lock and
     * wakes. Its end stores done_seq, then leaves OR_BUSY_INLINE; the
     * waiter looks at done_seq after this: one of the two sees the other. */
    uint32_t inl = OR_BUSY_INLINE;
    atomic_compare_exchange_strong(&s->busy, &inl, OR_BUSY_INLINE_WANTED);
}

/* Under dev->lock: whether the head executes. An inline task's end does
 * not take the lock; one found running is told that something came, so
 * that its end does (or_stream_inline_end). Acquire: what an end without
 * the lock did is seen by the holder that finds the stream idle. */
static bool busy_locked(or_stream *s)
{
    uint32_t b = atomic_load_explicit(&s->busy, memory_order_acquire);
    while (b == OR_BUSY_INLINE && !atomic_compare_exchange_weak(&s->busy, &b, OR_BUSY_INLINE_WANTED))
        ;
    return b != OR_IDLE;
}

static void set_busy(or_stream *s, enum or_busy b)
{
    atomic_store_explicit(&s->busy, b, memory_order_release);
}

/* A write that may be posted: the proxy sends its bytes with the request. */
static bool posts_write(const or_op *op)
{
    if (op->kind != OR_OP_REMOTE_COPY)
        return false;
    const or_proxy_req *req = (const or_proxy_req *)op->payload;
    return req->kind == OR_PROXY_PUT && req->length <= OR_PROXY_INLINE_PUT;
}

/* Resolve satisfied event waits at the head, then queue the stream if its
 * head can run. Returns true if the stream was queued. */
static bool stream_advance_locked(or_stream *s)
{
    while (s->head && s->head->kind == OR_OP_EVENT_WAIT) {
        or_op *op = s->head;
        if (!or_event_check_or_wait(op->u.event.event, op->u.event.gen, s)) {
            s->blocked = true;
            return false;
        }
        if (or_recording())
            or_record_op(op);
        pop_head_locked(s, op);
        or_op_release(op);
    }
    if (!s->head)
        return false;
    or_op *head = s->head;
    if (atomic_load(&s->posted) && !posts_write(head)) {
        s->fenced = true; /* the last acknowledgement moves the stream on */
        return false;
    }
    if (head->kind == OR_OP_HOST_FUNC && head->u.host.start) {
        /* Straight to the layer's thread, which completes it: no worker
         * wakes up only to pass it on, and the stream stays busy. */
        set_busy(s, OR_BUSY);
        head->u.host.start(head->u.host.data, head);
        return false;
    }
    or_device *dev = s->dev;
    int lvl = priority_level(s);
    s->next_ready = NULL;
    if (dev->ready_tail[lvl])
        dev->ready_tail[lvl]->next_ready = s;
    else
        dev->ready_head[lvl] = s;
    dev->ready_tail[lvl] = s;
    s->queued = true;
    return true;
}

static or_stream *pop_ready_locked(or_device *dev)
{
    for (int lvl = OR_NUM_PRIORITIES - 1; lvl >= 0; lvl--) {
        or_stream *s = dev->ready_head[lvl];
        if (!s)
            continue;
        dev->ready_head[lvl] = s->next_ready;
        if (!dev->ready_head[lvl])
            dev->ready_tail[lvl] = NULL;
        s->queued = false;
        return s;
    }
    return NULL;
}

static void op_execute(or_stream *s, or_op *op, bool issuer);

static bool posts_write(const or_op *op);

/* An event record at the head of an idle stream is taken (the stream made
 * busy) by the thread that finds it there, which completes it at once: a
 * worker woken only to mark an event done would cost more than the record,
 * and a query right after it (as a collective's work object makes) finds it
 * done. Not in virtual time, whose charges follow the worker's order. */
static or_op *take_record_locked(or_stream *s)
{
    or_op *op = s->head;
    if (!op || op->kind != OR_OP_EVENT_RECORD || or_vt_on || busy_locked(s) || s->queued || s->blocked ||
        atomic_load(&s->posted))
        return NULL;
    set_busy(s, OR_BUSY);
    return op;
}

uint64_t or_stream_enqueue(or_stream *s, or_op *op)
{
    or_device *dev = s->dev;
    bool wake = false;
    if (or_vt_on) /* a held task's end is this op's start: wait until it is known */
        or_vclock_wait_release(s);
    or_lock_acquire(&dev->lock);
    if (or_vt_on) {
        or_vclock_charge(s, op);
        if (op->kind == OR_OP_HOST_FUNC && op->u.host.held)
            or_vclock_hold(s, op);
    }
    uint64_t seq = op->seq = ++s->last_seq;
    op->stream = s;
    or_activity_issue(op);
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    /* Release, not sequentially consistent: no wait protocol orders a load
     * after it (done_seq's does, mark_done_locked), and on x86 that would
     * be a locked exchange per op. */
    atomic_store_explicit(&s->enq_seq, op->seq, memory_order_release);
    bool here = false;
    if (s->head == op && !s->queued && !s->blocked && !s->fenced && !busy_locked(s)) {
        here = take_record_locked(s) == op;
        if (!here && op->kind == OR_OP_REMOTE_COPY && !or_vt_on) {
            /* A copy with another node at the head of an idle stream: the
             * issuing thread hands it to the proxy (a write to post with its
             * message built), no worker woken only to pass it on
             * (op_execute). */
            set_busy(s, OR_BUSY);
            here = true;
        }
        if (!here)
            wake = stream_advance_locked(s);
    }
    if (wake)
        or_notifier_signal(&dev->work);
    or_lock_release(&dev->lock);
    if (here)
        op_execute(s, op, true);
    return seq;
}

/* The op at the head of s finished: move on. */
static void stream_complete(or_stream *s, or_op *op);

void or_stream_op_done(or_op *op) { stream_complete(op->stream, op); }

void or_stream_op_begin(or_op *op)
{
    if (or_recording())
        op->wall_start = or_now_ns();
    or_activity_set_running(op);
}

/* Under the device's lock, once what ran at the stream's head has ended:
 * an event record now at the head, which the caller completes outside the
 * lock, as on an idle stream; else NULL, the next op (if any) handed to the
 * device's worker. */
static or_op *head_done_locked(or_stream *s)
{
    or_op *next = take_record_locked(s);
    if (!next && s->head && stream_advance_locked(s))
        or_notifier_signal(&s->dev->work);
    return next;
}

static void record_complete(or_op *rec)
{
    or_stream_op_begin(rec);
    or_event_complete(rec->u.event.event, rec->u.event.gen, rec->vt_start);
}

static void stream_complete(or_stream *s, or_op *op)
{
    or_device *dev = s->dev;
    while (op) {
        if (or_recording())
            or_record_op(op);
        or_lock_acquire(&dev->lock);
        set_busy(s, OR_IDLE);
        pop_head_locked(s, op);
        or_op *next = head_done_locked(s);
        or_lock_release(&dev->lock);
        or_op_release(op);
        if (next)
            record_complete(next);
        op = next;
    }
}

/* ---- inline tasks ----------------------------------------------------------
 * A small collective whose stream is idle runs on the thread that issues
 * it. It takes the stream's next sequence number and keeps the stream busy
 * meanwhile (ops issued by other threads wait behind it, a synchronize
 * waits for it) but allocates and queues no op: the op, its two passes
 * under the device's lock and its hand-over cost more than the call
 * (docs/occl-perf.md). Not in virtual time or while recording, which
 * account for ops. */
static bool inline_off(void) { return or_vt_on || or_recording(); }

bool or_inline_tasks_off(void) { return inline_off(); }

bool or_stream_inline_begin(or_stream *s, uint64_t *seq)
{
    if (inline_off()) /* inline here: or_inline_tasks_off goes through the PLT */
        return false;
    or_device *dev = s->dev;
    or_lock_acquire(&dev->lock);
    bool idle = !s->head && !s->queued && !s->blocked && !atomic_load(&s->posted) && !busy_locked(s);
    if (idle) {
        set_busy(s, OR_BUSY_INLINE);
        *seq = ++s->last_seq;
        atomic_store_explicit(&s->enq_seq, *seq, memory_order_release); /* as in stream_enqueue */
    }
    or_lock_release(&dev->lock);
    return idle;
}

/* Without the device's lock when nothing came meanwhile: no op was issued
 * and no waiter came (busy_locked, want_wake), so there is nothing to move
 * on or wake; done_seq is stored first (release: the task's writes come
 * with it), then the stream is idle. A lock pass would be three locked
 * instructions a call, a third of a small call's cost (docs/occl-perf.md). */
void or_stream_inline_end(or_stream *s, uint64_t seq)
{
    atomic_store_explicit(&s->done_seq, seq, memory_order_release);
    uint32_t inl = OR_BUSY_INLINE;
    if (atomic_compare_exchange_strong(&s->busy, &inl, OR_IDLE))
        return;
    or_device *dev = s->dev;
    or_lock_acquire(&dev->lock);
    set_busy(s, OR_IDLE);
    mark_done_locked(s, seq);
    or_op *next = head_done_locked(s);
    or_lock_release(&dev->lock);
    if (next) { /* an event record issued meanwhile completes here */
        record_complete(next);
        stream_complete(s, next);
    }
}

or_op *or_stream_inline_hand(or_stream *s, uint64_t seq)
{
    or_op *op = or_op_new(OR_OP_HOST_FUNC, 0);
    if (!op)
        return NULL;
    op->u.host.held = true;
    op->seq = seq;
    op->stream = s;
    or_activity_issue(op);
    or_device *dev = s->dev;
    or_lock_acquire(&dev->lock);
    op->next = s->head; /* ops issued meanwhile wait behind it */
    s->head = op;
    if (!s->tail)
        s->tail = op;
    set_busy(s, OR_BUSY); /* an op's now: it ends as ops do (stream_complete) */
    or_lock_release(&dev->lock);
    return op;
}

/* Event completion calls this for a stream parked on it. */
void or_stream_unblock(or_stream *s)
{
    or_device *dev = s->dev;
    or_lock_acquire(&dev->lock);
    s->blocked = false;
    if (!s->queued && !s->fenced && !busy_locked(s) && stream_advance_locked(s))
        or_notifier_signal(&dev->work);
    or_lock_release(&dev->lock);
}

typedef struct {
    or_stream *s;
    uint64_t seq;
} seq_wait;

static bool seq_reached(void *arg)
{
    seq_wait *w = arg;
    want_wake(w->s, w->seq);
    /* done_seq first: a write is posted before its op is marked done. */
    return atomic_load(&w->s->done_seq) >= w->seq && !atomic_load(&w->s->posted);
}

orError_t or_stream_take_error(or_stream *s)
{
    return (orError_t)atomic_exchange(&s->async_error, orSuccess);
}

void or_stream_wait_seq(or_stream *s, uint64_t seq)
{
    seq_wait w = {s, seq};
    if (atomic_load(&s->posted) || atomic_load(&s->remote))
        or_wait_sleeping(&s->done, seq_reached, &w, 0);
    else
        or_wait(&s->done, seq_reached, &w, 0);
}

/* Teardown: drop what never ran. */
void or_stream_free_pending(or_stream *s)
{
    while (s->head) {
        or_op *op = s->head;
        s->head = op->next;
        or_op_release(op);
    }
    s->tail = NULL;
}

/* ---- execution (worker threads) ------------------------------------------- */

static _Thread_local void *block_shared;
static _Thread_local size_t block_shared_size;

/* A kernel's name for reports: its launch's, else its symbol, else its address. */
static void kernel_name(const or_op *op, char *buf, size_t len)
{
    if (op->u.kernel.label) {
        snprintf(buf, len, "%s", op->u.kernel.label);
        return;
    }
    Dl_info info;
    void *addr;
    orKernel_t fn = op->u.kernel.fn;
    memcpy(&addr, &fn, sizeof addr);
    if (dladdr(addr, &info) && info.dli_sname)
        snprintf(buf, len, "%s", info.dli_sname);
    else
        snprintf(buf, len, "%p", addr);
}

/* Device work failed with err: its stream reports it at the next
 * synchronization, and every later call of the process returns it. */
static void stream_fail(or_stream *s, orError_t err)
{
    int none = orSuccess;
    atomic_compare_exchange_strong(&s->async_error, &none, (int)err);
    or_error_set_sticky(err);
}

static void kernel_fault(or_stream *s, or_op *op, orDim3 block, const or_fault *f)
{
    bool first = false;
    if (!atomic_compare_exchange_strong(&op->u.kernel.faulted, &first, true))
        return; /* another block of the same launch reported already */
    char name[256], where[320];
    kernel_name(op, name, sizeof name);
    or_mem_describe(f->addr, where, sizeof where);
    OR_WARN("memcheck", "kernel %s, block (%u,%u,%u) on device %d: illegal address %p (%s): %s",
            name, block.x, block.y, block.z, s->dev->id, f->addr,
            f->sig == SIGBUS ? "SIGBUS" : "SIGSEGV", where);
    stream_fail(s, orErrorIllegalAddress);
}

/* Memcheck: a kernel that wrote before the start of an allocation changed
 * the bytes between its leading guard page and the block; one that wrote
 * just past its end (within its size rounded up to 256 bytes) changed the
 * slack before its trailing guard page. */
static void kernel_check_canaries(or_stream *s, or_op *op)
{
    void *addr;
    char where[320];
    if (!or_memcheck_canaries(&addr, where, sizeof where))
        return;
    char name[256];
    kernel_name(op, name, sizeof name);
    OR_WARN("memcheck", "kernel %s on device %d (block unknown: found after the kernel): illegal "
            "write at %p: %s", name, s->dev->id, addr, where);
    atomic_store(&op->u.kernel.faulted, true);
    stream_fail(s, orErrorIllegalAddress);
}

/* Run blocks of a kernel until none are left; the thread finishing the last
 * block completes the op. A block that faults fails the stream; the blocks
 * not yet started then do not run (nor do any after a sticky error). */
static void kernel_run_blocks(or_stream *s, or_op *op)
{
    const orDim3 grid = op->u.kernel.grid;
    orKernelContext ctx = {.blockDim = op->u.kernel.block, .gridDim = grid, .device = s->dev->id};
    size_t shared = op->u.kernel.shared_mem;
    if (shared > block_shared_size) {
        void *grown = realloc(block_shared, shared);
        if (grown) {
            block_shared = grown;
            block_shared_size = shared;
        }
    }
    ctx.sharedMem = shared ? block_shared : NULL;
    const uint64_t n = op->u.kernel.nblocks;
    bool last = false;
    or_strict_enter();
    for (;;) {
        uint64_t b = atomic_fetch_add(&op->u.kernel.next_block, 1);
        if (b >= n)
            break;
        ctx.blockIdx.x = (unsigned)(b % grid.x);
        ctx.blockIdx.y = (unsigned)(b / grid.x % grid.y);
        ctx.blockIdx.z = (unsigned)(b / ((uint64_t)grid.x * grid.y));
        or_fault f;
        if (!atomic_load_explicit(&op->u.kernel.faulted, memory_order_relaxed) &&
            or_error_sticky() == orSuccess &&
            !or_fault_call_kernel(op->u.kernel.fn, &ctx, op->u.kernel.args, &f))
            kernel_fault(s, op, ctx.blockIdx, &f);
        if (atomic_fetch_add(&op->u.kernel.blocks_done, 1) + 1 == n)
            last = true;
    }
    if (last && or_rt.cfg.memcheck && !atomic_load(&op->u.kernel.faulted))
        kernel_check_canaries(s, op); /* inside the strict window: the bytes are readable */
    or_strict_leave();
    if (last) {
        or_device *dev = s->dev;
        or_lock_acquire(&dev->lock);
        for (or_op **p = &dev->jobs; *p; p = &(*p)->u.kernel.next_job)
            if (*p == op) {
                *p = op->u.kernel.next_job;
                break;
            }
        or_lock_release(&dev->lock);
        stream_complete(s, op);
    }
}

static void copy_body(void *arg)
{
    or_op *op = arg;
    memmove(op->u.copy.dst, op->u.copy.src, op->u.copy.count);
}

static void memset_body(void *arg)
{
    or_op *op = arg;
    memset(op->u.memset.dst, op->u.memset.value, op->u.memset.count);
}

/* A copy or memset, which may fault when its memory was freed after it was
 * issued (memcheck) or unmapped. */
static void transfer_run(or_stream *s, or_op *op)
{
    if (or_error_sticky() != orSuccess)
        return;
    or_fault f;
    or_strict_enter();
    bool ok = or_fault_call(op->kind == OR_OP_COPY ? copy_body : memset_body, op, &f);
    or_strict_leave();
    if (ok)
        return;
    char where[320];
    or_mem_describe(f.addr, where, sizeof where);
    if (op->kind == OR_OP_COPY)
        OR_WARN("memcheck", "copy of %zu bytes from %p to %p on device %d: illegal address %p: %s",
                op->u.copy.count, op->u.copy.src, op->u.copy.dst, s->dev->id, f.addr, where);
    else
        OR_WARN("memcheck", "memset of %zu bytes at %p on device %d: illegal address %p: %s",
                op->u.memset.count, op->u.memset.dst, s->dev->id, f.addr, where);
    stream_fail(s, orErrorIllegalAddress);
}

/* or_remote_posted_writes: posted so far, and posted but not acknowledged. */
static _Atomic uint64_t posted_writes, unacked_writes;

uint64_t or_remote_posted_writes(uint64_t *unacked)
{
    if (unacked)
        *unacked = atomic_load(&unacked_writes);
    return atomic_load(&posted_writes);
}

static void remote_copy_failed(or_proxy_req *req, or_stream *s)
{
    OR_INFO("memory", "remote copy of %llu bytes with rank %d failed: %s",
            (unsigned long long)req->length, req->peer, orGetErrorName(req->status));
    int none = orSuccess;
    atomic_compare_exchange_strong(&s->async_error, &none, (int)req->status);
}

static void remote_copy_done(or_proxy_req *req)
{
    or_op *op = req->user;
    or_strict_leave();
    if (req->status != orSuccess)
        remote_copy_failed(req, op->stream);
    atomic_fetch_sub(&op->stream->remote, 1);
    or_stream_op_done(op);
}

/* The owner's answer to a posted write. */
static void remote_write_acked(or_proxy_req *req)
{
    or_op *op = req->user;
    or_stream *s = op->stream;
    or_device *dev = s->dev;
    if (req->status != orSuccess)
        remote_copy_failed(req, s); /* before posted drains: a synchronization sees it */
    atomic_fetch_sub(&unacked_writes, 1); /* before the stream may go on */
    or_op *rec = NULL;
    bool wake = false;
    or_lock_acquire(&dev->lock);
    if (atomic_fetch_sub(&s->posted, 1) == 1) {
        or_notifier_signal(&s->done); /* synchronizations wait for posted to drain */
        if (s->fenced) {
            s->fenced = false;
            if (!s->queued && !s->blocked && !busy_locked(s)) {
                rec = take_record_locked(s);
                if (!rec)
                    wake = stream_advance_locked(s);
            }
        }
    }
    if (wake)
        or_notifier_signal(&dev->work);
    or_lock_release(&dev->lock);
    /* Past this point s may be destroyed, unless its head is rec. */
    or_op_release(op);
    if (rec) {
        record_complete(rec);
        stream_complete(s, rec);
    }
}

/* issuer: on the thread that issued op, at the head of its idle stream. */
static void op_execute(or_stream *s, or_op *op, bool issuer)
{
    or_stream_op_begin(op);
    switch (op->kind) {
    case OR_OP_KERNEL:
        if (op->u.kernel.nblocks > 1 && s->dev->hw.nthreads > 1) {
            /* Publish the kernel so idle workers join in on its blocks. */
            or_device *dev = s->dev;
            or_lock_acquire(&dev->lock);
            op->u.kernel.next_job = dev->jobs;
            dev->jobs = op;
            atomic_fetch_add(&op->refs, 1);
            or_notifier_signal(&dev->work);
            or_lock_release(&dev->lock);
            kernel_run_blocks(s, op);
            or_op_release(op);
        } else {
            kernel_run_blocks(s, op);
        }
        return;
    case OR_OP_COPY:
    case OR_OP_MEMSET:
        transfer_run(s, op);
        break;
    case OR_OP_HOST_FUNC: {
        /* Work the function issues starts after it, in virtual time. */
        uint64_t saved = or_vt_on ? or_vclock_host_enter(op->vt_end) : 0;
        op->u.host.fn(op->u.host.data);
        if (or_vt_on)
            or_vclock_host_leave(saved);
        break;
    }
    case OR_OP_EVENT_RECORD:
        or_event_complete(op->u.event.event, op->u.event.gen, op->vt_start);
        break;
    case OR_OP_EVENT_WAIT: /* resolved by the scheduler, never executed */
        break;
    case OR_OP_REMOTE_COPY: {
        or_proxy_req *req = (or_proxy_req *)op->payload;
        req->user = op;
        or_strict_enter(); /* we, then MPI, read or write our memory */
        if (issuer && req->caller_waits && !atomic_load(&s->posted) && or_proxy_here_ok(req)) {
            /* A synchronous copy of one round trip: the thread that would
             * only wait for it sends the request and takes the answer
             * itself, two hand-overs between threads less. Nothing of
             * this stream is left with the proxy (posted writes drained),
             * so the owner still serves this rank's requests in stream
             * order. */
            if (or_proxy_call_here(req) != orSuccess)
                remote_copy_failed(req, s);
            or_strict_leave();
            break;
        }
        if (posts_write(op) && or_proxy_capture_put(req)) {
            /* Posted: the bytes are in the request message, the op completes
             * now, and the proxy's reference keeps req until the owner's
             * answer (remote_write_acked). */
            or_strict_leave();
            atomic_fetch_add(&op->refs, 1);
            atomic_fetch_add(&s->posted, 1); /* before the op is marked done */
            atomic_fetch_add(&posted_writes, 1);
            atomic_fetch_add(&unacked_writes, 1);
            req->done = remote_write_acked;
            or_proxy_submit(req);
            break;
        }
        /* The proxy moves the bytes; the stream stays busy until it is done,
         * and the worker is free for other streams meanwhile. */
        req->done = remote_copy_done;
        atomic_fetch_add(&s->remote, 1);
        or_proxy_submit(req);
        return;
    }
    }
    stream_complete(s, op);
}

typedef struct {
    or_device *dev;
    uint32_t seen;
} work_wait;

static bool work_signalled(void *arg)
{
    work_wait *w = arg;
    return atomic_load(&w->dev->work.seq) != w->seen;
}

/* A kernel job whose blocks are not all handed out yet, with a reference
 * taken for the caller; finished jobs are dropped from the list. */
static or_op *take_job_locked(or_device *dev)
{
    while (dev->jobs) {
        or_op *op = dev->jobs;
        if (atomic_load(&op->u.kernel.next_block) < op->u.kernel.nblocks) {
            atomic_fetch_add(&op->refs, 1);
            return op;
        }
        dev->jobs = op->u.kernel.next_job;
    }
    return NULL;
}

void *or_device_worker_main(void *arg)
{
    or_device *dev = arg;
    or_mark_worker_thread(dev->id);
    or_fault_thread_start();
    or_lock_acquire(&dev->lock);
    for (;;) {
        or_op *job = take_job_locked(dev);
        if (job) {
            /* The job's stream stays busy, hence alive, until the kernel completes. */
            or_lock_release(&dev->lock);
            kernel_run_blocks(job->stream, job);
            or_op_release(job);
            or_lock_acquire(&dev->lock);
            continue;
        }
        or_stream *s = pop_ready_locked(dev);
        if (s) {
            set_busy(s, OR_BUSY);
            or_op *op = s->head;
            or_lock_release(&dev->lock);
            op_execute(s, op, false);
            or_lock_acquire(&dev->lock);
            continue;
        }
        if (dev->stopping)
            break;
        work_wait w = {dev, atomic_load(&dev->work.seq)};
        or_lock_release(&dev->lock);
        or_wait(&dev->work, work_signalled, &w, 0);
        or_lock_acquire(&dev->lock);
    }
    or_lock_release(&dev->lock);
    or_fault_thread_end();
    free(block_shared);
    block_shared = NULL;
    block_shared_size = 0;
    return NULL;
}

/* ---- public: streams ------------------------------------------------------ */

orError_t orStreamCreateWithPriority(orStream_t *stream, unsigned int flags, int priority)
{
    OR_API_BEGIN();
    if (!stream || (flags & ~(unsigned)orStreamNonBlocking))
        OR_RETURN(orErrorInvalidValue);
    if (priority > OR_PRIORITY_LEAST)
        priority = OR_PRIORITY_LEAST;
    if (priority < OR_PRIORITY_GREATEST)
        priority = OR_PRIORITY_GREATEST;
    or_stream *s = malloc(sizeof *s);
    if (!s)
        OR_RETURN(orErrorMemoryAllocation);
    or_stream_init(s, or_current_device(), priority, flags);
    s->trace_tid = atomic_fetch_add(&s->dev->next_trace_tid, 1) + 1;
    if (or_trace_on) {
        char name[64];
        snprintf(name, sizeof name, "stream %d (priority %d)", s->trace_tid, priority);
        or_trace_name_track(s->dev->global_id, s->trace_tid, name);
    }
    s->handle = or_handle_register(OR_HANDLE_STREAM, s);
    if (!s->handle) {
        or_device *dev = s->dev;
        or_lock_acquire(&dev->lock);
        if (s->prev)
            s->prev->next = s->next;
        else
            dev->streams = s->next;
        if (s->next)
            s->next->prev = s->prev;
        or_lock_release(&dev->lock);
        free(s);
        OR_RETURN(orErrorMemoryAllocation);
    }
    *stream = (orStream_t)s->handle;
    return orSuccess;
}

orError_t orStreamCreate(orStream_t *stream)
{
    return orStreamCreateWithPriority(stream, orStreamDefault, OR_PRIORITY_LEAST);
}

orError_t orStreamGetPriority(orStream_t stream, int *priority)
{
    OR_API_BEGIN();
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err != orSuccess)
        OR_RETURN(err);
    if (!priority)
        OR_RETURN(orErrorInvalidValue);
    *priority = s->priority;
    return orSuccess;
}

static bool stream_drained(void *arg)
{
    or_stream *s = arg;
    want_wake(s, atomic_load(&s->enq_seq));
    return atomic_load(&s->done_seq) >= atomic_load(&s->enq_seq) && !atomic_load(&s->posted);
}

/* No orDeviceSynchronize is still looking at s. */
static bool stream_unpinned(void *arg)
{
    or_stream *s = arg;
    return atomic_load(&s->pins) == 0;
}

static _Atomic uint64_t streams_destroyed;

uint64_t or_stream_destroy_count(void) { return atomic_load(&streams_destroyed); }

orError_t orStreamDestroy(orStream_t stream)
{
    OR_API_BEGIN();
    if (!stream)
        OR_RETURN(orErrorInvalidResourceHandle);
    if (or_in_worker())
        OR_RETURN(orErrorNotPermitted);
    or_stream *s = or_handle_unregister(OR_HANDLE_STREAM, (uintptr_t)stream);
    if (!s)
        OR_RETURN(orErrorInvalidResourceHandle);
    atomic_fetch_add(&streams_destroyed, 1);
    /* The handle is dead for everyone else; finish what was queued. */
    or_wait(&s->done, stream_drained, s, 0);
    or_wait(&s->done, stream_unpinned, s, 0);
    or_device *dev = s->dev;
    or_lock_acquire(&dev->lock);
    if (s->prev)
        s->prev->next = s->next;
    else
        dev->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    or_lock_release(&dev->lock);
    free(s);
    return orSuccess;
}

orError_t orStreamSynchronize(orStream_t stream)
{
    OR_API_BEGIN();
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err != orSuccess)
        OR_RETURN(err);
    if (or_in_worker())
        OR_RETURN(orErrorNotPermitted);
    or_stream_wait_seq(s, atomic_load(&s->enq_seq));
    if (or_vt_on) /* read after: a held task sets the clock when it runs */
        or_vclock_host_sync(or_vclock_stream(s));
    OR_RETURN(or_stream_take_error(s));
}

orError_t orStreamQuery(orStream_t stream)
{
    OR_API_BEGIN();
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err != orSuccess)
        OR_RETURN(err);
    return stream_drained(s) ? orSuccess : orErrorNotReady;
}
