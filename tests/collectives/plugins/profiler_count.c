/*
 * A profiler plugin written only against NCCL's plugin ABI
 * (nccl_plugin_abi.h, as NCCL's plugins/profiler/example is against NCCL's
 * headers), v5 interface (v4 with -DPROFILER_V4): it enables the event types in TEST_PROFILER_MASK
 * (a number; default: all the ones OCCL emits), counts every event started
 * and stopped per type, checks each event's parent, sums the sizes the
 * events carry, and at finalize writes them to TEST_PROFILER_OUT.<rank> as
 * "key value" lines:
 *   start.<bit> / stop.<bit>  events of type 1<<bit started / stopped
 *   coll.count, p2p.count     elements of the Coll / P2p events
 *   coll.funcs                their functions, in order
 *   types                     the Coll and P2p events' datatypes, in order
 *   send.bytes, recv.bytes    transSize of ProxyStep SendWait / RecvGPUWait
 *   kernel.ns, kernel.end     KernelCh: summed stop-start pTimer, last stop
 *   orphans                   events whose parent was not the type expected
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_plugin_abi.h"

#define NTYPES 16

typedef struct {
    int rank, mask;
    long start[NTYPES], stop[NTYPES];
    unsigned long long coll_count, p2p_count, send_bytes, recv_bytes, kernel_ns, kernel_end;
    long orphans;
    char funcs[512];
    char types[512]; /* the Coll and P2p events' datatypes, in order */
} context;

typedef struct {
    uint64_t type;
    context *ctx;
    uint64_t t0;
} event;

static int bit(uint64_t type)
{
    for (int b = 0; b < NTYPES; b++)
        if (type == (1ull << b))
            return b;
    return -1;
}

/* The parent a type hangs from in NCCL's hierarchy (0: none checked). */
static uint64_t parent_type(uint64_t type)
{
    switch (type) {
    case ncclProfileGroup: return ncclProfileGroupApi;
    case ncclProfileCollApi:
    case ncclProfileP2pApi: return ncclProfileGroupApi;
#ifdef PROFILER_V4
    case ncclProfileColl:
    case ncclProfileP2p: return ncclProfileGroup; /* v4 has no API events */
#else
    case ncclProfileColl: return ncclProfileCollApi;
    case ncclProfileP2p: return ncclProfileP2pApi;
#endif
    case ncclProfileProxyStep: return ncclProfileProxyOp;
    case ncclProfileProxyOp:
    case ncclProfileKernelCh: return ncclProfileColl | ncclProfileP2p;
    default: return 0;
    }
}

static ncclResult_t init(void **context_, int *eActivationMask, const char *commName, int nNodes, int nranks,
                         int rank, ncclDebugLogger_t logfn)
{
    context *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    const char *m = getenv("TEST_PROFILER_MASK");
    c->rank = rank;
    c->mask = m ? atoi(m)
                : ncclProfileGroupApi | ncclProfileGroup | ncclProfileCollApi | ncclProfileP2pApi | ncclProfileColl |
                      ncclProfileP2p | ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileKernelCh;
    *eActivationMask = c->mask;
    logfn(NCCL_LOG_INFO, NCCL_PROFILE, __FILE__, __LINE__, "test profiler: comm %s rank %d/%d, mask 0x%x",
          commName, rank, nranks, c->mask);
    *context_ = c;
    return ncclSuccess;
}

/* What a descriptor of either version says, for start(). */
typedef struct {
    uint64_t type;
    const void *parent;
    int rank;
    size_t coll_count, p2p_count;
    const char *func, *datatype;
    uint64_t timer;
} seen;

static ncclResult_t start(context *c, void **eHandle, const seen *d)
{
    *eHandle = NULL;
    int b = bit(d->type);
    if (b < 0 || !(c->mask & (int)d->type) || d->rank != c->rank) {
        c->orphans++;
        return ncclSuccess;
    }
    uint64_t want = parent_type(d->type);
    const event *parent = d->parent;
    /* A parent of a type the mask leaves out is NULL; else it must be one. */
    if (want && (c->mask & (int)want) && (!parent || !(parent->type & want)))
        c->orphans++;
    event *e = calloc(1, sizeof *e);
    if (!e)
        return ncclSystemError;
    e->type = d->type;
    e->ctx = c;
    c->start[b]++;
    if (d->datatype) {
        size_t len = strlen(c->types);
        snprintf(c->types + len, sizeof c->types - len, "%s%s", len ? "," : "", d->datatype);
    }
    if (d->type == ncclProfileColl) {
        c->coll_count += d->coll_count;
        size_t len = strlen(c->funcs);
        snprintf(c->funcs + len, sizeof c->funcs - len, "%s%s", len ? "," : "", d->func);
    } else if (d->type == ncclProfileP2p) {
        c->p2p_count += d->p2p_count;
    } else if (d->type == ncclProfileKernelCh) {
        e->t0 = d->timer;
    }
    *eHandle = e;
    return ncclSuccess;
}

#ifdef PROFILER_V4
static ncclResult_t start_event(void *context_, void **eHandle, ncclProfilerEventDescr_v4_t *d)
#else
static ncclResult_t start_event(void *context_, void **eHandle, ncclProfilerEventDescr_v5_t *d)
#endif
{
    seen s = {.type = d->type, .parent = d->parentObj, .rank = d->rank};
    if (d->type == ncclProfileColl) {
        s.coll_count = d->coll.count;
        s.func = d->coll.func;
        s.datatype = d->coll.datatype;
    } else if (d->type == ncclProfileP2p) {
        s.p2p_count = d->p2p.count;
        s.datatype = d->p2p.datatype;
    } else if (d->type == ncclProfileKernelCh) {
        s.timer = d->kernelCh.pTimer;
    }
    return start(context_, eHandle, &s);
}

static ncclResult_t stop_event(void *eHandle)
{
    event *e = eHandle;
    if (!e)
        return ncclSuccess;
    e->ctx->stop[bit(e->type)]++;
    free(e);
    return ncclSuccess;
}

static ncclResult_t record_state(void *eHandle, ncclProfilerEventState_v5_t s, ncclProfilerEventStateArgs_v5_t *a)
{
    event *e = eHandle;
    if (!e || !a)
        return ncclSuccess;
    if (e->type == ncclProfileProxyStep && s == ncclProfilerProxyStepSendWait)
        e->ctx->send_bytes += a->proxyStep.transSize;
    else if (e->type == ncclProfileProxyStep && s == ncclProfilerProxyStepRecvGPUWait)
        e->ctx->recv_bytes += a->proxyStep.transSize;
    else if (e->type == ncclProfileKernelCh && s == ncclProfilerKernelChStop) {
        e->ctx->kernel_ns += a->kernelCh.pTimer - e->t0;
        e->ctx->kernel_end = a->kernelCh.pTimer;
    }
    return ncclSuccess;
}

static ncclResult_t finalize(void *context_)
{
    context *c = context_;
    const char *out = getenv("TEST_PROFILER_OUT");
    if (out) {
        char path[512];
        snprintf(path, sizeof path, "%s.%d", out, c->rank);
        FILE *f = fopen(path, "w");
        if (f) {
            for (int b = 0; b < NTYPES; b++)
                fprintf(f, "start.%d %ld\nstop.%d %ld\n", b, c->start[b], b, c->stop[b]);
            fprintf(f, "coll.count %llu\np2p.count %llu\ncoll.funcs %s\ntypes %s\nsend.bytes %llu\nrecv.bytes %llu\n"
                       "kernel.ns %llu\nkernel.end %llu\norphans %ld\n",
                    c->coll_count, c->p2p_count, c->funcs[0] ? c->funcs : "-", c->types[0] ? c->types : "-", c->send_bytes, c->recv_bytes,
                    c->kernel_ns, c->kernel_end, c->orphans);
            fclose(f);
        }
    }
    free(c);
    return ncclSuccess;
}

#ifdef PROFILER_V4
static ncclResult_t init_v4(void **context_, int *eActivationMask, const char *commName, uint64_t commHash,
                            int nNodes, int nranks, int rank, ncclDebugLogger_t logfn)
{
    return init(context_, eActivationMask, commName, nNodes, nranks, rank, logfn);
}

const ncclProfiler_v4_t ncclProfiler_v4 = {"test-count-v4", init_v4, start_event, stop_event, record_state, finalize};
#else
static ncclResult_t init_v5(void **context_, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                            int nranks, int rank, ncclDebugLogger_t logfn)
{
    return init(context_, eActivationMask, commName, nNodes, nranks, rank, logfn);
}

const ncclProfiler_v5_t ncclProfiler_v5 = {"test-count", init_v5, start_event, stop_event, record_state, finalize};
#endif
