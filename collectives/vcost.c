/*
 * collectives/vcost.c - collectives in virtual time (OPENREG_TIME=virtual)
 * and in traces.
 *
 * A collective's time depends on every participant's clock, which only its
 * run can see: the task is launched held (or_launch_host_func_held), so ops
 * the program issues after it on the stream wait in their call until the
 * task has set the stream's clock. When a call runs, the ranks first
 * exchange their entry clocks (and the memory bandwidth their reductions
 * run at) with a direct exchange of 16 bytes over the transport; then every
 * rank replays the algorithm's schedule - the same steps and transfers, for
 * every rank, as algorithms.c moves them - over the paths between the ranks'
 * devices (or_vclock_path): a transfer starts when both its sender and its
 * receiver have reached the step that holds it, takes the earliest slot
 * free on every link of its path on the replay's own link timelines (so
 * concurrent transfers that share a link share its bandwidth: the replay below),
 * and a step ends with its last transfer. Every rank computes the same
 * replay from the same inputs, so the times are deterministic, and its own
 * end is the stream's new clock. A reducing receive ends no earlier than
 * latency + the reduction's memory time (3 bytes moved per byte received)
 * after it is ready, as NCCL fuses the reduction into the transfer. The
 * planner (tuning.c) runs the same replay, every rank entering at 0, to
 * compare the candidate algorithms (occl_vcost_estimate).
 * docs/virtual-time.md#collectives.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "occl_internal.h"
#include "topo.h"
#include "vclock.h"
#include "vmodel.h"

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static uint64_t ceil_div_ns(uint64_t bytes, uint64_t bytes_per_s)
{
    if (!bytes || !bytes_per_s)
        return 0;
    unsigned __int128 ns = ((unsigned __int128)bytes * 1000000000u + bytes_per_s - 1) / bytes_per_s;
    return ns > UINT64_MAX / 4 ? UINT64_MAX / 4 : (uint64_t)ns;
}

/* ---- schedules ------------------------------------------------------------- */

typedef struct vend {
    int rank, peer, step; /* comm ranks; step of `rank` holding it */
    bool send, reduce;
    uint64_t bytes;
    uint64_t k;       /* k-th transfer of this direction of the pair */
} vend;

/* A ring's steps, generated as the replay reaches them rather than listed:
 * a ring of n ranks has 2 n (n-1) transfers per all-reduce, too many to hold
 * at thousands of ranks. `len` steps of the rank at ring position p, taking
 * the rank's steps at .. at+len-1 (the listed steps after them follow). */
typedef struct vseg {
    const int *ring;
    int n, p, at, len;
    size_t count, es;
    bool blocks, reduce; /* blocks: n-1 steps of `block` bytes (all-gather,
                          * reduce-scatter); else reduce-scatter + all-gather
                          * of the count's chunks (ring_rs_ag) */
    uint64_t block;
} vseg;

typedef struct vrank {
    int *first;         /* listed step s holds ends [first[s], first[s+1]) of the rank's list */
    uint64_t *compute;  /* local work after listed step s's transfers */
    int nsteps, cap;
    vend *e;
    int ne, cape;
    vseg seg;           /* len 0: none */
} vrank;

typedef struct vsim {
    const occl_vsystem *sys;
    int n;
    vrank *r;
    int *leaders; /* the hierarchical all-reduce's ring of node leaders */
    const uint64_t *bps; /* memory bandwidth of each rank */
    occl_proto proto;    /* what each transfer and the call are charged (vproto.h) */
    occl_pfam fam;
    bool spread; /* transfers between nodes spread over the rails (vmodel.h) */
    bool steady; /* a pipeline's further loop: the paths' latency is hidden (model_ends) */
    bool oom;
    const occl_vwatch *watch; /* NULL but in occl_vmodel_replay_steps */
} vsim;

static void step_begin(vsim *v, int rank)
{
    vrank *r = &v->r[rank];
    if (r->nsteps + 2 > r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        int *f = realloc(r->first, (size_t)(cap + 1) * sizeof *f);
        if (f)
            r->first = f;
        uint64_t *c = realloc(r->compute, (size_t)cap * sizeof *c);
        if (c)
            r->compute = c;
        if (!f || !c) {
            v->oom = true;
            return;
        }
        r->cap = cap;
    }
    r->first[r->nsteps] = r->ne;
    r->compute[r->nsteps] = 0;
    r->nsteps++;
    r->first[r->nsteps] = r->ne;
}

static void add_end(vsim *v, int rank, int peer, bool send, bool reduce, uint64_t bytes)
{
    vrank *r = &v->r[rank];
    if (v->oom || !r->nsteps)
        return;
    if (r->ne == r->cape) {
        int cap = r->cape ? 2 * r->cape : 32;
        vend *e = realloc(r->e, (size_t)cap * sizeof *e);
        if (!e) {
            v->oom = true;
            return;
        }
        r->e = e;
        r->cape = cap;
    }
    r->e[r->ne++] = (vend){rank, peer, r->nsteps - 1, send, reduce, bytes, 0};
    r->first[r->nsteps] = r->ne;
}

static void add_send(vsim *v, int rank, int peer, uint64_t bytes) { add_end(v, rank, peer, true, false, bytes); }
static void add_recv(vsim *v, int rank, int peer, uint64_t bytes, bool reduce)
{
    add_end(v, rank, peer, false, reduce, bytes);
}
/* Local work at the end of the rank's current step: a reduction of `bytes`
 * moved through its memory. */
static void add_compute(vsim *v, int rank, uint64_t bytes)
{
    vrank *r = &v->r[rank];
    if (!v->oom && r->nsteps)
        r->compute[r->nsteps - 1] += ceil_div_ns(bytes, v->bps[rank]);
}

static uint64_t chunk(size_t count, int q, int n, size_t es)
{
    size_t a = (size_t)((unsigned __int128)count * q / n), b = (size_t)((unsigned __int128)count * (q + 1) / n);
    return (uint64_t)(b - a) * es;
}

/* The schedules below follow algorithms.c step by step. */

static void ring_seg(vsim *v, const int *ring, int n, int p, size_t count, size_t es, int rank, bool blocks,
                     bool reduce, uint64_t block)
{
    vrank *r = &v->r[rank];
    if (v->oom)
        return;
    r->seg = (vseg){.ring = ring, .n = n, .p = p, .at = r->nsteps, .len = blocks ? n - 1 : 2 * (n - 1),
                    .count = count, .es = es, .blocks = blocks, .reduce = reduce, .block = block};
}

/* The ring all-reduce's steps (reduce-scatter, then all-gather), as
 * algorithms.c runs them: generated step by step (seg_step). */
static void ring_rs_ag(vsim *v, const int *ring, int n, int p, size_t count, size_t es, int rank)
{
    ring_seg(v, ring, n, p, count, es, rank, false, false, 0);
}

/* Step i of a ring segment: a send to the next rank and a receive from the
 * previous one. */
static void seg_step(const vseg *g, int rank, int i, vend e[2])
{
    int n = g->n, p = g->p, next = g->ring[(p + 1) % n], prev = g->ring[(p + n - 1) % n];
    uint64_t sb, rb;
    bool reduce;
    if (g->blocks) {
        sb = rb = g->block;
        reduce = g->reduce;
    } else if (i < n - 1) { /* reduce-scatter */
        sb = chunk(g->count, (p - i + n) % n, n, g->es);
        rb = chunk(g->count, (p - i - 1 + 2 * n) % n, n, g->es);
        reduce = true;
    } else { /* all-gather */
        int s = i - (n - 1);
        sb = chunk(g->count, (p + 1 - s + n) % n, n, g->es);
        rb = chunk(g->count, (p - s + n) % n, n, g->es);
        reduce = false;
    }
    e[0] = (vend){rank, next, i, true, false, sb, 0};
    e[1] = (vend){rank, prev, i, false, reduce, rb, 0};
}

/* The double binary tree: each half up and down its tree in chunks, the
 * steps occl_tree_allreduce_ops gives algorithms.c. */
static void sched_double_tree(vsim *v, size_t count, size_t es, int rank)
{
    size_t lo[2], len[2], ce[2], nchunks[2];
    for (int k = 0; k < 2; k++)
        occl_tree_half(count, es, k, &lo[k], &len[k], &ce[k], &nchunks[k]);
    occl_tree_op *ops = NULL;
    int m = occl_tree_allreduce_ops(&v->sys->trees, rank, nchunks, &ops);
    if (m < 0) {
        v->oom = true;
        return;
    }
    for (int i = 0; i < m; i++) {
        const occl_tree_op *o = &ops[i];
        if (i == 0 || o->step != ops[i - 1].step)
            step_begin(v, rank);
        size_t first = o->chunk * ce[o->tree], left = len[o->tree] - first;
        uint64_t bytes = (uint64_t)(left < ce[o->tree] ? left : ce[o->tree]) * es;
        if (o->kind == OCCL_TREE_SEND_UP || o->kind == OCCL_TREE_SEND_DOWN)
            add_send(v, rank, o->peer, bytes);
        else
            add_recv(v, rank, o->peer, bytes, o->kind == OCCL_TREE_RECV_UP);
    }
    free(ops);
}

static void sched_allreduce(vsim *v, const occl_call *c, occl_algo algo)
{
    const occl_vsystem *comm = v->sys;
    int n = v->n;
    size_t es = occl_type_size(c->type);
    uint64_t bytes = (uint64_t)c->count * es;
    for (int p = 0; p < n; p++) {
        int me = comm->ring[p];
        if (algo == OCCL_ALGO_TREE) {
            sched_double_tree(v, c->count, es, me);
        } else if (algo == OCCL_ALGO_DIRECT) {
            step_begin(v, me);
            for (int j = 0; j < n; j++)
                if (j != me) {
                    add_send(v, me, j, bytes);
                    add_recv(v, me, j, bytes, false);
                }
            add_compute(v, me, (uint64_t)(n + 1) * bytes); /* n-way reduction */
        } else if (algo == OCCL_ALGO_NVLS) {
            /* nvls_all_reduce: this rank's slice of every peer's input read in
             * place and reduced (n+1 slices through memory), then written into
             * every peer's output (the peer's end of each write is a receive). */
            step_begin(v, me);
            for (int j = 0; j < n; j++)
                if (j != me) {
                    add_send(v, me, j, chunk(c->count, j, n, es));
                    add_recv(v, me, j, chunk(c->count, me, n, es), false);
                }
            add_compute(v, me, (uint64_t)(n + 1) * chunk(c->count, me, n, es));
            step_begin(v, me);
            for (int j = 0; j < n; j++)
                if (j != me) {
                    add_send(v, me, j, chunk(c->count, me, n, es));
                    add_recv(v, me, j, chunk(c->count, j, n, es), false);
                }
        } else if (algo == OCCL_ALGO_HIERARCHICAL) {
            int k = 0;
            while (comm->node_first[k + 1] <= p)
                k++;
            int first = comm->node_first[k], m = comm->node_first[k + 1] - first;
            int leader = comm->ring[first];
            if (me != leader) {
                step_begin(v, me);
                add_send(v, me, leader, bytes);
                step_begin(v, me);
                add_recv(v, me, leader, bytes, false);
                continue;
            }
            if (m > 1) {
                step_begin(v, me);
                for (int i = 1; i < m; i++)
                    add_recv(v, me, comm->ring[first + i], bytes, false);
                add_compute(v, me, (uint64_t)(m + 1) * bytes);
            }
            int L = comm->nnodes;
            if (L > 1) {
                if (!v->leaders) {
                    v->leaders = malloc((size_t)L * sizeof *v->leaders);
                    if (!v->leaders) {
                        v->oom = true;
                        return;
                    }
                    for (int j = 0; j < L; j++)
                        v->leaders[j] = comm->ring[comm->node_first[j]];
                }
                ring_rs_ag(v, v->leaders, L, k, c->count, es, me);
            }
            if (m > 1) {
                step_begin(v, me);
                for (int i = 1; i < m; i++)
                    add_send(v, me, comm->ring[first + i], bytes);
            }
        } else {
            ring_rs_ag(v, comm->ring, n, p, c->count, es, me);
        }
    }
}

static int pos_of(const occl_vsystem *comm, int rank)
{
    int q = 0;
    while (comm->ring[q] != rank)
        q++;
    return q;
}

/* A pipeline along the ring: Broadcast from the root (rel 0), Reduce's chain
 * towards it (rel n-1 is the root). */
static void sched_pipeline(vsim *v, const occl_call *c, bool reduce_chain)
{
    const occl_vsystem *comm = v->sys;
    int n = v->n, root_pos = pos_of(comm, c->root);
    uint64_t bytes = (uint64_t)c->count * occl_type_size(c->type);
    uint64_t ck = reduce_chain ? occl_chain_chunk(bytes) : OCCL_BROADCAST_CHUNK;
    uint64_t nchunks = (bytes + ck - 1) / ck;
    for (int p = 0; p < n; p++) {
        int me = comm->ring[p], next = comm->ring[(p + 1) % n], prev = comm->ring[(p + n - 1) % n];
        int rel = reduce_chain ? (p - root_pos - 1 + 2 * n) % n : (p - root_pos + n) % n;
        bool head = rel == 0, tail = rel == n - 1;
        for (uint64_t k = 0; k <= nchunks; k++) {
            bool rx = !head && k < nchunks, tx = !tail && (head ? k < nchunks : k >= 1);
            if (!rx && !tx)
                continue;
            step_begin(v, me);
            if (rx)
                add_recv(v, me, prev, bytes - k * ck < ck ? bytes - k * ck : ck, reduce_chain);
            if (tx) {
                uint64_t sk = head ? k : k - 1;
                add_send(v, me, next, bytes - sk * ck < ck ? bytes - sk * ck : ck);
            }
        }
    }
}

/* Reduce's double tree: the trees re-rooted at the root, each half up its
 * tree in chunks (occl_tree_reduce_ops, as algorithms.c). */
static void sched_reduce_tree(vsim *v, const occl_call *c)
{
    size_t es = occl_type_size(c->type), lo[2], len[2], ce[2], nchunks[2];
    for (int k = 0; k < 2; k++)
        occl_tree_half(c->count, es, k, &lo[k], &len[k], &ce[k], &nchunks[k]);
    occl_trees R;
    if (occl_trees_reroot(&v->sys->trees, c->root, &R) != 0) {
        v->oom = true;
        return;
    }
    for (int me = 0; me < v->n && !v->oom; me++) {
        occl_tree_op *ops = NULL;
        int m = occl_tree_reduce_ops(&R, me, nchunks, &ops);
        if (m < 0)
            v->oom = true;
        for (int i = 0; i < m; i++) {
            const occl_tree_op *o = &ops[i];
            if (i == 0 || o->step != ops[i - 1].step)
                step_begin(v, me);
            size_t first = o->chunk * ce[o->tree], left = len[o->tree] - first;
            uint64_t bytes = (uint64_t)(left < ce[o->tree] ? left : ce[o->tree]) * es;
            if (o->kind == OCCL_TREE_SEND_UP)
                add_send(v, me, o->peer, bytes);
            else
                add_recv(v, me, o->peer, bytes, true);
        }
        free(ops);
    }
    occl_trees_release(&R);
}

static void sched_ring_blocks(vsim *v, const occl_call *c, bool reduce)
{
    const occl_vsystem *comm = v->sys;
    int n = v->n;
    uint64_t block = (uint64_t)c->count * occl_type_size(c->type);
    for (int p = 0; p < n; p++)
        ring_seg(v, comm->ring, n, p, 0, 0, comm->ring[p], true, reduce, block);
}

static void sched_direct(vsim *v, const occl_call *c)
{
    int n = v->n;
    uint64_t block = (uint64_t)c->count * occl_type_size(c->type);
    for (int me = 0; me < n; me++) {
        step_begin(v, me);
        for (int j = 0; j < n; j++) {
            if (j == me)
                continue;
            if (c->coll == OCCL_COLL_ALLTOALL) {
                add_send(v, me, j, block);
                add_recv(v, me, j, block, false);
            } else if (me == c->root) {
                if (c->coll == OCCL_COLL_GATHER)
                    add_recv(v, me, j, block, false);
                else
                    add_send(v, me, j, block);
            } else if (j == c->root) {
                if (c->coll == OCCL_COLL_GATHER)
                    add_send(v, me, j, block);
                else
                    add_recv(v, me, j, block, false);
            }
        }
    }
}

/* ---- replay ------------------------------------------------------------------ */

/* The replay runs each rank's steps in order from its entry clock: a step
 * offers its ends as it starts; the k-th send from a to b and the k-th
 * receive of b from a make a transfer, ready when both steps have started
 * (the later start). Ready transfers are taken in order of ready time (ties:
 * sender, receiver, k), each taking the earliest slot free on every link of
 * its path for its bytes at the bottleneck's rate (or_vlinks_reserve); a
 * step ends with its last transfer, plus its local work, and the rank's next
 * step starts. Ready times never decrease (a step starts when an earlier
 * transfer ends), so reservations are made in virtual start order, as the
 * runtime's timelines expect. Only what is in flight is held: the ends
 * waiting for their partner, the ready transfers and each pair's path. */

static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

typedef struct vwait { /* an end offered before its partner */
    uint64_t start, bytes;
    int next; /* the pair's next waiting end; -1: none */
    bool reduce;
} vwait;

typedef struct vpair { /* one direction between two ranks */
    int src, dst;
    int head, tail;  /* waiting ends, oldest first; -1: none */
    bool sends_wait; /* the waiting ends are sends (else receives) */
    uint64_t k;      /* transfers made so far */
    bool have_path;
    or_vpath path;   /* with the protocol's per-hop latency and the rails */
    occl_hw hw;
    bool sharp;
} vpair;

typedef struct vx { /* a ready transfer */
    int src, dst, pair;
    bool reduce;
    uint64_t k, ready, bytes;
} vx;

typedef struct vrun {
    vsim *v;
    const uint64_t *entry;
    uint64_t *end;
    int *step, *pending, *nsteps; /* per rank: the step it runs, its ends not yet done, its steps */
    uint64_t *last;               /* per rank: the step's start, then its latest transfer's end */
    int ended;
    vpair *pairs;
    int npairs, cap_pairs;
    int *slots; /* pair index + 1 by (src, dst), open addressing; 0: empty */
    size_t cap_slots;
    vwait *w;
    int nw, cap_w, free_w;
    vx *x;
    int nx, cap_x, free_x; /* free list threaded through src */
    int *heap;
    int nheap, cap_heap;
    or_vlinks links;
    bool bad; /* the ends do not pair up (a bug) */
} vrun;

static size_t pair_slot(int src, int dst, size_t cap)
{
    uint64_t h = (uint64_t)(uint32_t)src << 32 | (uint32_t)dst;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)(h & (cap - 1));
}

static bool grow_array(void **a, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return true;
    int c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *g = realloc(*a, (size_t)c * elem);
    if (!g)
        return false;
    *a = g;
    *cap = c;
    return true;
}

/* The pair (src, dst), made on first use; -1 when out of memory. */
static int pair_get(vrun *R, int src, int dst)
{
    if (R->cap_slots) {
        size_t j = pair_slot(src, dst, R->cap_slots);
        for (; R->slots[j]; j = (j + 1) & (R->cap_slots - 1)) {
            const vpair *p = &R->pairs[R->slots[j] - 1];
            if (p->src == src && p->dst == dst)
                return R->slots[j] - 1;
        }
    }
    if (2 * ((size_t)R->npairs + 1) > R->cap_slots) {
        size_t cap = R->cap_slots ? 2 * R->cap_slots : 256;
        int *g = calloc(cap, sizeof *g);
        if (!g)
            return -1;
        for (int i = 0; i < R->npairs; i++) {
            size_t j = pair_slot(R->pairs[i].src, R->pairs[i].dst, cap);
            while (g[j])
                j = (j + 1) & (cap - 1);
            g[j] = i + 1;
        }
        free(R->slots);
        R->slots = g;
        R->cap_slots = cap;
    }
    if (!grow_array((void **)&R->pairs, &R->cap_pairs, R->npairs + 1, sizeof *R->pairs))
        return -1;
    R->pairs[R->npairs] = (vpair){.src = src, .dst = dst, .head = -1, .tail = -1};
    size_t j = pair_slot(src, dst, R->cap_slots);
    while (R->slots[j])
        j = (j + 1) & (R->cap_slots - 1);
    R->slots[j] = R->npairs + 1;
    return R->npairs++;
}

/* Ready first, then sender, receiver, k: a fixed order for equal times. */
static bool x_before(const vx *p, const vx *q)
{
    if (p->ready != q->ready)
        return p->ready < q->ready;
    if (p->src != q->src)
        return p->src < q->src;
    if (p->dst != q->dst)
        return p->dst < q->dst;
    return p->k < q->k;
}

static bool heap_push(vrun *R, int xi)
{
    if (!grow_array((void **)&R->heap, &R->cap_heap, R->nheap + 1, sizeof *R->heap))
        return false;
    int i = R->nheap++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!x_before(&R->x[xi], &R->x[R->heap[parent]]))
            break;
        R->heap[i] = R->heap[parent];
        i = parent;
    }
    R->heap[i] = xi;
    return true;
}

static int heap_pop(vrun *R)
{
    int top = R->heap[0], moved = R->heap[--R->nheap], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= R->nheap)
            break;
        if (c + 1 < R->nheap && x_before(&R->x[R->heap[c + 1]], &R->x[R->heap[c]]))
            c++;
        if (!x_before(&R->x[R->heap[c]], &R->x[moved]))
            break;
        R->heap[i] = R->heap[c];
        i = c;
    }
    if (R->nheap)
        R->heap[i] = moved;
    return top;
}

/* Rank `rank`, whose step started at t, offers end e: it waits for its
 * partner, or makes a ready transfer with it. false when out of memory. */
static bool offer(vrun *R, int rank, const vend *e, uint64_t t)
{
    int src = e->send ? rank : e->peer, dst = e->send ? e->peer : rank;
    int pi = pair_get(R, src, dst);
    if (pi < 0)
        return false;
    vpair *P = &R->pairs[pi];
    if (P->head < 0 || P->sends_wait == e->send) {
        int wi = R->free_w;
        if (wi >= 0) {
            R->free_w = R->w[wi].next;
        } else {
            if (!grow_array((void **)&R->w, &R->cap_w, R->nw + 1, sizeof *R->w))
                return false;
            wi = R->nw++;
        }
        R->w[wi] = (vwait){t, e->bytes, -1, e->reduce};
        if (P->head < 0)
            P->head = wi;
        else
            R->w[P->tail].next = wi;
        P->tail = wi;
        P->sends_wait = e->send;
        return true;
    }
    int wi = P->head;
    vwait w = R->w[wi];
    P->head = w.next;
    R->w[wi].next = R->free_w;
    R->free_w = wi;
    if (w.bytes != e->bytes)
        R->bad = true;
    int xi = R->free_x;
    if (xi >= 0) {
        R->free_x = R->x[xi].src;
    } else {
        if (!grow_array((void **)&R->x, &R->cap_x, R->nx + 1, sizeof *R->x))
            return false;
        xi = R->nx++;
    }
    R->x[xi] = (vx){.src = src, .dst = dst, .pair = pi, .reduce = e->send ? w.reduce : e->reduce,
                    .k = P->k++, .ready = max_u64(w.start, t), .bytes = e->bytes};
    return heap_push(R, xi);
}

/* The ends of rank's step s and the work after it. */
static int step_ends(const vsim *v, int rank, int s, vend seg[2], const vend **ends, uint64_t *compute)
{
    const vrank *r = &v->r[rank];
    const vseg *g = &r->seg;
    if (g->len && s >= g->at && s < g->at + g->len) {
        seg_step(g, rank, s - g->at, seg);
        *ends = seg;
        *compute = 0;
        return 2;
    }
    if (g->len && s >= g->at)
        s -= g->len;
    *ends = &r->e[r->first[s]];
    *compute = r->compute[s];
    return r->first[s + 1] - r->first[s];
}

/* Rank starts step s at t; steps without transfers end at once. */
static bool step_start(vrun *R, int rank, int s, uint64_t t)
{
    for (;;) {
        vend seg[2];
        const vend *e;
        uint64_t compute;
        int ne = step_ends(R->v, rank, s, seg, &e, &compute);
        R->step[rank] = s;
        R->last[rank] = t;
        R->pending[rank] = ne;
        if (R->v->watch && R->v->watch->step)
            R->v->watch->step(R->v->watch->ctx, rank, s, t);
        for (int i = 0; i < ne; i++)
            if (!offer(R, rank, &e[i], t))
                return false;
        if (ne > 0)
            return true;
        t = add_sat(t, compute);
        if (s + 1 == R->nsteps[rank]) {
            R->end[rank] = t;
            R->ended++;
            return true;
        }
        s++;
    }
}

/* One of rank's current step's transfers ended at `end`. */
static bool transfer_ended(vrun *R, int rank, uint64_t end)
{
    R->last[rank] = max_u64(R->last[rank], end);
    if (--R->pending[rank] > 0)
        return true;
    int s = R->step[rank];
    vend seg[2];
    const vend *e;
    uint64_t compute;
    (void)step_ends(R->v, rank, s, seg, &e, &compute);
    uint64_t t = add_sat(R->last[rank], compute);
    if (s + 1 == R->nsteps[rank]) {
        R->end[rank] = t;
        R->ended++;
        return true;
    }
    return step_start(R, rank, s + 1, t);
}

/* The path of pair P, as the call charges it: the protocol's per-hop
 * latency comes on top of the path's, and NCCL's channels of a ring or tree
 * cross between nodes through every rail at once (the crossing runs at the
 * rails' sum). */
static void pair_path(const vsim *v, vpair *P)
{
    or_vpath path = v->sys->path(v->sys->ctx, P->src, P->dst);
    occl_hw hw = occl_proto_hw(path.type);
    if (v->spread && hw == OCCL_HW_NET && v->sys->rails > 1)
        path.bytes_per_s = path.bytes_per_s > UINT64_MAX / 4 / (uint64_t)v->sys->rails
                               ? UINT64_MAX / 4
                               : path.bytes_per_s * (uint64_t)v->sys->rails;
    uint64_t hop = occl_proto_hop_ns(v->fam, v->proto, hw);
    path.latency_ns = path.latency_ns > UINT64_MAX / 4 - hop ? UINT64_MAX / 4 : path.latency_ns + hop;
    if (v->steady)
        path.latency_ns = 0;
    P->path = path;
    P->hw = hw;
    P->sharp = occl_proto_sharp(hw, path.bytes_per_s);
    P->have_path = true;
}

static void vrun_free(vrun *R)
{
    free(R->step);
    free(R->pending);
    free(R->nsteps);
    free(R->last);
    free(R->pairs);
    free(R->slots);
    free(R->w);
    free(R->x);
    free(R->heap);
    or_vlinks_free(&R->links);
}

/* Replays the steps from the entry clocks; end[r]: when rank r's last step
 * ended. false if the schedule does not pair up (a bug) or memory ran out
 * (v->oom). */
static bool replay(vsim *v, const uint64_t *entry, uint64_t *end)
{
    int n = v->n;
    vrun R = {.v = v, .entry = entry, .end = end, .free_w = -1, .free_x = -1};
    R.step = malloc((size_t)n * sizeof *R.step);
    R.pending = malloc((size_t)n * sizeof *R.pending);
    R.nsteps = malloc((size_t)n * sizeof *R.nsteps);
    R.last = malloc((size_t)n * sizeof *R.last);
    bool ok = R.step && R.pending && R.nsteps && R.last;
    for (int r = 0; r < n && ok; r++) {
        R.nsteps[r] = v->r[r].nsteps + v->r[r].seg.len;
        if (!R.nsteps[r]) {
            end[r] = entry[r];
            R.ended++;
        } else {
            ok = step_start(&R, r, 0, entry[r]);
        }
    }
    while (ok && R.nheap) {
        int xi = heap_pop(&R);
        vx x = R.x[xi];
        R.x[xi].src = R.free_x;
        R.free_x = xi;
        vpair *P = &R.pairs[x.pair];
        if (!P->have_path)
            pair_path(v, P);
        uint64_t wire = occl_proto_wire_bytes(v->fam, v->proto, P->hw, v->n, P->sharp, x.bytes);
        uint64_t busy = or_vclock_bytes_ns(wire, P->path.bytes_per_s), slot;
        if (!or_vlinks_reserve(&R.links, &P->path, x.ready, busy, &slot)) {
            ok = false;
            break;
        }
        /* The data holds the links for `busy`; latency is the pipeline's
         * delay (as the runtime charges a copy). A reducing receive reads
         * two buffers and writes one at the receiver's memory, fused into
         * the transfer as the data arrives, whatever the links. */
        uint64_t e = add_sat(add_sat(slot, busy), P->path.latency_ns);
        if (x.reduce)
            e = max_u64(e, add_sat(add_sat(x.ready, P->path.latency_ns), ceil_div_ns(3 * x.bytes, v->bps[x.dst])));
        if (v->watch && v->watch->transfer)
            v->watch->transfer(v->watch->ctx, &(occl_vtransfer){x.src, x.dst, x.k, x.ready, slot, e});
        ok = transfer_ended(&R, x.src, e) && transfer_ended(&R, x.dst, e);
    }
    v->oom = !ok;
    ok = ok && !R.bad && R.ended == n;
    vrun_free(&R);
    return ok;
}

static void sim_free(vsim *v)
{
    for (int r = 0; r < v->n && v->r; r++) {
        free(v->r[r].first);
        free(v->r[r].compute);
        free(v->r[r].e);
    }
    free(v->r);
    free(v->leaders);
}

/* Every rank's steps of collective c with algorithm algo. */
static void schedule(vsim *v, const occl_call *c, occl_algo algo)
{
    switch (c->coll) {
    case OCCL_COLL_ALLREDUCE: sched_allreduce(v, c, algo); break;
    case OCCL_COLL_BROADCAST: sched_pipeline(v, c, false); break;
    case OCCL_COLL_REDUCE:
        if (algo == OCCL_ALGO_TREE)
            sched_reduce_tree(v, c);
        else
            sched_pipeline(v, c, true);
        break;
    case OCCL_COLL_ALLGATHER: sched_ring_blocks(v, c, false); break;
    case OCCL_COLL_REDUCESCATTER: sched_ring_blocks(v, c, true); break;
    default: sched_direct(v, c); break;
    }
}

/* Whether the schedule of coll with algo is a ring, chain or tree, whose
 * traffic between nodes NCCL spreads over the NICs; the direct exchanges
 * (AlltoAll, Gather, Scatter, OCCL's direct all-reduce) are not. */
static bool spreads(occl_coll coll, occl_algo algo)
{
    if (algo == OCCL_ALGO_DIRECT)
        return false;
    return coll == OCCL_COLL_ALLREDUCE || coll == OCCL_COLL_BROADCAST || coll == OCCL_COLL_REDUCE ||
           coll == OCCL_COLL_ALLGATHER || coll == OCCL_COLL_REDUCESCATTER;
}

int occl_vsystem_rails(const struct or_topo *topo, const int *dev, const int *ring,
                       const int *node_first, int nnodes)
{
    if (!topo || !dev || nnodes < 2)
        return 1;
    int rails = 0;
    for (int k = 0; k < nnodes; k++) {
        int ranks = node_first[k + 1] - node_first[k];
        int node = ranks > 0 ? or_topo_device_node(topo, dev[ring[node_first[k]]]) : -1;
        int nics = node >= 0 ? or_topo_node_nics(topo, node) : 0;
        int r = nics < ranks ? nics : ranks;
        if (k == 0 || r < rails)
            rails = r;
    }
    return rails > 1 ? rails : 1;
}

occl_pfam occl_vmodel_family(occl_coll coll, occl_algo algo)
{
    /* NCCL's rows: its ring for OCCL's ring, Broadcast's and Reduce's
     * chains and the one-step direct exchanges (NCCL runs AlltoAll, Gather
     * and Scatter as point-to-point, whose per-hop costs are the ring's);
     * its tree for the double binary tree and Reduce's trees, and for the
     * hierarchical all-reduce (a reduction up to each node's leader and down,
     * as NCCL's tree within a node); NVLS for nvls. */
    (void)coll;
    switch (algo) {
    case OCCL_ALGO_TREE:
    case OCCL_ALGO_HIERARCHICAL: return OCCL_PFAM_TREE;
    case OCCL_ALGO_NVLS: return OCCL_PFAM_NVLS;
    default: return OCCL_PFAM_RING;
    }
}

/* Every rank's end of the replay of collective c on system s, every rank
 * having entered at entry[] (the base latency not included). steady: the
 * paths' latency left out (model_ends). */
static bool replay_ends(const occl_vsystem *s, const occl_call *c, occl_algo algo, occl_proto proto,
                        const uint64_t *entry, const uint64_t *bps, bool steady, uint64_t *end, bool *oom)
{
    occl_pfam fam = occl_vmodel_family(c->coll, algo);
    vsim v = {.sys = s, .n = s->nranks, .r = calloc((size_t)s->nranks, sizeof(vrank)), .bps = bps,
              .proto = proto, .fam = fam, .spread = spreads(c->coll, algo), .steady = steady};
    bool ok = v.r != NULL;
    if (ok) {
        schedule(&v, c, algo);
        ok = !v.oom && replay(&v, entry, end);
    }
    *oom = !v.r || v.oom;
    sim_free(&v);
    return ok;
}

int occl_vmodel_replay_steps(const occl_vsystem *s, const occl_vsteps *st, occl_pfam fam, occl_proto proto,
                             const uint64_t *entry, const uint64_t *bps, const occl_vwatch *watch,
                             uint64_t *end)
{
    int n = st->nranks;
    if (n < 1 || n != s->nranks || st->step0[0] != 0)
        return OCCL_VSTEPS_INVALID;
    for (int r = 0; r < n; r++) {
        if (st->step0[r + 1] < st->step0[r])
            return OCCL_VSTEPS_INVALID;
        for (int k = st->step0[r]; k < st->step0[r + 1]; k++) {
            if (st->end0[k + 1] < st->end0[k])
                return OCCL_VSTEPS_INVALID;
            for (int i = st->end0[k]; i < st->end0[k + 1]; i++)
                if (st->ends[i].peer < 0 || st->ends[i].peer >= n || st->ends[i].peer == r)
                    return OCCL_VSTEPS_INVALID;
        }
    }
    vsim v = {.sys = s, .n = n, .r = calloc((size_t)n, sizeof(vrank)), .bps = bps, .proto = proto,
              .fam = fam, .spread = s->rails > 1, .watch = watch};
    int res = OCCL_VSTEPS_NOMEM;
    for (int r = 0; r < n && v.r && !v.oom; r++)
        for (int k = st->step0[r]; k < st->step0[r + 1] && !v.oom; k++) {
            step_begin(&v, r);
            for (int i = st->end0[k]; i < st->end0[k + 1]; i++) {
                const occl_vstep_end *e = &st->ends[i];
                add_end(&v, r, e->peer, e->send, e->reduce, e->bytes);
            }
            if (!v.oom)
                v.r[r].compute[v.r[r].nsteps - 1] = st->compute[k];
        }
    if (v.r && !v.oom)
        res = replay(&v, entry, end) ? OCCL_VSTEPS_OK : v.oom ? OCCL_VSTEPS_NOMEM : OCCL_VSTEPS_STUCK;
    sim_free(&v);
    return res;
}

/* Whether nvls all-reduce on s is NCCL's NVLS: one node whose paths reduce
 * in the switch (occl_proto_sharp). Elsewhere nvls is OCCL's one-pass
 * schedule, charged as it moves its bytes. */
static bool nvls_in_switch(const occl_vsystem *s, const occl_call *c, occl_algo algo)
{
    if (algo != OCCL_ALGO_NVLS || c->coll != OCCL_COLL_ALLREDUCE || s->nnodes != 1 || s->nranks < 2 ||
        c->count == 0)
        return false;
    for (int j = 1; j < s->nranks; j++) {
        or_vpath p = s->path(s->ctx, s->ring[0], s->ring[j]);
        if (!occl_proto_sharp(occl_proto_hw(p.type), p.bytes_per_s))
            return false;
    }
    return true;
}

/* c with the data of one loop of NCCL's NVLS pipeline whose busiest channel
 * moves `share` bytes: every channel taken to move as much, since a channel
 * runs at 1/nvlsChannels of NVLS's bandwidth (NCCL's tuning rates NVLS at
 * nChannels x its per-channel bandwidth) and the loop lasts as long as its
 * busiest channel. */
static occl_call nvls_loop_call(const occl_call *c, uint64_t share)
{
    occl_call l = *c;
    l.count = (size_t)(OCCL_NVLS_CHANNELS * share / occl_type_size(c->type));
    return l;
}

/* The time of one further loop of the pipeline moving `share` bytes on its
 * busiest channel: the replay of the loop's data alone, without the paths'
 * latency (a channel keeps several chunks in flight, NCCL_STEPS buffers, so
 * the hand-shakes overlap the data once the pipeline is full). */
static bool nvls_loop_ns(const occl_vsystem *s, const occl_call *c, const uint64_t *bps, uint64_t share,
                         uint64_t *zero, uint64_t *end, uint64_t *ns, bool *oom)
{
    occl_call l = nvls_loop_call(c, share);
    if (!replay_ends(s, &l, OCCL_ALGO_NVLS, OCCL_PROTO_SIMPLE, zero, bps, true, end, oom))
        return false;
    *ns = 0;
    for (int r = 0; r < s->nranks; r++)
        *ns = max_u64(*ns, end[r]);
    return true;
}

/* NCCL's NVLS all-reduce in the switch as a pipeline (vproto.h,
 * docs/virtual-time.md#protocols): each channel passes its loops through
 * OCCL_NVLS_STAGES stages, each stage one loop per loop time, so a call of
 * k loops takes k + STAGES - 1 loop times, the pipeline step t as long as
 * the oldest loop in flight, max(0, t - STAGES + 1). The first step is the
 * replay of its loop with the ranks' entries and the paths' latency; every
 * further one adds its loop's time (nvls_loop_ns) to every rank. */
static bool nvls_pipeline_ends(const occl_vsystem *s, const occl_call *c, const uint64_t *entry,
                               const uint64_t *bps, uint64_t *end, bool *oom)
{
    int n = s->nranks;
    uint64_t bytes = (uint64_t)c->count * occl_type_size(c->type);
    occl_nvls_loops shape = occl_nvls_shape(bytes, n);
    uint64_t k = shape.nloops, first = occl_nvls_channel_bytes(&shape, n, bytes, 0);
    occl_call l0 = nvls_loop_call(c, first);
    if (!replay_ends(s, &l0, OCCL_ALGO_NVLS, OCCL_PROTO_SIMPLE, entry, bps, false, end, oom))
        return false;
    uint64_t *zero = calloc((size_t)n, sizeof *zero), *tmp = malloc((size_t)n * sizeof *tmp);
    bool ok = zero && tmp;
    *oom = !ok;
    /* Steps 1 .. k + STAGES - 2, step t as long as its oldest loop,
     * max(0, t - STAGES + 1): the first channel's full share but in the
     * steps whose oldest loop is the last, k - 1 (which moves what is
     * left): the final step, or every step of a call of one loop. */
    uint64_t steps = k + OCCL_NVLS_STAGES - 2, last = occl_nvls_channel_bytes(&shape, n, bytes, k - 1);
    uint64_t at_last = k == 1 ? steps : 1;
    uint64_t full_ns = 0, last_ns = 0, add = 0;
    if (ok && steps > at_last)
        ok = nvls_loop_ns(s, c, bps, first, zero, tmp, &full_ns, oom);
    if (ok && at_last && steps > at_last && last == first)
        last_ns = full_ns;
    else if (ok && at_last)
        ok = nvls_loop_ns(s, c, bps, last, zero, tmp, &last_ns, oom);
    if (ok) {
        unsigned __int128 t = (unsigned __int128)(steps - at_last) * full_ns + (unsigned __int128)at_last * last_ns;
        add = t > UINT64_MAX / 4 ? UINT64_MAX / 4 : (uint64_t)t;
        for (int r = 0; r < n; r++)
            end[r] = add_sat(end[r], add);
    }
    free(zero);
    free(tmp);
    return ok;
}

/* Every rank's end of collective c on system s, every rank having entered
 * at entry[]: the replay's, plus the protocol's base latency (NCCL charges
 * it once per call). false if it cannot be modelled. */
static bool model_ends(const occl_vsystem *s, const occl_call *c, occl_algo algo, occl_proto proto,
                       const uint64_t *entry, const uint64_t *bps, uint64_t *end, bool *oom)
{
    occl_pfam fam = occl_vmodel_family(c->coll, algo);
    *oom = false;
    if (!occl_proto_supported(fam, proto))
        return false;
    bool ok = nvls_in_switch(s, c, algo) ? nvls_pipeline_ends(s, c, entry, bps, end, oom)
                                         : replay_ends(s, c, algo, proto, entry, bps, false, end, oom);
    uint64_t base = occl_proto_base_ns(fam, proto);
    for (int r = 0; r < s->nranks && ok; r++)
        end[r] += base;
    return ok;
}

/* Link loads of a floor: the wire time every transfer crossing a link
 * holds it for, summed, and the least latency among them. */
typedef struct vload {
    uint64_t key, busy, lat;
    bool used;
} vload;

static vload *load_slot(vload *t, size_t cap, uint64_t key)
{
    size_t i = pair_slot((int)(key >> 32), (int)(uint32_t)key, cap);
    while (t[i].used && t[i].key != key)
        i = (i + 1) & (cap - 1);
    return &t[i];
}

static uint64_t sat_u64(unsigned __int128 t) { return t > UINT64_MAX / 4 ? UINT64_MAX / 4 : (uint64_t)t; }

/* A ring all-reduce's floor (occl_vmodel_lower_bound), the larger of two:
 * - a rank's chain: its step i cannot start before its step i-1 ended, and
 *   its send of step i ends no earlier than the step's start + the path's
 *   latency + the chunk's wire time (the replay's slot is never before the
 *   transfer is ready, and a reduction only adds);
 * - a link's load: the replay gives each transfer the link alone for its
 *   wire time, so the last of them ends no earlier than their sum + its
 *   latency.
 * Rank p's 2(n-1) sends carry every chunk twice but chunk p+1 (reduce-
 * scatter) and p+2 (all-gather), and the chunks have two sizes only, so
 * each rank's wire time is O(1) once its path is known. */
static uint64_t ring_allreduce_floor(const occl_vsystem *s, const occl_call *c, occl_proto proto)
{
    int n = s->nranks;
    size_t es = occl_type_size(c->type);
    uint64_t small = (uint64_t)(c->count / (size_t)n) * es, big = small + es;
    uint64_t nbig = c->count % (size_t)n, nsmall = (uint64_t)n - nbig;
    vsim v = {.sys = s, .n = n, .proto = proto, .fam = OCCL_PFAM_RING,
              .spread = spreads(c->coll, OCCL_ALGO_RING)};
    size_t cap = 64;
    while (cap < (size_t)n * 16)
        cap *= 2;
    vload *loads = calloc(cap, sizeof *loads); /* NULL: the chains only */
    size_t nloads = 0;
    uint64_t floor = 0;
    for (int p = 0; p < n; p++) {
        vpair P = {.src = s->ring[p], .dst = s->ring[(p + 1) % n]};
        pair_path(&v, &P);
        uint64_t b_small = or_vclock_bytes_ns(
                     occl_proto_wire_bytes(v.fam, proto, P.hw, n, P.sharp, small), P.path.bytes_per_s),
                 b_big = or_vclock_bytes_ns(occl_proto_wire_bytes(v.fam, proto, P.hw, n, P.sharp, big),
                                            P.path.bytes_per_s);
        unsigned __int128 wire = (unsigned __int128)2 * (nsmall * b_small + nbig * b_big);
        for (int k = 1; k <= 2; k++) /* the two chunks p sends once only */
            wire -= chunk(c->count, (p + k) % n, n, es) == big ? b_big : b_small;
        uint64_t busy = sat_u64(wire), lat = P.path.latency_ns;
        floor = max_u64(floor, sat_u64((unsigned __int128)2 * (n - 1) * lat + busy));
        for (int i = 0; loads && i < or_vpath_nlinks(&P.path); i++) {
            vload *L = load_slot(loads, cap, or_vpath_link(&P.path, i));
            if (!L->used) {
                if (2 * ++nloads > cap) { /* full: keep the chains */
                    free(loads);
                    loads = NULL;
                    break;
                }
                *L = (vload){or_vpath_link(&P.path, i), 0, lat, true};
            }
            L->busy = add_sat(L->busy, busy);
            L->lat = L->lat < lat ? L->lat : lat;
        }
    }
    for (size_t i = 0; loads && i < cap; i++)
        if (loads[i].used)
            floor = max_u64(floor, add_sat(loads[i].busy, loads[i].lat));
    free(loads);
    return floor;
}

uint64_t occl_vmodel_lower_bound(const occl_vsystem *s, const occl_call *c, occl_algo algo, occl_proto proto)
{
    occl_pfam fam = occl_vmodel_family(c->coll, algo);
    if (s->nranks < 2 || !c->count || !occl_proto_supported(fam, proto))
        return 0;
    if (c->coll == OCCL_COLL_ALLREDUCE && algo == OCCL_ALGO_RING)
        return add_sat(ring_allreduce_floor(s, c, proto), occl_proto_base_ns(fam, proto));
    return 0;
}

uint64_t occl_vmodel_time(const occl_vsystem *s, const occl_call *c, occl_algo algo, occl_proto proto,
                          const uint64_t *bps)
{
    int n = s->nranks;
    uint64_t *entry = calloc((size_t)n, sizeof *entry), *end = malloc((size_t)n * sizeof *end);
    uint64_t last = UINT64_MAX;
    bool oom;
    if (entry && end && model_ends(s, c, algo, proto, entry, bps, end, &oom)) {
        last = 0;
        for (int r = 0; r < n; r++)
            last = max_u64(last, end[r]);
    }
    free(entry);
    free(end);
    return last;
}

bool occl_vmodel_ends(const occl_vsystem *s, const occl_call *c, occl_algo algo, occl_proto proto,
                      const uint64_t *entry, const uint64_t *bps, uint64_t *end)
{
    bool oom;
    return model_ends(s, c, algo, proto, entry, bps, end, &oom);
}

/* A communicator seen as the model's system: its ring, nodes and trees, and
 * the runtime's paths between its ranks' global devices (gdev). */
static or_vpath comm_path(void *ctx, int src, int dst)
{
    const int *gdev = ctx;
    return or_vclock_path(gdev[src], gdev[dst]);
}

/* The communicator's rails on the declared topology (1 without one, or
 * when a rank's device is not in it). */
static int comm_rails(occlComm_t comm, const int *gdev)
{
    if (!comm->job.topo || !comm->job.topo_device || comm->nnodes < 2)
        return 1;
    int *dev = malloc((size_t)comm->nranks * sizeof *dev), rails = 1;
    bool ok = dev != NULL;
    for (int r = 0; ok && r < comm->nranks; r++) {
        dev[r] = gdev[r] >= 0 ? comm->job.topo_device[gdev[r]] : -1;
        ok = dev[r] >= 0;
    }
    if (ok)
        rails = occl_vsystem_rails(comm->job.topo, dev, comm->ring, comm->node_first, comm->nnodes);
    free(dev);
    return rails;
}

static occl_vsystem comm_system(occlComm_t comm, int *gdev)
{
    return (occl_vsystem){.nranks = comm->nranks, .ring = comm->ring, .node_first = comm->node_first,
                          .nnodes = comm->nnodes, .trees = comm->trees, .path = comm_path,
                          .ctx = gdev, .rails = comm_rails(comm, gdev)};
}

/* This rank's end of collective c, every rank having entered at entry[]. */
static uint64_t collective_end(occlComm_t comm, const occl_call *c, occl_algo algo, occl_proto proto,
                               const uint64_t *entry, int *gdev, uint64_t *bps)
{
    occl_vsystem s = comm_system(comm, gdev);
    uint64_t *end = malloc((size_t)comm->nranks * sizeof *end), mine = entry[comm->rank];
    bool oom = end == NULL;
    if (end && model_ends(&s, c, algo, proto, entry, bps, end, &oom))
        mine = end[comm->rank];
    else
        OCCL_WARN("rank %d: %s: virtual time not modelled (%s); charged nothing", comm->rank,
                  occl_coll_name(c->coll), oom ? "out of memory" : "schedule mismatch");
    free(end);
    return mine;
}

/* The communicator's ranks' global devices, or NULL (out of memory). */
static int *comm_gdev(occlComm_t comm)
{
    int *gdev = malloc((size_t)comm->nranks * sizeof *gdev);
    for (int j = 0; gdev && j < comm->nranks; j++)
        gdev[j] = or_global_device(comm->peers[j].world_rank, comm->peers[j].device);
    return gdev;
}

int occl_vcost_view_make(occlComm_t comm, occl_vcost_view *v)
{
    v->gdev = comm_gdev(comm);
    if (!v->gdev)
        return -1;
    v->s = comm_system(comm, v->gdev);
    return 0;
}

void occl_vcost_view_release(occl_vcost_view *v)
{
    free(v->gdev);
    v->gdev = NULL;
}

/* ---- the exchange of entry clocks --------------------------------------------- */

typedef struct vinfo {
    uint64_t clock, bps;
} vinfo;

static uint64_t my_bps(occlComm_t comm)
{
    uint64_t bps = 0;
    or_device_memory_bps(comm->device, &bps);
    return bps;
}

/* Send this rank's entry to each of peers[] and receive theirs into
 * info[peer]. The bytes go from a device scratch (intra-node sends are read
 * from device memory). Before point-to-point calls (p2p) the exchange is
 * their traffic: a receive from any source finds its sender by it. */
static occlResult_t exchange(occlComm_t comm, const int *peers, int npeers, bool p2p, vinfo mine,
                             vinfo *info)
{
    info[comm->rank] = mine;
    if (!npeers)
        return occlSuccess;
    vinfo *dev = occl_scratch(comm, OCCL_SCRATCH_B, sizeof *dev);
    occl_xfer *xf = calloc((size_t)npeers * 2, sizeof *xf);
    occlResult_t res = occlSuccess;
    if (!dev)
        res = occlUnhandledDeviceError;
    else if (!xf)
        res = occl_fail(occlSystemError, "out of memory");
    /* A collective's exchange is its first, under its fingerprint; sends and
     * receives exchange as a Send and a Recv of the clocks. */
    occl_fp fs = {.comm_id = comm->id, .count = sizeof mine, .root = -1, .coll = OCCL_COLL_SEND,
                  .type = occlUint8, .op = OCCL_FP_NO_OP};
    occl_fp fr = fs;
    fr.coll = OCCL_COLL_RECV;
    if (res == occlSuccess) {
        *dev = mine;
        for (int i = 0; i < npeers; i++) {
            xf[2 * i] = (occl_xfer){.kind = OCCL_XFER_SEND, .peer = peers[i], .buf = dev,
                                    .bytes = sizeof mine, .p2p = p2p, .fp = p2p ? &fs : NULL};
            xf[2 * i + 1] = (occl_xfer){.kind = OCCL_XFER_RECV, .peer = peers[i], .buf = &info[peers[i]],
                                        .bytes = sizeof mine, .p2p = p2p, .fp = p2p ? &fr : NULL};
        }
        res = occl_xfers_run(comm, xf, 2 * npeers);
    }
    free(xf);
    return res;
}

/* ---- one call (or a group's sends and receives) -------------------------------- */

static const char *op_name(const occl_call *c)
{
    if (c->coll != OCCL_COLL_ALLREDUCE && c->coll != OCCL_COLL_REDUCE && c->coll != OCCL_COLL_REDUCESCATTER)
        return NULL;
    if (c->avg)
        return "avg";
    if (c->device_scalar)
        return "premulsum";
    switch (c->op.kind) {
    case OCCL_RED_SUM: return "sum";
    case OCCL_RED_PROD: return "prod";
    case OCCL_RED_MAX: return "max";
    case OCCL_RED_MIN: return "min";
    case OCCL_RED_PREMULSUM: return "premulsum";
    default: return "?";
    }
}

static bool has_algo(const occl_call *c) { return c->coll < OCCL_COLL_SEND; }

/* proto: the protocol charged in virtual time; OCCL_NUM_PROTOS: none (wall
 * time, where it changes nothing). */
static void trace_call(const occl_call *c, occl_algo algo, occl_proto proto, uint64_t start, uint64_t end)
{
    size_t es = occl_type_size(c->type);
    char args[320];
    int len = snprintf(args, sizeof args, "{\"bytes\":%llu,\"count\":%zu,\"type\":\"%s\"",
                       (unsigned long long)(c->count * es), c->count, occl_type_name(c->type));
    const char *op = op_name(c);
    if (op)
        len += snprintf(args + len, sizeof args - (size_t)len, ",\"op\":\"%s\"", op);
    if (c->coll == OCCL_COLL_BROADCAST || c->coll == OCCL_COLL_REDUCE || c->coll == OCCL_COLL_GATHER ||
        c->coll == OCCL_COLL_SCATTER)
        len += snprintf(args + len, sizeof args - (size_t)len, ",\"root\":%d", c->root);
    if (c->coll == OCCL_COLL_SEND || c->coll == OCCL_COLL_RECV)
        len += snprintf(args + len, sizeof args - (size_t)len, ",\"peer\":%d", c->root);
    if (has_algo(c))
        len += snprintf(args + len, sizeof args - (size_t)len, ",\"algorithm\":\"%s\"", occl_algo_name(algo));
    if (has_algo(c) && proto < OCCL_NUM_PROTOS)
        len += snprintf(args + len, sizeof args - (size_t)len, ",\"protocol\":\"%s\"", occl_proto_name(proto));
    snprintf(args + len, sizeof args - (size_t)len, ",\"nranks\":%d,\"rank\":%d}", c->comm->nranks,
             c->comm->rank);
    char name[64];
    snprintf(name, sizeof name, "occl %s", occl_coll_name(c->coll));
    or_trace_stream_slice(c->stream, name, "collective", start, end, args);
}

/* A group's sends and receives progress together: one slice. */
static void trace_group(const occl_call *calls, int n, uint64_t start, uint64_t end)
{
    unsigned long long sent = 0, received = 0;
    int sends = 0;
    for (int i = 0; i < n; i++) {
        uint64_t b = (uint64_t)calls[i].count * occl_type_size(calls[i].type);
        if (calls[i].coll == OCCL_COLL_SEND) {
            sends++;
            sent += b;
        } else {
            received += b;
        }
    }
    char args[256];
    snprintf(args, sizeof args, "{\"sends\":%d,\"recvs\":%d,\"bytes_sent\":%llu,"
             "\"bytes_received\":%llu,\"nranks\":%d,\"rank\":%d}", sends, n - sends, sent,
             received, calls[0].comm->nranks, calls[0].comm->rank);
    or_trace_stream_slice(calls[0].stream, "occl Send/Recv group", "collective", start, end, args);
}

/* The virtual end of a group's sends and receives: each transfer starts when
 * both ends have entered, and the group ends with its last transfer. */
static uint64_t p2p_end(occlComm_t comm, const occl_call *calls, int n, const vinfo *info,
                        const int *gdev)
{
    uint64_t end = info[comm->rank].clock;
    for (int i = 0; i < n; i++) {
        int peer = calls[i].root;
        bool send = calls[i].coll == OCCL_COLL_SEND;
        uint64_t go = max_u64(info[comm->rank].clock, info[peer].clock);
        uint64_t bytes = (uint64_t)calls[i].count * occl_type_size(calls[i].type);
        int src = send ? gdev[comm->rank] : gdev[peer], dst = send ? gdev[peer] : gdev[comm->rank];
        end = max_u64(end, go + or_vclock_path_cost(src, dst, bytes));
    }
    return end;
}

occlResult_t occl_vrun(occl_call *calls, int n, uint64_t *clock)
{
    occlComm_t comm = calls[0].comm;
    bool p2p = calls[0].coll == OCCL_COLL_SEND || calls[0].coll == OCCL_COLL_RECV;
    /* A call begun on the calling thread (calls[0].ll) is neither: enqueue.c
     * runs it there only then. */
    bool virt = !calls[0].ll && or_vclock_virtual(), traced = !calls[0].ll && or_trace_enabled();
    uint64_t wall0 = traced && !virt ? or_trace_now() : 0, entry = *clock;
    int nr = comm->nranks;
    bool model = virt && nr > 1 && (p2p || calls[0].count > 0);
    if (!p2p)
        occl_fp_begin(comm, &calls[0]);
    vinfo *info = NULL;
    int *peers = NULL, *gdev = NULL, npeers = 0;
    occlResult_t res = occlSuccess;
    if (model) {
        info = calloc((size_t)nr, sizeof *info);
        peers = calloc((size_t)nr, sizeof *peers);
        gdev = comm_gdev(comm);
        if (!info || !peers || !gdev)
            res = occl_fail(occlSystemError, "out of memory");
        for (int j = 0; j < nr && res == occlSuccess; j++) {
            bool with = false;
            if (!p2p)
                with = j != comm->rank;
            for (int i = 0; p2p && i < n && !with; i++)
                with = calls[i].root == j;
            if (with)
                peers[npeers++] = j;
        }
        if (res == occlSuccess)
            res = exchange(comm, peers, npeers, p2p, (vinfo){entry, my_bps(comm)}, info);
    }
    /* Every rank's bandwidth, for the planner too (tuning.c replays the
     * candidates with them): the same vector on every rank. */
    uint64_t *bps = NULL;
    if (res == occlSuccess && model && !p2p) {
        bps = malloc((size_t)nr * sizeof *bps);
        if (!bps)
            res = occl_fail(occlSystemError, "out of memory");
        for (int j = 0; bps && j < nr; j++)
            bps[j] = info[j].bps;
        comm->vbps = bps;
    }
    if (res == occlSuccess)
        res = p2p ? occl_run_calls(calls, n) : occl_run_call(calls);
    occl_choice pick = {OCCL_ALGO_RING, OCCL_PROTO_SIMPLE};
    if (has_algo(&calls[0]) && nr > 1 && calls[0].count > 0 && (model || traced))
        pick = occl_plan_choice(&calls[0]);
    occl_algo algo = pick.algo;
    comm->vbps = NULL;
    if (res == occlSuccess && model) {
        if (p2p) {
            *clock = p2p_end(comm, calls, n, info, gdev);
        } else {
            uint64_t *entries = malloc((size_t)nr * sizeof *entries);
            if (entries) {
                for (int j = 0; j < nr; j++)
                    entries[j] = info[j].clock;
                *clock = collective_end(comm, &calls[0], algo, pick.proto, entries, gdev, bps);
            }
            free(entries);
        }
    }
    free(bps);
    if (traced) {
        uint64_t s = virt ? entry : wall0, e = virt ? *clock : or_trace_now();
        if (n == 1)
            trace_call(&calls[0], algo, virt ? pick.proto : OCCL_NUM_PROTOS, s, e);
        else
            trace_group(calls, n, s, e);
    }
    free(info);
    free(peers);
    free(gdev);
    return res;
}

/* ---- a group charged without running (occlGroupSimulateEnd) -------------------- */

occlResult_t occl_vsimulate(const occl_call *calls, int n, uint64_t *clocks)
{
    occlComm_t comm = calls[0].comm;
    int nr = comm->nranks;
    uint64_t *bps = malloc((size_t)nr * sizeof *bps), *end = malloc((size_t)nr * sizeof *end);
    int *gdev = comm_gdev(comm);
    vinfo *info = malloc((size_t)nr * sizeof *info);
    occlResult_t res = occlSuccess;
    if (!bps || !end || !gdev || !info)
        res = occl_fail(occlSystemError, "out of memory");
    for (int j = 0; j < nr && res == occlSuccess; j++)
        bps[j] = comm->peers[j].mem_bps; /* as the entry exchange would give them */
    /* As task_exec runs them: consecutive sends and receives together, then
     * each collective; each starts where the last left every rank's clock.
     * Under the lock the calls run under: the planner's cache and vbps. */
    or_lock_acquire(&comm->lock);
    for (int i = 0; i < n && res == occlSuccess;) {
        int j = i;
        while (j < n && (calls[j].coll == OCCL_COLL_SEND || calls[j].coll == OCCL_COLL_RECV))
            j++;
        if (j > i) {
            /* Only this rank's side is known: each peer is taken to enter
             * at the clock the chain gives it, and to end with the transfer. */
            for (int r = 0; r < nr; r++)
                info[r].clock = clocks[r];
            uint64_t e = p2p_end(comm, &calls[i], j - i, info, gdev);
            clocks[comm->rank] = e;
            for (int k = i; k < j; k++)
                clocks[calls[k].root] = max_u64(clocks[calls[k].root], e);
            i = j;
            continue;
        }
        const occl_call *c = &calls[i++];
        if (nr == 1 || c->count == 0) /* charged nothing, as occl_vrun */
            continue;
        comm->vbps = bps; /* the planner replays its candidates with these */
        occl_choice pick = occl_plan_choice(c);
        comm->vbps = NULL;
        occl_vsystem s = comm_system(comm, gdev);
        bool oom;
        if (model_ends(&s, c, pick.algo, pick.proto, clocks, bps, end, &oom))
            memcpy(clocks, end, (size_t)nr * sizeof *end);
        else
            res = occl_fail(oom ? occlSystemError : occlInternalError, "%s: not modelled (%s)",
                            occl_coll_name(c->coll), oom ? "out of memory" : "schedule mismatch");
    }
    or_lock_release(&comm->lock);
    free(bps);
    free(end);
    free(gdev);
    free(info);
    return res;
}
