/*
 * topology/topo_internal.h - the builder the parsers share, and the record
 * behind the opaque or_topo. Not installed; the rest of the project uses
 * topo.h only.
 */
#ifndef OR_TOPO_INTERNAL_H
#define OR_TOPO_INTERNAL_H

#include "topo.h"

#include <stdarg.h>

/* Per-link latencies the model assumes where a source gives none (ns). */
#define OT_LAT_NVLINK 300.0
#define OT_LAT_PCIE 500.0
#define OT_LAT_SYS 1000.0
#define OT_LAT_NET_HALF 1500.0 /* NIC to network switch: 3 us NIC to NIC */

/* PCIe x16 per direction: GT/s x 16 lanes x 128/130 encoding / 8 bits. */
#define OT_PCIE_GEN4_X16 (16e9 * 16 * 128 / 130 / 8)
#define OT_PCIE_GEN5_X16 (32e9 * 16 * 128 / 130 / 8)

typedef struct ot_vertex {
    char *id;
    or_topo_kind kind;
    int node;   /* -1 for network switches */
    int device; /* assigned when the topology is finished */
    int line;   /* where it was declared, 0 if nowhere */
} ot_vertex;

typedef struct ot_link {
    or_topo_link_info info;
    int line;
} ot_link;

typedef struct ot_pair ot_pair;
typedef struct ot_scratch ot_scratch;

typedef struct ot_idmap {
    char **keys;
    int *values;
    size_t cap, count;
} ot_idmap;

struct or_topo {
    char *name;
    char *source; /* for messages raised after parsing */

    int nnodes, cap_nodes;
    char **node_names;
    int *node_lines;

    int nverts, cap_verts;
    ot_vertex *verts;
    int ndevs_added; /* device vertices so far (the limit's count) */
    ot_idmap ids;

    int nlinks, cap_links;
    ot_link *links;

    /* Filled by ot_finish. */
    int ndevs;
    int *dev_vertex;           /* device index -> vertex */
    int *node_first, *node_ndev;
    int *adj_off, *adj;        /* vertex -> incident link indices (CSR) */
    /* The paths asked for, each computed on first use and kept (topo.c):
     * device pairs in a hash of npair_buckets lists, host paths per device;
     * and one spare search scratch. */
    ot_pair *_Atomic *pairs;
    size_t npair_buckets;
    ot_pair *_Atomic *hosts;
    ot_scratch *_Atomic spare;
};

/* Set *err (if any) and return code. line/column 0 = unknown. */
or_topo_status ot_fail(or_topo_error *err, or_topo_status code, const char *source, int line,
                       int column, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void ot_clear_error(or_topo_error *err);
/* Read the whole file `path` (at most `limit` bytes) into *buf (malloc'd,
 * len bytes, not terminated). `what` names it in messages ("the placement
 * file"; NULL: nothing). OR_TOPO_OK, or ERR_IO, ERR_LIMIT, ERR_NOMEM with
 * *buf NULL. */
or_topo_status ot_read_file(const char *path, const char *what, size_t limit, char **buf,
                            size_t *len, or_topo_error *err);

or_topo *ot_new(const char *name, const char *source);
or_topo_status ot_set_name(or_topo *t, const char *name, or_topo_error *err);
/* Returns the node index through *node. */
or_topo_status ot_add_node(or_topo *t, const char *name, int line, int *node,
                           or_topo_error *err);
or_topo_status ot_add_vertex(or_topo *t, const char *id, or_topo_kind kind, int node, int line,
                             int *vertex, or_topo_error *err);
int ot_find_vertex(const or_topo *t, const char *id); /* -1 if absent */
or_topo_status ot_add_link(or_topo *t, int a, int b, or_topo_link_kind kind, double bandwidth,
                           double latency_ns, int line, or_topo_error *err);
/* Validate, number the devices node by node, compute every path. After this
 * the topology is read-only. On failure the topology is still freed by the
 * caller. */
or_topo_status ot_finish(or_topo *t, or_topo_error *err);

/* The path table's setup and teardown (topo.c). */
or_topo_status ot_paths_init(or_topo *t);
void ot_paths_free(or_topo *t);
/* Device d's paths by whole-fabric searches, the definition the per-pair
 * paths of or_topo_path_between follow (for tests): paths[0 .. ndevs) to
 * every device, paths[ndevs] to its host (nhops 0: none). *pool holds their
 * hops; the caller frees it. 0, or -1 when out of memory or d is out of
 * range. */
int ot_path_full_row(const or_topo *t, int d, or_topo_path *paths, int **pool);

/* Quantities with units (topology/units.c). The whole of text must be one
 * quantity, e.g. "300GB/s", "25Gb/s", "1.5us". Returns 0, or -1 with a
 * message in why (OT_WHY_SIZE bytes). */
#define OT_WHY_SIZE 320
int ot_parse_bandwidth(const char *text, double *bytes_per_s, char *why);
int ot_parse_latency(const char *text, double *ns, char *why);
/* A plain non-negative decimal number ("12", "0.5"), locale-independent. */
int ot_parse_number(const char *text, double *value);
/* The shortest text that ot_parse_* reads back to exactly v. */
void ot_format_bandwidth(double bytes_per_s, char *buf, size_t size);
void ot_format_latency(double ns, char *buf, size_t size);

/* Presets and synthetic strings (topology/synth.c). */
int ot_is_preset(const char *name);

#endif
