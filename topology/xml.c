/*
 * topology/xml.c - topologies in XML, read with libxml2: this project's
 * format (<topology>, written by or_topo_write_xml) and NCCL's topology
 * files (<system>, NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE).
 *
 * This project's format is strict (unknown elements and attributes are
 * errors); NCCL's is read the way NCCL reads it (unknown elements ignored,
 * NCCL's fallbacks for missing speeds), so files from any NCCL version load.
 */
#include "topo_internal.h"

#include <errno.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_FILE_BYTES (64u << 20)

typedef struct {
    or_topo *t;
    const char *source;
    or_topo_error *err;
} ot_reader;

static int line_of(const xmlNode *n)
{
    long l = xmlGetLineNo(n);
    return l > 0 && l < 0x7fffffff ? (int)l : 0;
}

#define FAIL(r, node, code, ...) ot_fail((r)->err, code, (r)->source, line_of(node), 0, __VA_ARGS__)
#define TRY(expr)                                                                              \
    do {                                                                                       \
        or_topo_status rc_ = (expr);                                                           \
        if (rc_ != OR_TOPO_OK)                                                                 \
            return rc_;                                                                        \
    } while (0)

static int is_named(const xmlNode *n, const char *name)
{
    return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

/* Copies attribute `name` of n into buf; 1 if present, 0 if absent, -1 if
 * longer than the buffer. */
static int get_attr(const xmlNode *n, const char *name, char *buf, size_t size)
{
    xmlChar *v = xmlGetNoNsProp(n, (const xmlChar *)name);
    if (!v)
        return 0;
    size_t len = strlen((const char *)v);
    int rc = len < size ? 1 : -1;
    if (rc == 1)
        memcpy(buf, v, len + 1);
    xmlFree(v);
    return rc;
}

static or_topo_status need_attr(const ot_reader *r, const xmlNode *n, const char *name,
                                char *buf, size_t size)
{
    int rc = get_attr(n, name, buf, size);
    if (rc == 0)
        return FAIL(r, n, OR_TOPO_ERR_SYNTAX, "<%s> needs attribute %s", n->name, name);
    if (rc < 0)
        return FAIL(r, n, OR_TOPO_ERR_VALUE, "<%s %s=...> is longer than %zu characters",
                    n->name, name, size - 1);
    return OR_TOPO_OK;
}

/* Text between elements must be blank; comments are fine. */
static or_topo_status check_content(const ot_reader *r, const xmlNode *n)
{
    if (n->type == XML_ELEMENT_NODE || n->type == XML_COMMENT_NODE || n->type == XML_PI_NODE)
        return OR_TOPO_OK;
    if (n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) {
        for (const xmlChar *p = n->content; p && *p; p++)
            if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
                return FAIL(r, n, OR_TOPO_ERR_SYNTAX, "unexpected text '%.20s'",
                            (const char *)n->content);
        return OR_TOPO_OK;
    }
    return FAIL(r, n, OR_TOPO_ERR_SYNTAX, "unexpected XML content");
}

static or_topo_status only_attrs(const ot_reader *r, const xmlNode *n, const char *const *ok)
{
    for (const xmlAttr *a = n->properties; a; a = a->next) {
        int known = 0;
        for (int i = 0; ok[i] && !known; i++)
            known = strcmp((const char *)a->name, ok[i]) == 0;
        if (!known)
            return FAIL(r, n, OR_TOPO_ERR_UNKNOWN_NAME, "<%s> has an unknown attribute '%s'",
                        n->name, a->name);
    }
    return OR_TOPO_OK;
}

/* ---- this project's format ---------------------------------------------- */

static const char *const vertex_elements[] = {"device", "cpu", "pci-switch", "nvswitch", "nic",
                                              "net-switch", NULL};

static int vertex_kind(const xmlNode *n)
{
    for (int k = 0; vertex_elements[k]; k++)
        if (is_named(n, vertex_elements[k]))
            return k;
    return -1;
}

static or_topo_status read_vertex(const ot_reader *r, const xmlNode *n, int kind, int node)
{
    static const char *const attrs[] = {"id", NULL};
    char id[OR_TOPO_MAX_ID + 1];
    TRY(only_attrs(r, n, attrs));
    TRY(need_attr(r, n, "id", id, sizeof id));
    if ((kind == OR_TOPO_NET_SWITCH) != (node < 0))
        return FAIL(r, n, OR_TOPO_ERR_STRUCTURE,
                    node < 0 ? "<%s> belongs inside a <node>" : "<%s> belongs outside nodes",
                    n->name);
    return ot_add_vertex(r->t, id, (or_topo_kind)kind, node, line_of(n), NULL, r->err);
}

static or_topo_status read_link(const ot_reader *r, const xmlNode *n)
{
    static const char *const attrs[] = {"a", "b", "type", "bandwidth", "latency", NULL};
    static const char *const types[] = {"nvlink", "pcie", "sys", "net", NULL};
    char a[OR_TOPO_MAX_ID + 1], b[OR_TOPO_MAX_ID + 1], type[16], bw_text[64], lat_text[64];
    char why[OT_WHY_SIZE];
    TRY(only_attrs(r, n, attrs));
    TRY(need_attr(r, n, "a", a, sizeof a));
    TRY(need_attr(r, n, "b", b, sizeof b));
    TRY(need_attr(r, n, "type", type, sizeof type));
    TRY(need_attr(r, n, "bandwidth", bw_text, sizeof bw_text));
    TRY(need_attr(r, n, "latency", lat_text, sizeof lat_text));
    int k = 0;
    while (types[k] && strcmp(types[k], type))
        k++;
    if (!types[k])
        return FAIL(r, n, OR_TOPO_ERR_VALUE, "link type '%s' is not nvlink, pcie, sys or net",
                    type);
    int va = ot_find_vertex(r->t, a), vb = ot_find_vertex(r->t, b);
    if (va < 0 || vb < 0)
        return FAIL(r, n, OR_TOPO_ERR_UNKNOWN_REF, "link to unknown '%s'", va < 0 ? a : b);
    double bw, lat;
    if (ot_parse_bandwidth(bw_text, &bw, why) || ot_parse_latency(lat_text, &lat, why))
        return FAIL(r, n, OR_TOPO_ERR_VALUE, "%s", why);
    return ot_add_link(r->t, va, vb, (or_topo_link_kind)k, bw, lat, line_of(n), r->err);
}

/* Two passes: every vertex first, so links may name ones declared later. */
static or_topo_status read_own(const ot_reader *r, const xmlNode *root)
{
    static const char *const root_attrs[] = {"version", "name", NULL};
    static const char *const node_attrs[] = {"name", NULL};
    char text[256];
    TRY(only_attrs(r, root, root_attrs));
    TRY(need_attr(r, root, "version", text, sizeof text));
    if (strcmp(text, "1") != 0)
        return FAIL(r, root, OR_TOPO_ERR_VALUE, "topology version '%s' is not 1", text);
    int has_name = get_attr(root, "name", text, sizeof text);
    if (has_name < 0)
        return FAIL(r, root, OR_TOPO_ERR_VALUE, "the topology name is too long");
    if (has_name)
        TRY(ot_set_name(r->t, text, r->err));
    for (const xmlNode *n = root->children; n; n = n->next) {
        TRY(check_content(r, n));
        if (n->type != XML_ELEMENT_NODE)
            continue;
        int kind = vertex_kind(n);
        if (kind >= 0) {
            TRY(read_vertex(r, n, kind, -1));
        } else if (is_named(n, "node")) {
            int node;
            TRY(only_attrs(r, n, node_attrs));
            TRY(need_attr(r, n, "name", text, sizeof text));
            TRY(ot_add_node(r->t, text, line_of(n), &node, r->err));
            for (const xmlNode *c = n->children; c; c = c->next) {
                TRY(check_content(r, c));
                if (c->type != XML_ELEMENT_NODE || is_named(c, "link"))
                    continue;
                if ((kind = vertex_kind(c)) < 0)
                    return FAIL(r, c, OR_TOPO_ERR_UNKNOWN_NAME,
                                "unknown element <%s> in <node> (device, cpu, pci-switch, "
                                "nvswitch, nic, link)",
                                c->name);
                TRY(read_vertex(r, c, kind, node));
            }
        } else if (!is_named(n, "link")) {
            return FAIL(r, n, OR_TOPO_ERR_UNKNOWN_NAME,
                        "unknown element <%s> in <topology> (node, net-switch, link)", n->name);
        }
    }
    for (const xmlNode *n = root->children; n; n = n->next) {
        if (is_named(n, "link"))
            TRY(read_link(r, n));
        if (!is_named(n, "node"))
            continue;
        for (const xmlNode *c = n->children; c; c = c->next)
            if (is_named(c, "link"))
                TRY(read_link(r, c));
    }
    return OR_TOPO_OK;
}

/* ---- NCCL's format ------------------------------------------------------ */

typedef struct {
    int node;
    char busid[32];
    int vertex;
} ot_busid;

typedef struct {
    int a, b; /* vertices; b = -1: to the node's NVSwitch; -2: to the local CPU */
    int count;
    int line;
} ot_nvl;

typedef struct {
    const xmlNode *xml;  /* the <pci> (or <gpu>'s parent) */
    int node, parent, cpu; /* parent vertex; the CPU above it */
    int dev_attr;        /* <gpu dev=...>, or -1 */
    int order;
    double link_bw;
    double nvl_bw;       /* per NVLink, from sm */
} ot_gpu;

typedef struct {
    ot_reader r;
    char **hosts; /* host_hash of each node */
    ot_busid *bus;
    int nbus, cap_bus;
    ot_gpu *gpus;
    int ngpus, cap_gpus;
    ot_nvl *nvl;
    int nnvl, cap_nvl;
    int *cpus; /* per CPU vertex: its sys bandwidth class */
    double *cpu_bw;
    int ncpus, cap_cpus;
    int nics_per_node[OR_TOPO_MAX_DEVICES];
    int net; /* network switch vertex, -1 until a NIC needs it */
} ot_nccl;

static int grow_array(void **a, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *p = realloc(*a, (size_t)n * elem);
    if (!p)
        return -1;
    *a = p;
    *cap = n;
    return 0;
}

static void lower(char *s)
{
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'F')
            *s = (char)(*s - 'A' + 'a');
}

static or_topo_status remember_busid(ot_nccl *x, const xmlNode *n, int node, const char *busid,
                                     int vertex)
{
    if (grow_array((void **)&x->bus, &x->cap_bus, x->nbus + 1, sizeof *x->bus))
        return FAIL(&x->r, n, OR_TOPO_ERR_NOMEM, "out of memory");
    ot_busid *b = &x->bus[x->nbus];
    snprintf(b->busid, sizeof b->busid, "%s", busid);
    lower(b->busid);
    for (int i = 0; i < x->nbus; i++)
        if (x->bus[i].node == node && strcmp(x->bus[i].busid, b->busid) == 0)
            return FAIL(&x->r, n, OR_TOPO_ERR_DUPLICATE, "PCI bus id %s appears twice", busid);
    b->node = node;
    b->vertex = vertex;
    x->nbus++;
    return OR_TOPO_OK;
}

static int find_busid(const ot_nccl *x, int node, const char *busid)
{
    char key[32];
    snprintf(key, sizeof key, "%s", busid);
    lower(key);
    for (int i = 0; i < x->nbus; i++)
        if (x->bus[i].node == node && strcmp(x->bus[i].busid, key) == 0)
            return i;
    return -1;
}

/* Integer attribute; absent gives def. -1 on a malformed value. */
static int int_attr(const xmlNode *n, const char *name, long def, long *out)
{
    char buf[64];
    int rc = get_attr(n, name, buf, sizeof buf);
    if (rc == 0) {
        *out = def;
        return 0;
    }
    if (rc < 0)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 0);
    if (errno || end == buf || *end)
        return -1;
    *out = v;
    return 0;
}

/* PCIe link bandwidth from link_speed ("16 GT/s", "16.0 GT/s PCIe") and
 * link_width. Like NCCL, an unknown speed counts as Gen3 and width 0 as 16. */
static or_topo_status pci_bandwidth(ot_nccl *x, const xmlNode *n, double *bw)
{
    char speed[64] = "";
    long width;
    if (get_attr(n, "link_speed", speed, sizeof speed) < 0 ||
        int_attr(n, "link_width", 16, &width) || width < 0 || width > 64)
        return FAIL(&x->r, n, OR_TOPO_ERR_VALUE,
                    "<pci> link_width must be a whole number from 0 to 64, link_speed like "
                    "'16 GT/s'");
    if (width == 0)
        width = 16;
    double gts = 8;
    char *gt = strstr(speed, " GT/s");
    if (gt) {
        *gt = '\0';
        double v;
        if (ot_parse_number(speed, &v) == 0 && v > 0 && v <= 256)
            gts = v;
    }
    /* 8b/10b encoding up to 5 GT/s, 128b/130b from 8 GT/s; Gen6's FLIT mode
     * is counted as no overhead. */
    double enc = gts <= 5 ? 0.8 : gts < 64 ? 128.0 / 130.0 : 1.0;
    *bw = gts * 1e9 * (double)width * enc / 8;
    return OR_TOPO_OK;
}

/* NVLink bandwidth per link and direction by compute capability, from the
 * public specifications (docs/topology.md). */
static double nvlink_bw(long sm)
{
    if (sm < 70)
        return 20e9; /* NVLink1, P100 */
    if (sm == 86)
        return 14.0625e9; /* GA10x NVLink: 112.5 GB/s over 4 links */
    if (sm < 100)
        return 25e9; /* NVLink2 (V100), NVLink3 (A100), NVLink4 (H100) */
    return 50e9;     /* NVLink5 */
}

static or_topo_status node_of_cpu(ot_nccl *x, const xmlNode *cpu, int *node)
{
    char hash[64] = "";
    if (get_attr(cpu, "host_hash", hash, sizeof hash) < 0)
        return FAIL(&x->r, cpu, OR_TOPO_ERR_VALUE, "host_hash is too long");
    for (int i = 0; i < x->r.t->nnodes; i++)
        if (strcmp(x->hosts[i], hash) == 0) {
            *node = i;
            return OR_TOPO_OK;
        }
    if (x->r.t->nnodes >= OR_TOPO_MAX_DEVICES)
        return FAIL(&x->r, cpu, OR_TOPO_ERR_LIMIT, "too many hosts");
    char **hosts = realloc(x->hosts, sizeof *hosts * (size_t)(x->r.t->nnodes + 1));
    if (!hosts)
        return FAIL(&x->r, cpu, OR_TOPO_ERR_NOMEM, "out of memory");
    x->hosts = hosts;
    if (!(x->hosts[x->r.t->nnodes] = strdup(hash)))
        return FAIL(&x->r, cpu, OR_TOPO_ERR_NOMEM, "out of memory");
    char name[32];
    snprintf(name, sizeof name, "node%d", x->r.t->nnodes);
    return ot_add_node(x->r.t, name, line_of(cpu), node, x->r.err);
}

static or_topo_status add_nic(ot_nccl *x, const xmlNode *n, const xmlNode *nic, int node,
                              int parent, double link_bw, double link_lat)
{
    char id[48];
    int v;
    snprintf(id, sizeof id, "n%d.nic%d", node, x->nics_per_node[node]++);
    TRY(ot_add_vertex(x->r.t, id, OR_TOPO_NIC, node, line_of(n), &v, x->r.err));
    TRY(ot_add_link(x->r.t, v, parent, OR_TOPO_LINK_PCIE, link_bw, link_lat, line_of(n),
                    x->r.err));
    /* Network speed: the sum of the NIC's ports (<net speed> in Mb/s; NCCL
     * reads 0 or less as 10 Gb/s); without any, the NIC's PCIe link. */
    double speed = 0, lat = 0;
    for (const xmlNode *c = nic ? nic->children : NULL; c; c = c->next) {
        if (!is_named(c, "net"))
            continue;
        long mbps;
        char text[64];
        double us = 0;
        if (int_attr(c, "speed", 0, &mbps))
            return FAIL(&x->r, c, OR_TOPO_ERR_VALUE, "<net speed> must be a whole number of Mb/s");
        int has = get_attr(c, "latency", text, sizeof text);
        if (has < 0 || (has && ot_parse_number(text, &us)))
            return FAIL(&x->r, c, OR_TOPO_ERR_VALUE,
                        "<net latency> must be a non-negative number of microseconds");
        speed += (mbps <= 0 ? 10000 : (double)mbps) * 125e3;
        if (us * 1e3 > lat)
            lat = us * 1e3;
    }
    if (speed == 0)
        speed = link_bw;
    if (x->net < 0)
        TRY(ot_add_vertex(x->r.t, "net", OR_TOPO_NET_SWITCH, -1, 0, &x->net, x->r.err));
    return ot_add_link(x->r.t, v, x->net, OR_TOPO_LINK_NET, speed, lat > 0 ? lat : OT_LAT_NET_HALF,
                       line_of(n), x->r.err);
}

static or_topo_status read_pci(ot_nccl *x, const xmlNode *n, int node, int parent, int cpu)
{
    char busid[32], cls[32] = "";
    TRY(need_attr(&x->r, n, "busid", busid, sizeof busid));
    if (get_attr(n, "class", cls, sizeof cls) < 0)
        return FAIL(&x->r, n, OR_TOPO_ERR_VALUE, "<pci class> is too long");
    double bw = 0;
    TRY(pci_bandwidth(x, n, &bw));
    const xmlNode *gpu = NULL, *nic = NULL;
    for (const xmlNode *c = n->children; c; c = c->next) {
        if (is_named(c, "gpu") && !gpu)
            gpu = c;
        if (is_named(c, "nic") && !nic)
            nic = c;
    }
    if (gpu || strncmp(cls, "0x03", 4) == 0) {
        /* Devices are added once all are known, in <gpu dev> order. */
        if (grow_array((void **)&x->gpus, &x->cap_gpus, x->ngpus + 1, sizeof *x->gpus))
            return FAIL(&x->r, n, OR_TOPO_ERR_NOMEM, "out of memory");
        ot_gpu *g = &x->gpus[x->ngpus];
        long dev = -1, sm = 80;
        if (gpu && (int_attr(gpu, "dev", -1, &dev) || dev < -1 || dev >= OR_TOPO_MAX_DEVICES))
            return FAIL(&x->r, gpu, OR_TOPO_ERR_VALUE, "<gpu dev> must be a device number");
        if (gpu && int_attr(gpu, "sm", 80, &sm))
            return FAIL(&x->r, gpu, OR_TOPO_ERR_VALUE, "<gpu sm> must be a whole number");
        if (x->ngpus >= OR_TOPO_MAX_DEVICES)
            return FAIL(&x->r, n, OR_TOPO_ERR_LIMIT, "more than %d devices", OR_TOPO_MAX_DEVICES);
        g->xml = n;
        g->node = node;
        g->parent = parent;
        g->cpu = cpu;
        g->dev_attr = (int)dev;
        g->order = x->ngpus;
        g->link_bw = bw;
        g->nvl_bw = nvlink_bw(sm);
        x->ngpus++;
        return remember_busid(x, n, node, busid, -1 - (x->ngpus - 1));
    }
    if (nic || strncmp(cls, "0x02", 4) == 0)
        return add_nic(x, n, nic, node, parent, bw, OT_LAT_PCIE);
    /* Anything else is a bridge: a PCIe switch, with its children below. */
    char id[64];
    int v;
    snprintf(id, sizeof id, "n%d.pci.%s", node, busid);
    TRY(ot_add_vertex(x->r.t, id, OR_TOPO_PCI_SWITCH, node, line_of(n), &v, x->r.err));
    TRY(ot_add_link(x->r.t, v, parent, OR_TOPO_LINK_PCIE, bw, OT_LAT_PCIE, line_of(n), x->r.err));
    TRY(remember_busid(x, n, node, busid, v));
    for (const xmlNode *c = n->children; c; c = c->next)
        if (is_named(c, "pci"))
            TRY(read_pci(x, c, node, v, cpu));
    return OR_TOPO_OK;
}

/* The CPU-to-CPU bandwidth NCCL gives a device-to-device copy through the
 * sockets, by CPU model. */
static double sys_bandwidth(const xmlNode *cpu)
{
    char arch[32] = "", vendor[32] = "";
    long family = 0, model = 0;
    get_attr(cpu, "arch", arch, sizeof arch);
    get_attr(cpu, "vendor", vendor, sizeof vendor);
    if (int_attr(cpu, "familyid", 0, &family) || int_attr(cpu, "modelid", 0, &model))
        family = model = 0;
    if (strcmp(arch, "ppc64") == 0)
        return 32e9;
    if (strcmp(arch, "x86_64") == 0 && strcmp(vendor, "AuthenticAMD") == 0)
        return 16e9;
    if (strcmp(arch, "x86_64") == 0 && strcmp(vendor, "GenuineIntel") == 0)
        return family == 6 && model >= 0x55 ? 10e9 : 6e9;
    return 6e9;
}

static or_topo_status read_cpu(ot_nccl *x, const xmlNode *n)
{
    int node, v;
    long numa;
    TRY(node_of_cpu(x, n, &node));
    if (int_attr(n, "numaid", -1, &numa) || numa < -1 || numa > 1 << 20)
        return FAIL(&x->r, n, OR_TOPO_ERR_VALUE, "<cpu numaid> must be a whole number");
    char id[48];
    if (numa >= 0)
        snprintf(id, sizeof id, "n%d.cpu%ld", node, numa);
    else
        snprintf(id, sizeof id, "n%d.cpu", node);
    TRY(ot_add_vertex(x->r.t, id, OR_TOPO_CPU, node, line_of(n), &v, x->r.err));
    if (grow_array((void **)&x->cpus, &x->cap_cpus, x->ncpus + 1, sizeof *x->cpus))
        return FAIL(&x->r, n, OR_TOPO_ERR_NOMEM, "out of memory");
    double *bws = realloc(x->cpu_bw, sizeof *bws * (size_t)x->cap_cpus);
    if (!bws)
        return FAIL(&x->r, n, OR_TOPO_ERR_NOMEM, "out of memory");
    x->cpu_bw = bws;
    x->cpus[x->ncpus] = v;
    x->cpu_bw[x->ncpus++] = sys_bandwidth(n);
    for (const xmlNode *c = n->children; c; c = c->next) {
        if (is_named(c, "pci"))
            TRY(read_pci(x, c, node, v, v));
        else if (is_named(c, "nic")) /* a NIC on the host itself, as NCCL: local bandwidth */
            TRY(add_nic(x, c, c, node, v, 5000e9, 0));
    }
    return OR_TOPO_OK;
}

static or_topo_status queue_nvlink(ot_nccl *x, int a, int b, int count, int line)
{
    for (int i = 0; i < x->nnvl; i++) {
        ot_nvl *q = &x->nvl[i];
        /* Both GPUs list a GPU-GPU connection: the same links, keep the larger
         * count. Several entries to NVSwitches (one per switch) add up. */
        if (b >= 0 && ((q->a == a && q->b == b) || (q->a == b && q->b == a))) {
            if (q->a == a)
                q->count += count;
            else if (count > q->count)
                q->count = count;
            return OR_TOPO_OK;
        }
        if (b < 0 && q->a == a && q->b == b) {
            q->count += count;
            return OR_TOPO_OK;
        }
    }
    if (grow_array((void **)&x->nvl, &x->cap_nvl, x->nnvl + 1, sizeof *x->nvl))
        return ot_fail(x->r.err, OR_TOPO_ERR_NOMEM, x->r.source, line, 0, "out of memory");
    x->nvl[x->nnvl++] = (ot_nvl){a, b, count, line};
    return OR_TOPO_OK;
}

static int gpu_cmp(const void *pa, const void *pb)
{
    const ot_gpu *a = pa, *b = pb;
    if (a->node != b->node)
        return a->node - b->node;
    /* dev numbers first (as nvidia-smi numbers them), then file order */
    int ka = a->dev_attr >= 0 ? a->dev_attr : OR_TOPO_MAX_DEVICES + a->order;
    int kb = b->dev_attr >= 0 ? b->dev_attr : OR_TOPO_MAX_DEVICES + b->order;
    return ka - kb;
}

static or_topo_status read_nccl_links(ot_nccl *x, int *gpu_vertex)
{
    or_topo *t = x->r.t;
    for (int i = 0; i < x->ngpus; i++) {
        const ot_gpu *g = &x->gpus[i];
        const xmlNode *gpu = NULL;
        for (const xmlNode *c = g->xml->children; c; c = c->next)
            if (is_named(c, "gpu"))
                gpu = c;
        if (!gpu)
            continue;
        for (const xmlNode *l = gpu->children; l; l = l->next) {
            int to;
            long count;
            if (is_named(l, "c2c")) {
                long bw;
                if (int_attr(l, "count", 0, &count) || int_attr(l, "bw", 0, &bw) ||
                    count <= 0 || bw <= 0)
                    return FAIL(&x->r, l, OR_TOPO_ERR_VALUE,
                                "<c2c> needs a positive count and bw (MB/s per link)");
                TRY(ot_add_link(t, gpu_vertex[i], g->cpu, OR_TOPO_LINK_NVLINK,
                                (double)count * (double)bw * 1e6, OT_LAT_NVLINK, line_of(l),
                                x->r.err));
                continue;
            }
            if (!is_named(l, "nvlink"))
                continue;
            char target[64] = "", tclass[32] = "";
            if (int_attr(l, "count", 1, &count) || count <= 0 || count > 1024)
                return FAIL(&x->r, l, OR_TOPO_ERR_VALUE,
                            "<nvlink count> must be a whole number of links from 1 to 1024");
            if (get_attr(l, "tclass", tclass, sizeof tclass) < 0 ||
                get_attr(l, "target", target, sizeof target) < 0)
                return FAIL(&x->r, l, OR_TOPO_ERR_VALUE, "<nvlink> attribute too long");
            if (strncmp(tclass, "0x03", 4) == 0) {
                int k = find_busid(x, g->node, target);
                if (k < 0 || x->bus[k].vertex >= 0)
                    return FAIL(&x->r, l, OR_TOPO_ERR_UNKNOWN_REF,
                                "nvlink target '%s' is not a GPU of this host", target);
                to = gpu_vertex[-1 - x->bus[k].vertex];
                if (to == gpu_vertex[i])
                    return FAIL(&x->r, l, OR_TOPO_ERR_STRUCTURE, "nvlink from a GPU to itself");
            } else if (strcmp(tclass, "0x068001") == 0) {
                to = -2;
            } else {
                to = -1; /* an NVSwitch (NCCL's fallback for any other class too) */
            }
            TRY(queue_nvlink(x, gpu_vertex[i], to, (int)count, line_of(l)));
        }
    }
    int *nvs = malloc(sizeof *nvs * (size_t)(t->nnodes ? t->nnodes : 1));
    if (!nvs)
        return ot_fail(x->r.err, OR_TOPO_ERR_NOMEM, x->r.source, 0, 0, "out of memory");
    for (int i = 0; i < t->nnodes; i++)
        nvs[i] = -1;
    or_topo_status rc = OR_TOPO_OK;
    for (int i = 0; i < x->nnvl && rc == OR_TOPO_OK; i++) {
        const ot_nvl *q = &x->nvl[i];
        int node = t->verts[q->a].node, to = q->b;
        const ot_gpu *g = NULL;
        for (int k = 0; k < x->ngpus; k++)
            if (gpu_vertex[k] == q->a)
                g = &x->gpus[k];
        if (to == -1) {
            if (nvs[node] < 0) {
                char id[48];
                snprintf(id, sizeof id, "n%d.nvs", node);
                rc = ot_add_vertex(t, id, OR_TOPO_NVSWITCH, node, q->line, &nvs[node], x->r.err);
            }
            to = nvs[node];
        } else if (to == -2) {
            to = g->cpu;
        }
        if (rc == OR_TOPO_OK)
            rc = ot_add_link(t, q->a, to, OR_TOPO_LINK_NVLINK, q->count * g->nvl_bw,
                             OT_LAT_NVLINK, q->line, x->r.err);
    }
    free(nvs);
    return rc;
}

static or_topo_status read_nccl(ot_nccl *x, const xmlNode *root)
{
    or_topo *t = x->r.t;
    for (const xmlNode *n = root->children; n; n = n->next)
        if (is_named(n, "cpu"))
            TRY(read_cpu(x, n));
    /* NCCL joins every pair of CPUs of a host. */
    for (int i = 0; i < x->ncpus; i++)
        for (int j = i + 1; j < x->ncpus; j++) {
            int a = x->cpus[i], b = x->cpus[j];
            if (t->verts[a].node != t->verts[b].node)
                continue;
            double bw = x->cpu_bw[i] < x->cpu_bw[j] ? x->cpu_bw[i] : x->cpu_bw[j];
            TRY(ot_add_link(t, a, b, OR_TOPO_LINK_SYS, bw, OT_LAT_SYS, 0, x->r.err));
        }
    if (x->ngpus == 0)
        return FAIL(&x->r, root, OR_TOPO_ERR_STRUCTURE,
                    "no GPU in this NCCL topology (no <gpu> and no <pci class=\"0x03...\">)");
    qsort(x->gpus, (size_t)x->ngpus, sizeof *x->gpus, gpu_cmp);
    int *gpu_vertex = malloc(sizeof *gpu_vertex * (size_t)x->ngpus);
    int *slot = malloc(sizeof *slot * (size_t)x->ngpus); /* file order -> sorted */
    if (!gpu_vertex || !slot) {
        free(gpu_vertex);
        free(slot);
        return FAIL(&x->r, root, OR_TOPO_ERR_NOMEM, "out of memory");
    }
    or_topo_status rc = OR_TOPO_OK;
    int per_node = 0, prev_node = -1;
    for (int i = 0; i < x->ngpus && rc == OR_TOPO_OK; i++) {
        ot_gpu *g = &x->gpus[i];
        per_node = g->node == prev_node ? per_node + 1 : 0;
        prev_node = g->node;
        if (i > 0 && g->dev_attr >= 0 && g[-1].node == g->node && g[-1].dev_attr == g->dev_attr) {
            rc = FAIL(&x->r, g->xml, OR_TOPO_ERR_DUPLICATE, "two GPUs have dev=\"%d\"",
                      g->dev_attr);
            break;
        }
        char id[48];
        snprintf(id, sizeof id, "n%d.gpu%d", g->node, per_node);
        rc = ot_add_vertex(t, id, OR_TOPO_DEVICE, g->node, line_of(g->xml), &gpu_vertex[i],
                           x->r.err);
        if (rc == OR_TOPO_OK)
            rc = ot_add_link(t, gpu_vertex[i], g->parent, OR_TOPO_LINK_PCIE, g->link_bw,
                             OT_LAT_PCIE, line_of(g->xml), x->r.err);
        slot[g->order] = i;
    }
    /* The bus table names GPUs by file order; map them to sorted slots. */
    for (int k = 0; k < x->nbus && rc == OR_TOPO_OK; k++)
        if (x->bus[k].vertex < 0)
            x->bus[k].vertex = -1 - slot[-1 - x->bus[k].vertex];
    if (rc == OR_TOPO_OK)
        rc = read_nccl_links(x, gpu_vertex);
    free(gpu_vertex);
    free(slot);
    return rc;
}

/* ---- entry points ------------------------------------------------------- */

/* libxml2 goes on after the first error and reports the last; the first is
 * the one that names the line to fix. */
typedef struct {
    int set, line, column;
    char message[300];
} ot_first_error;

static void keep_first_error(void *user, xmlErrorPtr e)
{
    xmlParserCtxtPtr ctxt = user;
    ot_first_error *first = ctxt ? ctxt->_private : NULL;
    if (!first || first->set || !e || e->level < XML_ERR_ERROR)
        return;
    first->set = 1;
    first->line = e->line;
    first->column = e->int2;
    snprintf(first->message, sizeof first->message, "%s", e->message ? e->message : "");
    size_t n = strlen(first->message);
    while (n > 0 && (first->message[n - 1] == '\n' || first->message[n - 1] == ' '))
        first->message[--n] = '\0';
}

static int line_of_text(const char *buf, size_t len, const char *needle)
{
    size_t k = strlen(needle);
    int line = 1;
    for (size_t i = 0; i + k <= len; i++) {
        if (memcmp(buf + i, needle, k) == 0)
            return line;
        line += buf[i] == '\n';
    }
    return 0;
}

or_topo_status or_topo_from_xml_memory(const char *buf, size_t len, const char *source,
                                       or_topo **out, or_topo_error *err)
{
    ot_clear_error(err);
    if (!source)
        source = "topology XML";
    if (len > MAX_FILE_BYTES || len > (size_t)0x7fffffff)
        return ot_fail(err, OR_TOPO_ERR_LIMIT, source, 0, 0, "file larger than %u MiB",
                       MAX_FILE_BYTES >> 20);
    xmlInitParser();
    xmlParserCtxtPtr ctxt = xmlNewParserCtxt();
    if (!ctxt)
        return ot_fail(err, OR_TOPO_ERR_NOMEM, source, 0, 0, "out of memory");
    /* No network, no entity expansion, nothing printed: errors come back here. */
    ot_first_error first = {0};
    ctxt->_private = &first;
    ctxt->sax->serror = keep_first_error;
    int options = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
                  XML_PARSE_BIG_LINES;
    xmlDocPtr doc = xmlCtxtReadMemory(ctxt, buf, (int)len, source, NULL, options);
    or_topo_status rc = OR_TOPO_OK;
    or_topo *t = NULL;
    if (!doc || first.set) {
        rc = ot_fail(err, OR_TOPO_ERR_SYNTAX, source, first.line, first.column,
                     "malformed XML: %s", first.set ? first.message : "not well-formed");
        goto out;
    }
    xmlNode *root = xmlDocGetRootElement(doc);
    if (doc->intSubset || doc->extSubset) {
        rc = ot_fail(err, OR_TOPO_ERR_SYNTAX, source, line_of_text(buf, len, "<!DOCTYPE"), 0,
                     "DOCTYPE declarations are not accepted in topology files");
        goto out;
    }
    if (!root || (!is_named(root, "topology") && !is_named(root, "system"))) {
        rc = ot_fail(err, OR_TOPO_ERR_UNKNOWN_NAME, source, root ? line_of(root) : 0, 0,
                     "the root element is <%s>: expected <topology> (this project's format) "
                     "or <system> (NCCL's)",
                     root ? (const char *)root->name : "");
        goto out;
    }
    /* An NCCL file has no name of its own: it is named after the file. */
    const char *base = strrchr(source, '/');
    t = ot_new(is_named(root, "system") ? (base ? base + 1 : source) : "", source);
    if (!t) {
        rc = ot_fail(err, OR_TOPO_ERR_NOMEM, source, 0, 0, "out of memory");
        goto out;
    }
    if (is_named(root, "topology")) {
        ot_reader r = {t, source, err};
        rc = read_own(&r, root);
    } else {
        ot_nccl *x = calloc(1, sizeof *x);
        if (!x) {
            rc = ot_fail(err, OR_TOPO_ERR_NOMEM, source, 0, 0, "out of memory");
            goto out;
        }
        x->r = (ot_reader){t, source, err};
        x->net = -1;
        rc = read_nccl(x, root);
        for (int i = 0; i < t->nnodes; i++)
            free(x->hosts[i]);
        free(x->hosts);
        free(x->bus);
        free(x->gpus);
        free(x->nvl);
        free(x->cpus);
        free(x->cpu_bw);
        free(x);
    }
    if (rc == OR_TOPO_OK)
        rc = ot_finish(t, err);
out:
    if (doc)
        xmlFreeDoc(doc);
    xmlFreeParserCtxt(ctxt);
    if (rc != OR_TOPO_OK) {
        or_topo_free(t);
        return rc;
    }
    *out = t;
    return OR_TOPO_OK;
}

or_topo_status or_topo_from_xml_file(const char *path, or_topo **out, or_topo_error *err)
{
    ot_clear_error(err);
    char *buf;
    size_t len;
    or_topo_status rc = ot_read_file(path, NULL, MAX_FILE_BYTES, &buf, &len, err);
    if (rc != OR_TOPO_OK)
        return rc;
    rc = or_topo_from_xml_memory(buf, len, path, out, err);
    free(buf);
    return rc;
}

/* ---- writing ------------------------------------------------------------ */

static int write_link(xmlNode *parent, const or_topo *t, const ot_link *l)
{
    char bw[64], lat[64];
    xmlNode *x = xmlNewChild(parent, NULL, (const xmlChar *)"link", NULL);
    if (!x)
        return -1;
    ot_format_bandwidth(l->info.bandwidth, bw, sizeof bw);
    ot_format_latency(l->info.latency_ns, lat, sizeof lat);
    return !xmlNewProp(x, (const xmlChar *)"a", (const xmlChar *)t->verts[l->info.a].id) ||
           !xmlNewProp(x, (const xmlChar *)"b", (const xmlChar *)t->verts[l->info.b].id) ||
           !xmlNewProp(x, (const xmlChar *)"type",
                       (const xmlChar *)or_topo_link_kind_name(l->info.kind)) ||
           !xmlNewProp(x, (const xmlChar *)"bandwidth", (const xmlChar *)bw) ||
           !xmlNewProp(x, (const xmlChar *)"latency", (const xmlChar *)lat);
}

or_topo_status or_topo_write_xml(const or_topo *t, char **out, size_t *len, or_topo_error *err)
{
    ot_clear_error(err);
    xmlInitParser();
    xmlDocPtr doc = xmlNewDoc((const xmlChar *)"1.0");
    xmlNode *root = doc ? xmlNewNode(NULL, (const xmlChar *)"topology") : NULL;
    int bad = !root;
    if (!bad) {
        xmlDocSetRootElement(doc, root);
        bad |= !xmlNewProp(root, (const xmlChar *)"version", (const xmlChar *)"1");
        if (t->name[0])
            bad |= !xmlNewProp(root, (const xmlChar *)"name", (const xmlChar *)t->name);
    }
    for (int n = 0; n < t->nnodes && !bad; n++) {
        xmlNode *node = xmlNewChild(root, NULL, (const xmlChar *)"node", NULL);
        bad |= !node || !xmlNewProp(node, (const xmlChar *)"name",
                                    (const xmlChar *)t->node_names[n]);
        for (int v = 0; v < t->nverts && !bad; v++) {
            if (t->verts[v].node != n)
                continue;
            xmlNode *x = xmlNewChild(node, NULL,
                                     (const xmlChar *)or_topo_kind_name(t->verts[v].kind), NULL);
            bad |= !x || !xmlNewProp(x, (const xmlChar *)"id", (const xmlChar *)t->verts[v].id);
        }
        for (int l = 0; l < t->nlinks && !bad; l++)
            if (t->links[l].info.kind != OR_TOPO_LINK_NET && t->verts[t->links[l].info.a].node == n)
                bad |= write_link(node, t, &t->links[l]);
    }
    for (int v = 0; v < t->nverts && !bad; v++) {
        if (t->verts[v].node >= 0)
            continue;
        xmlNode *x = xmlNewChild(root, NULL, (const xmlChar *)or_topo_kind_name(t->verts[v].kind),
                                 NULL);
        bad |= !x || !xmlNewProp(x, (const xmlChar *)"id", (const xmlChar *)t->verts[v].id);
    }
    for (int l = 0; l < t->nlinks && !bad; l++)
        if (t->links[l].info.kind == OR_TOPO_LINK_NET)
            bad |= write_link(root, t, &t->links[l]);
    xmlChar *mem = NULL;
    int size = 0;
    if (!bad)
        xmlDocDumpFormatMemoryEnc(doc, &mem, &size, "UTF-8", 1);
    xmlFreeDoc(doc);
    if (!mem)
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    *out = malloc((size_t)size + 1);
    if (!*out) {
        xmlFree(mem);
        return ot_fail(err, OR_TOPO_ERR_NOMEM, t->source, 0, 0, "out of memory");
    }
    memcpy(*out, mem, (size_t)size);
    (*out)[size] = '\0';
    if (len)
        *len = (size_t)size;
    xmlFree(mem);
    return OR_TOPO_OK;
}
