/*
 * src/event.c - events: markers in a stream that complete when the stream
 * reaches them. Each record gets a generation; queries, waits and elapsed
 * time refer to the newest record, as with CUDA.
 */
#include "internal.h"

#include <stdlib.h>

void or_event_release(or_event *ev)
{
    if (atomic_fetch_sub(&ev->refs, 1) != 1)
        return;
    pthread_mutex_destroy(&ev->lock);
    free(ev->done_extra);
    free(ev->waiters);
    free(ev);
}

/* Under ev->lock. */
static bool record_done(const or_event *ev, uint64_t gen)
{
    if (gen <= ev->done_prefix)
        return true;
    for (size_t i = 0; i < ev->n_extra; i++)
        if (ev->done_extra[i] == gen)
            return true;
    return false;
}

/* Under ev->lock: add gen to the completed set; false if out of memory. */
static bool record_mark_done(or_event *ev, uint64_t gen)
{
    if (gen == ev->done_prefix + 1) {
        ev->done_prefix++;
        /* Fold in records that completed early and are now contiguous. */
        for (size_t i = 0; i < ev->n_extra;) {
            if (ev->done_extra[i] == ev->done_prefix + 1) {
                ev->done_prefix++;
                ev->done_extra[i] = ev->done_extra[--ev->n_extra];
                i = 0;
            } else {
                i++;
            }
        }
        return true;
    }
    if (ev->n_extra == ev->cap_extra) {
        size_t cap = ev->cap_extra ? 2 * ev->cap_extra : 4;
        uint64_t *grown = realloc(ev->done_extra, cap * sizeof *grown);
        if (!grown)
            return false;
        ev->done_extra = grown;
        ev->cap_extra = cap;
    }
    ev->done_extra[ev->n_extra++] = gen;
    return true;
}

bool or_event_check_or_wait(or_event *ev, uint64_t gen, or_stream *s)
{
    pthread_mutex_lock(&ev->lock);
    bool done = record_done(ev, gen);
    if (!done) {
        if (ev->nwaiters == ev->cap_waiters) {
            size_t cap = ev->cap_waiters ? 2 * ev->cap_waiters : 4;
            or_event_waiter *grown = realloc(ev->waiters, cap * sizeof *grown);
            if (!grown) {
                /* Cannot park the stream: let it proceed rather than hang forever. */
                pthread_mutex_unlock(&ev->lock);
                OR_WARN("event", "out of memory registering a stream wait; wait skipped");
                return true;
            }
            ev->waiters = grown;
            ev->cap_waiters = cap;
        }
        ev->waiters[ev->nwaiters++] = (or_event_waiter){s, gen};
    }
    pthread_mutex_unlock(&ev->lock);
    return done;
}

void or_event_complete(or_event *ev, uint64_t gen, uint64_t vt)
{
    uint64_t now = or_now_ns();
    enum { BATCH = 16 };
    or_event_waiter ready[BATCH];
    size_t nready;
    pthread_mutex_lock(&ev->lock);
    if (!record_mark_done(ev, gen)) {
        /* Without room to remember it out of order, complete everything up
         * to gen: waiters may proceed early, but none hangs. */
        OR_WARN("event", "out of memory tracking event records; completing up to %llu",
                (unsigned long long)gen);
        ev->done_prefix = gen > ev->done_prefix ? gen : ev->done_prefix;
    }
    if (gen > ev->newest_done) {
        ev->newest_done = gen;
        ev->newest_done_ns = now;
        ev->newest_done_vt = vt;
    }
    or_notifier_signal(&ev->done);
    for (;;) {
        /* Hand satisfied waiters over in batches; streams are woken without
         * the event lock held (device locks come first in the lock order). */
        nready = 0;
        for (size_t i = 0; i < ev->nwaiters && nready < BATCH;) {
            if (record_done(ev, ev->waiters[i].gen)) {
                ready[nready++] = ev->waiters[i];
                ev->waiters[i] = ev->waiters[--ev->nwaiters];
            } else {
                i++;
            }
        }
        pthread_mutex_unlock(&ev->lock);
        for (size_t i = 0; i < nready; i++)
            or_stream_unblock(ready[i].stream);
        if (nready < BATCH)
            return;
        pthread_mutex_lock(&ev->lock);
    }
}

static orError_t event_lookup(orEvent_t handle, or_event **out)
{
    or_event *ev = handle ? or_handle_lookup(OR_HANDLE_EVENT, (uintptr_t)handle) : NULL;
    if (!ev)
        return orErrorInvalidResourceHandle;
    *out = ev;
    return orSuccess;
}

orError_t orEventCreateWithFlags(orEvent_t *event, unsigned int flags)
{
    OR_API_BEGIN();
    if (!event || (flags & ~(unsigned)orEventEnableTiming))
        OR_RETURN(orErrorInvalidValue);
    or_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        OR_RETURN(orErrorMemoryAllocation);
    ev->flags = flags;
    atomic_init(&ev->refs, 1);
    pthread_mutex_init(&ev->lock, NULL);
    ev->handle = or_handle_register(OR_HANDLE_EVENT, ev);
    if (!ev->handle) {
        or_event_release(ev);
        OR_RETURN(orErrorMemoryAllocation);
    }
    *event = (orEvent_t)ev->handle;
    return orSuccess;
}

orError_t orEventCreate(orEvent_t *event)
{
    return orEventCreateWithFlags(event, orEventDisableTiming);
}

orError_t orEventDestroy(orEvent_t event)
{
    OR_API_BEGIN();
    or_event *ev = event ? or_handle_unregister(OR_HANDLE_EVENT, (uintptr_t)event) : NULL;
    if (!ev)
        OR_RETURN(orErrorInvalidResourceHandle);
    or_event_release(ev); /* queued records and waits keep their own references */
    return orSuccess;
}

static orError_t event_enqueue(or_op_kind kind, orEvent_t event, orStream_t stream)
{
    or_event *ev;
    or_stream *s;
    orError_t err = event_lookup(event, &ev);
    if (err == orSuccess)
        err = or_stream_resolve(stream, &s);
    if (err != orSuccess)
        return err;
    or_op *op = or_op_new(kind, 0);
    if (!op)
        return orErrorMemoryAllocation;
    pthread_mutex_lock(&ev->lock);
    uint64_t gen = kind == OR_OP_EVENT_RECORD ? ++ev->record_gen : ev->record_gen;
    pthread_mutex_unlock(&ev->lock);
    if (gen == 0) { /* waiting on a never-recorded event is a no-op, as in CUDA */
        free(op);
        return orSuccess;
    }
    atomic_fetch_add(&ev->refs, 1);
    op->u.event.event = ev;
    op->u.event.gen = gen;
    or_stream_enqueue(s, op);
    return orSuccess;
}

orError_t orEventRecord(orEvent_t event, orStream_t stream)
{
    OR_API_BEGIN();
    OR_RETURN(event_enqueue(OR_OP_EVENT_RECORD, event, stream));
}

orError_t orStreamWaitEvent(orStream_t stream, orEvent_t event, unsigned int flags)
{
    OR_API_BEGIN();
    if (flags != 0)
        OR_RETURN(orErrorInvalidValue);
    OR_RETURN(event_enqueue(OR_OP_EVENT_WAIT, event, stream));
}

/* Has the newest record (as of now) completed? Never-recorded events have. */
static bool newest_record_done(or_event *ev)
{
    pthread_mutex_lock(&ev->lock);
    bool done = record_done(ev, ev->record_gen);
    pthread_mutex_unlock(&ev->lock);
    return done;
}

orError_t orEventQuery(orEvent_t event)
{
    OR_API_BEGIN();
    or_event *ev;
    orError_t err = event_lookup(event, &ev);
    if (err != orSuccess)
        OR_RETURN(err);
    return newest_record_done(ev) ? orSuccess : orErrorNotReady;
}

typedef struct {
    or_event *ev;
    uint64_t gen;
} gen_wait;

static bool gen_reached(void *arg)
{
    gen_wait *w = arg;
    pthread_mutex_lock(&w->ev->lock);
    bool done = record_done(w->ev, w->gen);
    pthread_mutex_unlock(&w->ev->lock);
    return done;
}

orError_t orEventSynchronize(orEvent_t event)
{
    OR_API_BEGIN();
    or_event *ev;
    orError_t err = event_lookup(event, &ev);
    if (err != orSuccess)
        OR_RETURN(err);
    if (or_in_worker())
        OR_RETURN(orErrorNotPermitted);
    pthread_mutex_lock(&ev->lock);
    gen_wait w = {ev, ev->record_gen};
    pthread_mutex_unlock(&ev->lock);
    /* The record's time was charged when it was issued, before this call. */
    uint64_t vt = or_vt_on && w.gen ? or_vclock_event(ev) : 0;
    or_wait(&ev->done, gen_reached, &w, 0);
    if (or_vt_on)
        or_vclock_host_sync(vt);
    return orSuccess;
}

/* Completion time of the newest record, or the reason there is none. */
static orError_t event_time(or_event *ev, uint64_t *ns)
{
    orError_t err = orSuccess;
    pthread_mutex_lock(&ev->lock);
    if (!(ev->flags & orEventEnableTiming) || ev->record_gen == 0)
        err = orErrorInvalidResourceHandle;
    else if (!record_done(ev, ev->record_gen))
        err = orErrorNotReady;
    else /* the newest record is done, so it is the highest completed one */
        *ns = or_vt_on ? ev->newest_done_vt : ev->newest_done_ns;
    pthread_mutex_unlock(&ev->lock);
    return err;
}

/* end - start in ns, in the runtime's clock (wall or virtual). */
static orError_t elapsed_ns(orEvent_t start, orEvent_t end, int64_t *ns)
{
    or_event *a, *b;
    orError_t err = event_lookup(start, &a);
    if (err == orSuccess)
        err = event_lookup(end, &b);
    if (err != orSuccess)
        return err;
    uint64_t ta, tb;
    if ((err = event_time(a, &ta)) != orSuccess || (err = event_time(b, &tb)) != orSuccess)
        return err;
    *ns = (int64_t)(tb - ta);
    return orSuccess;
}

orError_t orEventElapsedTimeNs(long long *ns, orEvent_t start, orEvent_t end)
{
    OR_API_BEGIN();
    if (!ns)
        OR_RETURN(orErrorInvalidValue);
    int64_t d;
    orError_t err = elapsed_ns(start, end, &d);
    if (err != orSuccess)
        OR_RETURN(err);
    *ns = (long long)d;
    return orSuccess;
}

orError_t orEventElapsedTime(float *ms, orEvent_t start, orEvent_t end)
{
    OR_API_BEGIN();
    if (!ms)
        OR_RETURN(orErrorInvalidValue);
    int64_t d;
    orError_t err = elapsed_ns(start, end, &d);
    if (err != orSuccess)
        OR_RETURN(err);
    *ms = (float)((double)d / 1e6);
    return orSuccess;
}
