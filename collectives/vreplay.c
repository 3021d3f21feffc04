/*
 * collectives/vreplay.c - a collective's transfers replayed over contended
 * links (vreplay.h).
 *
 * Ready times never decrease as the simulation goes: a step starts when an
 * earlier one ends, which is after the ready time of its transfers, so every
 * transfer that becomes ready later is ready no earlier than the one being
 * taken. Reservations are therefore made in virtual start order, as the
 * runtime's link timelines expect ("first come in virtual start time"), and
 * a binary heap of ready transfers keeps each event O(log n).
 */
#include "vreplay.h"

#include <stdbool.h>
#include <stdlib.h>

static uint64_t add_sat(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

typedef struct sim {
    occl_vreplay *r;
    int nsteps;
    int *owner;       /* rank of each step */
    size_t *xfirst;   /* step s holds transfers xlist[xfirst[s] .. xfirst[s+1]) */
    size_t *xlist;
    int *pending;     /* transfers of the step not yet ended */
    uint64_t *last;   /* the step's start, then the latest end of its transfers */
    unsigned char *waiting; /* ends of the transfer whose step has not started */
    size_t *heap;     /* ready transfers */
    size_t nheap;
    int ended;        /* ranks done */
} sim;

/* Ready first, then sender, receiver, k: a fixed order for equal times. */
static bool before(const occl_vxfer *x, size_t a, size_t b)
{
    const occl_vxfer *p = &x[a], *q = &x[b];
    if (p->ready != q->ready)
        return p->ready < q->ready;
    if (p->src != q->src)
        return p->src < q->src;
    if (p->dst != q->dst)
        return p->dst < q->dst;
    if (p->k != q->k)
        return p->k < q->k;
    return a < b;
}

static void heap_push(sim *m, size_t xi)
{
    size_t i = m->nheap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(m->r->x, xi, m->heap[parent]))
            break;
        m->heap[i] = m->heap[parent];
        i = parent;
    }
    m->heap[i] = xi;
}

static size_t heap_pop(sim *m)
{
    size_t top = m->heap[0], moved = m->heap[--m->nheap], i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m->nheap)
            break;
        if (c + 1 < m->nheap && before(m->r->x, m->heap[c + 1], m->heap[c]))
            c++;
        if (!before(m->r->x, m->heap[c], moved))
            break;
        m->heap[i] = m->heap[c];
        i = c;
    }
    if (m->nheap)
        m->heap[i] = moved;
    return top;
}

/* Step s starts at t; a step without transfers ends at once, and the next
 * one of its rank starts. */
static void step_start(sim *m, int s, uint64_t t)
{
    occl_vreplay *r = m->r;
    for (;;) {
        r->start[s] = m->last[s] = t;
        for (size_t i = m->xfirst[s]; i < m->xfirst[s + 1]; i++) {
            occl_vxfer *x = &r->x[m->xlist[i]];
            if (--m->waiting[m->xlist[i]] == 0) {
                x->ready = max_u64(r->start[x->src_step], r->start[x->dst_step]);
                heap_push(m, m->xlist[i]);
            }
        }
        if (m->pending[s] > 0)
            return;
        t = add_sat(t, r->compute[s]);
        int rank = m->owner[s];
        if (s + 1 == r->step0[rank + 1]) {
            r->end[rank] = t;
            m->ended++;
            return;
        }
        s++;
    }
}

/* One of step s's transfers ended at `end`; the step ends with its last. */
static void step_transfer_ended(sim *m, int s, uint64_t end)
{
    m->last[s] = max_u64(m->last[s], end);
    if (--m->pending[s] > 0)
        return;
    occl_vreplay *r = m->r;
    uint64_t t = add_sat(m->last[s], r->compute[s]);
    int rank = m->owner[s];
    if (s + 1 == r->step0[rank + 1]) {
        r->end[rank] = t;
        m->ended++;
    } else {
        step_start(m, s + 1, t);
    }
}

static void sim_free(sim *m)
{
    free(m->owner);
    free(m->xfirst);
    free(m->xlist);
    free(m->pending);
    free(m->last);
    free(m->waiting);
    free(m->heap);
}

int occl_vreplay_run(occl_vreplay *r)
{
    int n = r->nranks, nsteps = r->step0[n];
    sim m = {.r = r, .nsteps = nsteps};
    for (size_t i = 0; i < r->nx; i++)
        if (r->x[i].src_step < 0 || r->x[i].src_step >= nsteps || r->x[i].dst_step < 0 ||
            r->x[i].dst_step >= nsteps)
            return OCCL_VREPLAY_STUCK;
    size_t ns = (size_t)nsteps + 1, nx = r->nx ? r->nx : 1;
    m.owner = malloc(ns * sizeof *m.owner);
    m.xfirst = calloc(ns + 1, sizeof *m.xfirst);
    m.xlist = malloc(2 * nx * sizeof *m.xlist);
    m.pending = calloc(ns, sizeof *m.pending);
    m.last = malloc(ns * sizeof *m.last);
    m.waiting = malloc(nx);
    m.heap = malloc(nx * sizeof *m.heap);
    or_vlinks links = {0};
    int res = OCCL_VREPLAY_OK;
    if (!m.owner || !m.xfirst || !m.xlist || !m.pending || !m.last || !m.waiting || !m.heap) {
        res = OCCL_VREPLAY_NOMEM;
        goto out;
    }
    for (int rank = 0; rank < n; rank++)
        for (int s = r->step0[rank]; s < r->step0[rank + 1]; s++)
            m.owner[s] = rank;
    /* Each transfer listed under both its steps (counting sort by step). */
    for (size_t i = 0; i < r->nx; i++) {
        m.xfirst[r->x[i].src_step + 1]++;
        m.xfirst[r->x[i].dst_step + 1]++;
        m.waiting[i] = 2;
    }
    for (int s = 0; s < nsteps; s++) {
        m.pending[s] = (int)m.xfirst[s + 1];
        m.xfirst[s + 1] += m.xfirst[s];
    }
    for (size_t i = 0; i < r->nx; i++) {
        m.xlist[m.xfirst[r->x[i].src_step]++] = i;
        m.xlist[m.xfirst[r->x[i].dst_step]++] = i;
    }
    for (int s = nsteps; s > 0; s--) /* the fill moved every start to the next one's */
        m.xfirst[s] = m.xfirst[s - 1];
    m.xfirst[0] = 0;

    for (int rank = 0; rank < n; rank++) {
        if (r->step0[rank] == r->step0[rank + 1]) {
            r->end[rank] = r->entry[rank];
            m.ended++;
        } else {
            step_start(&m, r->step0[rank], r->entry[rank]);
        }
    }
    while (m.nheap) {
        occl_vxfer *x = &r->x[heap_pop(&m)];
        uint64_t busy = or_vclock_bytes_ns(x->bytes, x->path.bytes_per_s);
        if (!or_vlinks_reserve(&links, &x->path, x->ready, busy, &x->slot)) {
            res = OCCL_VREPLAY_NOMEM;
            goto out;
        }
        /* The data holds the links for `busy`; latency is the pipeline's
         * delay (as the runtime charges a copy). A fused reduction runs at
         * the receiver's memory as the data arrives, whatever the links. */
        x->end = add_sat(add_sat(x->slot, busy), x->path.latency_ns);
        if (x->reduce_ns)
            x->end = max_u64(x->end, add_sat(add_sat(x->ready, x->path.latency_ns), x->reduce_ns));
        step_transfer_ended(&m, x->src_step, x->end);
        step_transfer_ended(&m, x->dst_step, x->end);
    }
    if (m.ended != n)
        res = OCCL_VREPLAY_STUCK;
out:
    or_vlinks_free(&links);
    sim_free(&m);
    return res;
}
