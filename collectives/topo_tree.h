/*
 * collectives/topo_tree.h - a communicator's two trees (NCCL's double binary
 * tree) and the step schedules its tree all-reduce and tree Reduce (on the
 * trees re-rooted at the root) run on them: pure functions of their inputs,
 * so every rank computes the same trees and vcost.c replays exactly the
 * transfers algorithms.c moves.
 *
 * The trees are the topology layer's (or_topo_trees): within a node a chain
 * in ring order, across nodes a binary tree of the chain heads, the second
 * tree mirrored or shifted so that no node forwards across the network in
 * both. With a declared topology (OPENREG_TOPO) they come from the ranks'
 * topology devices; without one, from the communicator's virtual nodes
 * (its ring grouped by node), the same construction.
 */
#ifndef OCCL_TOPO_TREE_H
#define OCCL_TOPO_TREE_H

#include <stdbool.h>
#include <stddef.h>

struct or_topo;

/* The topology's trees give a vertex at most 3 children (its chain's next
 * rank and two node-tree children); re-rooting adds its old parent. */
#define OCCL_TREE_MAX_CHILDREN 4

typedef struct occl_tree_vertex {
    int parent; /* comm rank; -1 at the root */
    int nchildren;
    int children[OCCL_TREE_MAX_CHILDREN];
} occl_tree_vertex;

/* Both trees and when each rank acts in them. Steps count from 0 for a
 * call's first chunk; chunk j of a tree runs j steps after chunk 0. */
typedef struct occl_trees {
    int n;                /* comm ranks */
    occl_tree_vertex *v;  /* v[t * n + r]: comm rank r in tree t (t = 0, 1) */
    int *ready;           /* ready[t * n + r]: first step after r has reduced its children's
                           * chunk 0 (the root: sends it down) */
    int *up;              /* up[t * n + r]: the step r sends chunk 0 to its parent (>= ready;
                           * -1 at the root) */
    int *depth;           /* depth[t * n + r]: edges from the root */
    int root[2], max_depth[2];
    bool from_topology;
} occl_trees;

/* trees[t * nranks + r] receives comm rank r's place in tree t, from the
 * topology devices rank_device[r] (or_topo_trees). 0, or -1 with the reason
 * in why: no topology, a device out of range, two ranks on one device, out
 * of memory (the caller builds the virtual nodes' trees instead). */
int occl_topo_trees(const struct or_topo *topo, const int *rank_device, int nranks,
                    occl_tree_vertex *trees, char *why, size_t why_size);

/* The same trees from a ring grouped by node: node k's ranks are
 * ring[node_first[k] .. node_first[k+1]), nnodes + 1 entries. */
int occl_node_trees(const int *ring, const int *node_first, int nnodes, int nranks,
                    occl_tree_vertex *trees); /* 0, or -1 when out of memory */

/* Fill T's ready, up, depth, root and max_depth from T->v (T->n set, arrays
 * allocated by the caller, 2n entries each). A rank receives from one child
 * per step and chunk, in the order their partials are ready (then the order
 * of its children), so a buffer region is never reduced by two transfers at
 * once and the reduction order is fixed. 0, or -1 if T->v is not two trees
 * over all ranks (a bug). */
int occl_trees_schedule(occl_trees *T);

/* Steps a tree takes for nchunks chunks (0 for none). */
int occl_tree_steps(const occl_trees *T, int tree, size_t nchunks);

/* Half t of an all-reduce of count elements of es bytes: elements
 * [*lo, *lo + *len) (half 0 takes count / 2, half 1 the rest), moved in
 * *nchunks chunks of *chunk elements (the last shorter). */
void occl_tree_half(size_t count, size_t es, int tree, size_t *lo, size_t *len, size_t *chunk,
                    size_t *nchunks);

typedef enum {
    OCCL_TREE_RECV_UP,   /* a child's partial, reduced into ours */
    OCCL_TREE_SEND_UP,   /* our partial to the parent */
    OCCL_TREE_RECV_DOWN, /* the result from the parent */
    OCCL_TREE_SEND_DOWN  /* the result to a child */
} occl_tree_op_kind;

typedef struct occl_tree_op {
    int step, tree, peer;
    size_t chunk;
    occl_tree_op_kind kind;
} occl_tree_op;

/* Rank's transfers in the double-tree all-reduce, nchunks[t] chunks on tree
 * t, ordered by step, then tree (so both ends list a pair's transfers of a
 * step in the same order). The transfers of a step progress together; every
 * transfer meets its other end at the same step of the peer, so running the
 * steps in order cannot deadlock. Returns how many (*ops malloc'ed, NULL when none), or -1 when out
 * of memory. */
int occl_tree_allreduce_ops(const occl_trees *T, int rank, const size_t nchunks[2],
                            occl_tree_op **ops);

/* Reduce to a root: T's trees re-rooted at `root` (the path from each old
 * root to it reversed, so every other edge stays), scheduled. *out's arrays
 * are malloc'ed (occl_trees_release frees them). 0, or -1 when out of memory
 * or T is not two trees. */
int occl_trees_reroot(const occl_trees *T, int root, occl_trees *out);
/* T's arrays for n ranks, zeroed (T->n = n, no tree from a topology yet).
 * 0, or -1 when out of memory (then T holds nothing). */
int occl_trees_alloc(occl_trees *T, int n);
void occl_trees_release(occl_trees *T);

/* Rank's transfers in the double-tree Reduce on re-rooted trees: each half
 * goes up its tree in chunks (the up half of occl_tree_allreduce_ops). */
int occl_tree_reduce_ops(const occl_trees *T, int rank, const size_t nchunks[2],
                         occl_tree_op **ops);

#endif
