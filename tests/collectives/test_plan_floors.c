/*
 * test_plan_floors.c - the planner's floors (occl_vmodel_lower_bound, vmodel.h):
 * a candidate whose floor is above the best replay is not replayed, so the
 * floor must never be above the candidate's replay, and leaving candidates
 * out must never change the pick. Checked on one switch (where the ring
 * all-reduce's floor is its closed form, exactly) and on boxes joined by
 * NICs, in ring orders that cross the boxes' boundaries so that transfers
 * contend for the NICs, for counts below, at and above the ranks, three
 * element sizes and every protocol.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmodel.h"

#define MAXN 64

typedef struct fabric {
    int per_box;                 /* ranks of a box */
    int hops[MAXN][MAXN][4];
} fabric;

static fabric F;

/* A rank's own links up and down (keys 4r, 4r+1) inside its box over
 * NVLink; between boxes also its box's NIC out and the other box's NIC in
 * (keys 4 MAXN + 2b, +1), which every rank of the box shares. */
static or_vpath box_path(void *ctx, int a, int b)
{
    (void)ctx;
    int ba = a / F.per_box, bb = b / F.per_box;
    int *h = F.hops[a][b];
    h[0] = 4 * a;
    if (ba == bb) {
        h[1] = 4 * b + 1;
        return (or_vpath){.latency_ns = 700, .bytes_per_s = 300000000000ull, .type = "NVL", .nhops = 2, .hops = h};
    }
    h[1] = 4 * MAXN + 2 * ba;
    h[2] = 4 * MAXN + 2 * bb + 1;
    h[3] = 4 * b + 1;
    return (or_vpath){.latency_ns = 4000, .bytes_per_s = 50000000000ull, .type = "NET", .nhops = 4, .hops = h};
}

typedef struct sys {
    occl_vsystem s;
    int ring[MAXN], node_first[MAXN + 1];
    uint64_t bps[MAXN];
} sys;

/* n ranks, boxes of per_box; the ring visits the ranks in the order
 * rank = (i * stride) mod n (stride coprime with n), one virtual node per
 * run of the ring inside one box. */
static void make(sys *S, int n, int per_box, int stride, int rails)
{
    memset(S, 0, sizeof *S);
    F.per_box = per_box;
    for (int i = 0; i < n; i++) {
        S->ring[i] = (int)((long)i * stride % n);
        S->bps[i] = 2000000000000ull;
    }
    int nn = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || S->ring[i] / per_box != S->ring[i - 1] / per_box)
            S->node_first[nn++] = i;
    S->node_first[nn] = n;
    S->s = (occl_vsystem){.nranks = n, .ring = S->ring, .node_first = S->node_first, .nnodes = nn,
                          .path = box_path, .rails = rails};
    occl_trees *T = &S->s.trees;
    cr_assert_eq(occl_trees_alloc(T, n), 0);
    cr_assert_eq(occl_node_trees(S->ring, S->node_first, nn, n, T->v), 0);
    cr_assert_eq(occl_trees_schedule(T), 0);
}

static void release(sys *S) { occl_trees_release(&S->s.trees); }

/* Every candidate left out has a floor no higher than its replay, and no
 * replay of it beats the pick; the pick is the least replayed, the first
 * in enum order on a tie. Returns the candidates left out. */
static int check_plan(sys *S, const occl_call *c, const char *what)
{
    uint64_t est[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS], floor[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS];
    occl_choice pick = occl_plan_system(&S->s, c, S->bps, false, est, floor);
    uint64_t best = est[pick.algo][pick.proto];
    cr_assert_neq(best, UINT64_MAX, "%s: the pick %s/%s was replayed", what, occl_algo_name(pick.algo),
                  occl_proto_name(pick.proto));
    int left_out = 0;
    for (int a = 0; a < OCCL_NUM_ALGOS; a++)
        for (int p = 0; p < OCCL_NUM_PROTOS; p++) {
            bool before = a < (int)pick.algo || (a == (int)pick.algo && p < (int)pick.proto);
            uint64_t t = est[a][p];
            if (floor[a][p]) {
                cr_assert_eq(t, UINT64_MAX, "%s: %s/%s both replayed and left out", what,
                             occl_algo_name((occl_algo)a), occl_proto_name((occl_proto)p));
                left_out++;
                t = occl_vmodel_time(&S->s, c, (occl_algo)a, (occl_proto)p, S->bps);
                cr_assert_leq(floor[a][p], t, "%s: %s/%s floor %llu above its replay %llu", what,
                              occl_algo_name((occl_algo)a), occl_proto_name((occl_proto)p),
                              (unsigned long long)floor[a][p], (unsigned long long)t);
                cr_assert_gt(floor[a][p], best, "%s: %s/%s left out below the pick", what,
                             occl_algo_name((occl_algo)a), occl_proto_name((occl_proto)p));
            }
            if (t == UINT64_MAX)
                continue;
            cr_assert(t > best || (t == best && !before), "%s: %s/%s (%llu ns) beats the pick %s/%s (%llu ns)",
                      what, occl_algo_name((occl_algo)a), occl_proto_name((occl_proto)p),
                      (unsigned long long)t, occl_algo_name(pick.algo), occl_proto_name(pick.proto),
                      (unsigned long long)best);
        }
    return left_out;
}

static const occlDataType_t types[] = {occlInt8, occlFloat32, occlFloat64};

/* The floor of every protocol's ring all-reduce against its replay. */
static void check_floors(sys *S, size_t count, occlDataType_t type, const char *what)
{
    occl_call c = {.coll = OCCL_COLL_ALLREDUCE, .type = type, .count = count, .root = -1};
    for (int p = 0; p < OCCL_NUM_PROTOS; p++) {
        uint64_t f = occl_vmodel_lower_bound(&S->s, &c, OCCL_ALGO_RING, (occl_proto)p);
        uint64_t t = occl_vmodel_time(&S->s, &c, OCCL_ALGO_RING, (occl_proto)p, S->bps);
        cr_assert_gt(f, 0, "%s: a ring all-reduce has a floor", what);
        cr_assert_leq(f, t, "%s, %zu x %d-byte, %s: floor %llu above the replay %llu", what, count,
                      (int)occl_type_size(type), occl_proto_name((occl_proto)p), (unsigned long long)f,
                      (unsigned long long)t);
    }
}

Test(plan_floors, ring_floor_is_the_closed_form_on_one_switch)
{
    sys S;
    make(&S, 8, 8, 1, 1); /* one box: every step alone on its links */
    size_t counts[] = {8, 8 * 1024, 8 * 262144};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        for (int p = 0; p < OCCL_NUM_PROTOS; p++) {
            occl_call c = {.coll = OCCL_COLL_ALLREDUCE, .type = occlFloat32, .count = counts[i], .root = -1};
            cr_expect_eq(occl_vmodel_lower_bound(&S.s, &c, OCCL_ALGO_RING, (occl_proto)p),
                         occl_vmodel_time(&S.s, &c, OCCL_ALGO_RING, (occl_proto)p, S.bps),
                         "%zu floats, %s", counts[i], occl_proto_name((occl_proto)p));
        }
    release(&S);
}

Test(plan_floors, floors_never_above_the_replay)
{
    struct { int n, per_box, stride, rails; } shapes[] = {
        {8, 8, 1, 1}, {16, 4, 1, 1}, {16, 4, 3, 1}, {16, 4, 5, 2}, {24, 8, 7, 1}, {32, 8, 3, 4}, {64, 8, 1, 8}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        sys S;
        make(&S, shapes[k].n, shapes[k].per_box, shapes[k].stride, shapes[k].rails);
        int n = shapes[k].n;
        size_t counts[] = {1, (size_t)n - 1, (size_t)n, 3 * (size_t)n + 5, (1u << 20) + 3};
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
            for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
                char what[96];
                snprintf(what, sizeof what, "%d ranks, boxes of %d, stride %d, %d rails", n, shapes[k].per_box,
                         shapes[k].stride, shapes[k].rails);
                check_floors(&S, counts[i], types[t], what);
                occl_call c = {.coll = OCCL_COLL_ALLREDUCE, .type = types[t], .count = counts[i], .root = -1};
                check_plan(&S, &c, what);
            }
        release(&S);
    }
}

/* The point of the floors: a small all-reduce on many ranks never replays
 * the ring, whose floor (2(n-1) latencies) is far above the tree's. */
Test(plan_floors, small_calls_on_many_ranks_leave_the_ring_out)
{
    sys S;
    make(&S, 64, 8, 1, 1);
    occl_call c = {.coll = OCCL_COLL_ALLREDUCE, .type = occlFloat32, .count = 2, .root = -1};
    cr_assert_eq(check_plan(&S, &c, "64 ranks, 8 bytes"), OCCL_NUM_PROTOS, "every protocol of the ring left out");
    uint64_t est[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS], floor[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS];
    (void)occl_plan_system(&S.s, &c, S.bps, false, est, floor);
    for (int p = 0; p < OCCL_NUM_PROTOS; p++) {
        cr_expect_eq(est[OCCL_ALGO_RING][p], UINT64_MAX);
        cr_expect_gt(floor[OCCL_ALGO_RING][p], 2 * 63 * 700, "at least 2(n-1) NVLink latencies");
    }
    release(&S);
}

/* Collectives and algorithms without a floor are always replayed. */
Test(plan_floors, no_floor_without_a_ring_all_reduce)
{
    sys S;
    make(&S, 16, 4, 1, 1);
    occl_call ar = {.coll = OCCL_COLL_ALLREDUCE, .type = occlFloat32, .count = 1024, .root = -1};
    occl_call rd = {.coll = OCCL_COLL_REDUCE, .type = occlFloat32, .count = 1024, .root = 3};
    occl_call empty = {.coll = OCCL_COLL_ALLREDUCE, .type = occlFloat32, .count = 0, .root = -1};
    for (int p = 0; p < OCCL_NUM_PROTOS; p++) {
        cr_expect_eq(occl_vmodel_lower_bound(&S.s, &ar, OCCL_ALGO_TREE, (occl_proto)p), 0);
        cr_expect_eq(occl_vmodel_lower_bound(&S.s, &ar, OCCL_ALGO_HIERARCHICAL, (occl_proto)p), 0);
        cr_expect_eq(occl_vmodel_lower_bound(&S.s, &rd, OCCL_ALGO_RING, (occl_proto)p), 0);
        cr_expect_eq(occl_vmodel_lower_bound(&S.s, &empty, OCCL_ALGO_RING, (occl_proto)p), 0);
    }
    cr_expect_eq(occl_vmodel_lower_bound(&S.s, &ar, OCCL_ALGO_NVLS, OCCL_PROTO_LL), 0, "NVLS runs Simple only");
    release(&S);
}
