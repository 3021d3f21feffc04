/*
 * collectives/topo_tree.c - the communicator's double binary tree and the
 * step schedule of the tree all-reduce on it (topo_tree.h), then the
 * communicator's hook that builds them at creation.
 */
#include "topo_tree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OCCL_LOG_SUBSYS OCCL_SUBSYS_GRAPH
#include "occl_internal.h"
#include "topo.h"
#include "topo_ring.h"

static void from_topo_vertices(const or_topo_tree_vertex *tv, int n, occl_tree_vertex *trees)
{
    for (int i = 0; i < 2 * n; i++) {
        trees[i] = (occl_tree_vertex){.parent = tv[i].parent, .nchildren = tv[i].nchildren};
        for (int k = 0; k < tv[i].nchildren && k < OCCL_TREE_MAX_CHILDREN; k++)
            trees[i].children[k] = tv[i].children[k];
    }
}

int occl_topo_trees(const struct or_topo *topo, const int *rank_device, int nranks,
                    occl_tree_vertex *trees, char *why, size_t why_size)
{
    if (occl_topo_check_devices(topo, rank_device, nranks, why, why_size) != 0)
        return -1;
    or_topo_tree_vertex *tv = malloc(2 * (size_t)nranks * sizeof *tv);
    if (!tv) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    int rc = 0;
    or_topo_error err;
    if (or_topo_trees(topo, rank_device, nranks, tv, &err) != OR_TOPO_OK) {
        or_topo_error_format(&err, why, why_size);
        rc = -1;
    } else {
        from_topo_vertices(tv, nranks, trees);
    }
    free(tv);
    return rc;
}

int occl_node_trees(const int *ring, const int *node_first, int nnodes, int nranks,
                    occl_tree_vertex *trees)
{
    or_topo_tree_vertex *tv = malloc(2 * (size_t)nranks * sizeof *tv);
    if (!tv)
        return -1;
    or_topo_trees_of_groups(ring, node_first, nnodes, nranks, tv);
    from_topo_vertices(tv, nranks, trees);
    free(tv);
    return 0;
}

/* ---- the schedule ---------------------------------------------------------- */

/* The step at which rank r receives each child's chunk 0 (steps[i] for
 * children[i]): one child per step, the first ready first (ties: list
 * order). Returns r's ready step: after the last child, 0 for a leaf. */
static int child_steps(const occl_tree_vertex *V, const int *ready, int r, int *steps)
{
    const occl_tree_vertex *v = &V[r];
    int idx[OCCL_TREE_MAX_CHILDREN];
    for (int i = 0; i < v->nchildren; i++) {
        int j = i;
        while (j > 0 && ready[v->children[idx[j - 1]]] > ready[v->children[i]]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    int s = -1;
    for (int k = 0; k < v->nchildren; k++) {
        int c = ready[v->children[idx[k]]];
        s = c > s + 1 ? c : s + 1;
        if (steps)
            steps[idx[k]] = s;
    }
    return s + 1;
}

int occl_trees_schedule(occl_trees *T)
{
    int n = T->n;
    for (int t = 0; t < 2; t++) {
        const occl_tree_vertex *V = T->v + (size_t)t * n;
        int *ready = T->ready + (size_t)t * n, *depth = T->depth + (size_t)t * n;
        int *up = T->up + (size_t)t * n;
        int root = -1, maxd = 0;
        for (int r = 0; r < n; r++) {
            const occl_tree_vertex *v = &V[r];
            if (v->parent < 0) {
                if (root >= 0)
                    return -1; /* two roots */
                root = r;
            } else if (v->parent >= n) {
                return -1;
            }
            if (v->nchildren < 0 || v->nchildren > OCCL_TREE_MAX_CHILDREN)
                return -1;
            for (int k = 0; k < v->nchildren; k++)
                if (v->children[k] < 0 || v->children[k] >= n || V[v->children[k]].parent != r)
                    return -1;
        }
        if (root < 0)
            return -1;
        for (int r = 0; r < n; r++) {
            int d = 0;
            for (int q = r; V[q].parent >= 0; q = V[q].parent)
                if (++d >= n)
                    return -1; /* a cycle */
            /* Each rank is its parent's child exactly once. */
            if (V[r].parent >= 0) {
                int seen = 0;
                for (int k = 0; k < V[V[r].parent].nchildren; k++)
                    seen += V[V[r].parent].children[k] == r;
                if (seen != 1)
                    return -1;
            }
            depth[r] = d;
            maxd = d > maxd ? d : maxd;
        }
        /* Deepest first, so children are ready before their parent. */
        for (int d = maxd; d >= 0; d--)
            for (int r = 0; r < n; r++)
                if (depth[r] == d)
                    ready[r] = child_steps(V, ready, r, NULL);
        /* A child sends when its parent takes it, which may be after it is ready. */
        up[root] = -1;
        for (int r = 0; r < n; r++) {
            int steps[OCCL_TREE_MAX_CHILDREN];
            child_steps(V, ready, r, steps);
            for (int k = 0; k < V[r].nchildren; k++)
                up[V[r].children[k]] = steps[k];
        }
        T->root[t] = root;
        T->max_depth[t] = maxd;
    }
    return 0;
}

int occl_tree_steps(const occl_trees *T, int tree, size_t nchunks)
{
    if (!nchunks)
        return 0;
    return T->ready[(size_t)tree * T->n + T->root[tree]] + T->max_depth[tree] + (int)nchunks - 1;
}

void occl_tree_half(size_t count, size_t es, int tree, size_t *lo, size_t *len, size_t *chunk,
                    size_t *nchunks)
{
    *lo = tree ? count / 2 : 0;
    *len = tree ? count - count / 2 : count / 2;
    size_t ck = occl_chain_chunk(*len * es) / es;
    *chunk = ck ? ck : 1;
    *nchunks = (*len + *chunk - 1) / *chunk;
}

static int op_cmp(const void *pa, const void *pb)
{
    const occl_tree_op *a = pa, *b = pb;
    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    if (a->tree != b->tree)
        return a->tree < b->tree ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    if (a->peer != b->peer)
        return a->peer < b->peer ? -1 : 1;
    return a->chunk < b->chunk ? -1 : a->chunk > b->chunk;
}

/* Chunk j of a tree, at rank r with parent p and children c_i: receive and
 * reduce c_i's at up[c_i] + j (after c_i's own children: up[c_i] >=
 * ready[c_i]), send ours up at up[r] + j; the result comes down from p at
 * R + depth - 1 + j and goes on to the children at R + depth + j (R: the
 * root's ready step, at least one step per level above any up step). Both
 * ends of every transfer name the same step. */
static int tree_ops(const occl_trees *T, int rank, const size_t nchunks[2], bool down,
                    occl_tree_op **ops)
{
    int n = T->n;
    size_t total = 0;
    for (int t = 0; t < 2; t++) {
        const occl_tree_vertex *v = &T->v[(size_t)t * n + rank];
        total += nchunks[t] * (size_t)(v->nchildren + (v->parent >= 0)) * (down ? 2 : 1);
    }
    *ops = NULL;
    if (!total)
        return 0;
    occl_tree_op *o = malloc(total * sizeof *o);
    if (!o)
        return -1;
    size_t m = 0;
    for (int t = 0; t < 2; t++) {
        const occl_tree_vertex *V = T->v + (size_t)t * n, *v = &V[rank];
        const int *up = T->up + (size_t)t * n, *depth = T->depth + (size_t)t * n;
        int R = T->ready[(size_t)t * n + T->root[t]], d = depth[rank];
        for (size_t j = 0; j < nchunks[t]; j++) {
            int sj = (int)j;
            for (int i = 0; i < v->nchildren; i++)
                o[m++] = (occl_tree_op){up[v->children[i]] + sj, t, v->children[i], j, OCCL_TREE_RECV_UP};
            if (v->parent >= 0)
                o[m++] = (occl_tree_op){up[rank] + sj, t, v->parent, j, OCCL_TREE_SEND_UP};
            if (v->parent >= 0 && down)
                o[m++] = (occl_tree_op){R + d - 1 + sj, t, v->parent, j, OCCL_TREE_RECV_DOWN};
            for (int i = 0; i < v->nchildren && down; i++)
                o[m++] = (occl_tree_op){R + d + sj, t, v->children[i], j, OCCL_TREE_SEND_DOWN};
        }
    }
    qsort(o, m, sizeof *o, op_cmp);
    *ops = o;
    return (int)m;
}

int occl_tree_allreduce_ops(const occl_trees *T, int rank, const size_t nchunks[2],
                            occl_tree_op **ops)
{
    return tree_ops(T, rank, nchunks, true, ops);
}

int occl_tree_reduce_ops(const occl_trees *T, int rank, const size_t nchunks[2],
                         occl_tree_op **ops)
{
    return tree_ops(T, rank, nchunks, false, ops);
}

/* ---- re-rooting -------------------------------------------------------------- */

int occl_trees_alloc(occl_trees *T, int n)
{
    *T = (occl_trees){.n = n};
    T->v = calloc(2 * (size_t)n, sizeof *T->v);
    T->ready = calloc(2 * (size_t)n, sizeof *T->ready);
    T->up = calloc(2 * (size_t)n, sizeof *T->up);
    T->depth = calloc(2 * (size_t)n, sizeof *T->depth);
    if (T->v && T->ready && T->up && T->depth)
        return 0;
    occl_trees_release(T);
    return -1;
}

void occl_trees_release(occl_trees *T)
{
    free(T->v);
    free(T->ready);
    free(T->up);
    free(T->depth);
    memset(T, 0, sizeof *T);
}

static void drop_child(occl_tree_vertex *v, int child)
{
    for (int k = 0; k < v->nchildren; k++)
        if (v->children[k] == child) {
            memmove(&v->children[k], &v->children[k + 1],
                    (size_t)(v->nchildren - k - 1) * sizeof *v->children);
            v->nchildren--;
            return;
        }
}

int occl_trees_reroot(const occl_trees *T, int root, occl_trees *out)
{
    int n = T->n;
    if (root < 0 || root >= n || occl_trees_alloc(out, n) != 0) {
        *out = (occl_trees){0};
        return -1;
    }
    out->from_topology = T->from_topology;
    memcpy(out->v, T->v, 2 * (size_t)n * sizeof *out->v);
    for (int t = 0; t < 2; t++) {
        occl_tree_vertex *V = out->v + (size_t)t * n;
        /* Walk up from the new root, turning each edge around: the old
         * parent becomes a child (appended: the old children keep their
         * order). At most n steps, even if V were not a tree. */
        int child = root, parent = V[root].parent;
        V[root].parent = -1;
        for (int steps = 0; parent >= 0 && steps < n; steps++) {
            int next = V[parent].parent;
            drop_child(&V[parent], child);
            if (V[child].nchildren == OCCL_TREE_MAX_CHILDREN) {
                occl_trees_release(out);
                return -1;
            }
            V[child].children[V[child].nchildren++] = parent;
            V[parent].parent = child;
            child = parent;
            parent = next;
        }
    }
    if (occl_trees_schedule(out) != 0) {
        occl_trees_release(out);
        return -1;
    }
    return 0;
}

/* ---- the communicator's hook ------------------------------------------------ */

static void log_trees(occlComm_t c, const char *from)
{
    int n = c->nranks;
    char text[2048];
    size_t len = 0;
    for (int t = 0; t < 2 && len + 32 < sizeof text; t++) {
        len += (size_t)snprintf(text + len, sizeof text - len, "%stree %d parents:", t ? "; " : "", t);
        for (int r = 0; r < n && len + 32 < sizeof text; r++)
            len += (size_t)snprintf(text + len, sizeof text - len, " %d",
                                    c->trees.v[(size_t)t * n + r].parent);
    }
    if (len + 32 >= sizeof text)
        snprintf(text + len, sizeof text - len, " ...");
    OCCL_INFO("comm %016llx trees from %s: %s", (unsigned long long)c->id, from, text);
}

occlResult_t occl_trees_build(occlComm_t c)
{
    int n = c->nranks;
    occl_trees *T = &c->trees;
    int *dev = malloc((size_t)n * sizeof *dev);
    if (occl_trees_alloc(T, n) != 0 || !dev) {
        free(dev);
        return occl_fail(occlSystemError, "out of memory");
    }
    char why[600] = "no topology";
    T->from_topology = false;
    if (c->job.topo && c->job.topo_device) {
        for (int r = 0; r < n; r++) {
            int g = or_global_device(c->peers[r].world_rank, c->peers[r].device);
            dev[r] = g >= 0 ? c->job.topo_device[g] : -1;
        }
        T->from_topology = occl_topo_trees(c->job.topo, dev, n, T->v, why, sizeof why) == 0;
    }
    free(dev);
    if (!T->from_topology && occl_node_trees(c->ring, c->node_first, c->nnodes, n, T->v) != 0)
        return occl_fail(occlSystemError, "out of memory");
    if (occl_trees_schedule(T) != 0)
        return occl_fail(occlInternalError, "the communicator's trees are not trees");
    if (c->rank == 0 && occl_log_threshold >= OCCL_LOG_INFO) {
        char from[64];
        if (T->from_topology)
            snprintf(from, sizeof from, "the topology");
        else
            snprintf(from, sizeof from, "%d virtual node%s", c->nnodes, c->nnodes == 1 ? "" : "s");
        log_trees(c, from);
    }
    if (c->job.topo && !T->from_topology)
        OCCL_INFO("comm %016llx trees from its virtual nodes: %s", (unsigned long long)c->id, why);
    return occlSuccess;
}

void occl_trees_free(occlComm_t c)
{
    occl_trees_release(&c->trees);
}
