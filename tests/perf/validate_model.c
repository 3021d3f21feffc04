/*
 * validate_model.c - the virtual-time model against published measurements.
 *
 * Each row of the calibration file (docs/calibration/published.csv) is a
 * measurement someone published: a system (the topology preset that models
 * it), a number of GPUs, a collective, nccl-tests' "size" column, the
 * algorithm and protocol NCCL was held to (empty: its own choice), and the
 * time in us or the bus bandwidth in GB/s. For each row this program builds
 * the preset, takes its first `ranks` devices in order (packed, as
 * nccl-tests' ranks fill one box before the next), and runs OCCL's model
 * (vmodel.h: the schedules and replay of virtual time, with the protocols'
 * costs) for every algorithm NCCL has too and every protocol the row
 * allows, keeping the fastest, as OCCL's planner does. It prints model against published and
 * the error on the time, then the median and the worst absolute error.
 *
 * usage: validate_model [--max-median PCT] [--max-worst PCT] [FILE]
 * With the bounds it exits 1 when the model's errors exceed them (the CI
 * check in tests/perf/validate_model.sh).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "occl_internal.h"
#include "topo.h"
#include "vmodel.h"

#define MAX_ROWS 512
#define MAX_RANKS 256

typedef struct row {
    char system[96], coll[24], algo[24], proto[16], metric[16];
    int ranks, per_node, line;
    double bytes, value;
} row;

/* One preset's devices as the model's system. */
typedef struct machine {
    or_topo *topo;
    int n;
    int dev[MAX_RANKS]; /* rank r's topology device */
    int ring[MAX_RANKS], node_first[MAX_RANKS + 1], nnodes;
    occl_trees trees;
    uint64_t bps[MAX_RANKS];
} machine;

static or_vpath topo_path(void *ctx, int src, int dst)
{
    const machine *m = ctx;
    const or_topo_path *p = or_topo_path_between(m->topo, m->dev[src], m->dev[dst]);
    return (or_vpath){.latency_ns = (uint64_t)llround(p->latency_ns),
                      .bytes_per_s = (uint64_t)llround(p->bandwidth),
                      .type = or_topo_path_type_name(p->type),
                      .nhops = p->nhops,
                      .hops = p->hops};
}

/* The device profiles' memory bandwidth (devices/): what reductions run at. */
static uint64_t memory_bps(const char *system)
{
    return strstr(system, "h100") ? 3350000000000ull : 2039000000000ull;
}

/* n ranks, per_node on each node of the preset (its first devices there). */
static int machine_build(machine *m, const char *system, int n, int per_node, char *why, size_t why_size)
{
    or_topo_error err;
    memset(m, 0, sizeof *m);
    if (or_topo_from_string(system, "system", &m->topo, &err) != OR_TOPO_OK) {
        snprintf(why, why_size, "%.250s", err.message);
        return -1;
    }
    int nodes = per_node > 0 ? (n + per_node - 1) / per_node : 0;
    if (n < 2 || n > MAX_RANKS || per_node < 1 || n % per_node || nodes > or_topo_node_count(m->topo)) {
        snprintf(why, why_size, "%d ranks, %d per node: the preset has %d nodes", n, per_node,
                 or_topo_node_count(m->topo));
        return -1;
    }
    m->n = n;
    for (int k = 0; k < nodes; k++) {
        int first, count;
        or_topo_node_devices(m->topo, k, &first, &count);
        if (count < per_node) {
            snprintf(why, why_size, "%d ranks per node: the preset's nodes have %d devices", per_node, count);
            return -1;
        }
        m->node_first[m->nnodes++] = k * per_node;
        for (int d = 0; d < per_node; d++)
            m->dev[k * per_node + d] = first + d;
    }
    for (int r = 0; r < n; r++) {
        m->ring[r] = r;
        m->bps[r] = memory_bps(system);
    }
    m->node_first[m->nnodes] = n;
    occl_trees *T = &m->trees;
    if (occl_trees_alloc(T, n) != 0 || occl_topo_trees(m->topo, m->dev, n, T->v, why, why_size) != 0 ||
        occl_trees_schedule(T) != 0) {
        if (!why[0])
            snprintf(why, why_size, "the trees could not be built");
        return -1;
    }
    return 0;
}

static void machine_free(machine *m)
{
    occl_trees_release(&m->trees);
    or_topo_free(m->topo);
}

static const struct {
    const char *name;
    occl_coll coll;
    double bus; /* nccl-tests' busbw / algbw, n ranks: in units of (n-1)/n */
} colls[] = {
    {"allreduce", OCCL_COLL_ALLREDUCE, 2},
    {"allgather", OCCL_COLL_ALLGATHER, 1},
    {"reducescatter", OCCL_COLL_REDUCESCATTER, 1},
    {"alltoall", OCCL_COLL_ALLTOALL, 1},
};

/* The algorithms of OCCL's that NCCL has too, which the published figures
 * measured: an all-reduce's ring, tree and (one node of H100s: NCCL has no
 * NVLS on Ampere, nvlsEfficiency 0) nvls; the ring for
 * all-gather and reduce-scatter; AlltoAll's direct exchange (NCCL's
 * point-to-point sends). OCCL's direct and hierarchical all-reduce have no
 * NCCL counterpart, so they are left out of the comparison. */
static unsigned algos_of(occl_coll coll, int nnodes, bool nvls)
{
    if (coll == OCCL_COLL_ALLTOALL)
        return 1u << OCCL_ALGO_DIRECT;
    if (coll != OCCL_COLL_ALLREDUCE)
        return 1u << OCCL_ALGO_RING;
    unsigned nccl = 1u << OCCL_ALGO_RING | 1u << OCCL_ALGO_TREE | 1u << OCCL_ALGO_NVLS;
    return nnodes > 1 || !nvls ? nccl & ~(1u << OCCL_ALGO_NVLS) : nccl;
}

static int find_name(const char *s, const char *(*name)(int), int n)
{
    for (int i = 0; i < n; i++)
        if (!strcasecmp(s, name(i)))
            return i;
    return -1;
}
static const char *algo_name_i(int i) { return occl_algo_name((occl_algo)i); }
static const char *proto_name_i(int i) { return occl_proto_name((occl_proto)i); }

/* The model's time (ns) for row r and the pair it picked; 0 with why set if
 * the row cannot be modelled. */
static uint64_t model_row(const row *r, int ci, char *pick, size_t pick_size, char *why, size_t why_size)
{
    machine m;
    if (machine_build(&m, r->system, r->ranks, r->per_node, why, why_size)) {
        machine_free(&m);
        return 0;
    }
    int n = r->ranks;
    /* nccl-tests' size: the all-reduce's buffer, all-gather's output,
     * reduce-scatter's input, all-to-all's buffer of n blocks; OCCL's count
     * is per rank (all-gather, reduce-scatter) or per peer (AlltoAll). */
    double elems = r->bytes / 4;
    occl_call c = {.coll = colls[ci].coll, .type = occlFloat32, .root = 0,
                   .count = (size_t)(colls[ci].coll == OCCL_COLL_ALLREDUCE ? elems : elems / n)};
    unsigned algos = algos_of(c.coll, m.nnodes, strstr(r->system, "h100") != NULL), protos = OCCL_PROTO_ALL;
    int a0 = r->algo[0] ? find_name(r->algo, algo_name_i, OCCL_NUM_ALGOS) : -1;
    int p0 = r->proto[0] ? find_name(r->proto, proto_name_i, OCCL_NUM_PROTOS) : -1;
    if ((r->algo[0] && a0 < 0) || (r->proto[0] && p0 < 0)) {
        snprintf(why, why_size, "unknown algorithm or protocol '%s' '%s'", r->algo, r->proto);
        machine_free(&m);
        return 0;
    }
    if (a0 >= 0)
        algos &= 1u << a0;
    if (p0 >= 0)
        protos = 1u << p0;
    occl_vsystem s = {.nranks = n, .ring = m.ring, .node_first = m.node_first, .nnodes = m.nnodes,
                      .trees = m.trees, .path = topo_path, .ctx = &m,
                      .rails = occl_vsystem_rails(m.topo, m.dev, m.ring, m.node_first, m.nnodes)};
    uint64_t best = 0;
    for (int a = 0; a < OCCL_NUM_ALGOS; a++)
        for (int p = 0; p < OCCL_NUM_PROTOS; p++) {
            if (!(algos & (1u << a)) || !(protos & (1u << p)))
                continue;
            uint64_t t = occl_vmodel_time(&s, &c, (occl_algo)a, (occl_proto)p, m.bps);
            if (t != UINT64_MAX && (!best || t < best)) {
                best = t;
                snprintf(pick, pick_size, "%s/%s", occl_algo_name((occl_algo)a), occl_proto_name((occl_proto)p));
            }
        }
    if (!best)
        snprintf(why, why_size, "no algorithm and protocol of the row could be modelled");
    machine_free(&m);
    return best;
}

/* Splits a CSV line at commas (fields hold none); the number of fields. */
static int split(char *line, char **f, int max)
{
    int n = 0;
    for (char *p = line; n < max;) {
        f[n++] = p;
        char *comma = strchr(p, ',');
        if (!comma)
            break;
        *comma = '\0';
        p = comma + 1;
    }
    return n;
}

static int load(const char *path, row *rows, int *nrows)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "validate_model: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[2048];
    int ln = 0, bad = 0;
    *nrows = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#' || !strncmp(line, "system,", 7))
            continue;
        char *fl[16];
        int nf = split(line, fl, 16);
        row r = {.line = ln};
        char *end1, *end2, *end3, *end4;
        if (nf >= 12 && strlen(fl[0]) >= sizeof r.system) {
            fprintf(stderr, "validate_model: %s:%d: system longer than %zu characters\n", path, ln,
                    sizeof r.system - 1);
            bad = 1;
            continue;
        }
        if (nf < 12 || *nrows == MAX_ROWS) {
            fprintf(stderr, "validate_model: %s:%d: expected 12 fields\n", path, ln);
            bad = 1;
            continue;
        }
        snprintf(r.system, sizeof r.system, "%s", fl[0]);
        r.ranks = (int)strtol(fl[1], &end1, 10);
        r.per_node = (int)strtol(fl[2], &end4, 10);
        snprintf(r.coll, sizeof r.coll, "%s", fl[3]);
        r.bytes = strtod(fl[4], &end2);
        snprintf(r.algo, sizeof r.algo, "%s", fl[5]);
        snprintf(r.proto, sizeof r.proto, "%s", fl[6]);
        snprintf(r.metric, sizeof r.metric, "%s", fl[7]);
        r.value = strtod(fl[8], &end3);
        if (*end1 || *end2 || *end3 || *end4 || r.bytes < 1 || r.value <= 0 ||
            (strcmp(r.metric, "time_us") && strcmp(r.metric, "busbw_GBs"))) {
            fprintf(stderr, "validate_model: %s:%d: bad ranks, per_node, bytes, metric or value\n", path, ln);
            bad = 1;
            continue;
        }
        rows[(*nrows)++] = r;
    }
    fclose(f);
    return bad ? -1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    double max_median = -1, max_worst = -1;
    const char *path = "docs/calibration/published.csv";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--max-median") && i + 1 < argc)
            max_median = atof(argv[++i]);
        else if (!strcmp(argv[i], "--max-worst") && i + 1 < argc)
            max_worst = atof(argv[++i]);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: validate_model [--max-median PCT] [--max-worst PCT] [FILE]\n");
            return 2;
        } else
            path = argv[i];
    }
    static row rows[MAX_ROWS];
    int nrows = 0;
    if (load(path, rows, &nrows) || nrows == 0) {
        if (nrows == 0)
            fprintf(stderr, "validate_model: %s: no rows\n", path);
        return 2;
    }
    static double err[MAX_ROWS];
    int nerr = 0, failed = 0;
    printf("%-5s %-11s %9s %-13s %12s %-14s %-15s %12s %12s %12s %12s %8s\n", "line", "system", "ranks/nd",
           "collective", "bytes", "held to", "model pick", "model us", "published us", "model busbw",
           "publ. busbw", "error");
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        int ci = -1;
        for (size_t k = 0; k < sizeof colls / sizeof colls[0]; k++)
            if (!strcmp(r->coll, colls[k].name))
                ci = (int)k;
        char pick[48] = "", why[300] = "";
        uint64_t ns = ci < 0 ? 0 : model_row(r, ci, pick, sizeof pick, why, sizeof why);
        if (!ns) {
            fprintf(stderr, "validate_model: %s:%d: %s\n", path, r->line,
                    ci < 0 ? "unknown collective" : why);
            failed = 1;
            continue;
        }
        /* busbw = S / t x factor (nccl-tests' PERFORMANCE.md). */
        double factor = colls[ci].bus * (r->ranks - 1) / r->ranks;
        double model_us = (double)ns / 1e3;
        double pub_us = !strcmp(r->metric, "time_us") ? r->value : r->bytes * factor / (r->value * 1e3);
        double e = (model_us - pub_us) / pub_us * 100;
        err[nerr++] = fabs(e);
        char held[40];
        snprintf(held, sizeof held, "%s/%s", r->algo[0] ? r->algo : "-", r->proto[0] ? r->proto : "-");
        char rk[16];
        snprintf(rk, sizeof rk, "%d/%d", r->ranks, r->per_node);
        printf("%-5d %-11s %9s %-13s %12.0f %-14s %-15s %12.2f %12.2f %12.2f %12.2f %7.1f%%\n", r->line,
               r->system, rk, r->coll, r->bytes, held, pick, model_us, pub_us,
               r->bytes * factor / (model_us * 1e3), r->bytes * factor / (pub_us * 1e3), e);
    }
    if (!nerr)
        return 2;
    qsort(err, (size_t)nerr, sizeof *err, cmp_double);
    double median = nerr % 2 ? err[nerr / 2] : (err[nerr / 2 - 1] + err[nerr / 2]) / 2, worst = err[nerr - 1];
    printf("%d rows: median |error| %.1f%%, worst %.1f%%\n", nerr, median, worst);
    if (max_median >= 0 && median > max_median) {
        fprintf(stderr, "validate_model: median error %.1f%% exceeds %.1f%%\n", median, max_median);
        failed = 1;
    }
    if (max_worst >= 0 && worst > max_worst) {
        fprintf(stderr, "validate_model: worst error %.1f%% exceeds %.1f%%\n", worst, max_worst);
        failed = 1;
    }
    return failed;
}
