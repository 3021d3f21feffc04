/* topology/topo.c - the topology record: building, validation, paths, reading. */
#include "topo_internal.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------- */

static const char *const status_names[] = {
#define OR_TOPO_NAME_(code, text) #code,
    OR_TOPO_STATUS_LIST(OR_TOPO_NAME_)
#undef OR_TOPO_NAME_
};
static const char *const status_strings[] = {
#define OR_TOPO_TEXT_(code, text) text,
    OR_TOPO_STATUS_LIST(OR_TOPO_TEXT_)
#undef OR_TOPO_TEXT_
};
#define NSTATUS ((int)(sizeof status_names / sizeof status_names[0]))

const char *or_topo_status_name(or_topo_status s)
{
    return (int)s >= 0 && (int)s < NSTATUS ? status_names[s] : "OR_TOPO_ERR_UNKNOWN";
}

const char *or_topo_status_string(or_topo_status s)
{
    return (int)s >= 0 && (int)s < NSTATUS ? status_strings[s] : "unknown status";
}

void ot_clear_error(or_topo_error *err)
{
    if (err)
        memset(err, 0, sizeof *err);
}

or_topo_status ot_read_file(const char *path, const char *what, size_t limit, char **buf,
                            size_t *len, or_topo_error *err)
{
    const char *sp = what ? " " : "", *name = what ? what : "";
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ot_fail(err, OR_TOPO_ERR_IO, path, 0, 0, "cannot open%s%s: %s", sp, name,
                       strerror(errno));
    size_t cap = 1 << 12, n = 0;
    char *b = malloc(cap);
    or_topo_status rc = OR_TOPO_OK;
    while (rc == OR_TOPO_OK) {
        if (!b) {
            rc = ot_fail(err, OR_TOPO_ERR_NOMEM, path, 0, 0, "out of memory");
            break;
        }
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) { /* end of file, or an error */
            if (ferror(f))
                rc = ot_fail(err, OR_TOPO_ERR_IO, path, 0, 0, "cannot read%s%s: %s", sp, name,
                             strerror(errno));
            break;
        }
        if (cap > limit) {
            rc = ot_fail(err, OR_TOPO_ERR_LIMIT, path, 0, 0, "file larger than %zu MiB", limit >> 20);
            break;
        }
        char *bigger = realloc(b, cap * 2);
        if (!bigger)
            free(b);
        b = bigger;
        cap *= 2;
    }
    fclose(f);
    if (rc != OR_TOPO_OK) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return OR_TOPO_OK;
}

or_topo_status ot_fail(or_topo_error *err, or_topo_status code, const char *source, int line,
                       int column, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    snprintf(err->source, sizeof err->source, "%s", source ? source : "");
    err->line = line;
    err->column = column;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return code;
}

int or_topo_error_format(const or_topo_error *err, char *buf, size_t size)
{
    char where[300] = "";
    if (err->source[0] && err->line > 0 && err->column > 0)
        snprintf(where, sizeof where, "%s:%d:%d: ", err->source, err->line, err->column);
    else if (err->source[0] && err->line > 0)
        snprintf(where, sizeof where, "%s:%d: ", err->source, err->line);
    else if (err->source[0])
        snprintf(where, sizeof where, "%s: ", err->source);
    return snprintf(buf, size, "%s%s", where,
                    err->message[0] ? err->message : or_topo_status_string(err->code));
}

/* ---- names of enums ----------------------------------------------------- */

const char *or_topo_kind_name(or_topo_kind k)
{
    static const char *const names[] = {"device", "cpu", "pci-switch", "nvswitch", "nic",
                                        "net-switch"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

const char *or_topo_link_kind_name(or_topo_link_kind k)
{
    static const char *const names[] = {"nvlink", "pcie", "sys", "net"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

const char *or_topo_path_type_name(or_topo_path_type t)
{
    static const char *const names[] = {"LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS", "NET"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* ---- id map: string -> int, open addressing --------------------------- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int idmap_get(const ot_idmap *m, const char *key)
{
    if (!m->cap)
        return -1;
    for (size_t i = hash_str(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i])
            return -1;
        if (strcmp(m->keys[i], key) == 0)
            return m->values[i];
    }
}

/* key is borrowed (owned by the vertex). */
static int idmap_put(ot_idmap *m, char *key, int value)
{
    if ((m->count + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        char **keys = calloc(cap, sizeof *keys);
        int *values = calloc(cap, sizeof *values);
        if (!keys || !values) {
            free(keys);
            free(values);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i])
                continue;
            size_t j = hash_str(m->keys[i]) & (cap - 1);
            while (keys[j])
                j = (j + 1) & (cap - 1);
            keys[j] = m->keys[i];
            values[j] = m->values[i];
        }
        free(m->keys);
        free(m->values);
        m->keys = keys;
        m->values = values;
        m->cap = cap;
    }
    size_t i = hash_str(key) & (m->cap - 1);
    while (m->keys[i])
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = key;
    m->values[i] = value;
    m->count++;
    return 0;
}

/* ---- building ----------------------------------------------------------- */

or_topo *ot_new(const char *name, const char *source)
{
    or_topo *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->name = strdup(name ? name : "");
    t->source = strdup(source ? source : "");
    if (!t->name || !t->source) {
        or_topo_free(t);
        return NULL;
    }
    return t;
}

or_topo_status ot_set_name(or_topo *t, const char *name, or_topo_error *err)
{
    char *copy = strdup(name);
    if (!copy)
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    free(t->name);
    t->name = copy;
    return OR_TOPO_OK;
}

void or_topo_free(or_topo *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nnodes; i++)
        free(t->node_names[i]);
    free(t->node_names);
    free(t->node_lines);
    for (int i = 0; i < t->nverts; i++)
        free(t->verts[i].id);
    free(t->verts);
    free(t->ids.keys);
    free(t->ids.values);
    free(t->links);
    free(t->dev_vertex);
    free(t->node_first);
    free(t->node_ndev);
    free(t->adj_off);
    free(t->adj);
    ot_paths_free(t);
    free(t->name);
    free(t->source);
    free(t);
}

static int grow(void **array, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *p = realloc(*array, (size_t)n * elem);
    if (!p)
        return -1;
    *array = p;
    *cap = n;
    return 0;
}

static int valid_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > OR_TOPO_MAX_ID)
        return 0;
    for (const char *p = id; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return 0;
    return 1;
}

or_topo_status ot_add_node(or_topo *t, const char *name, int line, int *node,
                           or_topo_error *err)
{
    if (!valid_id(name))
        return ot_fail(err, OR_TOPO_ERR_VALUE, t->source, line, 0,
                       "node name '%.*s' is not valid: 1 to %d characters, no spaces",
                       OR_TOPO_MAX_ID, name, OR_TOPO_MAX_ID);
    for (int i = 0; i < t->nnodes; i++)
        if (strcmp(t->node_names[i], name) == 0)
            return ot_fail(err, OR_TOPO_ERR_DUPLICATE, t->source, line, 0,
                           "node '%s' is declared twice (first at line %d)", name,
                           t->node_lines[i]);
    int cap = t->cap_nodes;
    if (grow((void **)&t->node_names, &cap, t->nnodes + 1, sizeof *t->node_names))
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, line, 0, "out of memory");
    cap = t->cap_nodes;
    if (grow((void **)&t->node_lines, &cap, t->nnodes + 1, sizeof *t->node_lines))
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, line, 0, "out of memory");
    t->cap_nodes = cap;
    if (!(t->node_names[t->nnodes] = strdup(name)))
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, line, 0, "out of memory");
    t->node_lines[t->nnodes] = line;
    *node = t->nnodes++;
    return OR_TOPO_OK;
}

or_topo_status ot_add_vertex(or_topo *t, const char *id, or_topo_kind kind, int node, int line,
                             int *vertex, or_topo_error *err)
{
    if (!valid_id(id))
        return ot_fail(err, OR_TOPO_ERR_VALUE, t->source, line, 0,
                       "id '%.*s' is not valid: 1 to %d characters, no spaces", OR_TOPO_MAX_ID,
                       id, OR_TOPO_MAX_ID);
    int prev = idmap_get(&t->ids, id);
    if (prev >= 0)
        return ot_fail(err, OR_TOPO_ERR_DUPLICATE, t->source, line, 0,
                       "id '%s' is already used (line %d)", id, t->verts[prev].line);
    if (kind == OR_TOPO_DEVICE) {
        if (t->ndevs_added >= OR_TOPO_MAX_DEVICES)
            return ot_fail(err, OR_TOPO_ERR_LIMIT, t->source, line, 0,
                           "more than %d devices", OR_TOPO_MAX_DEVICES);
    }
    if (grow((void **)&t->verts, &t->cap_verts, t->nverts + 1, sizeof *t->verts))
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, line, 0, "out of memory");
    ot_vertex *v = &t->verts[t->nverts];
    if (!(v->id = strdup(id)))
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, line, 0, "out of memory");
    if (idmap_put(&t->ids, v->id, t->nverts)) {
        free(v->id);
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, line, 0, "out of memory");
    }
    v->kind = kind;
    v->node = node;
    v->device = -1;
    v->line = line;
    if (vertex)
        *vertex = t->nverts;
    t->nverts++;
    t->ndevs_added += kind == OR_TOPO_DEVICE;
    return OR_TOPO_OK;
}

int ot_find_vertex(const or_topo *t, const char *id)
{
    return idmap_get(&t->ids, id);
}

or_topo_status ot_add_link(or_topo *t, int a, int b, or_topo_link_kind kind, double bandwidth,
                           double latency_ns, int line, or_topo_error *err)
{
    if (!(bandwidth > 0) || !isfinite(bandwidth))
        return ot_fail(err, OR_TOPO_ERR_VALUE, t->source, line, 0,
                       "link %s - %s: bandwidth must be positive and finite", t->verts[a].id,
                       t->verts[b].id);
    if (!(latency_ns >= 0) || !isfinite(latency_ns))
        return ot_fail(err, OR_TOPO_ERR_VALUE, t->source, line, 0,
                       "link %s - %s: latency must be zero or positive and finite",
                       t->verts[a].id, t->verts[b].id);
    if (a == b)
        return ot_fail(err, OR_TOPO_ERR_STRUCTURE, t->source, line, 0,
                       "link from '%s' to itself", t->verts[a].id);
    if (t->nlinks >= OR_TOPO_MAX_LINKS)
        return ot_fail(err, OR_TOPO_ERR_LIMIT, t->source, line, 0, "more than %d links",
                       OR_TOPO_MAX_LINKS);
    if (grow((void **)&t->links, &t->cap_links, t->nlinks + 1, sizeof *t->links))
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, line, 0, "out of memory");
    ot_link *l = &t->links[t->nlinks++];
    l->info.a = a;
    l->info.b = b;
    l->info.kind = kind;
    l->info.bandwidth = bandwidth;
    l->info.latency_ns = latency_ns;
    l->line = line;
    return OR_TOPO_OK;
}

/* ---- validation --------------------------------------------------------- */

static unsigned kind_bit(or_topo_kind k) { return 1u << k; }

/* Which vertex kinds each link kind may join (both ends in the set). */
static unsigned link_allowed(or_topo_link_kind k)
{
    switch (k) {
    case OR_TOPO_LINK_NVLINK:
        return kind_bit(OR_TOPO_DEVICE) | kind_bit(OR_TOPO_NVSWITCH) | kind_bit(OR_TOPO_CPU);
    case OR_TOPO_LINK_PCIE:
        return kind_bit(OR_TOPO_DEVICE) | kind_bit(OR_TOPO_CPU) | kind_bit(OR_TOPO_PCI_SWITCH) |
               kind_bit(OR_TOPO_NIC);
    case OR_TOPO_LINK_SYS: return kind_bit(OR_TOPO_CPU);
    case OR_TOPO_LINK_NET: return kind_bit(OR_TOPO_NIC) | kind_bit(OR_TOPO_NET_SWITCH);
    }
    return 0;
}

static or_topo_status check_links(or_topo *t, or_topo_error *err)
{
    for (int i = 0; i < t->nlinks; i++) {
        const ot_link *l = &t->links[i];
        const ot_vertex *a = &t->verts[l->info.a], *b = &t->verts[l->info.b];
        unsigned ok = link_allowed(l->info.kind);
        if (!(ok & kind_bit(a->kind)) || !(ok & kind_bit(b->kind)))
            return ot_fail(err, OR_TOPO_ERR_STRUCTURE, t->source, l->line, 0,
                           "link type %s cannot join %s '%s' and %s '%s'",
                           or_topo_link_kind_name(l->info.kind), or_topo_kind_name(a->kind),
                           a->id, or_topo_kind_name(b->kind), b->id);
        if (l->info.kind == OR_TOPO_LINK_NVLINK && a->kind == OR_TOPO_CPU &&
            b->kind == OR_TOPO_CPU)
            return ot_fail(err, OR_TOPO_ERR_STRUCTURE, t->source, l->line, 0,
                           "CPUs '%s' and '%s' are joined by a sys link, not nvlink", a->id,
                           b->id);
        if (l->info.kind == OR_TOPO_LINK_PCIE && a->kind == OR_TOPO_CPU &&
            b->kind == OR_TOPO_CPU)
            return ot_fail(err, OR_TOPO_ERR_STRUCTURE, t->source, l->line, 0,
                           "CPUs '%s' and '%s' are joined by a sys link, not pcie", a->id,
                           b->id);
        if (l->info.kind != OR_TOPO_LINK_NET && a->node != b->node)
            return ot_fail(err, OR_TOPO_ERR_STRUCTURE, t->source, l->line, 0,
                           "%s link joins '%s' and '%s' of different nodes: only net links "
                           "leave a node",
                           or_topo_link_kind_name(l->info.kind), a->id, b->id);
        if (l->info.kind == OR_TOPO_LINK_NET && a->kind == OR_TOPO_NIC &&
            b->kind == OR_TOPO_NIC && a->node == b->node)
            return ot_fail(err, OR_TOPO_ERR_STRUCTURE, t->source, l->line, 0,
                           "net link joins NICs '%s' and '%s' of the same node", a->id, b->id);
    }
    /* Parallel links between one pair would be ambiguous: found by sorting. */
    int *order = malloc(sizeof *order * (size_t)(t->nlinks > 0 ? t->nlinks : 1));
    if (!order)
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    for (int i = 0; i < t->nlinks; i++)
        order[i] = i;
    /* Insertion sort into buckets would do; a simple comparison sort keeps the
     * first-declared link first so the message names the later one. */
    for (int i = 1; i < t->nlinks; i++) {
        int x = order[i], j = i - 1;
        const or_topo_link_info *lx = &t->links[x].info;
        int xa = lx->a < lx->b ? lx->a : lx->b, xb = lx->a < lx->b ? lx->b : lx->a;
        while (j >= 0) {
            const or_topo_link_info *ly = &t->links[order[j]].info;
            int ya = ly->a < ly->b ? ly->a : ly->b, yb = ly->a < ly->b ? ly->b : ly->a;
            if (ya < xa || (ya == xa && (yb < xb || (yb == xb && order[j] < x))))
                break;
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = x;
    }
    or_topo_status rc = OR_TOPO_OK;
    for (int i = 1; i < t->nlinks && rc == OR_TOPO_OK; i++) {
        const ot_link *p = &t->links[order[i - 1]], *q = &t->links[order[i]];
        int pa = p->info.a < p->info.b ? p->info.a : p->info.b;
        int pb = p->info.a < p->info.b ? p->info.b : p->info.a;
        int qa = q->info.a < q->info.b ? q->info.a : q->info.b;
        int qb = q->info.a < q->info.b ? q->info.b : q->info.a;
        if (pa == qa && pb == qb)
            rc = ot_fail(err, OR_TOPO_ERR_DUPLICATE, t->source, q->line, 0,
                         "a second link between '%s' and '%s' (first at line %d)",
                         t->verts[qa].id, t->verts[qb].id, p->line);
    }
    free(order);
    return rc;
}

/* ---- path search -------------------------------------------------------- */

/* A search state is a vertex plus whether it was reached over NVLink: a path
 * may pass through another device only from one NVLink to another (NVB). */
typedef struct {
    double bw, lat;
    int hops;
    int prev_state, prev_link; /* -1 at the source */
    int done;
} ot_label;

/* Labels of one search, initialized when first touched: a search that stops
 * early (one pair's path) costs what it visits, not the whole fabric. A state
 * whose stamp is not the current epoch holds the initial label. */
typedef struct {
    ot_label *L;
    unsigned *stamp;
    unsigned epoch;
    int nstates;
} ot_labels;

static ot_label *lab(ot_labels *x, int s)
{
    if (x->stamp[s] != x->epoch) {
        x->stamp[s] = x->epoch;
        x->L[s] = (ot_label){.bw = 0, .lat = INFINITY, .hops = 0, .prev_state = -1,
                             .prev_link = -1, .done = 0};
    }
    return &x->L[s];
}

/* Forget every label (O(1) but once every 2^32 searches). */
static void labels_reset(ot_labels *x)
{
    if (++x->epoch == 0) {
        memset(x->stamp, 0, sizeof *x->stamp * (size_t)x->nstates);
        x->epoch = 1;
    }
}

typedef struct {
    int *items;
    int n;
} ot_heap;

/* Heap order: for the widest pass, larger bw first; for the latency pass,
 * smaller (lat, hops) first; ties by state index keep it deterministic. */
static int better(const ot_label *L, int x, int y, int widest)
{
    if (widest) {
        if (L[x].bw != L[y].bw)
            return L[x].bw > L[y].bw;
    } else {
        if (L[x].lat != L[y].lat)
            return L[x].lat < L[y].lat;
        if (L[x].hops != L[y].hops)
            return L[x].hops < L[y].hops;
    }
    return x < y;
}

static void heap_push(ot_heap *h, const ot_label *L, int s, int widest)
{
    int i = h->n++;
    h->items[i] = s;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!better(L, h->items[i], h->items[p], widest))
            break;
        int tmp = h->items[i];
        h->items[i] = h->items[p];
        h->items[p] = tmp;
        i = p;
    }
}

static int heap_pop(ot_heap *h, const ot_label *L, int widest)
{
    int top = h->items[0];
    h->items[0] = h->items[--h->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && better(L, h->items[l], h->items[m], widest))
            m = l;
        if (r < h->n && better(L, h->items[r], h->items[m], widest))
            m = r;
        if (m == i)
            break;
        int tmp = h->items[i];
        h->items[i] = h->items[m];
        h->items[m] = tmp;
        i = m;
    }
    return top;
}

/* May a path that reached state s (vertex v) continue over link l? */
static int may_traverse(const or_topo *t, int src_vertex, int s, int l)
{
    int v = s / 2, via_nvlink = s % 2;
    const ot_link *lk = &t->links[l];
    int w = lk->info.a == v ? lk->info.b : lk->info.a;
    const ot_vertex *V = &t->verts[v], *W = &t->verts[w];
    if (v != src_vertex) {
        if (V->kind == OR_TOPO_DEVICE && !(via_nvlink && lk->info.kind == OR_TOPO_LINK_NVLINK))
            return 0;
    }
    int src_node = t->verts[src_vertex].node;
    /* A path leaves the source node at most once and enters one other node. */
    if (lk->info.kind == OR_TOPO_LINK_NET) {
        if (V->kind == OR_TOPO_NIC && V->node != src_node)
            return 0;
        if (W->kind == OR_TOPO_NIC && W->node == src_node)
            return 0;
    }
    /* Inside the destination node a NIC is only an entry: entering one from
     * inside would lead nowhere. So every NIC is reached one way (the source
     * node's from inside, others from the network), which lets the search
     * keep one state per NIC. */
    if (W->kind == OR_TOPO_NIC && lk->info.kind == OR_TOPO_LINK_PCIE && W->node != src_node)
        return 0;
    return 1;
}

/* The state reached from state s (prev_link: the link that led there, -1 at
 * the source) over link l, or -1 if l may not be taken. Both graph walks
 * follow this one rule. A NIC is a gateway between its node and the network,
 * not a bridge: it is left over the other kind of link than the one it was
 * reached by. */
static int next_state(const or_topo *t, int src_vertex, int s, int prev_link, int l)
{
    const or_topo_link_info *li = &t->links[l].info;
    int v = s / 2;
    if (!may_traverse(t, src_vertex, s, l))
        return -1;
    int came_net = prev_link >= 0 && t->links[prev_link].info.kind == OR_TOPO_LINK_NET;
    if (v != src_vertex && t->verts[v].kind == OR_TOPO_NIC &&
        came_net == (li->kind == OR_TOPO_LINK_NET))
        return -1;
    int w = li->a == v ? li->b : li->a;
    return 2 * w + (li->kind == OR_TOPO_LINK_NVLINK);
}

/* Run the search from a source vertex. Pass 1 (widest) fills best bottleneck
 * per state; pass 2, for one bottleneck value B, finds (lat, hops) shortest
 * paths over links of bandwidth >= B. `heap` is scratch.
 *
 * With stop >= 0 the search ends when it settles the first state of vertex
 * `stop`; what it leaves for that vertex is what the whole search would.
 * States are settled best first (the heap's root is always the best label:
 * a label only improves while its state waits, and the newest entry of each
 * state was sifted up when it was set), and a label set later is never
 * better than the one settled before it: a bottleneck only narrows, and a
 * hop adds one to `hops`, so the (lat, hops) key grows strictly. So the
 * vertex's other state ends no better than the settled one - in a tie, the
 * even state, which best_state prefers, is settled first - and widest_to and
 * best_state read the same answer as after the whole search; the states on
 * its path are settled, their labels final. */
static void search(const or_topo *t, int src, double min_bw, ot_labels *x, ot_heap *heap,
                   int widest, int stop)
{
    labels_reset(x);
    ot_label *L = x->L;
    int s0 = 2 * src;
    lab(x, s0)->bw = INFINITY;
    L[s0].lat = 0;
    if (stop >= 0) { /* read after the search even if never reached */
        lab(x, 2 * stop);
        lab(x, 2 * stop + 1);
    }
    heap->n = 0;
    heap_push(heap, L, s0, widest);
    while (heap->n) {
        int s = heap_pop(heap, L, widest);
        if (L[s].done)
            continue;
        L[s].done = 1;
        int v = s / 2;
        if (v == stop)
            return;
        for (int k = t->adj_off[v]; k < t->adj_off[v + 1]; k++) {
            int l = t->adj[k];
            const or_topo_link_info *li = &t->links[l].info;
            if (li->bandwidth < min_bw)
                continue;
            int ns = next_state(t, src, s, L[s].prev_link, l);
            if (ns < 0 || lab(x, ns)->done)
                continue;
            double bw = L[s].bw < li->bandwidth ? L[s].bw : li->bandwidth;
            double lat = L[s].lat + li->latency_ns;
            int hops = L[s].hops + 1;
            int improve;
            if (widest)
                improve = bw > L[ns].bw;
            else
                improve = lat < L[ns].lat || (lat == L[ns].lat && hops < L[ns].hops);
            if (!improve)
                continue;
            L[ns].bw = bw;
            L[ns].lat = lat;
            L[ns].hops = hops;
            L[ns].prev_state = s;
            L[ns].prev_link = l;
            heap_push(heap, L, ns, widest);
        }
    }
}

/* The better of the two states of vertex v (widest pass). */
static double widest_to(ot_labels *x, int v)
{
    double a = lab(x, 2 * v)->bw, b = lab(x, 2 * v + 1)->bw;
    return a > b ? a : b;
}

static int best_state(ot_labels *x, int v)
{
    const ot_label *a = lab(x, 2 * v), *b = lab(x, 2 * v + 1);
    if (a->lat != b->lat)
        return a->lat < b->lat ? 2 * v : 2 * v + 1;
    if (a->hops != b->hops)
        return a->hops < b->hops ? 2 * v : 2 * v + 1;
    return 2 * v;
}

static or_topo_path_type classify(const or_topo *t, int src, const int *hops, int n)
{
    if (n == 0)
        return OR_TOPO_PATH_LOC;
    int v = src, pci_switches = 0, pcie = 0, sys = 0, cpu = 0, via_dev = 0, net = 0;
    for (int i = 0; i < n; i++) {
        const or_topo_link_info *li = &t->links[hops[i] / 2].info;
        int w = hops[i] % 2 ? li->a : li->b;
        pcie |= li->kind == OR_TOPO_LINK_PCIE;
        sys |= li->kind == OR_TOPO_LINK_SYS;
        net |= li->kind == OR_TOPO_LINK_NET;
        if (i < n - 1) {
            or_topo_kind k = t->verts[w].kind;
            pci_switches += k == OR_TOPO_PCI_SWITCH;
            cpu |= k == OR_TOPO_CPU;
            via_dev |= k == OR_TOPO_DEVICE;
        } else if (t->verts[w].kind == OR_TOPO_CPU && pcie) {
            cpu = 1; /* a host path ends at the host bridge */
        }
        v = w;
    }
    (void)v;
    if (net)
        return OR_TOPO_PATH_NET;
    if (sys)
        return OR_TOPO_PATH_SYS;
    if (cpu)
        return OR_TOPO_PATH_PHB;
    if (pci_switches > 1)
        return OR_TOPO_PATH_PXB;
    if (pcie)
        return OR_TOPO_PATH_PIX;
    if (via_dev)
        return OR_TOPO_PATH_NVB;
    return OR_TOPO_PATH_NVL;
}

/* Reconstruct the path to state s into hops (reversed walk), return count.
 * Every state on it was settled, so its label was touched. */
static int walk_back(const or_topo *t, const ot_label *L, int s, int *hops)
{
    int n = 0;
    for (int x = s; L[x].prev_state >= 0; x = L[x].prev_state)
        n++;
    int i = n;
    for (int x = s; L[x].prev_state >= 0; x = L[x].prev_state) {
        int l = L[x].prev_link;
        int from = L[x].prev_state / 2;
        hops[--i] = 2 * l + (t->links[l].info.a == from ? 0 : 1);
    }
    return n;
}

typedef struct {
    int *hops;
    size_t n, cap;
} ot_pool;

static long pool_add(ot_pool *p, const int *hops, int n)
{
    if (p->n + (size_t)n > p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 1024;
        while (cap < p->n + (size_t)n)
            cap *= 2;
        int *h = realloc(p->hops, cap * sizeof *h);
        if (!h)
            return -1;
        p->hops = h;
        p->cap = cap;
    }
    memcpy(p->hops + p->n, hops, (size_t)n * sizeof *hops);
    p->n += (size_t)n;
    return (long)(p->n - (size_t)n);
}

/* Scratch of searches from a source. One caller uses it at a time: the
 * topology keeps one spare (taken and given back atomically), and a thread
 * that finds none allocates its own. Its arrays are sized by the fabric but
 * only the states a search visits are written. */
struct ot_scratch {
    ot_labels W, L;
    ot_heap heap;
    int *hops;
    double *levels;
};

static void scratch_free(ot_scratch *x)
{
    if (!x)
        return;
    free(x->W.L);
    free(x->W.stamp);
    free(x->L.L);
    free(x->L.stamp);
    free(x->heap.items);
    free(x->hops);
    free(x->levels);
    free(x);
}

static ot_scratch *scratch_alloc(const or_topo *t)
{
    ot_scratch *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    size_t nstates = 2 * (size_t)t->nverts;
    x->W.L = malloc(sizeof *x->W.L * nstates);
    x->L.L = malloc(sizeof *x->L.L * nstates);
    x->W.stamp = calloc(nstates ? nstates : 1, sizeof *x->W.stamp);
    x->L.stamp = calloc(nstates ? nstates : 1, sizeof *x->L.stamp);
    x->W.nstates = x->L.nstates = (int)nstates;
    /* Every state is expanded once and pushes at most once per incident link. */
    x->heap.items = malloc(sizeof(int) * (size_t)(4 * t->nlinks + 2));
    x->hops = malloc(sizeof(int) * (nstates + 1));
    x->levels = malloc(sizeof(double) * ((size_t)t->nverts + 1));
    if (x->W.L && x->L.L && x->W.stamp && x->L.stamp && x->heap.items && x->hops && x->levels)
        return x;
    scratch_free(x);
    return NULL;
}

static ot_scratch *scratch_take(const or_topo *t)
{
    ot_scratch *x = atomic_exchange_explicit(&((or_topo *)t)->spare, NULL, memory_order_acquire);
    return x ? x : scratch_alloc(t);
}

static void scratch_give(const or_topo *t, ot_scratch *x)
{
    ot_scratch *none = NULL;
    if (!atomic_compare_exchange_strong_explicit(&((or_topo *)t)->spare, &none, x,
                                                 memory_order_release, memory_order_relaxed))
        scratch_free(x);
}

/* The paths from device d by whole searches: to every device (with_devices)
 * and, entry nd, to its host. paths[nd + 1] and *pool (the hops; every
 * path's hops point into it) are the caller's to free. This is the
 * definition the per-pair search must match (ot_path_full_row for tests). */
static int full_row(const or_topo *t, ot_scratch *x, int d, int with_devices, or_topo_path *paths,
                    int **pool_out)
{
    int nd = t->ndevs, src = t->dev_vertex[d];
    long *offs = calloc((size_t)nd + 1, sizeof *offs); /* the pool moves while it grows */
    ot_pool pool = {0};
    if (!offs)
        return -1;
    memset(paths, 0, sizeof *paths * ((size_t)nd + 1));
    search(t, src, 0, &x->W, &x->heap, 1, -1);
    /* One latency search per distinct bottleneck among the targets: every
     * device, and the CPUs of the source's node. */
    int nlevels = 0;
    for (int v = 0; v < t->nverts; v++) {
        int target = (with_devices && t->verts[v].kind == OR_TOPO_DEVICE) ||
                     (t->verts[v].kind == OR_TOPO_CPU && t->verts[v].node == t->verts[src].node);
        if (!target || v == src)
            continue;
        double bw = widest_to(&x->W, v);
        if (bw <= 0)
            continue;
        int seen = 0;
        for (int i = 0; i < nlevels; i++)
            seen |= x->levels[i] == bw;
        if (!seen)
            x->levels[nlevels++] = bw;
    }
    double host_bw = 0, host_lat = 0;
    int host_hops = 0, host_state = -1;
    for (int i = 0; i < nlevels; i++) {
        search(t, src, x->levels[i], &x->L, &x->heap, 0, -1);
        for (int e = 0; with_devices && e < nd; e++) {
            int v = t->dev_vertex[e];
            if (v == src || widest_to(&x->W, v) != x->levels[i])
                continue;
            int s = best_state(&x->L, v);
            int n = walk_back(t, x->L.L, s, x->hops);
            long off = pool_add(&pool, x->hops, n);
            if (off < 0)
                goto fail;
            or_topo_path *p = &paths[e];
            p->type = classify(t, src, x->hops, n);
            p->bandwidth = x->levels[i];
            p->latency_ns = x->L.L[s].lat;
            p->nhops = n;
            offs[e] = off;
        }
        /* The host: the best CPU of the node by (bw, lat, hops, index). */
        for (int v = 0; v < t->nverts; v++) {
            if (t->verts[v].kind != OR_TOPO_CPU || t->verts[v].node != t->verts[src].node ||
                widest_to(&x->W, v) != x->levels[i])
                continue;
            int s = best_state(&x->L, v);
            if (host_state >= 0 && !(x->levels[i] > host_bw ||
                                     (x->levels[i] == host_bw &&
                                      (x->L.L[s].lat < host_lat ||
                                       (x->L.L[s].lat == host_lat && x->L.L[s].hops < host_hops)))))
                continue;
            int n = walk_back(t, x->L.L, s, x->hops);
            long off = pool_add(&pool, x->hops, n);
            if (off < 0)
                goto fail;
            host_state = s;
            host_bw = x->levels[i];
            host_lat = x->L.L[s].lat;
            host_hops = x->L.L[s].hops;
            or_topo_path *hp = &paths[nd];
            hp->type = classify(t, src, x->hops, n);
            hp->bandwidth = host_bw;
            hp->latency_ns = host_lat;
            hp->nhops = n;
            offs[nd] = off;
        }
    }
    paths[d].type = OR_TOPO_PATH_LOC;
    for (int e = 0; e <= nd; e++)
        paths[e].hops = pool.hops ? pool.hops + offs[e] : NULL;
    free(offs);
    *pool_out = pool.hops;
    return 0;
fail:
    free(offs);
    free(pool.hops);
    return -1;
}

int ot_path_full_row(const or_topo *t, int d, or_topo_path *paths, int **pool)
{
    if (d < 0 || d >= t->ndevs)
        return -1;
    ot_scratch *x = scratch_take(t);
    if (!x)
        return -1;
    int rc = full_row(t, x, d, 1, paths, pool);
    scratch_give(t, x);
    return rc;
}

/* A kept path: between two devices (dst >= 0) or to a device's host
 * (dst == -1), its hops after it. */
struct ot_pair {
    struct ot_pair *next;
    int src, dst;
    or_topo_path path;
    int hops[];
};

static ot_pair *pair_new(const or_topo_path *p, int src, int dst)
{
    ot_pair *e = malloc(sizeof *e + sizeof(int) * (size_t)p->nhops);
    if (!e)
        return NULL;
    e->next = NULL;
    e->src = src;
    e->dst = dst;
    e->path = *p;
    if (p->nhops)
        memcpy(e->hops, p->hops, sizeof(int) * (size_t)p->nhops);
    e->path.hops = e->hops;
    return e;
}

void ot_paths_free(or_topo *t)
{
    for (size_t b = 0; t->pairs && b < t->npair_buckets; b++) {
        ot_pair *e = atomic_load(&t->pairs[b]);
        while (e) {
            ot_pair *next = e->next;
            free(e);
            e = next;
        }
    }
    free((void *)t->pairs);
    for (int d = 0; t->hosts && d < t->ndevs; d++)
        free(atomic_load(&t->hosts[d]));
    free((void *)t->hosts);
    scratch_free(atomic_load(&t->spare));
}

or_topo_status ot_paths_init(or_topo *t)
{
    size_t nb = 64;
    while (nb < 4 * (size_t)t->ndevs)
        nb *= 2;
    t->npair_buckets = nb;
    t->pairs = calloc(nb, sizeof *t->pairs);
    t->hosts = calloc((size_t)t->ndevs, sizeof *t->hosts);
    return t->pairs && t->hosts ? OR_TOPO_OK : OR_TOPO_ERR_NOMEM;
}

/* The path from device d to device e by the two searches, each stopped at
 * e (see search): the widest bottleneck B to e, then the (lat, hops)
 * shortest path over links of at least B - what full_row gives e. */
static ot_pair *compute_pair(const or_topo *t, int d, int e)
{
    or_topo_path p = {OR_TOPO_PATH_LOC, 0, 0, 0, NULL};
    if (d == e)
        return pair_new(&p, d, e);
    ot_scratch *x = scratch_take(t);
    if (!x)
        return NULL;
    int src = t->dev_vertex[d], v = t->dev_vertex[e];
    search(t, src, 0, &x->W, &x->heap, 1, v);
    double bw = widest_to(&x->W, v);
    if (bw > 0) { /* else unreachable: a zero path, as the full row leaves it */
        search(t, src, bw, &x->L, &x->heap, 0, v);
        int s = best_state(&x->L, v);
        int n = walk_back(t, x->L.L, s, x->hops);
        p = (or_topo_path){classify(t, src, x->hops, n), bw, x->L.L[s].lat, n, x->hops};
    }
    ot_pair *pair = pair_new(&p, d, e);
    scratch_give(t, x);
    return pair;
}

static ot_pair *compute_host(const or_topo *t, int d)
{
    ot_scratch *x = scratch_take(t);
    or_topo_path *paths = malloc(sizeof *paths * ((size_t)t->ndevs + 1));
    int *pool = NULL;
    ot_pair *pair = NULL;
    if (x && paths && full_row(t, x, d, 0, paths, &pool) == 0)
        pair = pair_new(&paths[t->ndevs], d, -1);
    free(pool);
    free(paths);
    if (x)
        scratch_give(t, x);
    return pair;
}

static size_t pair_bucket(const or_topo *t, int d, int e)
{
    uint64_t h = ((uint64_t)(uint32_t)d << 32 | (uint32_t)e) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (t->npair_buckets - 1);
}

/* The kept path of a pair, computed by the first caller: kept paths are
 * pushed on their bucket's list with a compare-and-swap, and a caller that
 * lost the race to another computing the same pair keeps the other's. NULL
 * when out of memory. */
static const ot_pair *get_pair(const or_topo *t, int d, int e)
{
    ot_pair *_Atomic *slot = &t->pairs[pair_bucket(t, d, e)];
    ot_pair *head = atomic_load_explicit(slot, memory_order_acquire);
    for (ot_pair *p = head; p; p = p->next)
        if (p->src == d && p->dst == e)
            return p;
    ot_pair *mine = compute_pair(t, d, e);
    if (!mine)
        return NULL;
    for (;;) {
        mine->next = head;
        if (atomic_compare_exchange_weak_explicit(slot, &head, mine, memory_order_acq_rel,
                                                  memory_order_acquire))
            return mine;
        for (ot_pair *p = head; p; p = p->next)
            if (p->src == d && p->dst == e) {
                free(mine);
                return p;
            }
    }
}

static const ot_pair *get_host(const or_topo *t, int d)
{
    ot_pair *p = atomic_load_explicit(&t->hosts[d], memory_order_acquire);
    if (p)
        return p;
    ot_pair *mine = compute_host(t, d);
    if (!mine)
        return NULL;
    if (atomic_compare_exchange_strong_explicit(&t->hosts[d], &p, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    free(mine);
    return p;
}

/* Every device must reach every other under the path rules (next_state).
 * A walk over search states from every device would cost devices x states;
 * this one follows the fabric's structure instead. A path leaves its
 * source's node at most once, over a NIC to the network, and enters one
 * other node through a NIC; inside that node the rules no longer depend on
 * the source (its node is another one), and a NIC entered from the network
 * only leads inward. So what a source reaches is: a walk inside its own
 * node; the network walk from the exits that one found (which depends only
 * on those exits and the source's node, so sources of one node with the same
 * exits share it); and, for each NIC entered, the devices of its node walked
 * to from it, once for all sources. The first source (in device order) that
 * misses a device is reported with the first device it misses, as the
 * whole-state walk did (checked against it on 6 000 random XML fabrics). */
typedef struct {
    int *off, *dev;        /* per vertex: the devices reached entering that NIC, CSR */
    unsigned char *seen;   /* per state */
    int *queue, *prev;     /* per state */
    int *exits, nexits;    /* the last source's exits from its node */
    int *last, nlast, last_node;
    unsigned char *covered; /* per device: reached through the network */
    int *netq;
    unsigned char *netseen;
} ot_reach;

/* A walk over states from `start` (state, with its prev link) following
 * next_state for source src_vertex, staying within `node`; states outside it
 * are appended to exits when given (else dropped). Returns the count of
 * states visited (in r->queue); seen must be clear and is left set for the
 * caller to clear. */
static int walk_node(const or_topo *t, ot_reach *r, int src_vertex, int start, int start_prev,
                     int node, int collect_exits)
{
    int head = 0, tail = 0;
    r->seen[start] = 1;
    r->prev[start] = start_prev;
    r->queue[tail++] = start;
    while (head < tail) {
        int st = r->queue[head++], v = st / 2;
        for (int k = t->adj_off[v]; k < t->adj_off[v + 1]; k++) {
            int l = t->adj[k];
            int ns = next_state(t, src_vertex, st, r->prev[st], l);
            if (ns < 0)
                continue;
            if (t->verts[ns / 2].node != node) {
                if (collect_exits)
                    r->exits[r->nexits++] = ns;
                continue;
            }
            if (r->seen[ns])
                continue;
            r->seen[ns] = 1;
            r->prev[ns] = l;
            r->queue[tail++] = ns;
        }
    }
    return tail;
}

static void reach_free(ot_reach *r)
{
    free(r->off);
    free(r->dev);
    free(r->seen);
    free(r->queue);
    free(r->prev);
    free(r->exits);
    free(r->last);
    free(r->covered);
    free(r->netq);
    free(r->netseen);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static or_topo_status check_reachable(or_topo *t, or_topo_error *err)
{
    size_t nstates = 2 * (size_t)t->nverts;
    ot_reach r = {0};
    r.off = calloc((size_t)t->nverts + 1, sizeof *r.off);
    r.seen = calloc(nstates, 1);
    r.netseen = calloc(nstates, 1);
    r.queue = malloc(sizeof *r.queue * nstates);
    r.netq = malloc(sizeof *r.netq * nstates);
    r.prev = malloc(sizeof *r.prev * nstates);
    r.exits = malloc(sizeof *r.exits * (2 * (size_t)t->nlinks + 1));
    r.last = malloc(sizeof *r.last * (2 * (size_t)t->nlinks + 1));
    r.covered = calloc((size_t)t->ndevs, 1);
    size_t ndev = 0, capdev = 0;
    or_topo_status rc = OR_TOPO_OK;
    if (!r.off || !r.seen || !r.netseen || !r.queue || !r.netq || !r.prev || !r.exits ||
        !r.last || !r.covered)
        goto nomem;
    /* Each NIC entered from the network: the devices of its node it leads to. */
    for (int v = 0; v < t->nverts; v++) {
        r.off[v] = (int)ndev;
        if (t->nnodes < 2 || t->verts[v].kind != OR_TOPO_NIC)
            continue;
        int net = -1;
        for (int k = t->adj_off[v]; k < t->adj_off[v + 1] && net < 0; k++)
            if (t->links[t->adj[k]].info.kind == OR_TOPO_LINK_NET)
                net = t->adj[k];
        if (net < 0)
            continue;
        int m = t->verts[v].node;
        int other = t->dev_vertex[t->node_first[m == 0 ? 1 : 0]]; /* any source outside m */
        int n = walk_node(t, &r, other, 2 * v, net, m, 0);
        for (int i = 0; i < n; i++) {
            int w = r.queue[i] / 2;
            r.seen[r.queue[i]] = 0;
            if (t->verts[w].kind != OR_TOPO_DEVICE)
                continue;
            if (ndev == capdev) {
                size_t cap = capdev ? 2 * capdev : 1024;
                int *d = realloc(r.dev, cap * sizeof *d);
                if (!d)
                    goto nomem;
                r.dev = d;
                capdev = cap;
            }
            r.dev[ndev++] = t->verts[w].device;
        }
    }
    r.off[t->nverts] = (int)ndev;
    r.last_node = -1;
    for (int d = 0; d < t->ndevs && rc == OR_TOPO_OK; d++) {
        int src = t->dev_vertex[d], node = t->verts[src].node;
        r.nexits = 0;
        int n = walk_node(t, &r, src, 2 * src, -1, node, 1);
        qsort(r.exits, (size_t)r.nexits, sizeof *r.exits, cmp_int);
        int u = 0;
        for (int i = 0; i < r.nexits; i++)
            if (u == 0 || r.exits[u - 1] != r.exits[i])
                r.exits[u++] = r.exits[i];
        r.nexits = u;
        if (node != r.last_node || r.nlast != u ||
            memcmp(r.last, r.exits, sizeof *r.exits * (size_t)u) != 0) {
            /* The network from these exits, and the nodes entered from it. */
            memset(r.covered, 0, (size_t)t->ndevs);
            int head = 0, tail = 0;
            for (int i = 0; i < u; i++) {
                r.netseen[r.exits[i]] = 1;
                r.prev[r.exits[i]] = -2; /* reached over a net link */
                r.netq[tail++] = r.exits[i];
            }
            while (head < tail) {
                int st = r.netq[head++], v = st / 2;
                if (t->verts[v].kind == OR_TOPO_NIC) { /* another node's, entered */
                    for (int i = r.off[v]; i < r.off[v + 1]; i++)
                        r.covered[r.dev[i]] = 1;
                    continue;
                }
                for (int k = t->adj_off[v]; k < t->adj_off[v + 1]; k++) {
                    int ns = next_state(t, src, st, r.prev[st], t->adj[k]);
                    if (ns < 0 || r.netseen[ns])
                        continue;
                    r.netseen[ns] = 1;
                    r.prev[ns] = t->adj[k];
                    r.netq[tail++] = ns;
                }
            }
            for (int i = 0; i < tail; i++)
                r.netseen[r.netq[i]] = 0;
            memcpy(r.last, r.exits, sizeof *r.exits * (size_t)u);
            r.nlast = u;
            r.last_node = node;
        }
        for (int e = 0; e < t->ndevs; e++) {
            int v = t->dev_vertex[e];
            int ok = t->verts[v].node == node ? r.seen[2 * v] || r.seen[2 * v + 1] : r.covered[e];
            if (!ok) {
                rc = ot_fail(err, OR_TOPO_ERR_STRUCTURE, t->source, t->verts[v].line, 0,
                             "no path from device '%s' to device '%s'", t->verts[src].id,
                             t->verts[v].id);
                break;
            }
        }
        for (int i = 0; i < n; i++)
            r.seen[r.queue[i]] = 0;
    }
    reach_free(&r);
    return rc;
nomem:
    reach_free(&r);
    return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
}

or_topo_status ot_finish(or_topo *t, or_topo_error *err)
{
    if (t->nnodes == 0)
        return ot_fail(err, OR_TOPO_ERR_STRUCTURE, t->source, 0, 0, "the topology has no node");
    for (int v = 0; v < t->nverts; v++) {
        int node = t->verts[v].node;
        int net = t->verts[v].kind == OR_TOPO_NET_SWITCH;
        if (net ? node != -1 : (node < 0 || node >= t->nnodes))
            return ot_fail(err, OR_TOPO_ERR_STRUCTURE, t->source, t->verts[v].line, 0,
                           "'%s' is not placed correctly: network switches are outside "
                           "nodes, everything else inside one",
                           t->verts[v].id);
    }
    or_topo_status rc = check_links(t, err);
    if (rc)
        return rc;

    /* Devices numbered node by node, in declaration order within a node. */
    t->node_first = calloc((size_t)t->nnodes, sizeof *t->node_first);
    t->node_ndev = calloc((size_t)t->nnodes, sizeof *t->node_ndev);
    t->dev_vertex = malloc(sizeof *t->dev_vertex * (size_t)(t->nverts ? t->nverts : 1));
    t->adj_off = calloc((size_t)t->nverts + 1, sizeof *t->adj_off);
    t->adj = malloc(sizeof *t->adj * (size_t)(2 * t->nlinks + 1));
    if (!t->node_first || !t->node_ndev || !t->dev_vertex || !t->adj_off || !t->adj)
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    t->ndevs = 0;
    for (int n = 0; n < t->nnodes; n++) {
        t->node_first[n] = t->ndevs;
        for (int v = 0; v < t->nverts; v++) {
            if (t->verts[v].kind != OR_TOPO_DEVICE || t->verts[v].node != n)
                continue;
            t->verts[v].device = t->ndevs;
            t->dev_vertex[t->ndevs++] = v;
        }
        t->node_ndev[n] = t->ndevs - t->node_first[n];
        if (t->node_ndev[n] == 0)
            return ot_fail(err, OR_TOPO_ERR_STRUCTURE, t->source, t->node_lines[n], 0,
                           "node '%s' has no device", t->node_names[n]);
    }

    for (int i = 0; i < t->nlinks; i++) {
        t->adj_off[t->links[i].info.a + 1]++;
        t->adj_off[t->links[i].info.b + 1]++;
    }
    for (int v = 0; v < t->nverts; v++)
        t->adj_off[v + 1] += t->adj_off[v];
    int *fill = malloc(sizeof *fill * (size_t)(t->nverts ? t->nverts : 1));
    if (!fill)
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    memcpy(fill, t->adj_off, sizeof *fill * (size_t)t->nverts);
    for (int i = 0; i < t->nlinks; i++) {
        t->adj[fill[t->links[i].info.a]++] = i;
        t->adj[fill[t->links[i].info.b]++] = i;
    }
    free(fill);
    or_topo_status rc2 = check_reachable(t, err);
    if (rc2 != OR_TOPO_OK)
        return rc2;
    if (ot_paths_init(t) != OR_TOPO_OK)
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    return OR_TOPO_OK;
}

/* ---- reading ------------------------------------------------------------ */

const char *or_topo_name(const or_topo *t) { return t->name; }
int or_topo_device_count(const or_topo *t) { return t->ndevs; }
int or_topo_node_count(const or_topo *t) { return t->nnodes; }
int or_topo_vertex_count(const or_topo *t) { return t->nverts; }
int or_topo_link_count(const or_topo *t) { return t->nlinks; }

const char *or_topo_node_name(const or_topo *t, int node)
{
    return node >= 0 && node < t->nnodes ? t->node_names[node] : NULL;
}

void or_topo_node_devices(const or_topo *t, int node, int *first, int *count)
{
    int ok = node >= 0 && node < t->nnodes;
    *first = ok ? t->node_first[node] : 0;
    *count = ok ? t->node_ndev[node] : 0;
}

int or_topo_device_node(const or_topo *t, int d)
{
    return d >= 0 && d < t->ndevs ? t->verts[t->dev_vertex[d]].node : -1;
}

int or_topo_device_vertex(const or_topo *t, int d)
{
    return d >= 0 && d < t->ndevs ? t->dev_vertex[d] : -1;
}

int or_topo_node_nics(const or_topo *t, int node)
{
    if (node < 0 || node >= t->nnodes)
        return 0;
    int n = 0;
    for (int v = 0; v < t->nverts; v++) {
        if (t->verts[v].kind != OR_TOPO_NIC || t->verts[v].node != node)
            continue;
        for (int k = t->adj_off[v]; k < t->adj_off[v + 1]; k++)
            if (t->links[t->adj[k]].info.kind == OR_TOPO_LINK_NET) {
                n++;
                break;
            }
    }
    return n;
}

or_topo_vertex_info or_topo_vertex(const or_topo *t, int v)
{
    or_topo_vertex_info info = {NULL, OR_TOPO_DEVICE, -1, -1};
    if (v >= 0 && v < t->nverts) {
        info.id = t->verts[v].id;
        info.kind = t->verts[v].kind;
        info.node = t->verts[v].node;
        info.device = t->verts[v].device;
    }
    return info;
}

or_topo_link_info or_topo_link(const or_topo *t, int l)
{
    or_topo_link_info none = {-1, -1, OR_TOPO_LINK_NVLINK, 0, 0};
    return l >= 0 && l < t->nlinks ? t->links[l].info : none;
}

const or_topo_path *or_topo_path_between(const or_topo *t, int src, int dst)
{
    if (src < 0 || dst < 0 || src >= t->ndevs || dst >= t->ndevs)
        return NULL;
    const ot_pair *p = get_pair(t, src, dst);
    return p ? &p->path : NULL;
}

const or_topo_path *or_topo_host_path(const or_topo *t, int d)
{
    if (d < 0 || d >= t->ndevs)
        return NULL;
    const ot_pair *p = get_host(t, d);
    return p && p->path.nhops ? &p->path : NULL;
}

int or_topo_equal(const or_topo *a, const or_topo *b)
{
    if (strcmp(a->name, b->name) || a->nnodes != b->nnodes || a->nverts != b->nverts ||
        a->nlinks != b->nlinks || a->ndevs != b->ndevs)
        return 0;
    for (int i = 0; i < a->nnodes; i++)
        if (strcmp(a->node_names[i], b->node_names[i]))
            return 0;
    /* Vertices and links are matched by id, so declaration order may differ
     * except for the devices, whose order is their numbering. */
    for (int d = 0; d < a->ndevs; d++)
        if (strcmp(a->verts[a->dev_vertex[d]].id, b->verts[b->dev_vertex[d]].id))
            return 0;
    for (int v = 0; v < a->nverts; v++) {
        int w = ot_find_vertex(b, a->verts[v].id);
        if (w < 0 || a->verts[v].kind != b->verts[w].kind || a->verts[v].node != b->verts[w].node)
            return 0;
    }
    for (int i = 0; i < a->nlinks; i++) {
        const or_topo_link_info *la = &a->links[i].info;
        int x = ot_find_vertex(b, a->verts[la->a].id), y = ot_find_vertex(b, a->verts[la->b].id);
        int found = 0;
        for (int k = b->adj_off[x]; k < b->adj_off[x + 1] && !found; k++) {
            const or_topo_link_info *lb = &b->links[b->adj[k]].info;
            if (!((lb->a == x && lb->b == y) || (lb->a == y && lb->b == x)))
                continue;
            found = lb->kind == la->kind && lb->bandwidth == la->bandwidth &&
                    lb->latency_ns == la->latency_ns;
            if (!found)
                return 0;
        }
        if (!found)
            return 0;
    }
    return 1;
}
