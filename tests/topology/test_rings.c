/* tests/topology/test_rings.c - rings and trees built from topologies:
 * golden files (tests/topology/golden/, regenerate with
 * OR_TOPO_UPDATE_GOLDEN=1 and review the diff) and the properties every
 * ring and tree must have whatever the topology. */
#include "topo.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    const char *spec; /* a data file when it ends in .xml */
    int ranks, per_rank;
    or_topo_placement how;
} ring_case;

static ring_case cases[] = {
    {"dgx-a100", "dgx-a100", 8, 1, OR_TOPO_PLACE_PACKED},
    {"dgx-a100x2-packed", "dgx-a100x2", 16, 1, OR_TOPO_PLACE_PACKED},
    {"dgx-a100x2-spread-2dev", "dgx-a100x2", 8, 2, OR_TOPO_PLACE_SPREAD},
    {"torus4x4", "torus4x4", 16, 1, OR_TOPO_PLACE_PACKED},
    {"ring8", "ring8", 8, 1, OR_TOPO_PLACE_PACKED},
    {"v100-p2p", "nccl-v100-p2p.xml", 4, 1, OR_TOPO_PLACE_PACKED},
    {"azure-ndv4", "azure-ndv4-topo.xml", 8, 1, OR_TOPO_PLACE_PACKED},
    {"fat-tree-spread", "fat-tree.xml", 8, 1, OR_TOPO_PLACE_SPREAD},
    {"3nodes-spread", "nodes:3 devices:2 shape:full", 6, 1, OR_TOPO_PLACE_SPREAD},
    {"5nodes", "nodes:5 devices:1", 5, 1, OR_TOPO_PLACE_PACKED},
};
#define NCASES (sizeof cases / sizeof cases[0])

static or_topo *load_case(const ring_case *c)
{
    char spec[512];
    size_t n = strlen(c->spec);
    if (n > 4 && strcmp(c->spec + n - 4, ".xml") == 0)
        snprintf(spec, sizeof spec, "%s/data/%s", TOPO_DATA_DIR, c->spec);
    else
        snprintf(spec, sizeof spec, "%s", c->spec);
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_load(spec, "case", &t, &err), OR_TOPO_OK, "%s: %s", spec, err.message);
    return t;
}

/* Every ring: a permutation; each node's entries consecutive, so the
 * network is crossed once per node (never with one node). */
static void check_ring(const or_topo *t, const int *dev, int n, const int *order)
{
    int *seen = calloc((size_t)n, sizeof *seen);
    int nodes_used = 0, crossings = 0;
    int *node_seen = calloc((size_t)or_topo_node_count(t), sizeof *node_seen);
    for (int i = 0; i < n; i++) {
        cr_assert(order[i] >= 0 && order[i] < n);
        cr_assert_not(seen[order[i]]++, "entry %d twice", order[i]);
        int node = or_topo_device_node(t, dev[order[i]]);
        nodes_used += !node_seen[node]++;
        int next = or_topo_device_node(t, dev[order[(i + 1) % n]]);
        crossings += node != next;
    }
    cr_assert_eq(crossings, nodes_used > 1 ? nodes_used : 0);
    free(seen);
    free(node_seen);
}

/* Every tree: one root, parents and children agree, all entries reachable
 * from the root; across nodes a node head is an inner vertex of one tree. */
static void check_trees(const or_topo *t, const int *dev, int n, const or_topo_tree_vertex *tv)
{
    int inner_across[2][1024] = {{0}};
    for (int k = 0; k < 2; k++) {
        const or_topo_tree_vertex *T = tv + (size_t)k * n;
        int roots = 0;
        for (int i = 0; i < n; i++) {
            roots += T[i].parent < 0;
            if (T[i].parent >= 0) {
                const or_topo_tree_vertex *p = &T[T[i].parent];
                int found = 0;
                for (int c = 0; c < p->nchildren; c++)
                    found |= p->children[c] == i;
                cr_assert(found, "tree %d: %d's parent %d does not list it", k, i, T[i].parent);
            }
            for (int c = 0; c < T[i].nchildren; c++) {
                cr_assert_eq(T[T[i].children[c]].parent, i);
                if (or_topo_device_node(t, dev[T[i].children[c]]) !=
                    or_topo_device_node(t, dev[i]))
                    inner_across[k][i] = 1;
            }
        }
        cr_assert_eq(roots, 1, "tree %d has %d roots", k, roots);
        /* Reachability: walk up from each entry, at most n steps. */
        for (int i = 0; i < n; i++) {
            int v = i, steps = 0;
            while (T[v].parent >= 0 && steps++ <= n)
                v = T[v].parent;
            cr_assert_leq(steps, n, "tree %d has a cycle through %d", k, i);
        }
    }
    /* With an even node count no node head forwards across nodes in both
     * trees; with an odd count the shifted tree leaves exactly one that
     * does (as NCCL's), the root of tree 0, which has a single child there. */
    int both = 0;
    for (int i = 0; i < n; i++)
        if (inner_across[0][i] && inner_across[1][i]) {
            both++;
            cr_assert_eq(tv[i].parent, -1, "entry %d forwards across nodes in both trees", i);
            int across = 0;
            for (int c = 0; c < tv[i].nchildren; c++)
                across += or_topo_device_node(t, dev[tv[i].children[c]]) !=
                          or_topo_device_node(t, dev[i]);
            cr_assert_eq(across, 1);
        }
    cr_assert_leq(both, 1);
}

static char *describe(const or_topo *t, const ring_case *c, const int *dev, int n,
                      const int *order, const or_topo_tree_vertex *tv)
{
    size_t cap = 65536, len = 0;
    char *out = malloc(cap);
    len += (size_t)snprintf(out + len, cap - len, "# %s: %d ranks x %d devices, %s\n",
                            or_topo_name(t), c->ranks, c->per_rank,
                            c->how == OR_TOPO_PLACE_SPREAD ? "spread" : "packed");
    len += (size_t)snprintf(out + len, cap - len, "devices:");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(out + len, cap - len, " %d", dev[i]);
    len += (size_t)snprintf(out + len, cap - len, "\nring:");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(out + len, cap - len, " %d", order[i]);
    len += (size_t)snprintf(out + len, cap - len, "\n");
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < n; i++) {
            const or_topo_tree_vertex *v = &tv[k * n + i];
            len += (size_t)snprintf(out + len, cap - len, "tree%d %d: parent %d children", k, i,
                                    v->parent);
            for (int j = 0; j < v->nchildren; j++)
                len += (size_t)snprintf(out + len, cap - len, " %d", v->children[j]);
            len += (size_t)snprintf(out + len, cap - len, "\n");
        }
    return out;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

Test(rings, golden_files_and_properties)
{
    for (size_t k = 0; k < NCASES; k++) {
        const ring_case *c = &cases[k];
        or_topo *t = load_case(c);
        or_topo_error err;
        int n = c->ranks * c->per_rank;
        int *dev = malloc(sizeof *dev * (size_t)n), *order = malloc(sizeof *order * (size_t)n);
        or_topo_tree_vertex *tv = malloc(sizeof *tv * 2 * (size_t)n);
        cr_assert_eq(or_topo_place(t, c->ranks, c->per_rank, c->how, dev, &err), OR_TOPO_OK,
                     "%s", err.message);
        cr_assert_eq(or_topo_ring(t, dev, n, order, &err), OR_TOPO_OK, "%s", err.message);
        cr_assert_eq(or_topo_trees(t, dev, n, tv, &err), OR_TOPO_OK, "%s", err.message);
        check_ring(t, dev, n, order);
        check_trees(t, dev, n, tv);
        char *text = describe(t, c, dev, n, order, tv);
        char path[512];
        snprintf(path, sizeof path, "%s/golden/%s.txt", TOPO_DATA_DIR, c->name);
        if (getenv("OR_TOPO_UPDATE_GOLDEN")) {
            FILE *f = fopen(path, "w");
            cr_assert_not_null(f, "cannot write %s", path);
            fputs(text, f);
            fclose(f);
        }
        char *want = read_text(path);
        cr_assert_not_null(want, "no golden file %s", path);
        cr_assert_str_eq(text, want, "%s differs from the golden file", c->name);
        free(want);
        free(text);
        free(dev);
        free(order);
        free(tv);
        or_topo_free(t);
    }
}

/* The ring follows fast links: on a ring topology it is the ring itself,
 * whatever order the devices come in, and never a hop through a device. */
Test(rings, follows_the_links_of_a_ring_topology)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_from_preset("ring8", &t, &err), OR_TOPO_OK);
    int dev[8] = {5, 2, 7, 0, 3, 6, 1, 4}, order[8];
    cr_assert_eq(or_topo_ring(t, dev, 8, order, &err), OR_TOPO_OK);
    for (int i = 0; i < 8; i++) {
        const or_topo_path *p = or_topo_path_between(t, dev[order[i]], dev[order[(i + 1) % 8]]);
        cr_assert_eq(p->type, OR_TOPO_PATH_NVL, "hop %d is %s", i,
                     or_topo_path_type_name(p->type));
        cr_assert_eq(p->nhops, 1);
    }
    or_topo_free(t);
}

Test(rings, torus_ring_uses_only_neighbour_links)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_from_preset("torus4x4", &t, &err), OR_TOPO_OK);
    int dev[16], order[16];
    for (int i = 0; i < 16; i++)
        dev[i] = i;
    cr_assert_eq(or_topo_ring(t, dev, 16, order, &err), OR_TOPO_OK);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(or_topo_path_between(t, order[i], order[(i + 1) % 16])->nhops, 1);
    or_topo_free(t);
}

/* On the V100 mesh the best ring uses the 2-link pairs and no NVB hop. */
Test(rings, prefers_wide_links_in_a_mesh)
{
    char path[512];
    snprintf(path, sizeof path, "%s/data/nccl-v100-p2p.xml", TOPO_DATA_DIR);
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_from_xml_file(path, &t, &err), OR_TOPO_OK);
    int dev[4] = {0, 1, 2, 3}, order[4];
    cr_assert_eq(or_topo_ring(t, dev, 4, order, &err), OR_TOPO_OK);
    for (int i = 0; i < 4; i++) {
        const or_topo_path *p = or_topo_path_between(t, order[i], order[(i + 1) % 4]);
        cr_assert_eq(p->type, OR_TOPO_PATH_NVL);
    }
    or_topo_free(t);
}

Test(rings, two_entries_on_one_device)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_from_preset("full2", &t, &err), OR_TOPO_OK);
    int dev[3] = {1, 1, 0}, order[3];
    cr_assert_eq(or_topo_ring(t, dev, 3, order, &err), OR_TOPO_OK);
    check_ring(t, dev, 3, order);
    or_topo_free(t);
}

/* The node trees for every count: checked through a topology of one
 * device per node, so each node is one tree vertex. */
Test(trees, double_binary_tree_for_1_to_40_nodes)
{
    for (int nodes = 1; nodes <= 40; nodes++) {
        char spec[64];
        snprintf(spec, sizeof spec, "nodes:%d devices:1", nodes);
        or_topo *t = NULL;
        or_topo_error err;
        cr_assert_eq(or_topo_from_string(spec, NULL, &t, &err), OR_TOPO_OK, "%s", err.message);
        int dev[40];
        or_topo_tree_vertex tv[80];
        for (int i = 0; i < nodes; i++)
            dev[i] = i;
        cr_assert_eq(or_topo_trees(t, dev, nodes, tv, &err), OR_TOPO_OK);
        check_trees(t, dev, nodes, tv);
        /* Binary: at most 2 children, and depth about log2. */
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < nodes; i++) {
                cr_assert_leq(tv[k * nodes + i].nchildren, 2);
                int depth = 0;
                for (int v = i; tv[k * nodes + v].parent >= 0; v = tv[k * nodes + v].parent)
                    depth++;
                cr_assert_leq(depth, 2 + 2 * 6, "%d nodes: depth %d", nodes, depth);
            }
        or_topo_free(t);
    }
}
