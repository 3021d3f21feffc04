/*
 * topology/placement.c - placement files: a user's own map of every rank's
 * devices onto topology devices, read and checked against the job, and
 * written from any placement (so packed and spread give a file to start from).
 *
 *   # 4 ranks x 2 devices on dgx-a100x2
 *   0: n0.gpu0 n0.gpu1
 *   1: n1.gpu0 n1.gpu1     # a device id ...
 *   2: 2 3                 # ... or its index,
 *   3: D10 D11             # with or without the D that ortopo prints
 *
 * The reader stops at the first problem and names its line and column:
 * everything is checked before any rank starts, so a job never runs half
 * placed. Pure functions, like the rest of the layer.
 */
#include "topo_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A placement file is a few lines per rank; anything near this is a mistake. */
#define MAX_PLACEMENT_BYTES (16u << 20)

typedef struct {
    const or_topo *t;
    const char *source;
    or_topo_error *err;
    int nranks, per_rank;
    int *dev;        /* the result, [nranks * per_rank] */
    int *rank_line;  /* line placing each rank, 0 = not yet */
    int *dev_rank;   /* rank holding each topology device, -1 = free */
    int *dev_line;
} pf_reader;

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Digits only, as a count: -1 when not digits; huge values stay huge, capped. */
static long digits_value(const char *s, size_t n)
{
    if (n == 0)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (v < 100000000L)
            v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* The topology device a token names: a device id first (ids are the names
 * ortopo prints), else an index, "5" or "D5". */
static or_topo_status resolve_device(pf_reader *p, const char *tok, size_t n, int line,
                                     int column, int *device)
{
    const or_topo *t = p->t;
    char id[OR_TOPO_MAX_ID + 1];
    if (n <= OR_TOPO_MAX_ID) {
        memcpy(id, tok, n);
        id[n] = '\0';
        int v = ot_find_vertex(t, id);
        if (v >= 0 && t->verts[v].kind == OR_TOPO_DEVICE) {
            *device = t->verts[v].device;
            return OR_TOPO_OK;
        }
        if (v >= 0)
            return ot_fail(p->err, OR_TOPO_ERR_UNKNOWN_REF, p->source, line, column,
                           "'%s' is a %s of topology '%s', not a device", id,
                           or_topo_kind_name(t->verts[v].kind), t->name);
    }
    long index = digits_value(tok, n);
    if (index < 0 && n > 1 && tok[0] == 'D')
        index = digits_value(tok + 1, n - 1);
    if (index >= t->ndevs)
        return ot_fail(p->err, OR_TOPO_ERR_VALUE, p->source, line, column,
                       "device index %.*s is out of range: topology '%s' has %d device%s (0 to "
                       "%d)",
                       (int)(n > 32 ? 32 : n), tok, t->name, t->ndevs,
                       t->ndevs == 1 ? "" : "s", t->ndevs - 1);
    if (index >= 0) {
        *device = (int)index;
        return OR_TOPO_OK;
    }
    return ot_fail(p->err, OR_TOPO_ERR_UNKNOWN_REF, p->source, line, column,
                   "unknown device '%.*s': neither a device id of topology '%s' (like %s) nor "
                   "a device index (0 to %d, or D0 to D%d)",
                   (int)(n > 64 ? 64 : n), tok, t->name, t->verts[t->dev_vertex[0]].id,
                   t->ndevs - 1, t->ndevs - 1);
}

static const char *dev_id(const or_topo *t, int device)
{
    return t->verts[t->dev_vertex[device]].id;
}

/* One line: "RANK: DEVICE DEVICE ...", comment already cut. Sets *placed
 * when the line places a rank (blank lines do not). */
static or_topo_status read_line(pf_reader *p, const char *s, size_t len, int line, int *placed)
{
    const or_topo *t = p->t;
    size_t i = 0;
    *placed = 0;
    while (i < len && is_blank(s[i]))
        i++;
    if (i == len)
        return OR_TOPO_OK;
    size_t start = i;
    while (i < len && s[i] >= '0' && s[i] <= '9')
        i++;
    size_t rank_end = i;
    while (i < len && is_blank(s[i]))
        i++;
    if (rank_end == start || i == len || s[i] != ':') {
        size_t w = len;
        while (w > start && is_blank(s[w - 1]))
            w--;
        return ot_fail(p->err, OR_TOPO_ERR_SYNTAX, p->source, line, (int)start + 1,
                       "expected 'RANK: DEVICE...' (a rank number, a colon, then the rank's "
                       "devices), not '%.*s'",
                       (int)(w - start > 64 ? 64 : w - start), s + start);
    }
    i++; /* the colon */
    long rank = digits_value(s + start, rank_end - start);
    int rank_col = (int)start + 1;
    if (rank >= p->nranks)
        return ot_fail(p->err, OR_TOPO_ERR_FIT, p->source, line, rank_col,
                       "rank %.*s is not in the job: it has %d rank%s (0 to %d)",
                       (int)(rank_end - start > 32 ? 32 : rank_end - start), s + start,
                       p->nranks, p->nranks == 1 ? "" : "s", p->nranks - 1);
    if (p->rank_line[rank])
        return ot_fail(p->err, OR_TOPO_ERR_DUPLICATE, p->source, line, rank_col,
                       "rank %ld is placed twice: already on line %d", rank,
                       p->rank_line[rank]);
    int *mine = p->dev + rank * p->per_rank;
    int count = 0;
    for (;;) {
        while (i < len && is_blank(s[i]))
            i++;
        if (i == len)
            break;
        size_t tok = i;
        while (i < len && !is_blank(s[i]))
            i++;
        int col = (int)tok + 1;
        if (count == p->per_rank)
            return ot_fail(p->err, OR_TOPO_ERR_FIT, p->source, line, col,
                           "rank %ld has more than %d device%s: the job gives each rank %d "
                           "(OPENREG_DEVICES, orrun -d)",
                           rank, p->per_rank, p->per_rank == 1 ? "" : "s", p->per_rank);
        int d = -1;
        or_topo_status rc = resolve_device(p, s + tok, i - tok, line, col, &d);
        if (rc != OR_TOPO_OK)
            return rc;
        if (p->dev_rank[d] >= 0)
            return ot_fail(p->err, OR_TOPO_ERR_DUPLICATE, p->source, line, col,
                           "device %s (D%d) is used twice: it is already rank %d's (line %d)",
                           dev_id(t, d), d, p->dev_rank[d], p->dev_line[d]);
        if (count > 0 && t->verts[t->dev_vertex[d]].node != t->verts[t->dev_vertex[mine[0]]].node) {
            int a = t->verts[t->dev_vertex[mine[0]]].node, b = t->verts[t->dev_vertex[d]].node;
            return ot_fail(p->err, OR_TOPO_ERR_STRUCTURE, p->source, line, col,
                           "rank %ld's devices are on different nodes: %s on node '%s', %s on "
                           "node '%s'; a rank is one process, on one node",
                           rank, dev_id(t, mine[0]), t->node_names[a], dev_id(t, d),
                           t->node_names[b]);
        }
        mine[count++] = d;
        p->dev_rank[d] = (int)rank;
        p->dev_line[d] = line;
    }
    if (count < p->per_rank)
        return ot_fail(p->err, OR_TOPO_ERR_FIT, p->source, line, rank_col,
                       "rank %ld has %d device%s: the job gives each rank %d (OPENREG_DEVICES, "
                       "orrun -d)",
                       rank, count, count == 1 ? "" : "s", p->per_rank);
    p->rank_line[rank] = line;
    *placed = 1;
    return OR_TOPO_OK;
}

or_topo_status or_topo_place_text(const or_topo *t, const char *text, size_t len,
                                  const char *source, int nranks, int per_rank,
                                  int *rank_device, or_topo_error *err)
{
    ot_clear_error(err);
    if (!source)
        source = "placement";
    if (nranks < 1 || per_rank < 1)
        return ot_fail(err, OR_TOPO_ERR_VALUE, source, 0, 0,
                       "%d ranks x %d devices: both must be at least 1", nranks, per_rank);
    if ((long)nranks * per_rank > t->ndevs)
        return ot_fail(err, OR_TOPO_ERR_FIT, source, 0, 0,
                       "%d ranks x %d devices need %ld devices; topology '%s' has %d", nranks,
                       per_rank, (long)nranks * per_rank, t->name, t->ndevs);
    if (len > MAX_PLACEMENT_BYTES)
        return ot_fail(err, OR_TOPO_ERR_LIMIT, source, 0, 0, "file larger than %u MiB",
                       MAX_PLACEMENT_BYTES >> 20);
    pf_reader p = {t, source, err, nranks, per_rank, NULL, NULL, NULL, NULL};
    p.dev = malloc(sizeof *p.dev * (size_t)nranks * (size_t)per_rank);
    p.rank_line = calloc((size_t)nranks, sizeof *p.rank_line);
    p.dev_rank = malloc(sizeof *p.dev_rank * (size_t)t->ndevs);
    p.dev_line = calloc((size_t)t->ndevs, sizeof *p.dev_line);
    or_topo_status rc = OR_TOPO_OK;
    if (!p.dev || !p.rank_line || !p.dev_rank || !p.dev_line) {
        rc = ot_fail(err, OR_TOPO_ERR_NOMEM, source, 0, 0, "out of memory");
        goto out;
    }
    for (int d = 0; d < t->ndevs; d++)
        p.dev_rank[d] = -1;
    int line = 0, placed = 0;
    for (size_t pos = 0; pos < len && rc == OR_TOPO_OK;) {
        line++;
        size_t end = pos;
        while (end < len && text[end] != '\n')
            end++;
        /* A comment runs to the end of the line; a NUL is never text. */
        size_t cut = pos;
        while (cut < end && text[cut] != '#' && text[cut] != '\0')
            cut++;
        if (cut < end && text[cut] == '\0') {
            rc = ot_fail(err, OR_TOPO_ERR_SYNTAX, source, line, (int)(cut - pos) + 1,
                         "a NUL byte: a placement file is text");
            break;
        }
        int one = 0;
        rc = read_line(&p, text + pos, cut - pos, line, &one);
        placed += one;
        pos = end + 1;
    }
    if (rc != OR_TOPO_OK)
        goto out;
    if (placed == 0) {
        rc = ot_fail(err, OR_TOPO_ERR_SYNTAX, source, 0, 0,
                     "no ranks: the file holds no 'RANK: DEVICE...' line (the job has %d "
                     "rank%s)",
                     nranks, nranks == 1 ? "" : "s");
        goto out;
    }
    if (placed < nranks) {
        int missing = 0, first = -1;
        for (int r = 0; r < nranks; r++)
            if (!p.rank_line[r]) {
                if (first < 0)
                    first = r;
                missing++;
            }
        rc = ot_fail(err, OR_TOPO_ERR_FIT, source, 0, 0,
                     "rank %d is missing%s: the job has %d ranks (0 to %d) and the file "
                     "places %d",
                     first, missing > 1 ? " (and others)" : "", nranks, nranks - 1, placed);
        goto out;
    }
    memcpy(rank_device, p.dev, sizeof *p.dev * (size_t)nranks * (size_t)per_rank);
out:
    free(p.dev);
    free(p.rank_line);
    free(p.dev_rank);
    free(p.dev_line);
    return rc;
}

or_topo_status or_topo_place_file(const or_topo *t, const char *path, int nranks, int per_rank,
                                  int *rank_device, or_topo_error *err)
{
    ot_clear_error(err);
    char *buf;
    size_t len;
    or_topo_status rc = ot_read_file(path, "the placement file", MAX_PLACEMENT_BYTES, &buf, &len, err);
    if (rc != OR_TOPO_OK)
        return rc;
    rc = or_topo_place_text(t, buf, len, path, nranks, per_rank, rank_device, err);
    free(buf);
    return rc;
}

/* ---- writing ------------------------------------------------------------ */

typedef struct {
    char *data;
    size_t len, cap;
    int failed;
} pf_buf;

__attribute__((format(printf, 2, 3))) static void pf_printf(pf_buf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? b->cap - b->len : 0, fmt,
                          ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->data && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap <= b->len + (size_t)n)
            cap *= 2;
        char *bigger = realloc(b->data, cap);
        if (!bigger) {
            b->failed = 1;
            return;
        }
        b->data = bigger;
        b->cap = cap;
    }
}

or_topo_status or_topo_write_placement(const or_topo *t, int nranks, int per_rank,
                                       const int *rank_device, const char *comment, char **out,
                                       size_t *len, or_topo_error *err)
{
    ot_clear_error(err);
    if (nranks < 1 || per_rank < 1)
        return ot_fail(err, OR_TOPO_ERR_VALUE, t->source, 0, 0,
                       "%d ranks x %d devices: both must be at least 1", nranks, per_rank);
    for (long i = 0; i < (long)nranks * per_rank; i++)
        if (rank_device[i] < 0 || rank_device[i] >= t->ndevs)
            return ot_fail(err, OR_TOPO_ERR_VALUE, t->source, 0, 0,
                           "rank %ld's device %ld is %d: not a device of topology '%s'",
                           i / per_rank, i % per_rank, rank_device[i], t->name);
    pf_buf b = {0};
    if (comment)
        for (const char *c = comment; *c;) {
            size_t n = strcspn(c, "\n");
            pf_printf(&b, "# %.*s\n", (int)n, c);
            c += n + (c[n] == '\n');
        }
    pf_printf(&b, "# rank: its devices in order, as topology device ids (an index, 5 or D5, "
                  "works too)\n");
    for (int r = 0; r < nranks; r++) {
        pf_printf(&b, "%d:", r);
        for (int d = 0; d < per_rank; d++) {
            int dev = rank_device[r * per_rank + d];
            /* An id with a '#' would read as a comment: its index then. */
            if (strchr(dev_id(t, dev), '#'))
                pf_printf(&b, " D%d", dev);
            else
                pf_printf(&b, " %s", dev_id(t, dev));
        }
        pf_printf(&b, "\n");
    }
    if (b.failed || !b.data) {
        free(b.data);
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    }
    *out = b.data;
    *len = b.len;
    return OR_TOPO_OK;
}
