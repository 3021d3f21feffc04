/*
 * src/activity.c - activity records (orActivity* in openreg.h).
 *
 * Records are taken where the trace takes them (a finished op, a layer's
 * slice) into one list under a mutex: a profiler turns recording on for a
 * window, so the lock is paid only then, and the off path is one relaxed
 * atomic load. Names are the trace's interned strings, so records stay
 * small and their names live as long as the process.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

_Atomic bool or_activity_on;

typedef struct act_rec {
    orActivity a;
    const void *fn; /* a kernel without a name: its function, named at flush */
} act_rec;

static struct {
    pthread_mutex_t lock;
    act_rec *recs;
    size_t n, cap;
    uint64_t dropped;
} act = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define CORR_DEPTH 64
static _Thread_local struct {
    uint64_t ids[CORR_DEPTH];
    size_t depth; /* may exceed CORR_DEPTH: those pushes are not kept */
    int32_t tid;  /* this thread's Linux id, 0 until asked */
    /* On a worker: the op it runs (its correlation and issue). */
    uint64_t running, running_issue_ns;
    int32_t running_tid;
} corr;

bool or_recording(void)
{
    return or_trace_on || atomic_load_explicit(&or_activity_on, memory_order_relaxed);
}

static int32_t thread_id(void)
{
    if (!corr.tid)
        corr.tid = (int32_t)syscall(SYS_gettid);
    return corr.tid;
}

/* The innermost id pushed on this thread; on a worker that pushed none, the
 * running op's. */
static uint64_t correlation(void)
{
    if (corr.depth == 0)
        return corr.running;
    return corr.depth <= CORR_DEPTH ? corr.ids[corr.depth - 1] : corr.ids[CORR_DEPTH - 1];
}

void or_activity_issue(or_op *op)
{
    op->correlation = correlation();
    if (atomic_load_explicit(&or_activity_on, memory_order_relaxed)) {
        op->issue_ns = or_now_ns();
        op->issue_tid = thread_id();
    }
}

uint64_t or_activity_slice_correlation(void) { return correlation(); }

void or_activity_set_running(const or_op *op)
{
    corr.running = op->correlation;
    corr.running_issue_ns = op->issue_ns;
    corr.running_tid = op->issue_tid;
}

static void keep(const act_rec *r)
{
    pthread_mutex_lock(&act.lock);
    if (act.n == act.cap) {
        size_t limit = (size_t)or_rt.cfg.trace_buffer;
        size_t cap = act.cap ? 2 * act.cap : 1024;
        if (cap > limit)
            cap = limit;
        act_rec *grown = cap > act.cap ? realloc(act.recs, cap * sizeof *grown) : NULL;
        if (!grown) {
            act.dropped++;
            pthread_mutex_unlock(&act.lock);
            return;
        }
        act.recs = grown;
        act.cap = cap;
    }
    act.recs[act.n++] = *r;
    pthread_mutex_unlock(&act.lock);
}

void or_activity_op(const or_op *op, uint64_t wall_end)
{
    if (!atomic_load_explicit(&or_activity_on, memory_order_relaxed))
        return;
    if (op->kind == OR_OP_EVENT_RECORD || op->kind == OR_OP_EVENT_WAIT)
        return; /* instants: profilers read them from their own events */
    if (op->kind == OR_OP_HOST_FUNC && op->u.host.held)
        return; /* the layer that issued it records its own slice */
    const or_stream *s = op->stream;
    act_rec r;
    memset(&r, 0, sizeof r);
    r.a.device = s->dev->id;
    r.a.stream = s->trace_tid;
    r.a.virtualTime = or_vt_on;
    if (or_vt_on) {
        r.a.start = op->vt_start;
        r.a.end = op->vt_end;
    } else {
        r.a.start = op->wall_start ? op->wall_start : wall_end;
        r.a.end = wall_end > r.a.start ? wall_end : r.a.start;
    }
    r.a.correlationId = op->correlation;
    r.a.issueTime = op->issue_ns;
    r.a.issueThread = op->issue_tid;
    r.a.srcDevice = r.a.dstDevice = -1;
    switch (op->kind) {
    case OR_OP_KERNEL:
        r.a.kind = orActivityKindKernel;
        r.a.category = "kernel";
        r.a.name = op->u.kernel.name;
        r.fn = op->u.kernel.name ? NULL : (const void *)op->u.kernel.fn;
        if (op->cost.declared) {
            r.a.flops = op->cost.kernel_flops;
            r.a.bytes = (unsigned long long)op->cost.kernel_bytes;
        }
        break;
    case OR_OP_COPY:
    case OR_OP_REMOTE_COPY:
        r.a.kind = orActivityKindMemcpy;
        r.a.category = "copy";
        r.a.name = or_copy_name(op->cost.src, op->cost.dst, op->kind == OR_OP_REMOTE_COPY);
        r.a.bytes = op->cost.bytes;
        r.a.srcDevice = op->cost.src == OR_VT_HOST ? -1 : op->cost.src;
        r.a.dstDevice = op->cost.dst == OR_VT_HOST ? -1 : op->cost.dst;
        break;
    case OR_OP_MEMSET:
        r.a.kind = orActivityKindMemset;
        r.a.category = "memset";
        r.a.name = "memset";
        r.a.bytes = op->cost.bytes;
        break;
    default:
        r.a.kind = orActivityKindHostFunc;
        r.a.category = "host";
        r.a.name = "host function";
        break;
    }
    keep(&r);
}

void or_record_op(const or_op *op)
{
    uint64_t now = or_now_ns();
    if (or_trace_on)
        or_trace_op(op, now);
    or_activity_op(op, now);
}

void or_activity_slice(int device, int tid, const char *name, const char *cat, uint64_t start,
                       uint64_t end, const char *args)
{
    if (!atomic_load_explicit(&or_activity_on, memory_order_relaxed))
        return;
    act_rec r;
    memset(&r, 0, sizeof r);
    r.a.kind = orActivityKindCollective;
    r.a.device = device;
    r.a.stream = tid;
    r.a.virtualTime = or_vt_on;
    r.a.start = start;
    r.a.end = end > start ? end : start;
    r.a.correlationId = correlation();
    if (corr.depth == 0 && corr.running) { /* inside the op that issued it */
        r.a.issueTime = corr.running_issue_ns;
        r.a.issueThread = corr.running_tid;
    } else {
        r.a.issueTime = or_now_ns();
        r.a.issueThread = thread_id();
    }
    r.a.name = or_trace_intern(name ? name : "slice");
    r.a.category = or_trace_intern(cat ? cat : "external");
    r.a.args = args ? or_trace_intern(args) : NULL;
    r.a.srcDevice = r.a.dstDevice = -1;
    keep(&r);
}

/* ---- the API --------------------------------------------------------------- */

orError_t orActivityEnable(void)
{
    OR_API_BEGIN();
    atomic_store(&or_activity_on, true);
    return orSuccess;
}

orError_t orActivityDisable(void)
{
    OR_API_BEGIN();
    atomic_store(&or_activity_on, false);
    return orSuccess;
}

orError_t orActivityFlush(orActivityCallback callback, void *userData, unsigned long long *dropped)
{
    OR_API_BEGIN();
    if (!callback)
        OR_RETURN(orErrorInvalidValue);
    /* Taken out under the lock, handed over outside it: the callback may
     * issue work, and records of that work must not wait for it. */
    pthread_mutex_lock(&act.lock);
    act_rec *recs = act.recs;
    size_t n = act.n;
    uint64_t lost = act.dropped;
    act.recs = NULL;
    act.n = act.cap = 0;
    act.dropped = 0;
    pthread_mutex_unlock(&act.lock);
    for (size_t i = 0; i < n; i++) {
        char buf[48];
        if (!recs[i].a.name && recs[i].fn)
            recs[i].a.name = or_trace_intern(or_kernel_symbol(recs[i].fn, buf, sizeof buf));
        if (!recs[i].a.name)
            recs[i].a.name = "kernel"; /* out of memory interning */
        callback(&recs[i].a, userData);
    }
    free(recs);
    if (dropped)
        *dropped = lost;
    return orSuccess;
}

orError_t orActivityPushExternalCorrelationId(unsigned long long id)
{
    OR_API_BEGIN();
    if (corr.depth < CORR_DEPTH)
        corr.ids[corr.depth] = id;
    corr.depth++;
    return orSuccess;
}

orError_t orActivityPopExternalCorrelationId(unsigned long long *lastId)
{
    OR_API_BEGIN();
    if (corr.depth == 0)
        OR_RETURN(orErrorInvalidValue); /* nothing pushed on this thread */
    corr.depth--;
    if (lastId)
        *lastId = corr.depth < CORR_DEPTH ? corr.ids[corr.depth] : 0;
    return orSuccess;
}
