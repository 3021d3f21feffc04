/*
 * src/vclock.c - the virtual clock: paths, link timelines, charging ops.
 *
 * Charging at issue rather than at execution is what makes the times
 * deterministic: the order of issue is the program's, while the order in
 * which workers run ops of different streams is the host scheduler's. Every
 * dependency an op can have (earlier ops of its stream, event records, the
 * host's synchronizations, earlier transfers on a link) was issued before it,
 * so its time is known when it is issued.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool or_vt_on;

static pthread_mutex_t vt_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local uint64_t host_vt;

/* Absurd declared costs saturate instead of wrapping the clock around. */
static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* ---- link timelines ----------------------------------------------------- */

typedef struct {
    uint64_t a, b; /* busy over [a, b) */
} interval;

typedef struct {
    uint64_t key; /* 0 = empty slot */
    interval *v;
    size_t n, cap;
} timeline;

static timeline *links;
static size_t nlinks, cap_links;

static timeline *link_get(uint64_t key)
{
    if (2 * (nlinks + 1) > cap_links) {
        size_t cap = cap_links ? 2 * cap_links : 64;
        timeline *grown = calloc(cap, sizeof *grown);
        if (!grown)
            return NULL;
        for (size_t i = 0; i < cap_links; i++) {
            if (!links[i].key)
                continue;
            size_t j = links[i].key % cap;
            while (grown[j].key)
                j = (j + 1) % cap;
            grown[j] = links[i];
        }
        free(links);
        links = grown;
        cap_links = cap;
    }
    size_t j = key % cap_links;
    while (links[j].key && links[j].key != key)
        j = (j + 1) % cap_links;
    if (!links[j].key) {
        links[j].key = key;
        nlinks++;
    }
    return &links[j];
}

/* The earliest s >= t with [s, s+d) free on the link; reserves it. Busy
 * intervals are kept sorted and disjoint, so a transfer may take a gap
 * before later reservations when it fits there: the order is by virtual
 * start, not by issue. */
static uint64_t link_reserve(uint64_t key, uint64_t t, uint64_t d)
{
    if (d == 0)
        return t;
    timeline *tl = link_get(key);
    if (!tl)
        return t; /* out of memory: charge the transfer as if alone on the link */
    uint64_t s = t;
    size_t i = 0;
    for (; i < tl->n; i++) {
        if (tl->v[i].b <= s)
            continue;
        if (tl->v[i].a >= add_sat(s, d))
            break;
        s = tl->v[i].b;
    }
    /* i: the first interval after [s, e). Merge with touching neighbours. */
    uint64_t e = add_sat(s, d);
    bool left = i > 0 && tl->v[i - 1].b == s, right = i < tl->n && tl->v[i].a == e;
    if (left && right) {
        tl->v[i - 1].b = tl->v[i].b;
        memmove(&tl->v[i], &tl->v[i + 1], (tl->n - i - 1) * sizeof *tl->v);
        tl->n--;
    } else if (left) {
        tl->v[i - 1].b = e;
    } else if (right) {
        tl->v[i].a = s;
    } else {
        if (tl->n == tl->cap) {
            size_t cap = tl->cap ? 2 * tl->cap : 16;
            interval *grown = realloc(tl->v, cap * sizeof *grown);
            if (!grown)
                return s;
            tl->v = grown;
            tl->cap = cap;
        }
        memmove(&tl->v[i + 1], &tl->v[i], (tl->n - i) * sizeof *tl->v);
        tl->v[i] = (interval){s, e};
        tl->n++;
    }
    if (tl->n > OR_VT_MAX_INTERVALS) { /* bounded memory: the oldest gap is lost */
        tl->v[0].b = tl->v[1].b;
        memmove(&tl->v[1], &tl->v[2], (tl->n - 2) * sizeof *tl->v);
        tl->n--;
    }
    return s;
}

/* ---- paths -------------------------------------------------------------- */

int or_vclock_global_device(int d) { return or_cl.first_device[or_cl.rank] + d; }

/* World rank owning global device g. */
static int rank_of(int g)
{
    int lo = 0, hi = or_cl.nranks - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (or_cl.first_device[mid] <= g)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static int node_of(int g) { return or_cl.rank_node ? or_cl.rank_node[rank_of(g)] : 0; }

/* A device's declared memory bandwidth; another rank's device is taken to
 * have this process's profile. */
static uint64_t memory_bps(int g)
{
    int first = or_cl.first_device[or_cl.rank];
    int d = g >= first && g - first < or_rt.ndevices ? g - first : 0;
    return (uint64_t)llround(or_rt.devices[d].prop.memoryBandwidthGBs * 1e9);
}

enum { LINK_LOC = 1, LINK_H2D, LINK_D2H, LINK_H2H, LINK_PEER, LINK_NET };

static uint64_t link_key(int kind, int a, int b)
{
    return (uint64_t)kind << 56 | (uint64_t)(uint32_t)(a + 1) << 28 | (uint64_t)(uint32_t)(b + 1);
}

or_vpath or_vclock_path(int src, int dst)
{
    if (src == OR_VT_HOST && dst == OR_VT_HOST)
        return (or_vpath){OR_VT_HOST_MEM_NS, OR_VT_HOST_MEM_BPS, link_key(LINK_H2H, 0, 0), "SYS"};
    if (src == dst)
        return (or_vpath){OR_VT_LOCAL_LATENCY_NS, memory_bps(src), link_key(LINK_LOC, src, src),
                          "LOC"};
    int sn = src == OR_VT_HOST ? or_cl.node : node_of(src);
    int dn = dst == OR_VT_HOST ? or_cl.node : node_of(dst);
    if (sn != dn)
        return (or_vpath){OR_VT_NET_NS, OR_VT_NET_BPS, link_key(LINK_NET, src, dst), "NET"};
    if (src == OR_VT_HOST)
        return (or_vpath){OR_VT_HOST_LINK_NS, OR_VT_HOST_LINK_BPS, link_key(LINK_H2D, dst, dst),
                          "PHB"};
    if (dst == OR_VT_HOST)
        return (or_vpath){OR_VT_HOST_LINK_NS, OR_VT_HOST_LINK_BPS, link_key(LINK_D2H, src, src),
                          "PHB"};
    return (or_vpath){OR_VT_PEER_NS, OR_VT_PEER_BPS, link_key(LINK_PEER, src, dst), "PIX"};
}

uint64_t or_vclock_bytes_ns(uint64_t bytes, uint64_t bytes_per_s)
{
    if (!bytes)
        return 0;
    if (!bytes_per_s)
        return UINT64_MAX / 4;
    unsigned __int128 num = (unsigned __int128)bytes * 1000000000u;
    unsigned __int128 ns = (num + bytes_per_s - 1) / bytes_per_s;
    return ns > UINT64_MAX / 4 ? UINT64_MAX / 4 : (uint64_t)ns;
}

uint64_t or_vclock_path_cost(int src, int dst, uint64_t bytes)
{
    or_vpath p = or_vclock_path(src, dst);
    return p.latency_ns + or_vclock_bytes_ns(bytes, p.bytes_per_s);
}

/* ---- charging ------------------------------------------------------------ */

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }


/* ceil(x) as ns, bounded; x is finite and non-negative (launch checks). */
static uint64_t ceil_ns(double x)
{
    double c = ceil(x);
    return c >= 4.0e18 ? (uint64_t)4e18 : (uint64_t)c;
}

static uint64_t kernel_cost(const or_stream *s, const or_op *op)
{
    const orDeviceProp *p = &s->dev->prop;
    double flops = op->cost.kernel_flops, bytes = op->cost.kernel_bytes;
    if (!op->cost.declared) {
        const orDim3 b = op->u.kernel.block;
        double threads = (double)op->u.kernel.nblocks * b.x * b.y * b.z;
        flops = threads * OR_VT_GUESS_FLOPS_PER_THREAD;
        bytes = threads * OR_VT_GUESS_BYTES_PER_THREAD;
    }
    /* GFLOP/s is FLOPs per ns; GB/s is bytes per ns. */
    uint64_t compute = p->computeRateGflops > 0 ? ceil_ns(flops / p->computeRateGflops) : 0;
    uint64_t memory = p->memoryBandwidthGBs > 0 ? ceil_ns(bytes / p->memoryBandwidthGBs) : 0;
    return OR_VT_KERNEL_LAUNCH_NS + max_u64(compute, memory);
}

void or_vclock_charge(or_stream *s, or_op *op)
{
    pthread_mutex_lock(&vt_lock);
    uint64_t start = max_u64(s->vt_clock, host_vt), end = start;
    switch (op->kind) {
    case OR_OP_KERNEL:
        end = add_sat(start, kernel_cost(s, op));
        break;
    case OR_OP_COPY:
    case OR_OP_MEMSET:
    case OR_OP_REMOTE_COPY: {
        or_vpath p = or_vclock_path(op->cost.src, op->cost.dst);
        uint64_t busy = or_vclock_bytes_ns(op->cost.bytes, p.bytes_per_s);
        /* The data occupies the link for bytes/bandwidth; latency is the
         * pipeline's delay and is not a share of the link. */
        uint64_t slot = link_reserve(p.link, start, busy);
        end = add_sat(add_sat(slot, busy), p.latency_ns);
        break;
    }
    case OR_OP_EVENT_RECORD:
        op->u.event.event->vt_record = start;
        break;
    case OR_OP_EVENT_WAIT: /* from when the stream got there to the record */
        end = max_u64(start, op->u.event.event->vt_record);
        break;
    case OR_OP_HOST_FUNC:
        break;
    }
    op->vt_start = start;
    op->vt_end = end;
    s->vt_clock = end;
    pthread_mutex_unlock(&vt_lock);
}

uint64_t or_vclock_stream(or_stream *s)
{
    pthread_mutex_lock(&vt_lock);
    uint64_t t = s->vt_clock;
    pthread_mutex_unlock(&vt_lock);
    return t;
}

uint64_t or_vclock_event(or_event *ev)
{
    pthread_mutex_lock(&vt_lock);
    uint64_t t = ev->vt_record;
    pthread_mutex_unlock(&vt_lock);
    return t;
}

uint64_t or_vclock_advance(or_stream *s, uint64_t start_ns, uint64_t cost_ns)
{
    pthread_mutex_lock(&vt_lock);
    uint64_t start = max_u64(max_u64(s->vt_clock, host_vt), start_ns);
    s->vt_clock = add_sat(start, cost_ns);
    uint64_t end = s->vt_clock;
    pthread_mutex_unlock(&vt_lock);
    return end;
}

/* ---- held tasks (a layer sets the stream's clock when its task runs) ------ */

void or_vclock_hold(or_stream *s, or_op *op)
{
    pthread_mutex_lock(&vt_lock);
    s->vt_holds++;
    if (op->u.host.entry_out)
        *op->u.host.entry_out = op->vt_start;
    pthread_mutex_unlock(&vt_lock);
}

static bool released(void *arg)
{
    or_stream *s = arg;
    pthread_mutex_lock(&vt_lock);
    bool done = s->vt_holds == 0;
    pthread_mutex_unlock(&vt_lock);
    return done;
}

void or_vclock_wait_release(or_stream *s)
{
    /* A worker (a host function issuing work) must not wait: the held task
     * may be queued behind it. Its op starts at the clock as it is. */
    if (or_in_worker())
        return;
    pthread_mutex_lock(&vt_lock);
    bool held = s->vt_holds > 0;
    pthread_mutex_unlock(&vt_lock);
    if (held)
        or_wait(&s->done, released, s, 0);
}

void or_vclock_release(or_stream *s, uint64_t end_ns)
{
    pthread_mutex_lock(&vt_lock);
    s->vt_clock = max_u64(s->vt_clock, end_ns);
    if (s->vt_holds > 0)
        s->vt_holds--;
    pthread_mutex_unlock(&vt_lock);
    pthread_mutex_lock(&s->dev->lock);
    or_notifier_signal(&s->done);
    pthread_mutex_unlock(&s->dev->lock);
}

void or_vclock_host_sync(uint64_t t) { host_vt = max_u64(host_vt, t); }

uint64_t or_vclock_host(void) { return host_vt; }

uint64_t or_vclock_host_enter(uint64_t t)
{
    uint64_t saved = host_vt;
    host_vt = t;
    return saved;
}

void or_vclock_host_leave(uint64_t saved) { host_vt = saved; }

void or_vclock_start(bool on) { or_vt_on = on; }

void or_vclock_fini(void)
{
    pthread_mutex_lock(&vt_lock);
    for (size_t i = 0; i < cap_links; i++)
        free(links[i].v);
    free(links);
    links = NULL;
    nlinks = cap_links = 0;
    pthread_mutex_unlock(&vt_lock);
}
