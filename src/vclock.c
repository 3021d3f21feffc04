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
#include "topo.h"

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

struct or_vtimeline {
    uint64_t key;  /* 0 = empty slot */
    interval *v;   /* v[0 .. n): sorted and disjoint, within mem */
    interval *mem; /* cap intervals; the oldest are dropped from the front */
    size_t n, cap;
};
typedef struct or_vtimeline timeline;

/* The runtime's own timelines: every copy this process issues. */
static or_vlinks proc_links;

/* Keys keep their variety in high bits (a topology hop's is hop << 28):
 * mixed (splitmix64's finalizer) before they pick a slot. */
static size_t link_slot(uint64_t key, size_t cap)
{
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebull;
    key ^= key >> 31;
    return (size_t)(key & (cap - 1)); /* cap is a power of two */
}

/* The link's timeline, created empty if needed; NULL when out of memory.
 * Pointers it returns stay valid until the next call that creates one. */
static timeline *link_get(or_vlinks *l, uint64_t key)
{
    if (l->cap) {
        size_t j = link_slot(key, l->cap);
        while (l->slots[j].key && l->slots[j].key != key)
            j = (j + 1) & (l->cap - 1);
        if (l->slots[j].key)
            return &l->slots[j];
    }
    if (2 * (l->n + 1) > l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        timeline *grown = calloc(cap, sizeof *grown);
        if (!grown)
            return NULL;
        for (size_t i = 0; i < l->cap; i++) {
            if (!l->slots[i].key)
                continue;
            size_t j = link_slot(l->slots[i].key, cap);
            while (grown[j].key)
                j = (j + 1) & (cap - 1);
            grown[j] = l->slots[i];
        }
        free(l->slots);
        l->slots = grown;
        l->cap = cap;
    }
    size_t j = link_slot(key, l->cap);
    while (l->slots[j].key)
        j = (j + 1) & (l->cap - 1);
    l->slots[j].key = key;
    l->n++;
    return &l->slots[j];
}

/* The earliest s >= t with [s, s+d) free on the link; *at receives the
 * index of the first busy interval after it. Intervals are sorted, so the
 * first one that ends after t is found by bisection. */
static uint64_t link_free_from(const timeline *tl, uint64_t t, uint64_t d, size_t *at)
{
    size_t lo = 0, hi = tl->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tl->v[mid].b <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t s = t;
    size_t i = lo;
    for (; i < tl->n; i++) {
        if (tl->v[i].a >= add_sat(s, d))
            break;
        s = tl->v[i].b;
    }
    *at = i;
    return s;
}

/* Room for one more interval, so that link_occupy cannot fail. */
static bool link_room(timeline *tl)
{
    size_t head = tl->mem ? (size_t)(tl->v - tl->mem) : 0;
    if (head + tl->n < tl->cap)
        return true;
    if (head >= tl->n && head > 0) { /* as many dropped as kept: moving them back is paid for */
        memmove(tl->mem, tl->v, tl->n * sizeof *tl->v);
        tl->v = tl->mem;
        return true;
    }
    size_t cap = tl->cap ? 2 * tl->cap : 16;
    interval *grown = realloc(tl->mem, cap * sizeof *grown);
    if (!grown)
        return false;
    tl->mem = grown;
    tl->v = grown + head;
    tl->cap = cap;
    return true;
}

/* Marks [s, s+d) busy; the caller found it free (link_free_from) and made
 * room (link_room). */
static void link_occupy(timeline *tl, uint64_t s, uint64_t d)
{
    size_t i;
    (void)link_free_from(tl, s, d, &i);
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
        memmove(&tl->v[i + 1], &tl->v[i], (tl->n - i) * sizeof *tl->v);
        tl->v[i] = (interval){s, e};
        tl->n++;
    }
    if (tl->n > OR_VT_MAX_INTERVALS) { /* bounded memory: the oldest gap is lost */
        tl->v[1].a = tl->v[0].a; /* the two oldest become one, in O(1) */
        tl->v++;
        tl->n--;
    }
}

enum { LINK_LOC = 1, LINK_H2D, LINK_D2H, LINK_H2H, LINK_PEER, LINK_NET, LINK_TOPO };

static uint64_t link_key(int kind, int a, int b)
{
    return (uint64_t)kind << 56 | (uint64_t)(uint32_t)(a + 1) << 28 | (uint64_t)(uint32_t)(b + 1);
}

int or_vpath_nlinks(const or_vpath *p) { return p->nhops ? p->nhops : 1; }

uint64_t or_vpath_link(const or_vpath *p, int i)
{
    if (!p->nhops)
        return p->link;
    int hop = p->reversed ? p->hops[p->nhops - 1 - i] ^ 1 : p->hops[i];
    return link_key(LINK_TOPO, hop, 0);
}

/* Busy intervals are kept sorted and disjoint, so a transfer may take a gap
 * before later reservations when it fits there: the order is by virtual
 * start, not by issue. A transfer holds all its links at once, at the
 * bottleneck's rate (a circuit, not store and forward). */
bool or_vlinks_reserve(or_vlinks *l, const or_vpath *p, uint64_t t, uint64_t d, uint64_t *slot)
{
    if (d == 0) {
        *slot = t;
        return true;
    }
    /* Paths are short: their timelines are looked up once (a longer one
     * looks them up at each use). */
    timeline *seen[32];
    int n = or_vpath_nlinks(p), cached = n <= 32 ? n : 0;
    size_t links_before = l->n;
    for (int i = 0; i < n; i++) {
        timeline *tl = link_get(l, or_vpath_link(p, i));
        if (!tl || !link_room(tl))
            return false;
        if (i < cached)
            seen[i] = tl;
    }
    /* A timeline created above may have moved the others; none is created
     * from here on, so pointers stay valid. */
    for (int i = 0; i < cached && l->n != links_before; i++)
        seen[i] = link_get(l, or_vpath_link(p, i));
    uint64_t s = t;
    for (bool moved = true; moved;) { /* s only grows, to the end of some interval */
        moved = false;
        for (int i = 0; i < n; i++) {
            size_t at;
            timeline *tl = i < cached ? seen[i] : link_get(l, or_vpath_link(p, i));
            uint64_t free_at = link_free_from(tl, s, d, &at);
            if (free_at != s) {
                s = free_at;
                moved = true;
            }
        }
    }
    for (int i = 0; i < n; i++)
        link_occupy(i < cached ? seen[i] : link_get(l, or_vpath_link(p, i)), s, d);
    *slot = s;
    return true;
}

void or_vlinks_free(or_vlinks *l)
{
    for (size_t i = 0; i < l->cap; i++)
        free(l->slots[i].mem);
    free(l->slots);
    *l = (or_vlinks){0};
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

/* bytes/s and ns of a topology path, rounded to the clock's integers. */
static or_vpath topo_vpath(const or_topo_path *tp, bool reversed)
{
    return (or_vpath){.latency_ns = (uint64_t)llround(tp->latency_ns),
                      .bytes_per_s = (uint64_t)llround(tp->bandwidth),
                      .type = or_topo_path_type_name(tp->type),
                      .nhops = tp->nhops,
                      .hops = tp->hops,
                      .reversed = reversed};
}

/* The declared topology's path, when it has one for these ends: between two
 * devices, or a device and this rank's host when both are in one node.
 * Copies within a device and host to host keep the defaults (the topology
 * has no memory bandwidth), and so does a host end on another node than the
 * device (the topology holds no path from a device to another node's CPU). */
static bool topo_path(int src, int dst, or_vpath *out)
{
    if (!or_cl.topo || !or_cl.topo_device || src == dst)
        return false;
    int total = or_cl.first_device[or_cl.nranks];
    if ((src != OR_VT_HOST && (src < 0 || src >= total)) ||
        (dst != OR_VT_HOST && (dst < 0 || dst >= total)))
        return false;
    const or_topo_path *tp = NULL;
    bool reversed = false;
    if (src != OR_VT_HOST && dst != OR_VT_HOST) {
        tp = or_topo_path_between(or_cl.topo, or_cl.topo_device[src], or_cl.topo_device[dst]);
    } else {
        int dev = src == OR_VT_HOST ? dst : src;
        if (node_of(dev) != or_cl.node)
            return false;
        tp = or_topo_host_path(or_cl.topo, or_cl.topo_device[dev]);
        reversed = src == OR_VT_HOST; /* the host path runs device to CPU */
    }
    if (!tp || tp->bandwidth <= 0)
        return false;
    *out = topo_vpath(tp, reversed);
    return true;
}

or_vpath or_vclock_path(int src, int dst)
{
    or_vpath tp;
    if (topo_path(src, dst, &tp))
        return tp;
    if (src == OR_VT_HOST && dst == OR_VT_HOST)
        return (or_vpath){OR_VT_HOST_MEM_NS, OR_VT_HOST_MEM_BPS, link_key(LINK_H2H, 0, 0), "SYS",
                          0, NULL, false};
    if (src == dst)
        return (or_vpath){OR_VT_LOCAL_LATENCY_NS, memory_bps(src), link_key(LINK_LOC, src, src),
                          "LOC", 0, NULL, false};
    int sn = src == OR_VT_HOST ? or_cl.node : node_of(src);
    int dn = dst == OR_VT_HOST ? or_cl.node : node_of(dst);
    if (sn != dn)
        return (or_vpath){OR_VT_NET_NS, OR_VT_NET_BPS, link_key(LINK_NET, src, dst), "NET",
                          0, NULL, false};
    if (src == OR_VT_HOST)
        return (or_vpath){OR_VT_HOST_LINK_NS, OR_VT_HOST_LINK_BPS, link_key(LINK_H2D, dst, dst),
                          "PHB", 0, NULL, false};
    if (dst == OR_VT_HOST)
        return (or_vpath){OR_VT_HOST_LINK_NS, OR_VT_HOST_LINK_BPS, link_key(LINK_D2H, src, src),
                          "PHB", 0, NULL, false};
    return (or_vpath){OR_VT_PEER_NS, OR_VT_PEER_BPS, link_key(LINK_PEER, src, dst), "PIX",
                      0, NULL, false};
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
        uint64_t slot;
        if (!or_vlinks_reserve(&proc_links, &p, start, busy, &slot))
            slot = start; /* out of memory: charged as if alone on its links */
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
    or_lock_acquire(&s->dev->lock);
    or_notifier_signal(&s->done);
    or_lock_release(&s->dev->lock);
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
    or_vlinks_free(&proc_links);
    pthread_mutex_unlock(&vt_lock);
}
