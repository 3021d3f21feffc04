/* tests/collectives/test_topo_tree.c - the communicator's double binary tree
 * (collectives/topo_tree.c): trees from a topology's devices or from virtual
 * nodes, and the step schedule of the tree all-reduce on them. Golden files
 * in tests/collectives/golden/ hold the trees (who is whose parent), the
 * steps, the trees re-rooted for a Reduce and every rank's transfers;
 * regenerate them with
 * OCCL_UPDATE_GOLDEN=1 in the build directory and review the diff. The
 * properties hold on every case: each transfer has its other end at the same
 * step, running the sets as the transport does finishes (no deadlock), and a
 * symbolic run leaves every rank (a Reduce: the root, whichever it is) with
 * every rank's contribution once. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"
#include "topo_tree.h"

TestSuite(topo_tree);

typedef struct {
    const char *name;
    const char *spec; /* a topology, or NULL: virtual nodes of `sizes` ranks each */
    int ranks;        /* comm ranks: processes x per_process devices, rank p * D + d */
    int per_process;
    or_topo_placement how;
    int sizes[9]; /* virtual nodes' rank counts, 0-terminated (spec NULL) */
} tree_case;

static const tree_case cases[] = {
    {"2x4-spread", "nodes:2 devices:4", 8, 1, OR_TOPO_PLACE_SPREAD, {0}},
    {"2x4-spread-2dev", "nodes:2 devices:4", 8, 2, OR_TOPO_PLACE_SPREAD, {0}},
    {"2x4-packed", "nodes:2 devices:4", 8, 1, OR_TOPO_PLACE_PACKED, {0}},
    {"3x2-packed", "nodes:3 devices:2", 6, 1, OR_TOPO_PLACE_PACKED, {0}},
    {"3x2-spread", "nodes:3 devices:2", 6, 1, OR_TOPO_PLACE_SPREAD, {0}},
    {"5x2-spread", "nodes:5 devices:2", 10, 1, OR_TOPO_PLACE_SPREAD, {0}},
    {"dgx-a100x2-spread", "dgx-a100x2", 16, 1, OR_TOPO_PLACE_SPREAD, {0}},
    {"vnodes-2-2", NULL, 4, 1, OR_TOPO_PLACE_PACKED, {2, 2}},
    {"vnodes-4-2", NULL, 6, 1, OR_TOPO_PLACE_PACKED, {4, 2}},
    {"vnodes-1x1-x4", NULL, 4, 1, OR_TOPO_PLACE_PACKED, {1, 1, 1, 1}},
    {"vnodes-one-node-6", NULL, 6, 1, OR_TOPO_PLACE_PACKED, {6}},
};
#define NCASES (sizeof cases / sizeof cases[0])

typedef struct {
    occl_trees T;
    int *dev;  /* topology device of each rank (topology cases) */
    int *node; /* node of each rank */
} built;

static void alloc_trees(occl_trees *T, int n)
{
    cr_assert_eq(occl_trees_alloc(T, n), 0);
}

static void free_built(built *b)
{
    occl_trees_release(&b->T);
    free(b->node);
    free(b->dev);
}

static built build(const tree_case *c)
{
    built b = {{0}, NULL, NULL};
    int n = c->ranks;
    alloc_trees(&b.T, n);
    b.node = calloc((size_t)n, sizeof *b.node);
    if (c->spec) {
        or_topo *t = NULL;
        or_topo_error err;
        cr_assert_eq(or_topo_load(c->spec, "case", &t, &err), OR_TOPO_OK, "%s", err.message);
        b.dev = malloc((size_t)n * sizeof *b.dev);
        cr_assert_eq(or_topo_place(t, n / c->per_process, c->per_process, c->how, b.dev, &err),
                     OR_TOPO_OK, "%s", err.message);
        char why[256] = "";
        cr_assert_eq(occl_topo_trees(t, b.dev, n, b.T.v, why, sizeof why), 0, "%s", why);
        for (int r = 0; r < n; r++)
            b.node[r] = or_topo_device_node(t, b.dev[r]);
        b.T.from_topology = true;
        or_topo_free(t);
    } else {
        /* Virtual nodes as comm.c groups them: the ring by node, then rank.
         * Ranks are dealt round robin over the nodes, so the ring is not
         * rank order. */
        int nn = 0, ring[64], first[10], fill[10];
        while (c->sizes[nn])
            nn++;
        first[0] = 0;
        for (int k = 0; k < nn; k++)
            first[k + 1] = first[k] + c->sizes[k];
        memcpy(fill, first, sizeof fill);
        for (int r = 0, k = 0; r < n; r++) {
            while (fill[k] == first[k + 1])
                k = (k + 1) % nn;
            b.node[r] = k;
            ring[fill[k]++] = r;
            k = (k + 1) % nn;
        }
        cr_assert_eq(occl_node_trees(ring, first, nn, n, b.T.v), 0);
    }
    cr_assert_eq(occl_trees_schedule(&b.T), 0, "%s: not two trees", c->name);
    return b;
}

static const char *kind_name(occl_tree_op_kind k)
{
    static const char *const names[] = {"recv-reduce", "send-up", "recv-down", "send-down"};
    return names[k];
}

static char *describe(const tree_case *c, const built *b)
{
    const occl_trees *T = &b->T;
    int n = T->n;
    size_t cap = 1 << 20, len = 0;
    char *out = malloc(cap);
#define PUT(...) len += (size_t)snprintf(out + len, cap - len, __VA_ARGS__)
    PUT("# %s: %d ranks (%d per process, %s), %s\n", c->name, n, c->per_process,
        c->how == OR_TOPO_PLACE_SPREAD ? "spread" : "packed", c->spec ? c->spec : "virtual nodes");
    PUT("node:");
    for (int r = 0; r < n; r++)
        PUT(" %d", b->node[r]);
    PUT("\n");
    for (int t = 0; t < 2; t++) {
        PUT("tree %d: root %d, depth %d, steps for 1 chunk %d, for 4 chunks %d\n", t, T->root[t],
            T->max_depth[t], occl_tree_steps(T, t, 1), occl_tree_steps(T, t, 4));
        for (int r = 0; r < n; r++) {
            const occl_tree_vertex *v = &T->v[t * n + r];
            PUT("tree%d %d: parent %d children", t, r, v->parent);
            for (int k = 0; k < v->nchildren; k++)
                PUT(" %d", v->children[k]);
            PUT(" | depth %d ready %d up %d\n", T->depth[t * n + r], T->ready[t * n + r],
                T->up[t * n + r]);
        }
    }
    /* Reduce to the last rank: both trees re-rooted there. */
    occl_trees R;
    cr_assert_eq(occl_trees_reroot(T, n - 1, &R), 0);
    for (int t = 0; t < 2; t++) {
        PUT("reduce to %d, tree %d: steps for 1 chunk %d, parents", n - 1, t,
            R.ready[t * n + R.root[t]]);
        for (int r = 0; r < n; r++)
            PUT(" %d", R.v[t * n + r].parent);
        PUT("\n");
    }
    occl_trees_release(&R);
    /* Every rank's transfers with 2 chunks on tree 0 and 1 on tree 1. */
    const size_t nch[2] = {2, 1};
    for (int r = 0; r < n; r++) {
        occl_tree_op *ops = NULL;
        int m = occl_tree_allreduce_ops(T, r, nch, &ops);
        cr_assert_geq(m, 0);
        PUT("rank %d:", r);
        for (int i = 0; i < m; i++)
            PUT(" [%d t%d c%zu %s %d]", ops[i].step, ops[i].tree, ops[i].chunk,
                kind_name(ops[i].kind), ops[i].peer);
        PUT("\n");
        free(ops);
    }
#undef PUT
    return out;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

Test(topo_tree, golden_files)
{
    for (size_t k = 0; k < NCASES; k++) {
        built b = build(&cases[k]);
        char *text = describe(&cases[k], &b);
        char path[512];
        snprintf(path, sizeof path, "%s/%s.txt", GOLDEN_DIR, cases[k].name);
        if (getenv("OCCL_UPDATE_GOLDEN")) {
            FILE *f = fopen(path, "w");
            cr_assert_not_null(f, "cannot write %s", path);
            fputs(text, f);
            fclose(f);
        }
        char *want = read_text(path);
        cr_assert_not_null(want, "no golden file %s", path);
        cr_assert_str_eq(text, want, "%s differs from the golden file", cases[k].name);
        free(want);
        free(text);
        free_built(&b);
    }
}

/* ---- properties ---------------------------------------------------------- */

typedef struct {
    occl_tree_op *ops;
    int m, cur; /* cur: index of the first op of the current step */
    char *done;
} rank_run;

static bool is_send(occl_tree_op_kind k) { return k == OCCL_TREE_SEND_UP || k == OCCL_TREE_SEND_DOWN; }

static occl_tree_op_kind mate_kind(occl_tree_op_kind k)
{
    switch (k) {
    case OCCL_TREE_SEND_UP: return OCCL_TREE_RECV_UP;
    case OCCL_TREE_RECV_UP: return OCCL_TREE_SEND_UP;
    case OCCL_TREE_SEND_DOWN: return OCCL_TREE_RECV_DOWN;
    default: return OCCL_TREE_SEND_DOWN;
    }
}

/* The other end of rank r's op i: its index in the peer's list, or -1. */
static int find_mate(rank_run *R, int r, int i)
{
    const occl_tree_op *o = &R[r].ops[i];
    int found = -1;
    for (int k = 0; k < R[o->peer].m; k++) {
        const occl_tree_op *p = &R[o->peer].ops[k];
        if (p->peer == r && p->tree == o->tree && p->chunk == o->chunk && p->kind == mate_kind(o->kind)) {
            cr_assert_eq(found, -1, "two mates");
            found = k;
            cr_assert_eq(p->step, o->step, "rank %d's %s at step %d meets rank %d at step %d", r,
                         kind_name(o->kind), o->step, o->peer, p->step);
        }
    }
    return found;
}

static int set_end(const rank_run *x)
{
    int e = x->cur;
    while (e < x->m && x->ops[e].step == x->ops[x->cur].step)
        e++;
    return e;
}

/* Runs the steps as occl_xfers_run does (a transfer completes once both ends
 * have posted it; a step ends when all its transfers have), and carries each
 * rank's contributions: vec[r][t][c][q] counts rank q's input in rank r's
 * chunk c of tree t. Every rank must end with every input once. */
static void run_and_check(const built *b, const size_t nch[2], int reduce_root, const char *name)
{
    occl_trees Rt;
    const occl_trees *T = &b->T;
    if (reduce_root >= 0) {
        cr_assert_eq(occl_trees_reroot(T, reduce_root, &Rt), 0);
        cr_assert_eq(Rt.root[0], reduce_root);
        cr_assert_eq(Rt.root[1], reduce_root);
        T = &Rt;
    }
    int n = T->n;
    rank_run *R = calloc((size_t)n, sizeof *R);
    size_t C = nch[0] > nch[1] ? nch[0] : nch[1];
    int *vec = calloc((size_t)n * 2 * C * n + 1, sizeof *vec);
#define VEC(r, t, c, q) vec[(((size_t)(r) * 2 + (t)) * C + (c)) * n + (q)]
    for (int r = 0; r < n; r++) {
        R[r].m = reduce_root >= 0 ? occl_tree_reduce_ops(T, r, nch, &R[r].ops)
                                  : occl_tree_allreduce_ops(T, r, nch, &R[r].ops);
        cr_assert_geq(R[r].m, 0);
        R[r].done = calloc((size_t)R[r].m + 1, 1);
        for (int t = 0; t < 2; t++)
            for (size_t c = 0; c < nch[t]; c++)
                VEC(r, t, c, r) = 1;
        for (int i = 1; i < R[r].m; i++) {
            cr_assert(R[r].ops[i].step >= R[r].ops[i - 1].step);
        }
    }
    for (int r = 0; r < n; r++)
        for (int i = 0; i < R[r].m; i++)
            cr_assert_geq(find_mate(R, r, i), 0, "%s: rank %d op %d has no other end", name, r, i);
    for (bool moved = true; moved;) {
        moved = false;
        for (int r = 0; r < n; r++) {
            if (R[r].cur >= R[r].m)
                continue;
            int e = set_end(&R[r]);
            for (int i = R[r].cur; i < e; i++) {
                const occl_tree_op *o = &R[r].ops[i];
                if (R[r].done[i] || !is_send(o->kind))
                    continue;
                int k = find_mate(R, r, i), p = o->peer;
                if (k < R[p].cur || k >= set_end(&R[p]))
                    continue; /* the receiver has not posted it yet */
                int *dst = &VEC(p, o->tree, o->chunk, 0), *src = &VEC(r, o->tree, o->chunk, 0);
                for (int q = 0; q < n; q++)
                    dst[q] = o->kind == OCCL_TREE_SEND_UP ? dst[q] + src[q] : src[q];
                R[r].done[i] = R[p].done[k] = 1;
                moved = true;
            }
            bool all = true;
            for (int i = R[r].cur; i < e; i++)
                all &= R[r].done[i] != 0;
            if (all) {
                R[r].cur = e;
                moved = true;
            }
        }
    }
    for (int r = 0; r < n; r++) {
        cr_assert_eq(R[r].cur, R[r].m, "%s: rank %d stuck at op %d of %d (deadlock)", name, r,
                     R[r].cur, R[r].m);
        for (int t = 0; t < 2 && (reduce_root < 0 || r == reduce_root); t++)
            for (size_t c = 0; c < nch[t]; c++)
                for (int q = 0; q < n; q++)
                    cr_assert_eq(VEC(r, t, c, q), 1, "%s: rank %d tree %d chunk %zu has rank %d's "
                                 "input %d times", name, r, t, c, q, VEC(r, t, c, q));
        free(R[r].ops);
        free(R[r].done);
    }
#undef VEC
    free(vec);
    free(R);
    if (reduce_root >= 0)
        occl_trees_release(&Rt);
}

Test(topo_tree, every_schedule_matches_finishes_and_reduces_everything_once)
{
    const size_t chunk_counts[][2] = {{0, 0}, {0, 1}, {1, 1}, {2, 1}, {3, 3}, {5, 4}};
    for (size_t k = 0; k < NCASES; k++) {
        built b = build(&cases[k]);
        for (size_t j = 0; j < sizeof chunk_counts / sizeof *chunk_counts; j++) {
            run_and_check(&b, chunk_counts[j], -1, cases[k].name);
            for (int root = 0; root < b.T.n; root++) /* Reduce to every root */
                run_and_check(&b, chunk_counts[j], root, cases[k].name);
        }
        free_built(&b);
    }
}

/* More shapes than the golden files: 1 to 12 nodes of 1 to 3 ranks. */
Test(topo_tree, virtual_node_trees_of_many_shapes)
{
    for (int nodes = 1; nodes <= 12; nodes++)
        for (int per = 1; per <= 3; per++) {
            tree_case c = {"shape", NULL, nodes * per, 1, OR_TOPO_PLACE_PACKED, {0}};
            if (nodes > 8 || nodes * per < 2)
                continue;
            for (int k = 0; k < nodes; k++)
                c.sizes[k] = per;
            built b = build(&c);
            const size_t nch[2] = {3, 2};
            run_and_check(&b, nch, -1, "shape");
            run_and_check(&b, nch, nodes * per - 1, "shape");
            free_built(&b);
        }
}

/* A tree follows the topology: each node's ranks form one chain, so a
 * tree crosses the network once per node but the root's (nodes - 1 edges),
 * and no node forwards across the network in both trees but the odd
 * count's shared root. With spread placement (rank r on node r mod 2), a
 * binary tree over rank order would cross the network at nearly every edge. */
Test(topo_tree, trees_cross_the_network_once_per_node)
{
    built b = build(&cases[0]); /* 2 nodes x 4, spread */
    int n = b.T.n;
    for (int t = 0; t < 2; t++) {
        int crossings = 0;
        for (int r = 0; r < n; r++) {
            int p = b.T.v[t * n + r].parent;
            crossings += p >= 0 && b.node[p] != b.node[r];
        }
        cr_assert_eq(crossings, 1, "tree %d crosses the network %d times", t, crossings);
    }
    int rank_order_crossings = 0;
    for (int r = 1; r < n; r++)
        rank_order_crossings += b.node[(r - 1) / 2] != b.node[r];
    cr_assert_geq(rank_order_crossings, 3);
    /* Both roots' nodes differ: each node's head is the root of one tree. */
    cr_assert_neq(b.node[b.T.root[0]], b.node[b.T.root[1]]);
    free_built(&b);
}

Test(topo_tree, halves_cover_every_count)
{
    const size_t counts[] = {0, 1, 2, 7, 1048579, (size_t)9 << 20};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++)
        for (size_t es = 1; es <= 8; es *= 2) {
            size_t lo[2], len[2], ck[2], nch[2];
            for (int t = 0; t < 2; t++) {
                occl_tree_half(counts[k], es, t, &lo[t], &len[t], &ck[t], &nch[t]);
                cr_assert_geq(ck[t], 1);
                cr_assert(nch[t] * ck[t] >= len[t] && (nch[t] == 0 || (nch[t] - 1) * ck[t] < len[t]));
            }
            cr_assert_eq(lo[0], 0);
            cr_assert_eq(lo[1], len[0]);
            cr_assert_eq(len[0] + len[1], counts[k]);
            cr_assert(len[1] >= len[0] && len[1] - len[0] <= 1);
        }
}

Test(topo_tree, bad_inputs_are_refused)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_load("nodes:2 devices:2", "test", &t, &err), OR_TOPO_OK);
    occl_tree_vertex v[6];
    char why[256] = "";
    const int shared[3] = {0, 2, 0}, outside[2] = {0, 4};
    cr_assert_eq(occl_topo_trees(t, shared, 3, v, why, sizeof why), -1);
    cr_assert_str_eq(why, "rank 2 shares topology device 0 with another rank");
    cr_assert_eq(occl_topo_trees(t, outside, 2, v, why, sizeof why), -1);
    cr_assert_str_eq(why, "rank 1's device 4 is not in the topology");
    cr_assert_eq(occl_topo_trees(NULL, outside, 2, v, why, sizeof why), -1);
    or_topo_free(t);
    /* Not trees: two roots; a cycle; a child whose parent disowns it. */
    occl_trees T = {0};
    alloc_trees(&T, 3);
    for (int k = 0; k < 6; k++)
        T.v[k] = (occl_tree_vertex){.parent = -1};
    cr_assert_eq(occl_trees_schedule(&T), -1);
    for (int tr = 0; tr < 2; tr++) {
        T.v[tr * 3 + 0] = (occl_tree_vertex){.parent = -1, .nchildren = 1, .children = {1}};
        T.v[tr * 3 + 1] = (occl_tree_vertex){.parent = 0, .nchildren = 1, .children = {2}};
        T.v[tr * 3 + 2] = (occl_tree_vertex){.parent = 1};
    }
    cr_assert_eq(occl_trees_schedule(&T), 0);
    cr_assert_eq(occl_tree_steps(&T, 0, 1), 4); /* a chain of 3: 2 up, 2 down */
    occl_trees R;
    cr_assert_eq(occl_trees_reroot(&T, 3, &R), -1, "a root outside the communicator");
    cr_assert_eq(occl_trees_reroot(&T, 1, &R), 0); /* the middle: two leaves */
    cr_assert_eq(R.v[1].nchildren, 2);
    cr_assert_eq(R.v[0].parent, 1);
    cr_assert_eq(R.ready[1], 2, "one child per step: 2 steps up");
    occl_trees_release(&R);
    T.v[3 + 2].parent = 0;
    cr_assert_eq(occl_trees_schedule(&T), -1);
    T.v[3 + 2].parent = 1;
    T.v[3 + 0] = (occl_tree_vertex){.parent = 2, .nchildren = 1, .children = {1}};
    T.v[3 + 2] = (occl_tree_vertex){.parent = 1, .nchildren = 1, .children = {0}};
    cr_assert_eq(occl_trees_schedule(&T), -1);
    free(T.v);
    free(T.ready);
    free(T.up);
    free(T.depth);
}
