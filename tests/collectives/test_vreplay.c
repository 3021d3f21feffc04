/*
 * test_vreplay.c - a collective's schedule replayed over contended links by
 * the replay every call's model runs (collectives/vcost.c, through
 * occl_vmodel_replay_steps), on paths built here: every device has a link
 * up and a link down, every node a NIC out and a NIC in; a path within a
 * node is (up, down), across nodes (up, NIC out, NIC in, down). Expected
 * times are worked out by hand from the rule: ready when both steps
 * started, earliest slot free on every link, end = slot + ceil(bytes / bw)
 * + latency. The paths are typed PIX and charged with NVLS's family and
 * Simple, which add no per-hop latency and put the bytes on the links as
 * they are, so only the replay's rules count (test_vproto checks the
 * protocols' charges).
 */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmodel.h"

#define MAXR 8
#define MAXS 64
#define MAXX 512

enum { UP = 0, DOWN = 1, NIC_OUT = 1000, NIC_IN = 1001 };

static int node_of[MAXR];
static int hops[MAXR][MAXR][4];
static const uint64_t LAT_IN = 2000, BW_IN = 100000000000ull; /* 2 us, 100 GB/s */
static const uint64_t LAT_X = 6000, BW_X = 25000000000ull;    /* 6 us, 25 GB/s */

static or_vpath path(void *ctx, int a, int b)
{
    (void)ctx;
    int *h = hops[a][b];
    if (node_of[a] == node_of[b]) {
        h[0] = 2 * a + UP;
        h[1] = 2 * b + DOWN;
        return (or_vpath){.latency_ns = LAT_IN, .bytes_per_s = BW_IN, .type = "PIX", .nhops = 2, .hops = h};
    }
    h[0] = 2 * a + UP;
    h[1] = NIC_OUT + 2 * node_of[a];
    h[2] = NIC_IN + 2 * node_of[b];
    h[3] = 2 * b + DOWN;
    return (or_vpath){.latency_ns = LAT_X, .bytes_per_s = BW_X, .type = "PIX", .nhops = 4, .hops = h};
}

/* A transfer of the schedule being written, and what the replay made of it. */
typedef struct xfer_t {
    int src, dst;
    uint64_t k; /* k-th transfer from src to dst */
    int sstep, dstep; /* the rank's steps holding its ends */
    uint64_t bytes;
    bool reduce;
    uint64_t ready, slot, end; /* out */
} xfer_t;

/* A schedule being written: steps numbered per rank, made global by run(). */
typedef struct sched {
    int n;
    int nsteps[MAXR];
    uint64_t compute[MAXR][MAXS];
    uint64_t entry[MAXR];
    uint64_t bps[MAXR]; /* memory bandwidth, for fused reductions */
    xfer_t x[MAXX];
    size_t nx;
    int step0[MAXR + 1];
    uint64_t start[MAXR * MAXS], end[MAXR];
} sched;

static sched *sched_new(int n)
{
    sched *s = calloc(1, sizeof *s);
    cr_assert_not_null(s);
    s->n = n;
    for (int r = 0; r < MAXR; r++)
        s->bps[r] = 10000000000ull;
    return s;
}

static int step(sched *s, int rank) { return s->nsteps[rank]++; }

/* bytes from src's step ss to dst's step ds, the k-th of that direction;
 * reduce: the receive reduces (3 bytes per byte at dst's bps). */
static void xfer(sched *s, int src, int ss, int dst, int ds, uint64_t k, uint64_t bytes, bool reduce)
{
    cr_assert_lt(s->nx, MAXX);
    s->x[s->nx++] = (xfer_t){.src = src, .dst = dst, .k = k, .sstep = ss, .dstep = ds, .bytes = bytes,
                             .reduce = reduce};
}

static void seen_step(void *ctx, int rank, int st, uint64_t start)
{
    sched *s = ctx;
    s->start[s->step0[rank] + st] = start;
}

static void seen_transfer(void *ctx, const occl_vtransfer *t)
{
    sched *s = ctx;
    for (size_t i = 0; i < s->nx; i++)
        if (s->x[i].src == t->src && s->x[i].dst == t->dst && s->x[i].k == t->k) {
            s->x[i].ready = t->ready, s->x[i].slot = t->slot, s->x[i].end = t->end;
            return;
        }
    cr_assert_fail("a transfer %d -> %d #%llu the schedule does not hold", t->src, t->dst,
                   (unsigned long long)t->k);
}

/* Every transfer's two ends listed under their steps, in the order the
 * transfers were written; a step the rank does not have is kept (as
 * written) so that the replay can refuse it. */
static int run(sched *s)
{
    s->step0[0] = 0;
    for (int r = 0; r < s->n; r++)
        s->step0[r + 1] = s->step0[r] + s->nsteps[r];
    int nsteps = s->step0[s->n];
    static int end0[MAXR * MAXS + 1];
    static occl_vstep_end ends[2 * MAXX];
    uint64_t compute[MAXR * MAXS];
    int ne = 0;
    for (int r = 0; r < s->n; r++)
        for (int k = 0; k < s->nsteps[r]; k++) {
            end0[s->step0[r] + k] = ne;
            compute[s->step0[r] + k] = s->compute[r][k];
            for (size_t i = 0; i < s->nx; i++) {
                const xfer_t *x = &s->x[i];
                if (x->src == r && x->sstep == k)
                    ends[ne++] = (occl_vstep_end){.peer = x->dst, .send = true, .bytes = x->bytes};
                if (x->dst == r && x->dstep == k)
                    ends[ne++] = (occl_vstep_end){.peer = x->src, .reduce = x->reduce, .bytes = x->bytes};
            }
        }
    end0[nsteps] = ne;
    occl_vsystem sys = {.nranks = s->n, .path = path, .rails = 1};
    occl_vsteps st = {.nranks = s->n, .step0 = s->step0, .end0 = end0, .ends = ends, .compute = compute};
    occl_vwatch w = {seen_step, seen_transfer, s};
    return occl_vmodel_replay_steps(&sys, &st, OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE, s->entry, s->bps, &w, s->end);
}

static uint64_t ns(uint64_t bytes, uint64_t bps) { return or_vclock_bytes_ns(bytes, bps); }

/* A fused reduction of `bytes` (3 x bytes through memory) at bps. */
static uint64_t reduce_ns(uint64_t bytes, uint64_t bps) { return ns(3 * bytes, bps); }

/* The memory bandwidth at which a fused reduction of `bytes` takes `want` ns. */
static uint64_t bps_for(uint64_t bytes, uint64_t want)
{
    uint64_t bps = (uint64_t)(((unsigned __int128)3 * bytes * 1000000000u + want - 1) / want);
    cr_assert_eq(reduce_ns(bytes, bps), want, "no bandwidth gives %llu ns", (unsigned long long)want);
    return bps;
}

/* The ring all-reduce of algorithms.c in rank order: 2(n-1) steps, each
 * sending a chunk of S/n to the next rank and receiving one from the
 * previous (reducing in the first n-1). */
static void ring_allreduce(sched *s, uint64_t S, bool reduce)
{
    int n = s->n;
    for (int p = 0; p < n; p++)
        for (int k = 0; k < 2 * (n - 1); k++)
            step(s, p);
    for (int p = 0; p < n; p++)
        for (int k = 0; k < 2 * (n - 1); k++)
            xfer(s, p, k, (p + 1) % n, k, (uint64_t)k, S / (uint64_t)n, reduce && k < n - 1);
}

Test(vreplay, one_transfer_costs_latency_plus_bytes_over_bandwidth)
{
    node_of[0] = 0, node_of[1] = 1;
    sched *s = sched_new(2);
    s->entry[0] = 100, s->entry[1] = 700;
    xfer(s, 0, step(s, 0), 1, step(s, 1), 0, 1 << 20, 0);
    s->compute[1][0] = 50;
    cr_assert_eq(run(s), OCCL_VSTEPS_OK);
    /* ready when the later end arrives; 1 MiB at 25 GB/s is 41944 ns */
    cr_assert_eq(s->x[0].ready, 700);
    cr_assert_eq(s->end[0], 700 + LAT_X + 41944);
    cr_assert_eq(s->end[1], 700 + LAT_X + 41944 + 50);
    free(s);
}

Test(vreplay, two_transfers_into_one_device_share_its_link_in_sender_order)
{
    for (int order = 0; order < 2; order++) {
        node_of[0] = node_of[1] = node_of[2] = 0;
        sched *s = sched_new(3);
        int a = step(s, 0), b = step(s, 1), c = step(s, 2);
        uint64_t B = 3 << 20, d = ns(B, BW_IN);
        if (order) { /* the input's order does not matter: the key does */
            xfer(s, 1, b, 2, c, 0, B, 0);
            xfer(s, 0, a, 2, c, 0, B, 0);
        } else {
            xfer(s, 0, a, 2, c, 0, B, 0);
            xfer(s, 1, b, 2, c, 0, B, 0);
        }
        cr_assert_eq(run(s), OCCL_VSTEPS_OK);
        cr_assert_eq(s->end[0], LAT_IN + d);
        cr_assert_eq(s->end[1], LAT_IN + 2 * d, "rank 1 waits for rank 0's transfer on 2's link");
        cr_assert_eq(s->end[2], LAT_IN + 2 * d);
        free(s);
    }
}

Test(vreplay, transfers_on_disjoint_links_do_not_wait)
{
    node_of[0] = node_of[1] = node_of[2] = node_of[3] = 0;
    sched *s = sched_new(4);
    uint64_t B = 1 << 20;
    for (int r = 0; r < 4; r++)
        step(s, r);
    xfer(s, 0, 0, 1, 0, 0, B, 0);
    xfer(s, 1, 0, 0, 0, 0, B, 0); /* the other direction of each link */
    xfer(s, 2, 0, 3, 0, 0, B, 0);
    cr_assert_eq(run(s), OCCL_VSTEPS_OK);
    for (int r = 0; r < 4; r++)
        cr_assert_eq(s->end[r], LAT_IN + ns(B, BW_IN), "rank %d", r);
    free(s);
}

/* 2 nodes x 2 devices. Packed (ranks 0 1 | 2 3): the rank-order ring
 * crosses at 1 -> 2 and 3 -> 0, one transfer per NIC direction per step, so
 * every step costs one network hop. Spread (0 2 | 1 3): every hop crosses,
 * and 0 -> 1 and 2 -> 3 both leave node 0 by its NIC (1 -> 2 and 3 -> 0 both
 * leave node 1): each step costs the hop at half the NIC's bandwidth. */
Test(vreplay, a_ring_whose_hops_share_nics_pays_half_their_bandwidth)
{
    uint64_t S = 16 << 20, d = ns(S / 4, BW_X);
    for (int r = 0; r < 4; r++)
        node_of[r] = r / 2;
    sched *s = sched_new(4);
    ring_allreduce(s, S, false);
    cr_assert_eq(run(s), OCCL_VSTEPS_OK);
    for (int r = 0; r < 4; r++)
        cr_assert_eq(s->end[r], 6 * (LAT_X + d), "packed rank %d: %llu", r, (unsigned long long)s->end[r]);
    free(s);

    for (int r = 0; r < 4; r++)
        node_of[r] = r % 2;
    s = sched_new(4);
    ring_allreduce(s, S, false);
    cr_assert_eq(run(s), OCCL_VSTEPS_OK);
    /* Each step: 0 -> 1 and 1 -> 2 at once, 2 -> 3 and 3 -> 0 one transfer
     * later; rank 1, which neither waits for nor sends a second one, ends
     * its last step one transfer earlier (its other steps wait for 0 and 2). */
    uint64_t E = 6 * (LAT_X + 2 * d);
    cr_assert_eq(s->end[0], E);
    cr_assert_eq(s->end[1], E - d);
    cr_assert_eq(s->end[2], E);
    cr_assert_eq(s->end[3], E);
    free(s);
}

Test(vreplay, a_fused_reduction_bounds_the_receive_and_links_still_contend)
{
    node_of[0] = node_of[1] = node_of[2] = 0;
    uint64_t B = 4 << 20, d = ns(B, BW_IN), red = d + d / 2;
    sched *s = sched_new(3);
    s->bps[2] = bps_for(B, red); /* the receiver reduces B in `red` */
    int a = step(s, 0), b = step(s, 1), c = step(s, 2);
    xfer(s, 0, a, 2, c, 0, B, true);
    xfer(s, 1, b, 2, c, 0, B, true);
    cr_assert_eq(run(s), OCCL_VSTEPS_OK);
    cr_assert_eq(s->x[0].end, LAT_IN + red, "alone, the reduction bounds it");
    cr_assert_eq(s->x[1].slot, d, "the second waits for the link");
    cr_assert_eq(s->x[1].end, LAT_IN + 2 * d, "and its link time bounds it");
    free(s);
}

Test(vreplay, steps_follow_each_other_with_their_compute)
{
    node_of[0] = 0, node_of[1] = 1;
    sched *s = sched_new(2);
    uint64_t B = 1000, d = ns(B, BW_X);
    int a0 = step(s, 0), a1 = step(s, 0), a2 = step(s, 0); /* a1: local work only */
    int b0 = step(s, 1), b1 = step(s, 1);
    s->compute[0][a1] = 400;
    s->compute[1][b0] = 30;
    xfer(s, 0, a0, 1, b0, 0, B, 0);
    xfer(s, 1, b1, 0, a2, 0, B, 0);
    s->entry[1] = 10;
    cr_assert_eq(run(s), OCCL_VSTEPS_OK);
    uint64_t first = 10 + LAT_X + d;            /* rank 0 entered at 0, rank 1 at 10 */
    uint64_t second = first + 400 + LAT_X + d;  /* rank 0's a2 starts after its 400 ns of work */
    cr_assert_eq(s->start[1], first);       /* a1 */
    cr_assert_eq(s->start[2], first + 400); /* a2 */
    cr_assert_eq(s->end[0], second);
    cr_assert_eq(s->end[1], second);
    free(s);
}

Test(vreplay, a_rank_without_steps_ends_at_its_entry)
{
    node_of[0] = node_of[1] = node_of[2] = 0;
    sched *s = sched_new(3);
    s->entry[2] = 77;
    xfer(s, 0, step(s, 0), 1, step(s, 1), 0, 10, 0);
    cr_assert_eq(run(s), OCCL_VSTEPS_OK);
    cr_assert_eq(s->end[2], 77);
    free(s);
}

Test(vreplay, a_schedule_whose_steps_wait_for_each_other_is_refused)
{
    node_of[0] = node_of[1] = 0;
    sched *s = sched_new(2);
    /* rank 0: receive, then send; rank 1 the same: each receive's sender is
     * behind the other's receive. */
    int a0 = step(s, 0), a1 = step(s, 0), b0 = step(s, 1), b1 = step(s, 1);
    xfer(s, 0, a1, 1, b0, 0, 8, 0);
    xfer(s, 1, b1, 0, a0, 0, 8, 0);
    cr_assert_eq(run(s), OCCL_VSTEPS_STUCK);
    free(s);

    s = sched_new(2);
    step(s, 0);
    step(s, 1);
    xfer(s, 0, 0, 1, 5, 0, 8, 0); /* rank 1 has no step 5: the send is never received */
    cr_assert_eq(run(s), OCCL_VSTEPS_STUCK);
    free(s);
}

Test(vreplay, ends_that_do_not_match_or_name_no_rank_are_refused)
{
    node_of[0] = node_of[1] = 0;
    int step0[3] = {0, 1, 2}, end0[3] = {0, 1, 2};
    uint64_t compute[2] = {0, 0}, entry[2] = {0, 0}, bps[2] = {1, 1}, end[2];
    occl_vsystem sys = {.nranks = 2, .path = path, .rails = 1};
    occl_vstep_end ends[2] = {{.peer = 1, .send = true, .bytes = 8}, {.peer = 0, .bytes = 16}};
    occl_vsteps st = {.nranks = 2, .step0 = step0, .end0 = end0, .ends = ends, .compute = compute};
    cr_assert_eq(occl_vmodel_replay_steps(&sys, &st, OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE, entry, bps, NULL, end),
                 OCCL_VSTEPS_STUCK, "8 bytes sent, 16 received");
    ends[1].bytes = 8;
    cr_assert_eq(occl_vmodel_replay_steps(&sys, &st, OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE, entry, bps, NULL, end),
                 OCCL_VSTEPS_OK);
    ends[1].peer = 2;
    cr_assert_eq(occl_vmodel_replay_steps(&sys, &st, OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE, entry, bps, NULL, end),
                 OCCL_VSTEPS_INVALID, "no rank 2");
    ends[1].peer = 1;
    cr_assert_eq(occl_vmodel_replay_steps(&sys, &st, OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE, entry, bps, NULL, end),
                 OCCL_VSTEPS_INVALID, "rank 1 receiving from itself");
    ends[1].peer = 0;
    end0[1] = 2, end0[2] = 1;
    cr_assert_eq(occl_vmodel_replay_steps(&sys, &st, OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE, entry, bps, NULL, end),
                 OCCL_VSTEPS_INVALID, "ends out of order");
    end0[1] = 1, end0[2] = 2;
    sys.nranks = 3;
    cr_assert_eq(occl_vmodel_replay_steps(&sys, &st, OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE, entry, bps, NULL, end),
                 OCCL_VSTEPS_INVALID, "a schedule of 2 ranks on a system of 3");
}

/* Paths of an 8-rank spread job (4 nodes of 2): the replay gives the same
 * times whatever the order of its input. */
Test(vreplay, the_result_does_not_depend_on_the_input_order)
{
    uint64_t S = 8 << 20;
    for (int r = 0; r < 8; r++)
        node_of[r] = r % 4;
    sched *a = sched_new(8), *b = sched_new(8);
    for (int r = 0; r < 8; r++) /* fused reductions of 123 ns */
        a->bps[r] = b->bps[r] = bps_for(S / 8, 123);
    ring_allreduce(a, S, true);
    ring_allreduce(b, S, true);
    srand(7);
    for (size_t i = b->nx - 1; i > 0; i--) { /* shuffle b's transfers: the order of each step's ends */
        size_t j = (size_t)rand() % (i + 1);
        xfer_t t = b->x[i];
        b->x[i] = b->x[j];
        b->x[j] = t;
    }
    cr_assert_eq(run(a), OCCL_VSTEPS_OK);
    cr_assert_eq(run(b), OCCL_VSTEPS_OK);
    for (int r = 0; r < 8; r++)
        cr_assert_eq(a->end[r], b->end[r], "rank %d", r);
    free(a);
    free(b);
}
