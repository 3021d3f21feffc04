/*
 * topology/rings.c - what a job does with a topology: does it fit, where do
 * its ranks go, and the rings and trees its collectives follow. Pure
 * functions of the topology and their arguments.
 */
#include "topo_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- fit and placement -------------------------------------------------- */

static int rank_room(const or_topo *t, int node, int per_rank)
{
    return t->node_ndev[node] / per_rank;
}

or_topo_status or_topo_check_fit(const or_topo *t, int nranks, int per_rank, or_topo_error *err)
{
    ot_clear_error(err);
    if (nranks < 1 || per_rank < 1)
        return ot_fail(err, OR_TOPO_ERR_VALUE, t->source, 0, 0,
                       "%d ranks x %d devices: both must be at least 1", nranks, per_rank);
    long room = 0;
    for (int n = 0; n < t->nnodes; n++)
        room += rank_room(t, n, per_rank);
    if (nranks <= room)
        return OR_TOPO_OK;
    long need = (long)nranks * per_rank;
    if (need > t->ndevs)
        return ot_fail(err, OR_TOPO_ERR_FIT, t->source, 0, 0,
                       "%d ranks x %d devices need %ld devices; topology '%s' has %d (in %d "
                       "node%s)",
                       nranks, per_rank, need, t->name, t->ndevs, t->nnodes,
                       t->nnodes == 1 ? "" : "s");
    return ot_fail(err, OR_TOPO_ERR_FIT, t->source, 0, 0,
                   "%d ranks x %d devices do not fit topology '%s': a rank's devices are in "
                   "one node, and its %d nodes have room for %ld ranks of %d devices",
                   nranks, per_rank, t->name, t->nnodes, room, per_rank);
}

or_topo_status or_topo_place(const or_topo *t, int nranks, int per_rank, or_topo_placement how,
                             int *rank_device, or_topo_error *err)
{
    or_topo_status rc = or_topo_check_fit(t, nranks, per_rank, err);
    if (rc != OR_TOPO_OK)
        return rc;
    if (how != OR_TOPO_PLACE_PACKED && how != OR_TOPO_PLACE_SPREAD)
        return ot_fail(err, OR_TOPO_ERR_VALUE, t->source, 0, 0, "unknown placement %d", (int)how);
    int *used = calloc((size_t)t->nnodes, sizeof *used); /* ranks placed per node */
    if (!used)
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    int node = 0;
    for (int r = 0; r < nranks; r++) {
        if (how == OR_TOPO_PLACE_SPREAD)
            node = r % t->nnodes;
        /* check_fit guarantees some node has room: the loop ends. */
        while (used[node] >= rank_room(t, node, per_rank))
            node = (node + 1) % t->nnodes;
        int first = t->node_first[node] + used[node] * per_rank;
        for (int d = 0; d < per_rank; d++)
            rank_device[r * per_rank + d] = first + d;
        used[node]++;
    }
    free(used);
    return OR_TOPO_OK;
}

/* ---- rings -------------------------------------------------------------- */

/* A hop's quality: widest first, then fastest. Two ranks on one device (a
 * LOC path) cost nothing. */
typedef struct {
    double bw, lat;
} ot_cost;

static ot_cost hop_cost(const or_topo *t, int a, int b)
{
    const or_topo_path *p = or_topo_path_between(t, a, b);
    ot_cost c = {p->type == OR_TOPO_PATH_LOC ? INFINITY : p->bandwidth, p->latency_ns};
    return c;
}

static int cost_better(ot_cost a, ot_cost b)
{
    return a.bw > b.bw || (a.bw == b.bw && a.lat < b.lat);
}

/* Branch and bound over orders of one node's members, for the best
 * bottleneck and then the least latency; a cycle when `cycle`, else a path.
 * A bounded number of steps keeps big nodes fast (and the result
 * deterministic: it never depends on time); the greedy first descent is
 * already a full answer. */
#define SEARCH_STEPS 200000

typedef struct {
    const or_topo *t;
    const int *dev; /* topology device of each member */
    int m, cycle;
    int *cur, *best, *used, *nbr; /* nbr: m*m, each member's others best first */
    ot_cost *cost;                /* m*m: the hop from member i to j, asked once */
    ot_cost best_cost;
    long steps;
    int found;
} ot_ring_search;

static void dfs(ot_ring_search *s, int depth, ot_cost so_far)
{
    if (s->steps++ > SEARCH_STEPS)
        return;
    if (s->found && !cost_better(so_far, s->best_cost))
        return; /* bandwidth can only drop and latency only grow */
    if (depth == s->m) {
        ot_cost c = so_far;
        if (s->cycle && s->m > 1) {
            ot_cost close = s->cost[s->cur[s->m - 1] * s->m + s->cur[0]];
            c.bw = fmin(c.bw, close.bw);
            c.lat += close.lat;
        }
        if (!s->found || cost_better(c, s->best_cost)) {
            memcpy(s->best, s->cur, sizeof *s->cur * (size_t)s->m);
            s->best_cost = c;
            s->found = 1;
        }
        return;
    }
    int last = s->cur[depth - 1];
    for (int k = 0; k < s->m - 1; k++) {
        int next = s->nbr[last * s->m + k];
        if (s->used[next])
            continue;
        ot_cost h = s->cost[last * s->m + next];
        ot_cost c = {fmin(so_far.bw, h.bw), so_far.lat + h.lat};
        s->used[next] = 1;
        s->cur[depth] = next;
        dfs(s, depth + 1, c);
        s->used[next] = 0;
    }
}

static const ot_ring_search *sort_ctx;
static int sort_from;

static int nbr_cmp(const void *pa, const void *pb)
{
    int a = *(const int *)pa, b = *(const int *)pb;
    ot_cost ca = sort_ctx->cost[sort_from * sort_ctx->m + a];
    ot_cost cb = sort_ctx->cost[sort_from * sort_ctx->m + b];
    if (cost_better(ca, cb))
        return -1;
    if (cost_better(cb, ca))
        return 1;
    return a - b;
}

/* Order members[0..m) (topology devices dev[members[i]]) in place. */
/* The orders already searched, by their hop costs: the search depends on
 * nothing else (m, cycle, the cost matrix), so a node whose members' costs
 * equal an earlier node's, bit for bit - every box of a uniform cluster -
 * takes the earlier order instead of searching again. */
#define RING_MEMO 16
#define RING_MEMO_MAX_M 64 /* a kept matrix is at most 64 KiB */
typedef struct {
    int n;
    struct {
        int m, cycle;
        ot_cost *cost;
        int *best;
    } e[RING_MEMO];
} ot_ring_memo;

static void memo_free(ot_ring_memo *memo)
{
    for (int i = 0; i < memo->n; i++) {
        free(memo->e[i].cost);
        free(memo->e[i].best);
    }
    memo->n = 0;
}

static const int *memo_find(const ot_ring_memo *memo, int m, int cycle, const ot_cost *cost)
{
    for (int i = 0; i < memo->n; i++)
        if (memo->e[i].m == m && memo->e[i].cycle == cycle &&
            memcmp(memo->e[i].cost, cost, sizeof *cost * (size_t)m * (size_t)m) == 0)
            return memo->e[i].best;
    return NULL;
}

/* Keep a copy (or nothing when full, too large or out of memory: only speed
 * is lost). */
static void memo_add(ot_ring_memo *memo, int m, int cycle, const ot_cost *cost, const int *best)
{
    if (memo->n == RING_MEMO || m > RING_MEMO_MAX_M)
        return;
    ot_cost *c = malloc(sizeof *c * (size_t)m * (size_t)m);
    int *b = malloc(sizeof *b * (size_t)m);
    if (!c || !b) {
        free(c);
        free(b);
        return;
    }
    memcpy(c, cost, sizeof *c * (size_t)m * (size_t)m);
    memcpy(b, best, sizeof *b * (size_t)m);
    memo->e[memo->n].m = m;
    memo->e[memo->n].cycle = cycle;
    memo->e[memo->n].cost = c;
    memo->e[memo->n].best = b;
    memo->n++;
}

static or_topo_status order_node(const or_topo *t, const int *devices, int *members, int m,
                                 int cycle, ot_ring_memo *memo, or_topo_error *err)
{
    if (m <= 2)
        return OR_TOPO_OK;
    ot_ring_search s = {.t = t, .m = m, .cycle = cycle};
    int *dev = malloc(sizeof *dev * (size_t)m);
    s.cur = malloc(sizeof *s.cur * (size_t)m);
    s.best = malloc(sizeof *s.best * (size_t)m);
    s.used = calloc((size_t)m, sizeof *s.used);
    s.nbr = malloc(sizeof *s.nbr * (size_t)m * (size_t)m);
    s.cost = malloc(sizeof *s.cost * (size_t)m * (size_t)m);
    if (!dev || !s.cur || !s.best || !s.used || !s.nbr || !s.cost) {
        free(dev);
        free(s.cur);
        free(s.best);
        free(s.used);
        free(s.nbr);
        free(s.cost);
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    }
    for (int i = 0; i < m; i++)
        dev[i] = devices[members[i]];
    s.dev = dev;
    /* The search revisits each hop many times: a matrix, not a path lookup
     * per visit. */
    for (int i = 0; i < m; i++)
        for (int j = 0; j < m; j++)
            s.cost[i * m + j] = j != i ? hop_cost(t, dev[i], dev[j]) : (ot_cost){0, 0};
    const int *known = memo_find(memo, m, cycle, s.cost);
    if (known) {
        memcpy(s.best, known, sizeof *s.best * (size_t)m);
        goto order;
    }
    /* qsort has no context argument in C11: a file-scope pointer, set and
     * used only inside this call. */
    sort_ctx = &s;
    for (int i = 0; i < m; i++) {
        int k = 0;
        for (int j = 0; j < m; j++)
            if (j != i)
                s.nbr[i * m + k++] = j;
        sort_from = i;
        qsort(&s.nbr[i * m], (size_t)(m - 1), sizeof(int), nbr_cmp);
    }
    sort_ctx = NULL;
    /* A cycle may start anywhere: start at the first member. A path tries
     * every start, sharing one step budget. */
    for (int first = 0; first < (cycle ? 1 : m); first++) {
        s.cur[0] = first;
        s.used[first] = 1;
        dfs(&s, 1, (ot_cost){INFINITY, 0});
        s.used[first] = 0;
    }
    memo_add(memo, m, cycle, s.cost, s.best);
order:;
    int *copy = malloc(sizeof *copy * (size_t)m);
    if (copy) {
        for (int i = 0; i < m; i++)
            copy[i] = members[s.best[i]];
        memcpy(members, copy, sizeof *copy * (size_t)m);
    }
    free(copy);
    free(dev);
    free(s.cur);
    free(s.best);
    free(s.used);
    free(s.nbr);
    free(s.cost);
    return copy ? OR_TOPO_OK : ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
}

/* Group the entries of devices[] by node, nodes in order of first
 * appearance, entries in given order: group g is order[gstart[g] ..
 * gstart[g+1]). Returns the number of groups, or -1. */
static int group_by_node(const or_topo *t, const int *devices, int n, int *order, int *gstart,
                         or_topo_error *err)
{
    int *node_group = malloc(sizeof *node_group * (size_t)t->nnodes);
    if (!node_group)
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory"), -1;
    for (int i = 0; i < t->nnodes; i++)
        node_group[i] = -1;
    int ngroups = 0;
    for (int i = 0; i < n; i++) {
        int node = or_topo_device_node(t, devices[i]);
        if (node_group[node] < 0)
            node_group[node] = ngroups++;
    }
    /* Counting sort, stable. */
    for (int g = 0; g <= ngroups; g++)
        gstart[g] = 0;
    for (int i = 0; i < n; i++)
        gstart[node_group[or_topo_device_node(t, devices[i])] + 1]++;
    for (int g = 0; g < ngroups; g++)
        gstart[g + 1] += gstart[g];
    int *fill = malloc(sizeof *fill * (size_t)(ngroups + 1));
    if (!fill) {
        free(node_group);
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory"), -1;
    }
    memcpy(fill, gstart, sizeof *fill * (size_t)(ngroups + 1));
    for (int i = 0; i < n; i++)
        order[fill[node_group[or_topo_device_node(t, devices[i])]]++] = i;
    free(fill);
    free(node_group);
    return ngroups;
}

static or_topo_status check_devices(const or_topo *t, const int *devices, int n,
                                    or_topo_error *err)
{
    if (n < 1)
        return ot_fail(err, OR_TOPO_ERR_VALUE, t->source, 0, 0, "no devices given");
    for (int i = 0; i < n; i++)
        if (devices[i] < 0 || devices[i] >= t->ndevs)
            return ot_fail(err, OR_TOPO_ERR_VALUE, t->source, 0, 0,
                           "device %d is not in the topology (it has %d)", devices[i], t->ndevs);
    return OR_TOPO_OK;
}

/* The ring: groups in order, each group's segment ordered. */
static or_topo_status build_ring(const or_topo *t, const int *devices, int n, int *order,
                                 int **gstart_out, int *ngroups_out, or_topo_error *err)
{
    or_topo_status rc = check_devices(t, devices, n, err);
    if (rc != OR_TOPO_OK)
        return rc;
    int *gstart = malloc(sizeof *gstart * (size_t)(n + 1));
    if (!gstart)
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    int ngroups = group_by_node(t, devices, n, order, gstart, err);
    if (ngroups < 0) {
        free(gstart);
        return err ? err->code : OR_TOPO_ERR_NOMEM;
    }
    ot_ring_memo memo = {0};
    for (int g = 0; g < ngroups && rc == OR_TOPO_OK; g++)
        rc = order_node(t, devices, order + gstart[g], gstart[g + 1] - gstart[g], ngroups == 1,
                        &memo, err);
    memo_free(&memo);
    if (rc != OR_TOPO_OK || !gstart_out) {
        free(gstart);
    } else {
        *gstart_out = gstart;
        *ngroups_out = ngroups;
    }
    return rc;
}

or_topo_status or_topo_ring(const or_topo *t, const int *devices, int n, int *order,
                            or_topo_error *err)
{
    ot_clear_error(err);
    return build_ring(t, devices, n, order, NULL, NULL, err);
}

/* ---- trees -------------------------------------------------------------- */

/* A binary tree over 0..n-1: 0 is the root with one child, the others form
 * an in-order tree in which odd numbers are leaves (the lowest set bit of a
 * number is its height). */
static void btree(int n, int r, int *up, int *c0, int *c1)
{
    *c0 = *c1 = -1;
    if (r == 0) {
        *up = -1;
        if (n > 1) {
            int top = 1;
            while (top * 2 <= n - 1)
                top *= 2;
            *c0 = top;
        }
        return;
    }
    int bit = r & -r;
    int parent = (r ^ bit) | (bit << 1);
    *up = parent < n ? parent : r ^ bit;
    int low = bit >> 1;
    if (low == 0)
        return; /* odd: a leaf */
    *c0 = r - low;
    while (low > 0 && r + low >= n)
        low >>= 1;
    *c1 = low > 0 ? r + low : -1;
}

/* Tree t (0 or 1) over group indices: tree 1 is tree 0 mirrored (even
 * counts) or shifted by one (odd), so a group is inner in at most one. */
static void group_tree(int n, int tree, int g, int *up, int *c0, int *c1)
{
    if (tree == 0) {
        btree(n, g, up, c0, c1);
        return;
    }
    int mirror = n % 2 == 0;
    int p = mirror ? n - 1 - g : (g - 1 + n) % n;
    btree(n, p, up, c0, c1);
    int *v[3] = {up, c0, c1};
    for (int i = 0; i < 3; i++)
        if (*v[i] >= 0)
            *v[i] = mirror ? n - 1 - *v[i] : (*v[i] + 1) % n;
}

static void add_child(or_topo_tree_vertex *v, int child)
{
    if (child >= 0 && v->nchildren < OR_TOPO_TREE_MAX_CHILDREN)
        v->children[v->nchildren++] = child;
}

void or_topo_trees_of_groups(const int *order, const int *gstart, int ngroups, int n,
                             or_topo_tree_vertex *trees)
{
    for (int tree = 0; tree < 2; tree++) {
        or_topo_tree_vertex *T = trees + (size_t)tree * n;
        for (int i = 0; i < n; i++)
            T[i] = (or_topo_tree_vertex){.parent = -1};
        for (int g = 0; g < ngroups; g++) {
            /* The node's chain, in ring order; its head joins the node tree. */
            for (int k = gstart[g] + 1; k < gstart[g + 1]; k++) {
                T[order[k]].parent = order[k - 1];
                add_child(&T[order[k - 1]], order[k]);
            }
            int up, c0, c1;
            group_tree(ngroups, tree, g, &up, &c0, &c1);
            int head = order[gstart[g]];
            if (up >= 0)
                T[head].parent = order[gstart[up]];
            if (c0 >= 0)
                add_child(&T[head], order[gstart[c0]]);
            if (c1 >= 0)
                add_child(&T[head], order[gstart[c1]]);
        }
    }
}

or_topo_status or_topo_trees(const or_topo *t, const int *devices, int n,
                             or_topo_tree_vertex *trees, or_topo_error *err)
{
    ot_clear_error(err);
    int *order = malloc(sizeof *order * (size_t)(n > 0 ? n : 1));
    if (!order)
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    int *gstart = NULL, ngroups = 0;
    or_topo_status rc = build_ring(t, devices, n, order, &gstart, &ngroups, err);
    if (rc != OR_TOPO_OK) {
        free(order);
        return rc;
    }
    or_topo_trees_of_groups(order, gstart, ngroups, n, trees);
    free(order);
    free(gstart);
    return OR_TOPO_OK;
}
