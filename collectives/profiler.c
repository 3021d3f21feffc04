/*
 * collectives/profiler.c - events for an NCCL profiler plugin.
 *
 * OCCL runs each task of a communicator (one call, or the calls of a
 * group) on the communicator's thread; the events follow NCCL's hierarchy:
 *
 *   GroupApi            the task (v5+)
 *     Group             the task (parent: GroupApi)
 *     CollApi / P2pApi  each call of it (v5+, parent: GroupApi)
 *       Coll / P2p      each call (parent: its CollApi/P2pApi; v4: the Group)
 *         KernelCh      the call's span on channel 0, with its start and end
 *                       in pTimer: virtual ns under OPENREG_TIME=virtual,
 *                       else CLOCK_MONOTONIC ns
 *         ProxyOp       each transfer of a step, to or from one peer
 *           ProxyStep   the transfer's one step; its states carry transSize:
 *                       SendGPUWait, SendPeerWait, SendWait when a send is
 *                       posted; RecvWait when a receive is, RecvFlushWait
 *                       and RecvGPUWait when its data has arrived
 *
 * (The exchange of entry clocks that precedes a call under virtual time is
 * bookkeeping of the model, not the call's data: it is not reported.)
 *
 * NCCL starts the API events in the user's call; OCCL starts them when the
 * task runs (the call's arguments are the same). Only the event types the
 * plugin's eActivationMask enables are started; a child whose parent is
 * not enabled gets a NULL parentObj.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin.h"

struct occl_prof_comm {
    const occl_plugin_lib *lib;
    void *ctx;
    int mask; /* eActivationMask, as the plugin set it */
    void *group_api, *group;
    /* The calls running now (consecutive point-to-point calls run
     * together) and their events: api[i], task[i], kernel[i]. */
    const occl_call *calls;
    int ncalls, cap;
    void **api, **task, **kernel;
    /* Runs of transfers still to come that are not the calls' data: under
     * virtual time occl_vrun first exchanges entry clocks with the peers. */
    int skip_runs;
};

static bool resolve(void *handle, const char *name, const void **sym, int *version)
{
    for (int v = 6; v >= 4; v--) {
        char s[32];
        snprintf(s, sizeof s, "ncclProfiler_v%d", v);
        const ncclProfiler_v5_t *p = dlsym(handle, s);
        if (!p)
            continue;
        /* The members every version has, in the same places. */
        if (!p->name || !p->init || !p->startEvent || !p->stopEvent || !p->recordEventState || !p->finalize) {
            OCCL_WARN("profiler plugin '%s' refused: %s lacks a name or a function; continuing without it", name,
                      s);
            return false;
        }
        *sym = p;
        *version = v;
        return true;
    }
    occl_plugin_refuse_versions(handle, "profiler", name, "ncclProfiler", 4, 6);
    return false;
}

void occl_prof_comm_init(occlComm_t comm)
{
    const occl_plugin_lib *lib = occl_plugin_acquire(OCCL_PLUGIN_PROFILER, resolve);
    if (!lib)
        return;
    struct occl_prof_comm *p = calloc(1, sizeof *p);
    if (!p) {
        occl_plugin_refuse_for_comm(OCCL_PLUGIN_PROFILER, comm, "allocation", ncclSystemError);
        occl_plugin_release(OCCL_PLUGIN_PROFILER);
        return;
    }
    p->lib = lib;
    char name[32];
    snprintf(name, sizeof name, "%016llx", (unsigned long long)comm->id);
    ncclResult_t r;
    if (lib->version >= 5)
        r = ((const ncclProfiler_v5_t *)lib->sym)
                ->init(&p->ctx, comm->id, &p->mask, name, comm->nnodes, comm->nranks, comm->rank, occl_plugin_logger);
    else
        r = ((const ncclProfiler_v4_t *)lib->sym)
                ->init(&p->ctx, &p->mask, name, comm->id, comm->nnodes, comm->nranks, comm->rank, occl_plugin_logger);
    if (r != ncclSuccess) {
        occl_plugin_refuse_for_comm(OCCL_PLUGIN_PROFILER, comm, "init", r);
        free(p);
        occl_plugin_release(OCCL_PLUGIN_PROFILER);
        return;
    }
    if (lib->version == 4)
        p->mask &= 0xff; /* v4 descriptors name their type in one byte */
    comm->prof = p;
    OCCL_INFO("rank %d: comm %016llx uses profiler plugin '%s' (v%d), event mask 0x%x", comm->rank,
              (unsigned long long)comm->id, *(const char *const *)lib->sym, lib->version, (unsigned)p->mask);
}

void occl_prof_comm_fini(occlComm_t comm)
{
    struct occl_prof_comm *p = comm->prof;
    if (!p)
        return;
    ncclResult_t r = ((const ncclProfiler_v5_t *)p->lib->sym)->finalize(p->ctx);
    if (r != ncclSuccess)
        OCCL_WARN("rank %d: profiler plugin finalize returned %d", comm->rank, r);
    comm->prof = NULL;
    free(p->api);
    free(p->task);
    free(p->kernel);
    free(p);
    occl_plugin_release(OCCL_PLUGIN_PROFILER);
}

/* Start an event of type d->type if the plugin wants it; its handle or NULL. */
static void *start(occlComm_t comm, ncclProfilerEventDescr_v6_t *d)
{
    struct occl_prof_comm *p = comm->prof;
    if (!(p->mask & (int)d->type))
        return NULL;
    d->rank = comm->rank;
    void *h = NULL;
    ncclResult_t r;
    if (p->lib->version >= 5) {
        /* v5's descriptor is v6's without the copy-engine members. */
        r = ((const ncclProfiler_v6_t *)p->lib->sym)->startEvent(p->ctx, &h, d);
    } else {
        ncclProfilerEventDescr_v4_t d4 = {.type = (uint8_t)d->type, .parentObj = d->parentObj, .rank = d->rank};
        /* Each v4 member is a prefix of v5's. */
        memcpy(&d4.coll, &d->coll, sizeof d4 - offsetof(ncclProfilerEventDescr_v4_t, coll));
        r = ((const ncclProfiler_v4_t *)p->lib->sym)->startEvent(p->ctx, &h, &d4);
    }
    return r == ncclSuccess ? h : NULL;
}

static void stop(occlComm_t comm, void *h)
{
    if (h)
        ((const ncclProfiler_v5_t *)comm->prof->lib->sym)->stopEvent(h);
}

static void record(occlComm_t comm, void *h, ncclProfilerEventState_t s, ncclProfilerEventStateArgs_v5_t *a)
{
    if (h)
        ((const ncclProfiler_v5_t *)comm->prof->lib->sym)->recordEventState(h, s, a);
}

/* NCCL's names (ncclFuncToString). */
static const char *func_name(occl_coll c)
{
    static const char *const names[] = {
        [OCCL_COLL_ALLREDUCE] = "AllReduce", [OCCL_COLL_BROADCAST] = "Broadcast",
        [OCCL_COLL_REDUCE] = "Reduce",       [OCCL_COLL_ALLGATHER] = "AllGather",
        [OCCL_COLL_REDUCESCATTER] = "ReduceScatter", [OCCL_COLL_ALLTOALL] = "AlltoAll",
        [OCCL_COLL_GATHER] = "Gather",       [OCCL_COLL_SCATTER] = "Scatter",
        [OCCL_COLL_SEND] = "Send",           [OCCL_COLL_RECV] = "Recv",
    };
    return (unsigned)c <= OCCL_COLL_RECV ? names[c] : "?";
}

/* NCCL's names (ncclDatatypeToString): "nccl" and OCCL's name capitalized,
 * "float32" -> "ncclFloat32". Kept for the process: plugins keep the
 * pointers. */
#define TYPE_NAMES 64
static char type_names[TYPE_NAMES][32];
static pthread_once_t type_names_once = PTHREAD_ONCE_INIT;

static void type_names_make(void)
{
    for (int t = 0; t < TYPE_NAMES; t++) {
        const char *o = occl_type_name((occlDataType_t)t);
        snprintf(type_names[t], sizeof type_names[t], "nccl%c%s", toupper((unsigned char)o[0]), o[0] ? o + 1 : "");
    }
}

static const char *type_name(occlDataType_t t)
{
    pthread_once(&type_names_once, type_names_make);
    return (unsigned)t < TYPE_NAMES ? type_names[t] : "unknown";
}

static bool is_p2p(const occl_call *c) { return c->coll == OCCL_COLL_SEND || c->coll == OCCL_COLL_RECV; }

static uint64_t timer(uint64_t clock) { return or_vclock_virtual() ? clock : or_trace_now(); }

void occl_prof_group_start(occlComm_t comm)
{
    struct occl_prof_comm *p = comm->prof;
    ncclProfilerEventDescr_v6_t d = {.type = ncclProfileGroupApi};
    d.groupApi.groupDepth = 1;
    p->group_api = start(comm, &d);
    d = (ncclProfilerEventDescr_v6_t){.type = ncclProfileGroup, .parentObj = p->group_api};
    p->group = start(comm, &d);
}

void occl_prof_group_stop(occlComm_t comm)
{
    struct occl_prof_comm *p = comm->prof;
    stop(comm, p->group);
    stop(comm, p->group_api);
    p->group = p->group_api = NULL;
}

void occl_prof_calls_start(occlComm_t comm, const occl_call *calls, int n, uint64_t clock)
{
    struct occl_prof_comm *p = comm->prof;
    p->calls = calls;
    p->ncalls = 0;
    /* As occl_vrun decides to model the calls (vcost.c). */
    p->skip_runs = or_vclock_virtual() && comm->nranks > 1 && (is_p2p(&calls[0]) || calls[0].count > 0);
    if (n > p->cap) {
        void **a = realloc(p->api, (size_t)n * sizeof *a), **t = a ? realloc(p->task, (size_t)n * sizeof *t) : NULL,
             **k = t ? realloc(p->kernel, (size_t)n * sizeof *k) : NULL;
        if (a)
            p->api = a;
        if (t)
            p->task = t;
        if (!k) {
            OCCL_WARN("rank %d: out of memory for profiler events; these calls are not reported", comm->rank);
            return;
        }
        p->kernel = k;
        p->cap = n;
    }
    p->ncalls = n;
    for (int i = 0; i < n; i++) {
        const occl_call *c = &calls[i];
        const char *type = type_name(c->type);
        ncclProfilerEventDescr_v6_t d = {.parentObj = p->group_api};
        if (is_p2p(c)) {
            d.type = ncclProfileP2pApi;
            d.p2pApi.func = func_name(c->coll);
            d.p2pApi.count = c->count;
            d.p2pApi.datatype = type;
            d.p2pApi.stream = c->stream;
        } else {
            d.type = ncclProfileCollApi;
            d.collApi.func = func_name(c->coll);
            d.collApi.count = c->count;
            d.collApi.datatype = type;
            d.collApi.root = c->root;
            d.collApi.stream = c->stream;
        }
        p->api[i] = start(comm, &d);
        /* v4 had no API events: its tasks hang off the group. */
        d = (ncclProfilerEventDescr_v6_t){.parentObj = p->lib->version >= 5 ? p->api[i] : p->group};
        if (is_p2p(c)) {
            d.type = ncclProfileP2p;
            d.p2p.func = func_name(c->coll);
            d.p2p.buff = c->coll == OCCL_COLL_SEND ? (void *)c->sendbuff : c->recvbuff;
            d.p2p.datatype = type;
            d.p2p.count = c->count;
            d.p2p.peer = c->root;
            d.p2p.nChannels = 1;
            d.p2p.parentGroup = p->group;
        } else {
            d.type = ncclProfileColl;
            d.coll.seqNumber = comm->fp.seq + 1; /* occl_vrun numbers it next */
            d.coll.func = func_name(c->coll);
            d.coll.sendBuff = c->sendbuff;
            d.coll.recvBuff = c->recvbuff;
            d.coll.count = c->count;
            d.coll.root = c->root;
            d.coll.datatype = type;
            d.coll.nChannels = 1;
            d.coll.nWarps = 1;
            d.coll.algo = "auto"; /* decided as the call runs: see OCCL_DEBUG=INFO */
            d.coll.proto = "SIMPLE";
            d.coll.parentGroup = p->group;
        }
        p->task[i] = start(comm, &d);
        d = (ncclProfilerEventDescr_v6_t){.type = ncclProfileKernelCh, .parentObj = p->task[i]};
        d.kernelCh.channelId = 0;
        d.kernelCh.pTimer = timer(clock);
        p->kernel[i] = start(comm, &d);
    }
}

void occl_prof_calls_stop(occlComm_t comm, uint64_t clock)
{
    struct occl_prof_comm *p = comm->prof;
    uint64_t end = timer(clock);
    for (int i = 0; i < p->ncalls; i++) {
        ncclProfilerEventStateArgs_v5_t a = {.kernelCh = {.pTimer = end}};
        record(comm, p->kernel[i], ncclProfilerKernelChStop, &a);
        stop(comm, p->kernel[i]);
        stop(comm, p->task[i]);
        stop(comm, p->api[i]);
    }
    p->ncalls = 0;
    p->skip_runs = 0;
}

/* The call a transfer belongs to: the collective, or the point-to-point
 * call of its peer and direction. */
static void *task_of(struct occl_prof_comm *p, const occl_xfer *x)
{
    for (int i = 0; i < p->ncalls; i++) {
        const occl_call *c = &p->calls[i];
        if (!is_p2p(c) || (c->root == x->peer && (c->coll == OCCL_COLL_SEND) == (x->kind == OCCL_XFER_SEND)))
            return p->task[i];
    }
    return NULL;
}

occlResult_t occl_prof_xfers_run(occlComm_t comm, occl_xfer *x, int n,
                                 occlResult_t (*run)(occlComm_t, occl_xfer *, int))
{
    struct occl_prof_comm *p = comm->prof;
    if (p->skip_runs > 0) {
        p->skip_runs--;
        return run(comm, x, n);
    }
    if (!(p->mask & (ncclProfileProxyOp | ncclProfileProxyStep)) || n <= 0)
        return run(comm, x, n);
    void *stack[2 * 8], **h = n <= 8 ? stack : calloc(2 * (size_t)n, sizeof *h);
    if (!h)
        return run(comm, x, n);
    pid_t pid = getpid();
    for (int i = 0; i < n; i++) {
        h[2 * i] = h[2 * i + 1] = NULL;
        if (x[i].resume) /* its step was reported when it was posted */
            continue;
        bool send = x[i].kind == OCCL_XFER_SEND;
        ncclProfilerEventDescr_v6_t d = {.type = ncclProfileProxyOp, .parentObj = task_of(p, &x[i])};
        d.proxyOp.pid = pid;
        d.proxyOp.channelId = 0;
        d.proxyOp.peer = x[i].peer;
        d.proxyOp.nSteps = 1;
        d.proxyOp.chunkSize = x[i].bytes > INT_MAX ? INT_MAX : (int)x[i].bytes;
        d.proxyOp.isSend = send;
        h[2 * i] = start(comm, &d);
        d = (ncclProfilerEventDescr_v6_t){.type = ncclProfileProxyStep, .parentObj = h[2 * i]};
        d.proxyStep.step = 0;
        h[2 * i + 1] = start(comm, &d);
        /* NCCL's states in its order: a send's data is ready and posted at
         * once (GPU wait, peer wait, then the wait for the transfer); a
         * receive waits for the data, then flushes and hands it over. */
        ncclProfilerEventStateArgs_v5_t a = {.proxyStep = {.transSize = x[i].bytes}};
        if (send) {
            record(comm, h[2 * i + 1], ncclProfilerProxyStepSendGPUWait, &a);
            record(comm, h[2 * i + 1], ncclProfilerProxyStepSendPeerWait_v4, &a);
            record(comm, h[2 * i + 1], ncclProfilerProxyStepSendWait, &a);
        } else {
            record(comm, h[2 * i + 1], ncclProfilerProxyStepRecvWait, &a);
        }
    }
    occlResult_t res = run(comm, x, n);
    for (int i = 0; i < n; i++) {
        if (x[i].kind == OCCL_XFER_RECV && res == occlSuccess) {
            ncclProfilerEventStateArgs_v5_t a = {.proxyStep = {.transSize = x[i].bytes}};
            record(comm, h[2 * i + 1], ncclProfilerProxyStepRecvFlushWait, &a);
            record(comm, h[2 * i + 1], ncclProfilerProxyStepRecvGPUWait, &a);
        }
        stop(comm, h[2 * i + 1]);
        stop(comm, h[2 * i]);
    }
    if (h != stack)
        free(h);
    return res;
}
