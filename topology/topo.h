/*
 * topology/topo.h - a cluster topology as data: nodes, devices, switches,
 * host CPUs, NICs and the links between them, with bandwidth and latency.
 *
 * Pure C11: no MPI, no threads, no global state (libxml2 reads the XML), so
 * every function here is unit-tested as a pure function. A topology is built
 * from a preset name, a one-line synthetic string or an XML file (this
 * project's format or NCCL's NCCL_TOPO_DUMP_FILE format), validated, and then
 * immutable. A device pair's path is computed the first time it is asked
 * for and kept; threads may read a topology concurrently.
 *
 * Units everywhere: bandwidth in bytes per second (per direction of a link),
 * latency in nanoseconds. Errors: a status code plus an or_topo_error naming
 * the source (file name or the variable a string came from), line, column.
 * See docs/topology.md for the formats.
 */
#ifndef OR_TOPO_H
#define OR_TOPO_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One list makes both the enum and its names, so they never drift. */
#define OR_TOPO_STATUS_LIST(X)                                                         \
    X(OR_TOPO_OK, "no error")                                                          \
    X(OR_TOPO_ERR_NOMEM, "out of memory")                                              \
    X(OR_TOPO_ERR_IO, "cannot read or write the file")                                 \
    X(OR_TOPO_ERR_SYNTAX, "malformed input")                                           \
    X(OR_TOPO_ERR_UNKNOWN_PRESET, "unknown preset")                                    \
    X(OR_TOPO_ERR_UNKNOWN_NAME, "unknown element, attribute or key")                   \
    X(OR_TOPO_ERR_UNKNOWN_REF, "reference to an unknown device or component")          \
    X(OR_TOPO_ERR_DUPLICATE, "duplicate name")                                         \
    X(OR_TOPO_ERR_VALUE, "invalid value")                                              \
    X(OR_TOPO_ERR_STRUCTURE, "invalid topology structure")                             \
    X(OR_TOPO_ERR_LIMIT, "topology too large")                                         \
    X(OR_TOPO_ERR_FIT, "the job does not fit the topology")

typedef enum {
#define OR_TOPO_ENUM_(code, text) code,
    OR_TOPO_STATUS_LIST(OR_TOPO_ENUM_)
#undef OR_TOPO_ENUM_
} or_topo_status;

/* Longest accepted id or name, and the most devices and links a topology
 * may hold: a cluster of 16 384 devices (2 048 eight-device boxes with
 * their switches and NICs); paths are computed per pair on demand, so the
 * limits bound building, not the paths. */
#define OR_TOPO_MAX_ID 128
#define OR_TOPO_MAX_DEVICES 16384
/* The most devices one node (a synthetic node, a fullN, ringN, switchN or
 * torus preset) may hold. */
#define OR_TOPO_MAX_NODE_DEVICES 1024
#define OR_TOPO_MAX_LINKS 262144

typedef struct or_topo_error {
    or_topo_status code;
    char source[256]; /* file name, or what the string came from; "" if none */
    int line;         /* 1-based; 0 when it does not apply */
    int column;       /* 1-based within the line; 0 when unknown */
    char message[512];
} or_topo_error;

const char *or_topo_status_name(or_topo_status status);   /* "OR_TOPO_ERR_VALUE" */
const char *or_topo_status_string(or_topo_status status); /* "invalid value" */
/* "source:line:column: message" (parts that do not apply are left out). */
int or_topo_error_format(const or_topo_error *err, char *buf, size_t size);

typedef enum {
    OR_TOPO_DEVICE,     /* an accelerator (a GPU in NCCL's files) */
    OR_TOPO_CPU,        /* a host CPU / NUMA node: the host side of copies */
    OR_TOPO_PCI_SWITCH, /* a PCIe switch */
    OR_TOPO_NVSWITCH,   /* a device-fabric switch (NVSwitch-like) */
    OR_TOPO_NIC,        /* a network adapter of a node */
    OR_TOPO_NET_SWITCH  /* a network switch, outside every node */
} or_topo_kind;

typedef enum {
    OR_TOPO_LINK_NVLINK, /* device fabric: device-device, device-nvswitch, device-cpu */
    OR_TOPO_LINK_PCIE,   /* PCIe: device, nic, pci switch, cpu */
    OR_TOPO_LINK_SYS,    /* CPU-CPU (socket interconnect) */
    OR_TOPO_LINK_NET     /* nic-network switch, network switch-network switch */
} or_topo_link_kind;

/* Path types, from best to worst, as NCCL names them. */
typedef enum {
    OR_TOPO_PATH_LOC, /* same device */
    OR_TOPO_PATH_NVL, /* device fabric only (direct or through NVSwitches) */
    OR_TOPO_PATH_NVB, /* device fabric through another device */
    OR_TOPO_PATH_PIX, /* PCIe through at most one PCIe switch */
    OR_TOPO_PATH_PXB, /* PCIe through several PCIe switches, no CPU */
    OR_TOPO_PATH_PHB, /* through one host CPU (PCIe host bridge) */
    OR_TOPO_PATH_SYS, /* between CPUs of one node */
    OR_TOPO_PATH_NET  /* between nodes, over the network */
} or_topo_path_type;

typedef struct or_topo_vertex_info {
    const char *id; /* unique in the topology */
    or_topo_kind kind;
    int node;   /* node index; -1 for network switches */
    int device; /* global device index for devices, else -1 */
} or_topo_vertex_info;

typedef struct or_topo_link_info {
    int a, b; /* vertex indices */
    or_topo_link_kind kind;
    double bandwidth;  /* bytes/s, each direction */
    double latency_ns;
} or_topo_link_info;

/* A path from one device to another (or to its host CPU). `hops` are
 * directed links in order from the source: 2*link + 0 when the link is used
 * from a to b, 2*link + 1 from b to a, so that users that share bandwidth
 * between transfers can treat each direction as its own resource. */
typedef struct or_topo_path {
    or_topo_path_type type;
    double bandwidth;  /* bottleneck, bytes/s; LOC: 0, meaning "no link" */
    double latency_ns; /* sum over the links */
    int nhops;
    const int *hops;
} or_topo_path;

typedef struct or_topo or_topo;

/* ---- building ----------------------------------------------------------- */

/* A preset name (see or_topo_preset_names), e.g. "dgx-a100x2". */
or_topo_status or_topo_from_preset(const char *name, or_topo **out, or_topo_error *err);
/* A one-line synthetic string, e.g. "nodes:2 devices:4 intra:300GB/s,1us
 * inter:25GB/s,5us"; a lone preset name is accepted too. `source` names
 * where the text came from, for messages (may be NULL). */
or_topo_status or_topo_from_string(const char *text, const char *source, or_topo **out,
                                   or_topo_error *err);
/* An XML file in this project's format (<topology>) or NCCL's (<system>). */
or_topo_status or_topo_from_xml_file(const char *path, or_topo **out, or_topo_error *err);
or_topo_status or_topo_from_xml_memory(const char *buf, size_t len, const char *source,
                                       or_topo **out, or_topo_error *err);
/* What OPENREG_TOPO and `orrun --topo` accept: a path ending in .xml (any
 * case) is a file; anything else a preset name or a synthetic string. */
or_topo_status or_topo_load(const char *spec, const char *source, or_topo **out,
                            or_topo_error *err);
void or_topo_free(or_topo *topo);

/* The preset names, NULL-terminated, and a one-line description of each. */
const char *const *or_topo_preset_names(void);
const char *or_topo_preset_help(const char *name);

/* ---- writing ------------------------------------------------------------ */

/* This project's XML format; or_topo_from_xml_memory of the result gives an
 * equal topology. *out is malloc'ed, NUL-terminated. */
or_topo_status or_topo_write_xml(const or_topo *topo, char **out, size_t *len,
                                 or_topo_error *err);
/* Same structure, ids, kinds, nodes and link values (bit for bit). */
int or_topo_equal(const or_topo *a, const or_topo *b);

/* ---- reading ------------------------------------------------------------ */

const char *or_topo_name(const or_topo *topo);
int or_topo_device_count(const or_topo *topo);
int or_topo_node_count(const or_topo *topo);
const char *or_topo_node_name(const or_topo *topo, int node);
/* Devices are numbered node by node: node n holds [first, first + count). */
void or_topo_node_devices(const or_topo *topo, int node, int *first, int *count);
int or_topo_device_node(const or_topo *topo, int device); /* -1 if out of range */
int or_topo_device_vertex(const or_topo *topo, int device);
/* The NICs of a node that reach the network (a net link): the rails NCCL
 * spreads a ring's or tree's channels over. 0 for a node out of range. */
int or_topo_node_nics(const or_topo *topo, int node);
int or_topo_vertex_count(const or_topo *topo);
or_topo_vertex_info or_topo_vertex(const or_topo *topo, int vertex);
int or_topo_link_count(const or_topo *topo);
or_topo_link_info or_topo_link(const or_topo *topo, int link);
/* The path from device src to device dst (src == dst: LOC, no hops); NULL if
 * either is out of range, or out of memory computing it. The path lives as
 * long as the topology. */
const or_topo_path *or_topo_path_between(const or_topo *topo, int src, int dst);
/* The path from a device to the nearest CPU of its node (host copies); NULL if
 * the node has no CPU or the device is out of range. */
const or_topo_path *or_topo_host_path(const or_topo *topo, int device);

const char *or_topo_kind_name(or_topo_kind kind);            /* "device" */
const char *or_topo_link_kind_name(or_topo_link_kind kind);  /* "nvlink" */
const char *or_topo_path_type_name(or_topo_path_type type);  /* "NVL" */

/* ---- placing a job ------------------------------------------------------ */

typedef enum {
    OR_TOPO_PLACE_PACKED, /* fill node 0, then node 1, ... */
    OR_TOPO_PLACE_SPREAD  /* rank r on node r mod nodes, round robin */
} or_topo_placement;

/* Whether nranks ranks of devices_per_rank devices each fit (a rank lives on
 * one node, so its devices must all be in one node). OR_TOPO_OK, or
 * OR_TOPO_ERR_FIT with a message saying what is missing. */
or_topo_status or_topo_check_fit(const or_topo *topo, int nranks, int devices_per_rank,
                                 or_topo_error *err);
/* Place the job: rank_device[r * devices_per_rank + d] receives the global
 * topology device of rank r's local device d. */
or_topo_status or_topo_place(const or_topo *topo, int nranks, int devices_per_rank,
                             or_topo_placement how, int *rank_device, or_topo_error *err);

/* A placement file: the user's own rank_device, one line per rank,
 * "RANK: DEVICE DEVICE ..." (a DEVICE is a device id of the topology, or an
 * index, 5 or D5), '#' comments, blank lines (docs/topology.md). Checked
 * whole against the job: every rank 0..nranks-1 exactly once, each with
 * devices_per_rank devices of one node, no device twice. Errors name the
 * line and column. rank_device is written only on success. `source` names
 * the text in messages (may be NULL). */
or_topo_status or_topo_place_text(const or_topo *topo, const char *text, size_t len,
                                  const char *source, int nranks, int devices_per_rank,
                                  int *rank_device, or_topo_error *err);
/* The same from a file (OR_TOPO_ERR_IO when it cannot be read). */
or_topo_status or_topo_place_file(const or_topo *topo, const char *path, int nranks,
                                  int devices_per_rank, int *rank_device, or_topo_error *err);
/* The placement file of rank_device (e.g. what or_topo_place gave), device
 * ids by name, after `comment` (may be NULL; each of its lines becomes a '#'
 * line). or_topo_place_text of the result gives rank_device back. *out is
 * malloc'ed, NUL-terminated. */
or_topo_status or_topo_write_placement(const or_topo *topo, int nranks, int devices_per_rank,
                                       const int *rank_device, const char *comment, char **out,
                                       size_t *len, or_topo_error *err);

/* ---- rings and trees ---------------------------------------------------- */

/* One ring through the given devices (entries of `devices` are topology
 * device indices, e.g. one per rank; order[i] receives indices into
 * `devices`). The ring visits each node's devices consecutively, so it
 * crosses the network once per node (never when there is one node), and
 * within a node it follows the widest links: it maximizes the bottleneck
 * bandwidth of the node's segment, then minimizes its latency. */
or_topo_status or_topo_ring(const or_topo *topo, const int *devices, int n, int *order,
                            or_topo_error *err);

#define OR_TOPO_TREE_MAX_CHILDREN 3
typedef struct or_topo_tree_vertex {
    int parent; /* index into `devices`; -1 for the root */
    int nchildren;
    int children[OR_TOPO_TREE_MAX_CHILDREN];
} or_topo_tree_vertex;

/* Two trees (NCCL's double binary tree idea): within a node the devices form
 * a chain in ring order; across nodes the chain heads form a binary tree,
 * and the second tree is the first mirrored (even node count) or shifted by
 * one (odd), so no node is an inner vertex of both. trees[t * n + i] is
 * device i's place in tree t (t = 0, 1). With one node both are the chain. */
or_topo_status or_topo_trees(const or_topo *topo, const int *devices, int n,
                             or_topo_tree_vertex *trees, or_topo_error *err);
/* The same two trees over entries 0..n-1 already grouped by node and ordered:
 * group g is order[gstart[g] .. gstart[g+1]) (its chain in that order), the
 * groups in the order of the node tree. or_topo_trees is this over its ring;
 * a caller that knows its nodes without a topology uses it directly. */
void or_topo_trees_of_groups(const int *order, const int *gstart, int ngroups, int n,
                             or_topo_tree_vertex *trees);

#ifdef __cplusplus
}
#endif

#endif
