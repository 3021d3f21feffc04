/*
 * collectives/enqueue.c - the public collective calls: check the arguments,
 * pack the call, and queue it on the stream as a task the communicator's
 * own thread runs (or keep it for occlGroupEnd). One enqueue path for every
 * collective.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "group.h"
#define OCCL_LOG_SUBSYS OCCL_SUBSYS_COLL
#include "occl_internal.h"
#include "plugin.h"

static _Thread_local struct {
    int depth;
    unsigned char *inits;
    size_t init_size;
    int ninits, cap_inits;
    occl_call *calls;
    int ncalls, cap_calls;
    occlResult_t error; /* the first failure inside the group, reported at its end */
    char reason[256];
} grp;

int occl_group_depth(void) { return grp.depth; }

occlResult_t occl_group_fail(occlResult_t res)
{
    if (grp.depth && grp.error == occlSuccess) {
        grp.error = res;
        snprintf(grp.reason, sizeof grp.reason, "%s", occlGetLastError(NULL));
    }
    return res;
}

occlResult_t occl_group_add_init(const void *init, size_t size)
{
    if (grp.ninits == grp.cap_inits) {
        int cap = grp.cap_inits ? 2 * grp.cap_inits : 4;
        unsigned char *grown = realloc(grp.inits, (size_t)cap * size);
        if (!grown)
            return occl_fail(occlSystemError, "out of memory");
        grp.inits = grown;
        grp.cap_inits = cap;
    }
    grp.init_size = size;
    memcpy(grp.inits + (size_t)grp.ninits++ * size, init, size);
    return occlSuccess;
}

/* ---- tasks ------------------------------------------------------------------- */

typedef struct occl_task {
    uint64_t entry_ns; /* virtual clock of the stream at the task (vcost.c) */
    or_handed_task op; /* the stream's op, completed when the task has run */
    struct occl_task *next; /* in the communicator's queue */
    occl_ll_state ll; /* a low-latency call begun on the calling thread */
    bool large;       /* of calls that never run on the calling thread: counted in comm->large_live */
    int n;
    occl_call calls[];
} occl_task;

static orError_t stream_error_of(occlResult_t res)
{
    return res == occlTimeout ? orErrorTimeout : res == occlRemoteError ? orErrorRemote : orErrorUnknown;
}

/* A call small enough for the calling thread: within a node the
 * low-latency path, across nodes a direct all-reduce (algorithms.c). */
static occlResult_t small_run(const occl_call *c, occl_ll_state *st)
{
    return c->comm->network ? occl_net_small_run(c, st) : occl_ll_run(c, st);
}

/* Runs the task's calls, holding comm->lock; occlInProgress when a call on
 * the calling thread gave up waiting (the communicator's thread resumes it). */
static occlResult_t task_exec(occl_task *t, uint64_t *clock)
{
    occlComm_t comm = t->calls[0].comm;
    if (atomic_load(&comm->revoked))
        return occl_fail(occlInvalidUsage, "the communicator was revoked; call stopped");
    if (t->ll.begun) /* begun on the calling thread: the rest is left */
        return small_run(&t->calls[0], &t->ll);
    occlResult_t res = (occlResult_t)atomic_load(&comm->async_error);
    if (res != occlSuccess)
        occl_fail(res, "the communicator failed earlier; call skipped");
    struct occl_prof_comm *prof = comm->prof; /* NCCL profiler plugin events (profiler.c) */
    /* A small call on the calling thread: neither virtual time nor a trace
     * (occl_vrun's part) applies, and it was found eligible at its launch
     * (occl_run_call's choice), so straight to the low-latency path. */
    if (t->calls[0].ll && !prof && comm->nranks > 1 && res == occlSuccess) {
        occl_fp_begin(comm, &t->calls[0]);
        return small_run(&t->calls[0], t->calls[0].ll);
    }
    if (prof)
        occl_prof_group_start(comm);
    for (int i = 0; i < t->n && res == occlSuccess;) {
        if (occl_coll_is_rma(t->calls[i].coll)) { /* in call order; no virtual time */
            res = occl_rma_run(&t->calls[i++]);
            continue;
        }
        /* Consecutive sends and receives progress together (no ordering deadlock). */
        int j = i;
        while (j < t->n && (t->calls[j].coll == OCCL_COLL_SEND || t->calls[j].coll == OCCL_COLL_RECV))
            j++;
        int m = j > i ? j - i : 1;
        if (t->calls[i].source) { /* a receive from any source, alone in its task */
            res = occl_xfer_probe(comm, &t->calls[i].root);
            if (res != occlSuccess)
                break;
            *t->calls[i].source = t->calls[i].root;
        }
        if (prof)
            occl_prof_calls_start(comm, &t->calls[i], m, *clock);
        res = occl_vrun(&t->calls[i], m, clock);
        if (prof)
            occl_prof_calls_stop(comm, *clock);
        i += m;
    }
    if (prof)
        occl_prof_group_stop(comm);
    return res;
}

/* A call of task_exec that failed: the communicator and the stream say so. */
static void task_report(occl_task *t, occlResult_t res)
{
    occlComm_t comm = t->calls[0].comm;
    occl_comm_set_error(comm, res);
    or_stream_fail(t->calls[0].stream, stream_error_of(res));
    OCCL_WARN("rank %d: %s failed: %s", comm->rank, occl_coll_name(t->calls[0].coll),
              atomic_load(&comm->revoked) ? occlGetLastError(NULL) : comm->last_error);
}

/* Completes the task after task_exec (comm->lock held, released here). */
static void task_end(occl_task *t, occlResult_t res, uint64_t clock)
{
    occlComm_t comm = t->calls[0].comm;
    or_stream_release_vclock(t->calls[0].stream, clock);
    if (res != occlSuccess)
        task_report(t, res);
    atomic_fetch_sub(&comm->tasks_live, 1);
    if (t->large)
        atomic_fetch_sub(&comm->large_live, 1);
    or_lock_release(&comm->lock);
    or_handed_task op = t->op;
    for (int i = 0; i < t->n; i++)
        occl_call_release(&t->calls[i]);
    free(t);
    or_handed_task_done(op);
}

/* Runs on the communicator's thread, in stream order. */
static void task_run(occl_task *t)
{
    occlComm_t comm = t->calls[0].comm;
    uint64_t clock = t->entry_ns;
    or_lock_acquire(&comm->lock);
    t->ll.wait_ns = t->ll.give_up_ns = 0;
    occlResult_t res = task_exec(t, &clock);
    task_end(t, res, clock);
}

/* The communicator's thread runs its tasks one at a time, in the order the
 * tasks reach their streams' heads. A collective waits for its peers there,
 * so it holds no worker: the device's other streams go on, and so do the
 * tasks of other communicators, whatever order each rank reached them in
 * (FSDP's all-gathers and TP's all-reduces on two groups). */
static void *runner_main(void *arg)
{
    occlComm_t comm = arg;
    orSetDevice(comm->device);
    or_bind_thread_to_device(comm->device);
    pthread_mutex_lock(&comm->runner_lock);
    for (;;) {
        occl_task *t = comm->runner_head;
        if (!t) {
            if (comm->runner_stop)
                break;
            pthread_cond_wait(&comm->runner_cv, &comm->runner_lock);
            continue;
        }
        comm->runner_head = t->next;
        if (!comm->runner_head)
            comm->runner_tail = NULL;
        pthread_mutex_unlock(&comm->runner_lock);
        if (!t->ll.begun) /* else begun on the calling thread */
            or_handed_task_begin(t->op);
        task_run(t);
        atomic_fetch_add_explicit(&comm->runner_calls, 1, memory_order_relaxed);
        if (atomic_fetch_sub(&comm->runner_load, 1) == 1)
            or_notifier_signal(&comm->runner_idle);
        pthread_mutex_lock(&comm->runner_lock);
    }
    pthread_mutex_unlock(&comm->runner_lock);
    return NULL;
}

uint64_t occl_comm_runner_calls(occlComm_t comm)
{
    return occl_comm_valid(comm) ? atomic_load(&comm->runner_calls) : 0;
}

occlResult_t occl_runner_start(occlComm_t comm)
{
    if (pthread_create(&comm->runner, NULL, runner_main, comm))
        return occl_fail(occlSystemError, "cannot start the communicator's thread");
    comm->runner_started = true;
    return occlSuccess;
}

void occl_runner_stop(occlComm_t comm)
{
    if (!comm->runner_started)
        return;
    pthread_mutex_lock(&comm->runner_lock);
    comm->runner_stop = true;
    pthread_cond_signal(&comm->runner_cv);
    pthread_mutex_unlock(&comm->runner_lock);
    pthread_join(comm->runner, NULL);
    comm->runner_started = false;
}

static void runner_queue_locked(occlComm_t comm, occl_task *t)
{
    atomic_fetch_add(&comm->runner_load, 1);
    t->next = NULL;
    if (comm->runner_tail)
        comm->runner_tail->next = t;
    else
        comm->runner_head = t;
    comm->runner_tail = t;
    pthread_cond_signal(&comm->runner_cv);
}

/* The task the calling thread is launching, and whether it reached the
 * head of its stream at once and may run right there (run_on_caller). */
static _Thread_local occl_task *launching;
static _Thread_local bool launched_here;
/* A group of several communicators' calls: each would wait for the next,
 * which this thread has yet to launch. */
static _Thread_local bool launching_many;

/* A small call whose stream is idle (on one node, or an all-reduce across
 * nodes) runs on the thread that issues it, when nothing of its
 * communicator runs or waits to: no hand-off to the communicator's thread,
 * whose wake-up would cost more than the call (docs/occl-perf.md). Not in virtual time or traces, which account for
 * the call on the communicator's thread. */
static bool call_fits_caller(const occl_call *c)
{
    return occl_caller_wait_ns(c->comm) &&
           (occl_ll_eligible(c) || occl_ll_solo(c) || occl_net_small_eligible(c)) &&
           /* a tuner's choice is asked on the communicator's thread */
           !(c->comm->tuner && occl_tuner_asks(c->coll));
}

/* fits: call_fits_caller(c), which a repeated call knows already. */
static bool call_may_run_on_caller(const occl_call *c, bool fits)
{
    return !launching_many && fits && !or_inline_tasks_off();
}

static bool may_run_on_caller(const occl_task *t)
{
    return t == launching && !t->large; /* launch asked call_may_run_on_caller */
}

/* The calling thread's turn to run a task of comm: it takes the
 * communicator's lock (which serializes its tasks) when the runner has
 * none queued or running, so the call keeps its place after them. Only
 * tried: a thread that holds it (the runner, another caller) is busy with
 * the communicator. A task queued for the runner meanwhile is seen by the
 * second look (the lock's exchange and the queueing's count are both
 * sequentially consistent), and the lock is given back. */
static bool caller_claim(occlComm_t comm)
{
    if (atomic_load(&comm->runner_load) || !or_lock_try(&comm->lock))
        return false;
    if (!atomic_load(&comm->runner_load))
        return true;
    or_lock_release(&comm->lock);
    return false;
}

/* When the task reaches the head of its stream, under the device's lock
 * (the runner never holds its lock while taking that one). */
static void task_hand(void *arg, or_handed_task op)
{
    occl_task *t = arg;
    occlComm_t comm = t->calls[0].comm;
    t->op = op;
    if (may_run_on_caller(t) && caller_claim(comm)) {
        launched_here = true;
        return;
    }
    pthread_mutex_lock(&comm->runner_lock);
    runner_queue_locked(comm, t);
    pthread_mutex_unlock(&comm->runner_lock);
}

/* The calling thread's turn ends with task t, which it began and whose
 * peers are late: t goes first in the communicator thread's queue (tasks
 * queued meanwhile reached their streams' heads after it), counted before
 * the lock is given back, so nothing overtakes it. */
static void caller_hand_over(occlComm_t comm, occl_task *t)
{
    pthread_mutex_lock(&comm->runner_lock);
    atomic_fetch_add(&comm->runner_load, 1);
    t->next = comm->runner_head;
    comm->runner_head = t;
    if (!comm->runner_tail)
        comm->runner_tail = t;
    pthread_cond_signal(&comm->runner_cv);
    pthread_mutex_unlock(&comm->runner_lock);
    or_lock_release(&comm->lock);
}

/* Run task t on the calling thread (which holds the communicator's lock,
 * caller_claim) for up to OCCL_CALLER_WAIT_US of waiting for peers; if they
 * have not come by then, the communicator's thread takes the rest over and
 * the caller goes on. */
static void run_on_caller(occl_task *t)
{
    occlComm_t comm = t->calls[0].comm;
    uint64_t clock = t->entry_ns;
    or_handed_task_begin(t->op);
    t->calls[0].ll = &t->ll;
    t->ll.wait_ns = occl_caller_wait_ns(comm);
    t->ll.give_up_ns = 0;
    occlResult_t res = task_exec(t, &clock);
    if (res == occlInProgress)
        caller_hand_over(comm, t);
    else
        task_end(t, res, clock);
}

/* The call on the calling thread with no stream op at all, when its stream
 * is idle and nothing of its communicator runs or waits: as run_on_caller,
 * without allocating a task and an op and passing them through the stream
 * (an inline task, src/stream.c). If its peers are late, the task and its
 * op are made then and the communicator's thread takes the rest over.
 * Until then the task is not counted in tasks_live: the communicator's
 * lock, held throughout, stands for it (occl_comm_quiesce_locked).
 * false: not possible, launch the call as usual. */
static bool launch_inline(occl_call *call)
{
    occlComm_t comm = call->comm;
    if (!caller_claim(comm))
        return false;
    /* A NULL stream is the default stream of the call's device. */
    int prev = call->stream_device;
    if (!call->sref.stream && !call->stream) {
        orGetDevice(&prev);
        if (prev != call->stream_device)
            orSetDevice(call->stream_device);
    }
    or_inline_task it;
    bool idle = call->sref.stream ? or_inline_task_begin_ref(&call->sref, &it)
                                  : or_inline_task_begin(call->stream, &it);
    if (!idle) {
        if (prev != call->stream_device)
            orSetDevice(prev);
        or_lock_release(&comm->lock);
        return false;
    }
    _Alignas(max_align_t) unsigned char room[sizeof(occl_task) + sizeof(occl_call)];
    occl_task *t = (occl_task *)room;
    t->entry_ns = 0;
    t->op = NULL;
    t->next = NULL;
    t->n = 1;
    t->large = false;
    t->ll.begun = t->ll.posted = false;
    t->calls[0] = *call;
    t->calls[0].ll = &t->ll;
    uint64_t clock = 0;
    t->ll.wait_ns = occl_caller_wait_ns(comm);
    t->ll.give_up_ns = 0;
    occlResult_t res = task_exec(t, &clock);
    if (res == occlInProgress) {
        occl_task *h = malloc(sizeof room);
        or_handed_task op = h ? or_inline_task_hand(&it) : NULL;
        if (op) {
            /* The communicator's thread takes it over. */
            memcpy(h, room, sizeof room);
            h->calls[0].ll = &h->ll;
            h->op = op;
            atomic_fetch_add(&comm->tasks_live, 1);
            caller_hand_over(comm, h);
            if (prev != call->stream_device)
                orSetDevice(prev);
            return true;
        }
        free(h); /* out of memory: the call ends here */
        t->ll.wait_ns = t->ll.give_up_ns = 0;
        res = task_exec(t, &clock);
    }
    if (res != occlSuccess)
        task_report(t, res);
    or_lock_release(&comm->lock);
    or_inline_task_end(&it);
    if (prev != call->stream_device)
        orSetDevice(prev);
    return true;
}

/* Calls a calling thread queues at once while the peers are stuck, before
 * it waits again: a soft bound on the calls queued behind a late peer. */
enum { STUCK_QUEUE = 64 };

/* A number that grows whenever a peer of the node or the communicator's
 * thread finishes a call (never 0). */
static uint64_t progress(occlComm_t comm)
{
    return occl_ll_peers_progress(comm) + atomic_load(&comm->runner_calls);
}

/* The communicator's thread has nothing handed over left (or the
 * communicator failed). */
static bool runner_idle(void *arg)
{
    occlComm_t comm = arg;
    return !atomic_load(&comm->runner_load) || atomic_load(&comm->async_error) != occlSuccess;
}

/* A call that may run on the calling thread finds the communicator's
 * thread still busy with calls handed over to it (their peers were late):
 * wait for it to finish them, as long as calls keep being finished, and
 * then run the call here. Else one late peer would send every later call
 * of a stream that never drains (a loop of small calls) through the
 * communicator's thread: a task, a stream op and two threads per call
 * (docs/occl-perf.md). Given up as a call on this thread is, after
 * OCCL_CALLER_WAIT_US in which no call was finished: then the peers are
 * stuck, and the next STUCK_QUEUE calls are queued at once unless some call
 * is finished meanwhile. */
static void runner_drain(occlComm_t comm)
{
    uint64_t mark = progress(comm);
    if (mark == atomic_load_explicit(&comm->stuck_progress, memory_order_relaxed) &&
        atomic_load(&comm->tasks_live) < atomic_load_explicit(&comm->stuck_queue, memory_order_relaxed))
        return;
    uint64_t wait = occl_caller_wait_ns(comm);
    while (!or_wait_sleeping(&comm->runner_idle, runner_idle, comm, or_now_ns() + wait)) {
        uint64_t m = progress(comm);
        if (m == mark) {
            atomic_store_explicit(&comm->stuck_progress, m, memory_order_relaxed);
            atomic_store_explicit(&comm->stuck_queue, atomic_load(&comm->tasks_live) + STUCK_QUEUE,
                                  memory_order_relaxed);
            return;
        }
        mark = m;
    }
}

/* fits: whether calls[0] would fit the calling thread (call_fits_caller),
 * or -1 to find out. */
static occlResult_t launch(occl_call *calls, int n, int fits)
{
    occlComm_t comm = calls[0].comm;
    bool small = n == 1 && call_may_run_on_caller(&calls[0], fits < 0 ? call_fits_caller(&calls[0]) : fits);
    if (small) {
        /* Not behind a large call: that one is not late, only long. */
        if (atomic_load(&comm->runner_load) && !atomic_load(&comm->large_live))
            runner_drain(comm);
        if (launch_inline(&calls[0]))
            return occlSuccess;
    }
    occl_task *t = malloc(sizeof *t + (size_t)n * sizeof *calls);
    if (!t)
        return occl_fail(occlSystemError, "out of memory");
    t->n = n;
    t->large = !small;
    if (t->large)
        atomic_fetch_add(&comm->large_live, 1);
    t->ll.begun = t->ll.posted = false;
    memcpy(t->calls, calls, (size_t)n * sizeof *calls);
    /* A NULL stream is the default stream of the device current at the call,
     * which a group may have changed since. */
    int prev;
    orGetDevice(&prev);
    orSetDevice(calls[0].stream_device);
    launching = t;
    launched_here = false;
    atomic_fetch_add(&calls[0].comm->tasks_live, 1);
    orError_t err = or_launch_handed_task_held(calls[0].stream, task_hand, t, &t->entry_ns);
    launching = NULL;
    orSetDevice(prev);
    if (err != orSuccess) {
        atomic_fetch_sub(&comm->tasks_live, 1);
        if (t->large)
            atomic_fetch_sub(&comm->large_live, 1);
        free(t);
        return occl_fail(occlUnhandledDeviceError, "cannot enqueue on the stream");
    }
    if (launched_here)
        run_on_caller(t);
    return occlSuccess;
}

occlResult_t occlGroupStart(void)
{
    if (grp.depth++ == 0)
        grp.error = occlSuccess;
    return occlSuccess;
}

/* Check every call before launching any, so a bad group starts nothing:
 * the calls of one communicator must share one stream. */
static occlResult_t group_check(void)
{
    occlResult_t res = grp.error;
    if (res != occlSuccess) /* a call of the group failed: none of it runs */
        occl_fail(res, "a call of the group failed: %s", grp.reason);
    for (int i = 0; i < grp.ncalls && res == occlSuccess; i++)
        for (int j = i + 1; j < grp.ncalls && res == occlSuccess; j++)
            if (grp.calls[j].comm == grp.calls[i].comm &&
                (grp.calls[j].stream != grp.calls[i].stream ||
                 grp.calls[j].stream_device != grp.calls[i].stream_device))
                res = occl_fail(occlInvalidUsage, "calls of one communicator in a group must use "
                                                  "one stream");
    return res;
}

/* The calls of grp.calls[i]'s communicator, in order, into mine[]; taken
 * out of grp.calls (their comm set to NULL). */
static int group_take(int i, occl_call *mine)
{
    occlComm_t comm = grp.calls[i].comm;
    int n = 0;
    for (int j = i; j < grp.ncalls; j++)
        if (grp.calls[j].comm == comm) {
            mine[n++] = grp.calls[j];
            grp.calls[j].comm = NULL;
        }
    return n;
}

static void group_reset(void)
{
    for (int i = 0; i < grp.ncalls; i++)
        if (grp.calls[i].comm) /* not taken into a task */
            occl_call_release(&grp.calls[i]);
    free(grp.inits);
    free(grp.calls);
    memset(&grp, 0, sizeof grp);
}

/* The group's virtual time, in ns: each communicator's calls charged by the
 * model (occl_vsimulate) from every rank's clock at 0; communicators on one
 * stream one after the other, on different streams side by side. */
static occlResult_t group_simulate(uint64_t *total)
{
    occlResult_t res = occlSuccess;
    occl_call *mine = malloc((size_t)(grp.ncalls ? grp.ncalls : 1) * sizeof *mine);
    struct sim_stream {
        orStream_t stream;
        int device;
        uint64_t end;
    } *streams = calloc((size_t)(grp.ncalls ? grp.ncalls : 1), sizeof *streams);
    int nstreams = 0;
    *total = 0;
    if (!mine || !streams)
        res = occl_fail(occlSystemError, "out of memory");
    for (int i = 0; i < grp.ncalls && res == occlSuccess; i++) {
        if (!grp.calls[i].comm)
            continue;
        int n = group_take(i, mine), kept = 0;
        /* One-sided calls are not modelled: they take no virtual time. */
        for (int k = 0; k < n; k++) {
            if (occl_coll_is_rma(mine[k].coll))
                occl_call_release(&mine[k]);
            else
                mine[kept++] = mine[k];
        }
        if (!(n = kept))
            continue;
        int s = 0;
        while (s < nstreams &&
               (streams[s].stream != mine[0].stream || streams[s].device != mine[0].stream_device))
            s++;
        if (s == nstreams)
            streams[nstreams++] = (struct sim_stream){mine[0].stream, mine[0].stream_device, 0};
        uint64_t *clocks = calloc((size_t)mine[0].comm->nranks, sizeof *clocks);
        if (!clocks) {
            res = occl_fail(occlSystemError, "out of memory");
            break;
        }
        res = occl_vsimulate(mine, n, clocks);
        uint64_t last = 0;
        for (int r = 0; r < mine[0].comm->nranks; r++)
            last = clocks[r] > last ? clocks[r] : last;
        free(clocks);
        streams[s].end += last;
        if (streams[s].end > *total)
            *total = streams[s].end;
    }
    free(mine);
    free(streams);
    return res;
}

static occlResult_t group_end(bool simulate, occlSimInfo_t *sim)
{
    if (grp.depth == 0)
        return occl_fail(occlInvalidUsage, "%s without occlGroupStart",
                         simulate ? "occlGroupSimulateEnd" : "occlGroupEnd");
    if (--grp.depth > 0)
        return occlSuccess;
    occlResult_t res = group_check();
    /* NCCL's check: the size field says how much of the struct to read and
     * write (an older or newer header's), the magic that it was initialized. */
    occlSimInfo_t info = OCCL_SIM_INFO_INITIALIZER;
    size_t size = 0;
    if (res == occlSuccess && simulate) {
        if (!sim) {
            res = occl_fail(occlInvalidArgument, "occlGroupSimulateEnd: simInfo is NULL");
        } else {
            memcpy(&size, &sim->size, sizeof size);
            if (size > sizeof info)
                size = sizeof info;
            info.magic = 0;
            memcpy(&info, sim, size);
            if (size < offsetof(occlSimInfo_t, estimatedTime) + sizeof info.estimatedTime ||
                info.magic != OCCL_SIM_INFO_MAGIC)
                res = occl_fail(occlInvalidArgument, "occlGroupSimulateEnd: simInfo not "
                                                     "initialized with OCCL_SIM_INFO_INITIALIZER");
        }
    }
    if (res == occlSuccess && grp.ninits)
        res = occl_group_run_inits(grp.inits, grp.ninits);
    if (simulate) {
        uint64_t ns = 0;
        if (res == occlSuccess)
            res = group_simulate(&ns);
        if (res == occlSuccess) {
            info.estimatedTime = (float)((double)ns / 1e3);
            memcpy(sim, &info, size);
        }
        group_reset();
        return res;
    }
    /* One task per communicator, on the stream of its first call. */
    for (int i = 1; i < grp.ncalls; i++)
        launching_many |= grp.calls[i].comm != grp.calls[0].comm;
    for (int i = 0; i < grp.ncalls && res == occlSuccess; i++) {
        if (!grp.calls[i].comm)
            continue; /* taken into an earlier task */
        occl_call *mine = malloc((size_t)grp.ncalls * sizeof *mine);
        if (!mine) {
            res = occl_fail(occlSystemError, "out of memory");
            break;
        }
        int n = group_take(i, mine);
        res = launch(mine, n, -1);
        if (res != occlSuccess)
            for (int k = 0; k < n; k++)
                occl_call_release(&mine[k]);
        free(mine);
    }
    launching_many = false;
    group_reset();
    return res;
}

occlResult_t occlGroupEnd(void) { return group_end(false, NULL); }

occlResult_t occlGroupSimulateEnd(occlSimInfo_t *simInfo) { return group_end(true, simInfo); }

/* ---- argument checks -------------------------------------------------------- */

static bool has_root(occl_coll c)
{
    return c == OCCL_COLL_BROADCAST || c == OCCL_COLL_REDUCE || c == OCCL_COLL_GATHER ||
           c == OCCL_COLL_SCATTER || c == OCCL_COLL_SEND || c == OCCL_COLL_RECV ||
           c == OCCL_COLL_PUTSIGNAL || c == OCCL_COLL_SIGNAL;
}

/* Elements each buffer holds, per the call's shape. */
static void buffer_counts(const occl_call *c, int n, size_t *send, size_t *recv, bool *overflow)
{
    size_t cnt = c->count, big = cnt * (size_t)n;
    *send = *recv = 0;
    *overflow = n > 0 && cnt > SIZE_MAX / (size_t)n;
    bool root = c->comm->rank == c->root;
    switch (c->coll) {
    case OCCL_COLL_ALLREDUCE: *send = cnt; *recv = cnt; break;
    case OCCL_COLL_BROADCAST: *send = root ? cnt : 0; *recv = cnt; break;
    case OCCL_COLL_REDUCE: *send = cnt; *recv = root ? cnt : 0; break;
    case OCCL_COLL_ALLGATHER: *send = cnt; *recv = big; break;
    case OCCL_COLL_REDUCESCATTER: *send = big; *recv = cnt; break;
    case OCCL_COLL_ALLTOALL: *send = big; *recv = big; break;
    case OCCL_COLL_GATHER: *send = cnt; *recv = root ? big : 0; break;
    case OCCL_COLL_SCATTER: *send = root ? big : 0; *recv = cnt; break;
    case OCCL_COLL_SEND: *send = cnt; *recv = 0; break;
    case OCCL_COLL_RECV: *send = 0; *recv = cnt; break;
    case OCCL_COLL_PUTSIGNAL: *send = cnt; break;
    case OCCL_COLL_SIGNAL:
    case OCCL_COLL_WAITSIGNAL: break;
    }
}

/* Why buf, given to a call, is not device memory of this rank. */
static const char *not_device_memory(const void *buf)
{
    orPointerAttributes attr;
    if (orPointerGetAttributes(&attr, buf) != orSuccess)
        return "is not device memory of this rank";
    switch (attr.type) {
    case orMemoryTypeHost: return "is pinned host memory (orMallocHost), not device memory";
    case orMemoryTypeDevice:
        return "runs past the end of its device allocation, or is another rank's memory "
               "(an opened IPC handle)";
    case orMemoryTypeRemote: return "is device memory of another node (an opened IPC handle)";
    default: return "is host memory (or freed device memory), not device memory";
    }
}

/* Buffers of this process's devices found valid, kept until any device
 * memory is freed: a loop of calls on the same buffers looks each up once
 * (the look-up takes the device's memory lock), not twice per call. */
static _Thread_local struct checked_buffer {
    const void *buf;
    size_t bytes;
    int device;
    uint64_t frees;
} checked[4];
static _Thread_local unsigned checked_next;

static occlResult_t check_buffer(const occl_call *c, const void *buf, size_t elems, const char *name)
{
    if (!elems)
        return occlSuccess;
    size_t bytes = elems * occl_type_size(c->type);
    if (!buf)
        return occl_fail(occlInvalidArgument, "%s: %s is NULL", occl_coll_name(c->coll), name);
    if (bytes / occl_type_size(c->type) != elems)
        return occl_fail(occlInvalidArgument, "%s: %zu elements overflow", occl_coll_name(c->coll), elems);
    uint64_t frees = or_mem_free_count();
    for (int i = 0; i < 4; i++)
        if (checked[i].buf == buf && checked[i].bytes == bytes && checked[i].frees == frees &&
            checked[i].device == c->comm->device)
            return occlSuccess;
    or_mem_ref ref;
    if (or_mem_export(buf, bytes, &ref) != orSuccess)
        return occl_fail(occlInvalidArgument, "%s: %s (%zu bytes) %s", occl_coll_name(c->coll),
                         name, bytes, not_device_memory(buf));
    if (ref.device != c->comm->device)
        return occl_fail(occlInvalidUsage, "%s: %s is memory of device %d, the communicator's is "
                                           "device %d", occl_coll_name(c->coll), name, ref.device,
                         c->comm->device);
    if (ref.rank == c->comm->peers[c->comm->rank].world_rank)
        checked[checked_next++ % 4] = (struct checked_buffer){buf, bytes, ref.device, frees};
    return occlSuccess;
}

/* The last call this thread found valid and launched at once: the next
 * call of a loop (a benchmark, a training step's small all-reduces) on the
 * same stream and buffers is not looked up again while no device memory
 * was freed and no stream destroyed since. A named stream only: the NULL
 * stream is the current device's, which orSetDevice changes. */
static _Thread_local struct checked_call {
    occlComm_t comm;
    occl_coll coll;
    const void *sendbuff;
    void *recvbuff;
    size_t count;
    occlDataType_t type;
    int root;
    orStream_t stream;
    or_stream_ref sref;
    uint64_t frees, streams_destroyed;
    bool fits; /* call_fits_caller */
} last_checked;

static bool checked_before(const occl_call *c)
{
    const struct checked_call *l = &last_checked;
    return c->stream && !c->source && l->stream == c->stream && l->comm == c->comm && l->coll == c->coll &&
           l->sendbuff == c->sendbuff && l->recvbuff == c->recvbuff && l->count == c->count &&
           l->type == c->type && l->root == c->root && l->frees == or_mem_free_count() &&
           l->streams_destroyed == or_stream_destroy_count();
}

static occlResult_t enqueue(occl_call *c)
{
    occlResult_t res = occlSuccess;
    if (!occl_comm_valid(c->comm))
        res = occl_fail(occlInvalidArgument, "%s: comm is not a live communicator",
                        occl_coll_name(c->coll));
    else if (atomic_load(&c->comm->revoked))
        res = occl_fail(occlInvalidUsage, "%s: the communicator was revoked", occl_coll_name(c->coll));
    else if (atomic_load(&c->comm->suspended))
        res = occl_fail(occlInvalidUsage, "%s: the communicator is suspended (occlCommResume first)",
                        occl_coll_name(c->coll));
    else if (c->comm->finalized)
        res = occl_fail(occlInvalidUsage, "%s: the communicator is finalized", occl_coll_name(c->coll));
    else if ((unsigned)c->type >= occlNumTypes)
        res = occl_fail(occlInvalidArgument, "%s: unknown data type %d", occl_coll_name(c->coll), (int)c->type);
    else if (c->source && grp.depth)
        res = occl_fail(occlInvalidUsage, "RecvAnySource: not in a group (the calls of a group "
                                          "are matched before they run; its sender is known "
                                          "only when it runs)");
    else if (c->source && c->comm->nranks == 1)
        res = occl_fail(occlInvalidUsage, "RecvAnySource: the communicator has no other rank");
    else if (has_root(c->coll) && !c->source && (c->root < 0 || c->root >= c->comm->nranks))
        res = occl_fail(occlInvalidArgument, "%s: %s %d is not in [0, %d)", occl_coll_name(c->coll),
                        c->coll >= OCCL_COLL_SEND ? "peer" : "root",
                        c->root, c->comm->nranks);
    else if ((c->coll == OCCL_COLL_SEND || c->coll == OCCL_COLL_RECV) && c->root == c->comm->rank)
        res = occl_fail(occlInvalidUsage, "%s: peer is this rank", occl_coll_name(c->coll));
    bool known = res == occlSuccess && !grp.depth && checked_before(c);
    if (known) {
        c->sref = last_checked.sref;
        c->stream_device = c->sref.device;
    }
    if (res == occlSuccess && !known) {
        if (or_stream_ref_of(c->stream, &c->sref) != orSuccess)
            res = occl_fail(occlInvalidArgument, "%s: invalid stream", occl_coll_name(c->coll));
        else if (c->sref.device != c->comm->device)
            res = occl_fail(occlInvalidUsage, "%s: the stream is on device %d, the communicator "
                                              "on device %d", occl_coll_name(c->coll),
                            c->sref.device, c->comm->device);
        c->stream_device = res == occlSuccess ? c->sref.device : -1;
    }
    if (res == occlSuccess && !known) {
        uint64_t frees = or_mem_free_count(), destroyed = or_stream_destroy_count();
        size_t send, recv;
        bool overflow;
        buffer_counts(c, c->comm->nranks, &send, &recv, &overflow);
        if (overflow)
            res = occl_fail(occlInvalidArgument, "%s: count %zu times %d ranks overflows",
                            occl_coll_name(c->coll), c->count, c->comm->nranks);
        if (res == occlSuccess)
            res = check_buffer(c, c->sendbuff, send,
                               c->coll == OCCL_COLL_PUTSIGNAL ? "localbuff" : "sendbuff");
        if (res == occlSuccess)
            res = check_buffer(c, c->recvbuff, recv, "recvbuff");
        /* The counts read before the look-ups: a free meanwhile is seen next time. */
        if (res == occlSuccess && !grp.depth && c->stream && !occl_coll_is_rma(c->coll) && !c->source)
            last_checked = (struct checked_call){c->comm, c->coll, c->sendbuff, c->recvbuff, c->count,
                                                 c->type, c->root, c->stream, c->sref, frees, destroyed,
                                                 call_fits_caller(c)};
    }
    /* Last: it copies WaitSignal's descriptors, which the call then owns. */
    if (res == occlSuccess && occl_coll_is_rma(c->coll))
        res = occl_rma_check(c);
    if (res != occlSuccess)
        return occl_group_fail(res);
    if (grp.depth) {
        if (grp.ncalls == grp.cap_calls) {
            int cap = grp.cap_calls ? 2 * grp.cap_calls : 8;
            occl_call *grown = realloc(grp.calls, (size_t)cap * sizeof *grown);
            if (!grown) {
                occl_call_release(c);
                return occl_fail(occlSystemError, "out of memory");
            }
            grp.calls = grown;
            grp.cap_calls = cap;
        }
        grp.calls[grp.ncalls] = *c;
        grp.calls[grp.ncalls++].sref.stream = NULL;
        return occlSuccess;
    }
    occlResult_t launched = launch(c, 1, known ? last_checked.fits : -1);
    if (launched != occlSuccess)
        occl_call_release(c);
    return launched;
}

occlResult_t occl_enqueue_call(occl_call *c) { return enqueue(c); }

static occlResult_t with_op(occl_call *c, occlRedOp_t op)
{
    if (!occl_comm_valid(c->comm))
        return enqueue(c); /* reports the bad communicator */
    if (!occl_redop_lookup(c->comm, op, c->type, c)) {
        return occl_group_fail(occl_fail(occlInvalidArgument, "%s: unknown reduction op %d for "
                                                              "this communicator and type",
                                         occl_coll_name(c->coll), (int)op));
    }
    return enqueue(c);
}

occlResult_t occlAllReduce(const void *sendbuff, void *recvbuff, size_t count, occlDataType_t datatype,
                           occlRedOp_t op, occlComm_t comm, orStream_t stream)
{
    occl_call c = {OCCL_COLL_ALLREDUCE, comm, sendbuff, recvbuff, count, datatype, {0}, false, NULL, 0, stream, -1, NULL, NULL, {0}, {0}};
    return with_op(&c, op);
}

occlResult_t occlReduce(const void *sendbuff, void *recvbuff, size_t count, occlDataType_t datatype,
                        occlRedOp_t op, int root, occlComm_t comm, orStream_t stream)
{
    occl_call c = {OCCL_COLL_REDUCE, comm, sendbuff, recvbuff, count, datatype, {0}, false, NULL, root, stream, -1, NULL, NULL, {0}, {0}};
    return with_op(&c, op);
}

occlResult_t occlReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               occlDataType_t datatype, occlRedOp_t op, occlComm_t comm, orStream_t stream)
{
    occl_call c = {OCCL_COLL_REDUCESCATTER, comm, sendbuff, recvbuff, recvcount, datatype, {0}, false, NULL, 0, stream, -1, NULL, NULL, {0}, {0}};
    return with_op(&c, op);
}

occlResult_t occlBroadcast(const void *sendbuff, void *recvbuff, size_t count, occlDataType_t datatype,
                           int root, occlComm_t comm, orStream_t stream)
{
    occl_call c = {OCCL_COLL_BROADCAST, comm, sendbuff, recvbuff, count, datatype, {0}, false, NULL, root, stream, -1, NULL, NULL, {0}, {0}};
    return enqueue(&c);
}

occlResult_t occlBcast(void *buff, size_t count, occlDataType_t datatype, int root, occlComm_t comm,
                       orStream_t stream)
{
    return occlBroadcast(buff, buff, count, datatype, root, comm, stream);
}

occlResult_t occlAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           occlDataType_t datatype, occlComm_t comm, orStream_t stream)
{
    occl_call c = {OCCL_COLL_ALLGATHER, comm, sendbuff, recvbuff, sendcount, datatype, {0}, false, NULL, 0, stream, -1, NULL, NULL, {0}, {0}};
    return enqueue(&c);
}

occlResult_t occlAlltoAll(const void *sendbuff, void *recvbuff, size_t count, occlDataType_t datatype,
                          occlComm_t comm, orStream_t stream)
{
    occl_call c = {OCCL_COLL_ALLTOALL, comm, sendbuff, recvbuff, count, datatype, {0}, false, NULL, 0, stream, -1, NULL, NULL, {0}, {0}};
    return enqueue(&c);
}

occlResult_t occlGather(const void *sendbuff, void *recvbuff, size_t count, occlDataType_t datatype,
                        int root, occlComm_t comm, orStream_t stream)
{
    occl_call c = {OCCL_COLL_GATHER, comm, sendbuff, recvbuff, count, datatype, {0}, false, NULL, root, stream, -1, NULL, NULL, {0}, {0}};
    return enqueue(&c);
}

occlResult_t occlScatter(const void *sendbuff, void *recvbuff, size_t count, occlDataType_t datatype,
                         int root, occlComm_t comm, orStream_t stream)
{
    occl_call c = {OCCL_COLL_SCATTER, comm, sendbuff, recvbuff, count, datatype, {0}, false, NULL, root, stream, -1, NULL, NULL, {0}, {0}};
    return enqueue(&c);
}

occlResult_t occlSend(const void *sendbuff, size_t count, occlDataType_t datatype, int peer,
                      occlComm_t comm, orStream_t stream)
{
    occl_call c = {OCCL_COLL_SEND, comm, sendbuff, NULL, count, datatype, {0}, false, NULL, peer, stream, -1, NULL, NULL, {0}, {0}};
    return enqueue(&c);
}

occlResult_t occlRecv(void *recvbuff, size_t count, occlDataType_t datatype, int peer,
                      occlComm_t comm, orStream_t stream)
{
    occl_call c = {OCCL_COLL_RECV, comm, NULL, recvbuff, count, datatype, {0}, false, NULL, peer, stream, -1, NULL, NULL, {0}, {0}};
    return enqueue(&c);
}

occlResult_t occlRecvAnySource(void *recvbuff, size_t count, occlDataType_t datatype, int *peer,
                               occlComm_t comm, orStream_t stream)
{
    if (!peer)
        return occl_group_fail(occl_fail(occlInvalidArgument, "RecvAnySource: peer is NULL"));
    *peer = -1;
    occl_call c = {OCCL_COLL_RECV, comm, NULL, recvbuff, count, datatype, {0}, false, NULL, -1, stream, -1,
                   peer, NULL, {0}, {0}};
    return enqueue(&c);
}
