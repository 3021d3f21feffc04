/*
 * topology/synth.c - presets and one-line synthetic topology strings.
 *
 *   nodes:2 devices:4 shape:switch intra:300GB/s,1us inter:25GB/s,5us
 *   box:dgx-a100 nodes:4 inter:100Gb/s
 *
 * Link speeds of the DGX boxes come from NVIDIA's public specifications;
 * docs/topology.md cites them.
 */
#define OT_STR_(x) #x
#define OT_STR(x) OT_STR_(x)
#include "topo_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    double bw, lat;
    int given;
} ot_linkspec;

typedef enum { SHAPE_SWITCH, SHAPE_FULL, SHAPE_RING, SHAPE_TORUS } ot_shape;
typedef enum { BOX_NONE, BOX_DGX_A100, BOX_DGX_H100, BOX_NVL72 } ot_box;
/* How the nodes' NICs meet: one switch; leaves of `leaf` nodes under a
 * spine; or rail-optimized, NIC k of every node on leaf k (DGX SuperPOD),
 * the leaves under a spine. The spine is one vertex, as NCCL folds a
 * fabric's switches; its links to a leaf carry the leaf's NICs' bandwidth
 * divided by the oversubscription. */
typedef enum { FABRIC_SWITCH, FABRIC_LEAF_SPINE, FABRIC_RAILS } ot_fabric;

typedef struct {
    int nodes, devices;
    ot_shape shape;
    int dim_a, dim_b;
    ot_box box;
    int nics; /* a box's NICs (1..8); 0: its 8 */
    ot_fabric fabric;
    int leaf;       /* nodes per leaf (leaf-spine) */
    double oversub; /* leaf downlinks : uplink, >= 1 */
    ot_linkspec intra, inter, host;
} ot_synth;

static const char *const box_names[] = {NULL, "dgx-a100", "dgx-h100", "nvl72"};

/* Devices of each kind of box. */
static int box_devices(ot_box b) { return b == BOX_NVL72 ? 72 : 8; }

/* ---- builders ----------------------------------------------------------- */

#define TRY(expr)                                                                              \
    do {                                                                                       \
        or_topo_status rc_ = (expr);                                                           \
        if (rc_ != OR_TOPO_OK)                                                                 \
            return rc_;                                                                        \
    } while (0)

static or_topo_status add_v(or_topo *t, or_topo_kind kind, int node, int *v, or_topo_error *err,
                            const char *fmt, int a, int b)
{
    char id[OR_TOPO_MAX_ID + 1];
    snprintf(id, sizeof id, fmt, a, b);
    return ot_add_vertex(t, id, kind, node, 0, v, err);
}

/* Devices of one node joined by the requested shape; a CPU; each device on
 * the CPU's PCIe. Vertex numbers of the devices go to dev[]. */
static or_topo_status build_generic_node(or_topo *t, const ot_synth *s, int n, int *dev,
                                         int *cpu, or_topo_error *err)
{
    TRY(add_v(t, OR_TOPO_CPU, n, cpu, err, "n%d.cpu", n, 0));
    for (int i = 0; i < s->devices; i++)
        TRY(add_v(t, OR_TOPO_DEVICE, n, &dev[i], err, "n%d.dev%d", n, i));
    int D = s->devices;
    switch (s->shape) {
    case SHAPE_SWITCH: {
        if (D < 2)
            break;
        int sw;
        TRY(add_v(t, OR_TOPO_NVSWITCH, n, &sw, err, "n%d.nvs", n, 0));
        for (int i = 0; i < D; i++)
            TRY(ot_add_link(t, dev[i], sw, OR_TOPO_LINK_NVLINK, s->intra.bw, s->intra.lat / 2, 0,
                            err));
        break;
    }
    case SHAPE_FULL:
        for (int i = 0; i < D; i++)
            for (int j = i + 1; j < D; j++)
                TRY(ot_add_link(t, dev[i], dev[j], OR_TOPO_LINK_NVLINK, s->intra.bw,
                                s->intra.lat, 0, err));
        break;
    case SHAPE_RING:
        /* A ring of two is one link; of one, none. */
        for (int i = 0; i < D && D > 1; i++) {
            if (D == 2 && i == 1)
                break;
            TRY(ot_add_link(t, dev[i], dev[(i + 1) % D], OR_TOPO_LINK_NVLINK, s->intra.bw,
                            s->intra.lat, 0, err));
        }
        break;
    case SHAPE_TORUS:
        for (int r = 0; r < s->dim_a; r++)
            for (int c = 0; c < s->dim_b; c++) {
                int me = r * s->dim_b + c;
                int right = r * s->dim_b + (c + 1) % s->dim_b;
                int down = ((r + 1) % s->dim_a) * s->dim_b + c;
                /* Dimensions of 2 would link the same pair twice, of 1 to itself. */
                if (s->dim_b > 2 || (s->dim_b == 2 && c == 0))
                    TRY(ot_add_link(t, dev[me], dev[right], OR_TOPO_LINK_NVLINK, s->intra.bw,
                                    s->intra.lat, 0, err));
                if (s->dim_a > 2 || (s->dim_a == 2 && r == 0))
                    TRY(ot_add_link(t, dev[me], dev[down], OR_TOPO_LINK_NVLINK, s->intra.bw,
                                    s->intra.lat, 0, err));
            }
        break;
    }
    for (int i = 0; i < D; i++)
        TRY(ot_add_link(t, dev[i], *cpu, OR_TOPO_LINK_PCIE, s->host.bw, s->host.lat, 0, err));
    return OR_TOPO_OK;
}

/* A DGX-like box: two CPUs, four PCIe switches, each with two devices and two
 * NICs, and every device on one NVSwitch fabric (NCCL too folds the fabric's
 * switches into one vertex). The NICs are returned for the network. With
 * nics:N fewer NICs (HGX builds with 4), NIC k sits on PCIe switch 4k/N. */
static or_topo_status build_box_node(or_topo *t, const ot_synth *s, int n, int *nics,
                                     or_topo_error *err)
{
    int h100 = s->box == BOX_DGX_H100;
    /* Per device per direction: 12 NVLink3 links (A100) or 18 NVLink4 links
     * (H100) of 25 GB/s each, i.e. half of 600 or 900 GB/s. */
    double nvl = (h100 ? 18 : 12) * 25e9;
    double pcie = h100 ? OT_PCIE_GEN5_X16 : OT_PCIE_GEN4_X16;
    /* CPU-CPU bandwidth a device-to-device copy gets through the sockets, as
     * NCCL models it (AMD 16 GB/s, Intel Skylake and later 10 GB/s). */
    double sys = h100 ? 10e9 : 16e9;
    int cpu[2], sw[4], nvs;
    for (int c = 0; c < 2; c++)
        TRY(add_v(t, OR_TOPO_CPU, n, &cpu[c], err, "n%d.cpu%d", n, c));
    TRY(ot_add_link(t, cpu[0], cpu[1], OR_TOPO_LINK_SYS, sys, OT_LAT_SYS, 0, err));
    TRY(add_v(t, OR_TOPO_NVSWITCH, n, &nvs, err, "n%d.nvs", n, 0));
    for (int k = 0; k < 4; k++) {
        TRY(add_v(t, OR_TOPO_PCI_SWITCH, n, &sw[k], err, "n%d.pcisw%d", n, k));
        TRY(ot_add_link(t, sw[k], cpu[k / 2], OR_TOPO_LINK_PCIE, pcie, OT_LAT_PCIE, 0, err));
    }
    for (int g = 0; g < 8; g++) {
        int dev;
        TRY(add_v(t, OR_TOPO_DEVICE, n, &dev, err, "n%d.gpu%d", n, g));
        TRY(ot_add_link(t, dev, nvs, OR_TOPO_LINK_NVLINK, nvl, OT_LAT_NVLINK, 0, err));
        TRY(ot_add_link(t, dev, sw[g / 2], OR_TOPO_LINK_PCIE, pcie, OT_LAT_PCIE, 0, err));
    }
    int nnic = s->nics ? s->nics : 8;
    for (int k = 0; k < nnic; k++) {
        TRY(add_v(t, OR_TOPO_NIC, n, &nics[k], err, "n%d.nic%d", n, k));
        TRY(ot_add_link(t, nics[k], sw[4 * k / nnic], OR_TOPO_LINK_PCIE, pcie, OT_LAT_PCIE, 0, err));
    }
    return OR_TOPO_OK;
}

/* The network switches of a fabric, made before the nodes so that the
 * plain switch keeps its vertex first: the switch (or spine) goes to *net,
 * leaf j to leaves[j]; the leaves' links to the spine. */
static or_topo_status build_fabric(or_topo *t, const ot_synth *s, int nnic, double bw, double half,
                                   int *net, int *leaves, or_topo_error *err)
{
    if (s->fabric == FABRIC_SWITCH)
        return ot_add_vertex(t, "net", OR_TOPO_NET_SWITCH, -1, 0, net, err);
    TRY(ot_add_vertex(t, "spine", OR_TOPO_NET_SWITCH, -1, 0, net, err));
    int nleaves = s->fabric == FABRIC_RAILS ? nnic : (s->nodes + s->leaf - 1) / s->leaf;
    for (int j = 0; j < nleaves; j++) {
        TRY(add_v(t, OR_TOPO_NET_SWITCH, -1, &leaves[j], err, "leaf%d", j, 0));
        /* What the leaf's NICs can send, over the oversubscription. */
        int below = s->fabric == FABRIC_RAILS ? s->nodes
                                              : (j + 1 < nleaves ? s->leaf : s->nodes - j * s->leaf) * nnic;
        double up = below * bw / (s->oversub > 0 ? s->oversub : 1);
        TRY(ot_add_link(t, leaves[j], *net, OR_TOPO_LINK_NET, up, half / 2, 0, err));
    }
    return OR_TOPO_OK;
}

/* The switch NIC k of node n joins. */
static int fabric_switch_of(const ot_synth *s, int net, const int *leaves, int n, int k)
{
    switch (s->fabric) {
    case FABRIC_LEAF_SPINE: return leaves[n / s->leaf];
    case FABRIC_RAILS: return leaves[k];
    default: return net;
    }
}

/* An NVL72-class rack: 72 devices in one NVLink switch domain (NVLink 5,
 * 18 links x 50 GB/s = 900 GB/s per direction), 18 trays of two Grace CPUs
 * each with two devices on NVLink-C2C (450 GB/s per direction) and, per
 * device, a 400 Gb/s NIC on a PCIe Gen5 switch it shares with its CPU. */
static or_topo_status build_nvl72_node(or_topo *t, int n, int *nics, or_topo_error *err)
{
    int nvs, cpu[36];
    TRY(add_v(t, OR_TOPO_NVSWITCH, n, &nvs, err, "n%d.nvs", n, 0));
    for (int c = 0; c < 36; c++) {
        TRY(add_v(t, OR_TOPO_CPU, n, &cpu[c], err, "n%d.cpu%d", n, c));
        if (c % 2)
            TRY(ot_add_link(t, cpu[c - 1], cpu[c], OR_TOPO_LINK_SYS, 10e9, OT_LAT_SYS, 0, err));
    }
    for (int g = 0; g < 72; g++) {
        int dev, sw;
        TRY(add_v(t, OR_TOPO_DEVICE, n, &dev, err, "n%d.gpu%d", n, g));
        TRY(ot_add_link(t, dev, nvs, OR_TOPO_LINK_NVLINK, 18 * 50e9, OT_LAT_NVLINK, 0, err));
        TRY(ot_add_link(t, dev, cpu[g / 2], OR_TOPO_LINK_NVLINK, 450e9, OT_LAT_NVLINK, 0, err));
        TRY(add_v(t, OR_TOPO_PCI_SWITCH, n, &sw, err, "n%d.pcisw%d", n, g));
        TRY(ot_add_link(t, sw, cpu[g / 2], OR_TOPO_LINK_PCIE, OT_PCIE_GEN5_X16, OT_LAT_PCIE, 0, err));
        TRY(add_v(t, OR_TOPO_NIC, n, &nics[g], err, "n%d.nic%d", n, g));
        TRY(ot_add_link(t, nics[g], sw, OR_TOPO_LINK_PCIE, OT_PCIE_GEN5_X16, OT_LAT_PCIE, 0, err));
    }
    return OR_TOPO_OK;
}

static or_topo_status build(or_topo *t, const ot_synth *s, or_topo_error *err)
{
    int *dev = malloc(sizeof *dev * (size_t)(s->devices > 0 ? s->devices : 1));
    int nleaves = s->fabric == FABRIC_LEAF_SPINE && s->leaf > 0 ? (s->nodes + s->leaf - 1) / s->leaf : 72;
    int *leaves = malloc(sizeof *leaves * (size_t)nleaves);
    if (!dev || !leaves) {
        free(dev);
        free(leaves);
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    }
    or_topo_status rc = OR_TOPO_OK;
    int net = -1;
    int nnic = s->box == BOX_NONE ? 1 : s->box == BOX_NVL72 ? 72 : s->nics ? s->nics : 8;
    double bw = s->box == BOX_NONE || s->inter.given ? s->inter.bw : s->box == BOX_DGX_A100 ? 25e9 : 50e9;
    double half = s->box == BOX_NONE || s->inter.given ? s->inter.lat / 2 : OT_LAT_NET_HALF;
    if (s->nodes > 1)
        rc = build_fabric(t, s, nnic, bw, half, &net, leaves, err);
    for (int n = 0; n < s->nodes && rc == OR_TOPO_OK; n++) {
        char name[32];
        int node, cpu, nics[72];
        snprintf(name, sizeof name, "node%d", n);
        if ((rc = ot_add_node(t, name, 0, &node, err)))
            break;
        if (s->box != BOX_NONE) {
            rc = s->box == BOX_NVL72 ? build_nvl72_node(t, n, nics, err) : build_box_node(t, s, n, nics, err);
            if (rc || net < 0)
                continue;
            for (int k = 0; k < nnic && rc == OR_TOPO_OK; k++)
                rc = ot_add_link(t, nics[k], fabric_switch_of(s, net, leaves, n, k), OR_TOPO_LINK_NET, bw,
                                 half, 0, err);
            continue;
        }
        if ((rc = build_generic_node(t, s, n, dev, &cpu, err)) || net < 0)
            continue;
        /* One NIC per node on the host; the inter latency is NIC to NIC. */
        int nic;
        if ((rc = add_v(t, OR_TOPO_NIC, n, &nic, err, "n%d.nic", n, 0)))
            break;
        if ((rc = ot_add_link(t, nic, cpu, OR_TOPO_LINK_PCIE, s->inter.bw, 0, 0, err)))
            break;
        rc = ot_add_link(t, nic, fabric_switch_of(s, net, leaves, n, 0), OR_TOPO_LINK_NET, s->inter.bw,
                         s->inter.lat / 2, 0, err);
    }
    free(dev);
    free(leaves);
    return rc;
}

/* ---- the string --------------------------------------------------------- */

typedef struct {
    const char *text, *source;
    or_topo_error *err;
} ot_cursor;

static or_topo_status fail_at(const ot_cursor *c, const char *at, or_topo_status code,
                              const char *fmt, const char *a, const char *b)
{
    char msg[400];
    snprintf(msg, sizeof msg, fmt, a, b);
    return ot_fail(c->err, code, c->source, 1, (int)(at - c->text) + 1, "%s", msg);
}

/* A whole positive integer in [1, max]. */
static int parse_count(const char *v, int max, int *out)
{
    if (!isdigit((unsigned char)*v))
        return -1;
    long x = 0;
    for (; *v; v++) {
        if (!isdigit((unsigned char)*v))
            return -1;
        x = x * 10 + (*v - '0');
        if (x > max)
            return -1;
    }
    if (x < 1)
        return -1;
    *out = (int)x;
    return 0;
}

static or_topo_status parse_linkspec(const ot_cursor *c, const char *key, const char *value,
                                     const char *at, ot_linkspec *ls)
{
    char buf[128], why[OT_WHY_SIZE];
    snprintf(buf, sizeof buf, "%s", value);
    char *comma = strchr(buf, ',');
    if (comma)
        *comma = '\0';
    if (ot_parse_bandwidth(buf, &ls->bw, why))
        return fail_at(c, at, OR_TOPO_ERR_VALUE, "%s: %s", key, why);
    if (comma && ot_parse_latency(comma + 1, &ls->lat, why))
        return fail_at(c, at + (comma + 1 - buf), OR_TOPO_ERR_VALUE, "%s: %s", key, why);
    ls->given = 1;
    return OR_TOPO_OK;
}

static const char *const keys[] = {"nodes", "devices", "shape", "dims", "intra", "inter", "host",
                                   "box",   "nics",    "fabric", "leaf", "oversub", NULL};
#define KEY_LIST "nodes, devices, shape, dims, intra, inter, host, box, nics, fabric, leaf, oversub"

static or_topo_status parse_synth(const ot_cursor *c, ot_synth *s)
{
    const char *seen_at[12] = {0};
    const char *p = c->text;
    int ntokens = 0;
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            break;
        const char *tok = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        size_t len = (size_t)(p - tok);
        char token[160];
        if (len >= sizeof token)
            return fail_at(c, tok, OR_TOPO_ERR_SYNTAX, "token too long: '%.40s...'", tok, NULL);
        memcpy(token, tok, len);
        token[len] = '\0';
        ntokens++;
        char *colon = strchr(token, ':');
        if (!colon) {
            if (ot_is_preset(token))
                return fail_at(c, tok, OR_TOPO_ERR_SYNTAX,
                               "preset '%s' cannot be combined with keys; spell it with keys "
                               "(see docs/topology.md)",
                               token, NULL);
            return fail_at(c, tok, OR_TOPO_ERR_SYNTAX,
                           "expected key:value, got '%s' (keys: " KEY_LIST ")", token, NULL);
        }
        *colon = '\0';
        const char *value = colon + 1;
        const char *vat = tok + (value - token);
        int k = 0;
        while (keys[k] && strcmp(keys[k], token) != 0)
            k++;
        if (!keys[k])
            return fail_at(c, tok, OR_TOPO_ERR_UNKNOWN_NAME,
                           "unknown key '%s' (keys: " KEY_LIST ")", token, NULL);
        if (seen_at[k])
            return fail_at(c, tok, OR_TOPO_ERR_DUPLICATE, "key '%s' is given twice", token,
                           NULL);
        seen_at[k] = tok;
        if (!*value)
            return fail_at(c, vat, OR_TOPO_ERR_VALUE, "key '%s' has no value", token, NULL);
        switch (k) {
        case 0:
            if (parse_count(value, OR_TOPO_MAX_DEVICES, &s->nodes))
                return fail_at(c, vat, OR_TOPO_ERR_VALUE,
                               "nodes:%s is not a whole number from 1 to " OT_STR(OR_TOPO_MAX_DEVICES), value, NULL);
            break;
        case 1:
            if (parse_count(value, OR_TOPO_MAX_NODE_DEVICES, &s->devices))
                return fail_at(c, vat, OR_TOPO_ERR_VALUE,
                               "devices:%s is not a whole number from 1 to " OT_STR(OR_TOPO_MAX_NODE_DEVICES), value, NULL);
            break;
        case 2:
            if (!strcmp(value, "switch"))
                s->shape = SHAPE_SWITCH;
            else if (!strcmp(value, "full"))
                s->shape = SHAPE_FULL;
            else if (!strcmp(value, "ring"))
                s->shape = SHAPE_RING;
            else if (!strcmp(value, "torus"))
                s->shape = SHAPE_TORUS;
            else
                return fail_at(c, vat, OR_TOPO_ERR_VALUE,
                               "unknown shape '%s' (switch, full, ring or torus)", value, NULL);
            break;
        case 3: {
            char a[32] = "", *x;
            snprintf(a, sizeof a, "%s", value);
            x = strchr(a, 'x');
            if (!x)
                return fail_at(c, vat, OR_TOPO_ERR_VALUE,
                               "dims:%s is not ROWSxCOLUMNS, like 4x4", value, NULL);
            *x = '\0';
            if (parse_count(a, OR_TOPO_MAX_NODE_DEVICES, &s->dim_a) ||
                parse_count(x + 1, OR_TOPO_MAX_NODE_DEVICES, &s->dim_b))
                return fail_at(c, vat, OR_TOPO_ERR_VALUE,
                               "dims:%s is not ROWSxCOLUMNS, like 4x4", value, NULL);
            if ((long)s->dim_a * s->dim_b > OR_TOPO_MAX_NODE_DEVICES)
                return fail_at(c, vat, OR_TOPO_ERR_LIMIT, "dims:%s holds more than " OT_STR(OR_TOPO_MAX_NODE_DEVICES) " devices",
                               value, NULL);
            break;
        }
        case 4: TRY(parse_linkspec(c, "intra", value, vat, &s->intra)); break;
        case 5: TRY(parse_linkspec(c, "inter", value, vat, &s->inter)); break;
        case 6: TRY(parse_linkspec(c, "host", value, vat, &s->host)); break;
        case 7:
            if (!strcmp(value, "dgx-a100"))
                s->box = BOX_DGX_A100;
            else if (!strcmp(value, "dgx-h100"))
                s->box = BOX_DGX_H100;
            else if (!strcmp(value, "nvl72"))
                s->box = BOX_NVL72;
            else
                return fail_at(c, vat, OR_TOPO_ERR_UNKNOWN_PRESET,
                               "unknown box '%s' (dgx-a100, dgx-h100 or nvl72)", value, NULL);
            break;
        case 8:
            if (parse_count(value, 8, &s->nics))
                return fail_at(c, vat, OR_TOPO_ERR_VALUE,
                               "nics:%s is not a whole number from 1 to 8 (NICs per box)", value,
                               NULL);
            break;
        case 9:
            if (!strcmp(value, "switch"))
                s->fabric = FABRIC_SWITCH;
            else if (!strcmp(value, "leaf-spine"))
                s->fabric = FABRIC_LEAF_SPINE;
            else if (!strcmp(value, "rails"))
                s->fabric = FABRIC_RAILS;
            else
                return fail_at(c, vat, OR_TOPO_ERR_VALUE,
                               "unknown fabric '%s' (switch, leaf-spine or rails)", value, NULL);
            break;
        case 10:
            if (parse_count(value, OR_TOPO_MAX_DEVICES, &s->leaf))
                return fail_at(c, vat, OR_TOPO_ERR_VALUE,
                               "leaf:%s is not a whole number from 1 to " OT_STR(OR_TOPO_MAX_DEVICES) " (nodes per leaf switch)",
                               value, NULL);
            break;
        case 11:
            if (ot_parse_number(value, &s->oversub) || !(s->oversub >= 1 && s->oversub <= 1000))
                return fail_at(c, vat, OR_TOPO_ERR_VALUE,
                               "oversub:%s is not a ratio from 1 to 1000 (a leaf's downlink to uplink "
                               "bandwidth, like 2 or 1.5)",
                               value, NULL);
            break;
        }
    }
    if (ntokens == 0)
        return ot_fail(c->err, OR_TOPO_ERR_SYNTAX, c->source, 1, 1, "empty topology string");
    if (seen_at[10] && s->fabric != FABRIC_LEAF_SPINE)
        return fail_at(c, seen_at[10], OR_TOPO_ERR_SYNTAX, "leaf applies to fabric:leaf-spine only",
                       NULL, NULL);
    if (seen_at[11] && s->fabric == FABRIC_SWITCH)
        return fail_at(c, seen_at[11], OR_TOPO_ERR_SYNTAX,
                       "oversub applies to fabric:leaf-spine or fabric:rails only", NULL, NULL);
    if (s->fabric != FABRIC_SWITCH && s->nodes < 2)
        return fail_at(c, seen_at[9], OR_TOPO_ERR_SYNTAX,
                       "fabric:%s needs nodes:2 or more (one node has no network)",
                       s->fabric == FABRIC_RAILS ? "rails" : "leaf-spine", NULL);
    if (s->fabric == FABRIC_LEAF_SPINE && !s->leaf)
        s->leaf = 8;

    if (s->box != BOX_NONE) {
        static const int box_excludes[] = {1, 2, 3, 4, 6};
        for (size_t i = 0; i < sizeof box_excludes / sizeof box_excludes[0]; i++)
            if (seen_at[box_excludes[i]])
                return fail_at(c, seen_at[box_excludes[i]], OR_TOPO_ERR_SYNTAX,
                               "'%s' cannot be combined with box: (a box fixes its devices "
                               "and links; only nodes, inter, nics and the fabric apply)",
                               keys[box_excludes[i]], NULL);
        s->devices = box_devices(s->box);
        if (s->box == BOX_NVL72 && seen_at[8])
            return fail_at(c, seen_at[8], OR_TOPO_ERR_SYNTAX,
                           "nics applies to the dgx boxes only (an nvl72 rack has a NIC per device)",
                           NULL, NULL);
        if ((long)s->nodes * s->devices > OR_TOPO_MAX_DEVICES)
            return ot_fail(c->err, OR_TOPO_ERR_LIMIT, c->source, 1, 0,
                           "%d nodes x %d devices is more than %d devices", s->nodes, s->devices,
                           OR_TOPO_MAX_DEVICES);
        return OR_TOPO_OK;
    }
    if (seen_at[8])
        return fail_at(c, seen_at[8], OR_TOPO_ERR_SYNTAX,
                       "nics applies to box: only (a box's NICs; other nodes have one)", NULL,
                       NULL);
    if (s->shape == SHAPE_TORUS) {
        if (!seen_at[3])
            return fail_at(c, seen_at[2], OR_TOPO_ERR_SYNTAX,
                           "shape:torus needs dims:ROWSxCOLUMNS", NULL, NULL);
        int n = s->dim_a * s->dim_b;
        if (seen_at[1] && s->devices != n) {
            char msg[64];
            snprintf(msg, sizeof msg, "%dx%d", s->dim_a, s->dim_b);
            return fail_at(c, seen_at[1], OR_TOPO_ERR_VALUE,
                           "devices does not match dims:%s (their product)", msg, NULL);
        }
        s->devices = n;
    } else if (seen_at[3]) {
        return fail_at(c, seen_at[3], OR_TOPO_ERR_SYNTAX, "dims applies to shape:torus only",
                       NULL, NULL);
    } else if (!seen_at[1]) {
        return ot_fail(c->err, OR_TOPO_ERR_SYNTAX, c->source, 1, 0,
                       "the string needs devices:N (devices per node) or box:NAME");
    }
    if ((long)s->nodes * s->devices > OR_TOPO_MAX_DEVICES)
        return ot_fail(c->err, OR_TOPO_ERR_LIMIT, c->source, 1, 0,
                       "%d nodes x %d devices is more than %d devices", s->nodes, s->devices,
                       OR_TOPO_MAX_DEVICES);
    return OR_TOPO_OK;
}

static void synth_defaults(ot_synth *s)
{
    memset(s, 0, sizeof *s);
    s->nodes = 1;
    s->shape = SHAPE_SWITCH;
    s->intra = (ot_linkspec){300e9, 1000, 0};
    s->inter = (ot_linkspec){25e9, 5000, 0};
    s->host = (ot_linkspec){OT_PCIE_GEN4_X16, OT_LAT_PCIE, 0};
}

static or_topo_status from_synth(const ot_synth *s, const char *name, const char *source,
                                 or_topo **out, or_topo_error *err)
{
    or_topo *t = ot_new(name, source);
    if (!t)
        return ot_fail(err, OR_TOPO_ERR_NOMEM, source, 0, 0, "out of memory");
    or_topo_status rc = build(t, s, err);
    if (rc == OR_TOPO_OK)
        rc = ot_finish(t, err);
    if (rc != OR_TOPO_OK) {
        or_topo_free(t);
        return rc;
    }
    *out = t;
    return OR_TOPO_OK;
}

/* ---- presets ------------------------------------------------------------ */

static const char *const preset_names[] = {"full8",    "ring8",     "torus4x4",   "switch8",
                                           "dgx-a100", "dgx-h100",  "dgx-a100x2", "dgx-h100x2",
                                           "nvl72",    "nvl72x2",   NULL};

const char *const *or_topo_preset_names(void) { return preset_names; }

/* Whole number suffix starting at p, in [1, max]; -1 if not one. */
/* A preset's count: n in 1..max; -2 for digits out of that range (0, too
 * many, or past an int); -1 for anything else. */
static int suffix_count(const char *p, int max)
{
    int n;
    if (parse_count(p, max, &n) == 0)
        return n;
    if (!*p)
        return -1;
    for (; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -1;
    return -2;
}

/* Reads a preset name into s; 0 on success, -1 for no preset, -2 for a
 * preset whose size is out of range (then why, if given, says the range).
 * The families: fullN, ringN, switchN, torusAxB (one node, default link
 * speeds) and dgx-a100[xN], dgx-h100[xN] (N boxes on one network). */
static int preset_synth(const char *name, ot_synth *s, char *why, size_t why_size)
{
    synth_defaults(s);
    static const struct {
        const char *prefix;
        ot_shape shape;
    } shapes[] = {{"full", SHAPE_FULL}, {"ring", SHAPE_RING}, {"switch", SHAPE_SWITCH}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        size_t n = strlen(shapes[i].prefix);
        if (strncmp(name, shapes[i].prefix, n) == 0) {
            s->shape = shapes[i].shape;
            s->devices = suffix_count(name + n, OR_TOPO_MAX_NODE_DEVICES);
            if (s->devices == -2 && why)
                snprintf(why, why_size, "%sN has from 1 to %d devices", shapes[i].prefix,
                         OR_TOPO_MAX_NODE_DEVICES);
            return s->devices > 0 ? 0 : s->devices;
        }
    }
    if (strncmp(name, "torus", 5) == 0) {
        char a[32];
        snprintf(a, sizeof a, "%s", name + 5);
        char *x = strchr(a, 'x');
        if (!x)
            return -1;
        *x = '\0';
        s->shape = SHAPE_TORUS;
        s->dim_a = suffix_count(a, OR_TOPO_MAX_NODE_DEVICES);
        s->dim_b = suffix_count(x + 1, OR_TOPO_MAX_NODE_DEVICES);
        if (s->dim_a == -1 || s->dim_b == -1)
            return -1;
        if (s->dim_a < 1 || s->dim_b < 1 || (long)s->dim_a * s->dim_b > OR_TOPO_MAX_NODE_DEVICES) {
            if (why)
                snprintf(why, why_size, "torusAxB has from 1 to %d devices, A times B",
                         OR_TOPO_MAX_NODE_DEVICES);
            return -2;
        }
        s->devices = s->dim_a * s->dim_b;
        return 0;
    }
    for (int b = BOX_DGX_A100; b <= BOX_NVL72; b++) {
        size_t n = strlen(box_names[b]);
        if (strncmp(name, box_names[b], n) != 0)
            continue;
        s->box = (ot_box)b;
        s->devices = box_devices(s->box);
        if (name[n] == '\0')
            return 0;
        if (name[n] != 'x')
            return -1;
        s->nodes = suffix_count(name + n + 1, OR_TOPO_MAX_DEVICES / s->devices);
        if (s->nodes == -2 && why)
            snprintf(why, why_size, "%sxN has from 1 to %d %s of %d devices", box_names[b],
                     OR_TOPO_MAX_DEVICES / s->devices, s->box == BOX_NVL72 ? "racks" : "boxes",
                     s->devices);
        return s->nodes > 0 ? 0 : s->nodes;
    }
    return -1;
}

int ot_is_preset(const char *name)
{
    ot_synth s;
    return preset_synth(name, &s, NULL, 0) == 0;
}

const char *or_topo_preset_help(const char *name)
{
    ot_synth s;
    if (preset_synth(name, &s, NULL, 0))
        return NULL;
    if (s.box == BOX_DGX_A100)
        return "DGX A100-class boxes: 8 devices on NVLink3/NVSwitch (300 GB/s per direction), "
               "PCIe Gen4, 8 x 200 Gb/s NICs each; dgx-a100xN: N boxes on one network";
    if (s.box == BOX_DGX_H100)
        return "DGX H100-class boxes: 8 devices on NVLink4/NVSwitch (450 GB/s per direction), "
               "PCIe Gen5, 8 x 400 Gb/s NICs each; dgx-h100xN: N boxes on one network";
    if (s.box == BOX_NVL72)
        return "NVL72-class racks: 72 devices in one NVLink5 switch domain (900 GB/s per "
               "direction), two per Grace CPU on NVLink-C2C, a 400 Gb/s NIC each; nvl72xN: N "
               "racks on one network";
    switch (s.shape) {
    case SHAPE_FULL: return "fullN: N devices, a direct 300 GB/s, 1 us link between each pair";
    case SHAPE_RING: return "ringN: N devices in a ring of 300 GB/s, 1 us links";
    case SHAPE_SWITCH: return "switchN: N devices on one switch, 300 GB/s, 1 us device to device";
    case SHAPE_TORUS: return "torusAxB: A x B devices in a 2-D torus of 300 GB/s, 1 us links";
    }
    return NULL;
}

or_topo_status or_topo_from_preset(const char *name, or_topo **out, or_topo_error *err)
{
    ot_clear_error(err);
    ot_synth s;
    char why[96];
    int found = name ? preset_synth(name, &s, why, sizeof why) : -1;
    if (found == -2)
        return ot_fail(err, OR_TOPO_ERR_VALUE, "", 0, 0,
                       "preset '%.64s': its size is out of range (%s)", name, why);
    if (found) {
        char list[256] = "";
        size_t used = 0;
        for (int i = 0; preset_names[i]; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                     preset_names[i]);
        return ot_fail(err, OR_TOPO_ERR_UNKNOWN_PRESET, "", 0, 0,
                       "unknown preset '%.64s' (presets: %s; also fullN, ringN, switchN, "
                       "torusAxB, dgx-a100xN, dgx-h100xN, nvl72xN)",
                       name ? name : "(null)", list);
    }
    return from_synth(&s, name, "", out, err);
}

or_topo_status or_topo_from_string(const char *text, const char *source, or_topo **out,
                                   or_topo_error *err)
{
    ot_clear_error(err);
    if (!source)
        source = "topology string";
    if (!text)
        return ot_fail(err, OR_TOPO_ERR_SYNTAX, source, 0, 0, "no topology string");
    /* A lone word is a preset name. */
    const char *b = text;
    while (*b == ' ' || *b == '\t')
        b++;
    size_t len = strcspn(b, " \t");
    const char *rest = b + len;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    if (len > 0 && *rest == '\0' && !memchr(b, ':', len)) {
        char word[160];
        if (len >= sizeof word)
            len = sizeof word - 1;
        memcpy(word, b, len);
        word[len] = '\0';
        or_topo_status rc = or_topo_from_preset(word, out, err);
        if (rc != OR_TOPO_OK && err && !err->source[0])
            snprintf(err->source, sizeof err->source, "%s", source);
        return rc;
    }
    ot_synth s;
    synth_defaults(&s);
    ot_cursor c = {text, source, err};
    or_topo_status rc = parse_synth(&c, &s);
    if (rc != OR_TOPO_OK)
        return rc;
    /* The name is the string itself, trimmed: it says what was built. */
    char name[256];
    snprintf(name, sizeof name, "%s", b);
    for (size_t n = strlen(name); n > 0 && (name[n - 1] == ' ' || name[n - 1] == '\t'); n--)
        name[n - 1] = '\0';
    return from_synth(&s, name, source, out, err);
}

or_topo_status or_topo_load(const char *spec, const char *source, or_topo **out,
                            or_topo_error *err)
{
    ot_clear_error(err);
    if (!spec)
        return ot_fail(err, OR_TOPO_ERR_SYNTAX, source, 0, 0, "no topology given");
    size_t n = strlen(spec);
    if (n > 4 && strcasecmp(spec + n - 4, ".xml") == 0)
        return or_topo_from_xml_file(spec, out, err);
    return or_topo_from_string(spec, source, out, err);
}
