/*
 * launch/ortopo.c - look at a cluster topology: the device matrix (path type
 * and bandwidth between every pair, like `nvidia-smi topo -m`), the
 * topology as XML, a validation of a file, the rings and trees OCCL
 * builds on it, and the placement file of a job (a start for one's own).
 */
#include "topo.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ortopo [options] [TOPOLOGY]\n"
            "\n"
            "TOPOLOGY is a preset name, a synthetic string or an XML file (a name ending in\n"
            ".xml), as OPENREG_TOPO takes it; without one, OPENREG_TOPO is used.\n"
            "\n"
            "  (default)            print the device matrix: path type and bandwidth (GB/s)\n"
            "  --xml                print the topology in this project's XML format\n"
            "  --paths              print every device pair's path, link by link\n"
            "  --check FILE         validate a topology file; errors name the line\n"
            "  --rings              print the ring OCCL builds for the job\n"
            "  --trees              print the two trees OCCL builds for the job\n"
            "  --print-placement    print the job's placement file (one 'RANK: DEVICE...'\n"
            "                       line per rank), e.g. to start one's own from spread\n"
            "  -n, --ranks N        ranks of the job (default: as many as fit)\n"
            "  -d, --devices-per-rank D  devices each rank hosts (default 1)\n"
            "  --placement P        packed, spread or a placement file (default packed;\n"
            "                       ./packed for a file named packed)\n"
            "  --presets            list the presets\n"
            "  -h, --help           this text\n"
            "\n"
            "Exit status: 0 on success, 1 for an invalid topology or a job that does not\n"
            "fit, 2 for a usage error.\n");
}

static int report(const or_topo_error *err)
{
    char msg[1024];
    or_topo_error_format(err, msg, sizeof msg);
    fprintf(stderr, "ortopo: %s\n", msg);
    return 1;
}

static void print_matrix(const or_topo *t)
{
    int n = or_topo_device_count(t);
    printf("topology %s: %d node%s, %d device%s\n", or_topo_name(t), or_topo_node_count(t),
           or_topo_node_count(t) == 1 ? "" : "s", n, n == 1 ? "" : "s");
    printf("%-8s", "");
    for (int j = 0; j < n; j++) {
        char label[16];
        snprintf(label, sizeof label, "D%d", j);
        printf(" %-9s", label);
    }
    printf(" %-6s %s\n", "node", "host path");
    for (int i = 0; i < n; i++) {
        char label[16];
        snprintf(label, sizeof label, "D%d", i);
        printf("%-8s", label);
        for (int j = 0; j < n; j++) {
            const or_topo_path *p = or_topo_path_between(t, i, j);
            char cell[32];
            if (i == j)
                snprintf(cell, sizeof cell, "X");
            else
                snprintf(cell, sizeof cell, "%s %.3g", or_topo_path_type_name(p->type),
                         p->bandwidth / 1e9);
            printf(" %-9s", cell);
        }
        const or_topo_path *h = or_topo_host_path(t, i);
        char host[32] = "-";
        if (h)
            snprintf(host, sizeof host, "%s %.3g", or_topo_path_type_name(h->type),
                     h->bandwidth / 1e9);
        printf(" %-6d %s\n", or_topo_device_node(t, i), host);
    }
    printf("\ndevices:");
    for (int i = 0; i < n; i++)
        printf(" D%d=%s", i, or_topo_vertex(t, or_topo_device_vertex(t, i)).id);
    printf("\n\nLegend: TYPE BW = path type and bottleneck bandwidth in GB/s per direction\n"
           "  X   = self\n"
           "  NVL = device fabric only (direct or through NVSwitches)\n"
           "  NVB = device fabric through another device\n"
           "  PIX = PCIe through at most one PCIe switch\n"
           "  PXB = PCIe through several PCIe switches\n"
           "  PHB = through a host CPU (PCIe host bridge)\n"
           "  SYS = between the CPUs of a node\n"
           "  NET = between nodes, over the network\n");
}

static void print_path(const or_topo *t, const or_topo_path *p, int src_vertex)
{
    printf("%s %.6g GB/s %.6g us:", or_topo_path_type_name(p->type), p->bandwidth / 1e9,
           p->latency_ns / 1e3);
    printf(" %s", or_topo_vertex(t, src_vertex).id);
    for (int k = 0; k < p->nhops; k++) {
        or_topo_link_info l = or_topo_link(t, p->hops[k] / 2);
        int to = p->hops[k] % 2 ? l.a : l.b;
        printf(" -%s-> %s", or_topo_link_kind_name(l.kind), or_topo_vertex(t, to).id);
    }
    printf("\n");
}

static void print_paths(const or_topo *t)
{
    int n = or_topo_device_count(t);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            if (i == j)
                continue;
            printf("D%d -> D%d: ", i, j);
            print_path(t, or_topo_path_between(t, i, j), or_topo_device_vertex(t, i));
        }
        const or_topo_path *h = or_topo_host_path(t, i);
        if (h) {
            printf("D%d -> host: ", i);
            print_path(t, h, or_topo_device_vertex(t, i));
        }
    }
}

/* How the job is placed: packed, spread, or a file (how_file). */
typedef struct {
    or_topo_placement how;
    const char *file;
} job_placement;

/* Rings and trees are over the job's devices: entry r*per_rank+d is rank r's
 * device d. Printed as job entries with their topology device. */
static int print_job(const or_topo *t, int nranks, int per_rank, job_placement place,
                     int rings, int trees, int placement_file)
{
    or_topo_error err;
    int n = nranks * per_rank;
    int *dev = malloc(sizeof *dev * (size_t)n);
    int *order = malloc(sizeof *order * (size_t)n);
    or_topo_tree_vertex *tv = malloc(sizeof *tv * 2 * (size_t)n);
    int rc = 0;
    if (!dev || !order || !tv) {
        fprintf(stderr, "ortopo: out of memory\n");
        rc = 1;
        goto out;
    }
    if (place.file ? or_topo_place_file(t, place.file, nranks, per_rank, dev, &err)
                   : or_topo_place(t, nranks, per_rank, place.how, dev, &err)) {
        rc = report(&err);
        goto out;
    }
    char what[512];
    if (place.file)
        snprintf(what, sizeof what, "placement file %s", place.file);
    else
        snprintf(what, sizeof what, "%s placement",
                 place.how == OR_TOPO_PLACE_SPREAD ? "spread" : "packed");
    if (placement_file) {
        char comment[1024], *text;
        size_t len;
        snprintf(comment, sizeof comment, "%d rank%s x %d device%s on topology %s, %s",
                 nranks, nranks == 1 ? "" : "s", per_rank, per_rank == 1 ? "" : "s",
                 or_topo_name(t), what);
        if (or_topo_write_placement(t, nranks, per_rank, dev, comment, &text, &len, &err)) {
            rc = report(&err);
            goto out;
        }
        fwrite(text, 1, len, stdout);
        free(text);
        goto out;
    }
    printf("job: %d rank%s x %d device%s, %s\n", nranks, nranks == 1 ? "" : "s", per_rank,
           per_rank == 1 ? "" : "s", what);
    for (int r = 0; r < nranks; r++) {
        printf("  rank %d:", r);
        for (int d = 0; d < per_rank; d++)
            printf(" D%d(node %d)", dev[r * per_rank + d],
                   or_topo_device_node(t, dev[r * per_rank + d]));
        printf("\n");
    }
    if (rings) {
        if (or_topo_ring(t, dev, n, order, &err)) {
            rc = report(&err);
            goto out;
        }
        int crossings = 0;
        double bottleneck = 0;
        printf("ring:");
        for (int i = 0; i < n; i++) {
            int a = dev[order[i]], b = dev[order[(i + 1) % n]];
            const or_topo_path *p = or_topo_path_between(t, a, b);
            crossings += p->type == OR_TOPO_PATH_NET;
            if (a != b && (bottleneck == 0 || p->bandwidth < bottleneck))
                bottleneck = p->bandwidth;
            printf(" r%d.%d(D%d)", order[i] / per_rank, order[i] % per_rank, a);
        }
        printf("\nring: %d network crossing%s, bottleneck %.6g GB/s\n", crossings,
               crossings == 1 ? "" : "s", bottleneck / 1e9);
    }
    if (trees) {
        if (or_topo_trees(t, dev, n, tv, &err)) {
            rc = report(&err);
            goto out;
        }
        for (int k = 0; k < 2; k++) {
            printf("tree %d:\n", k);
            for (int i = 0; i < n; i++) {
                const or_topo_tree_vertex *v = &tv[k * n + i];
                printf("  r%d.%d(D%d) parent ", i / per_rank, i % per_rank, dev[i]);
                if (v->parent < 0)
                    printf("-");
                else
                    printf("r%d.%d", v->parent / per_rank, v->parent % per_rank);
                printf(" children");
                for (int c = 0; c < v->nchildren; c++)
                    printf(" r%d.%d", v->children[c] / per_rank, v->children[c] % per_rank);
                if (v->nchildren == 0)
                    printf(" -");
                printf("\n");
            }
        }
    }
out:
    free(dev);
    free(order);
    free(tv);
    return rc;
}

static int parse_positive(const char *opt, const char *text, int *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (*text < '0' || *text > '9' || *end || v < 1 || v > 1 << 20) {
        fprintf(stderr, "ortopo: %s takes a whole number from 1, not '%s'\n", opt, text);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    enum { OPT_XML = 256, OPT_PATHS, OPT_CHECK, OPT_RINGS, OPT_TREES, OPT_PRINT_PLACEMENT,
           OPT_PLACEMENT, OPT_PRESETS };
    static const struct option options[] = {
        {"xml", no_argument, NULL, OPT_XML},
        {"paths", no_argument, NULL, OPT_PATHS},
        {"check", required_argument, NULL, OPT_CHECK},
        {"rings", no_argument, NULL, OPT_RINGS},
        {"trees", no_argument, NULL, OPT_TREES},
        {"print-placement", no_argument, NULL, OPT_PRINT_PLACEMENT},
        {"ranks", required_argument, NULL, 'n'},
        {"devices-per-rank", required_argument, NULL, 'd'},
        {"placement", required_argument, NULL, OPT_PLACEMENT},
        {"presets", no_argument, NULL, OPT_PRESETS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int xml = 0, paths = 0, rings = 0, trees = 0, print_placement = 0, nranks = 0, per_rank = 1;
    const char *check = NULL;
    job_placement place = {OR_TOPO_PLACE_PACKED, NULL};
    int c;
    while ((c = getopt_long(argc, argv, "hn:d:", options, NULL)) != -1) {
        switch (c) {
        case OPT_XML: xml = 1; break;
        case OPT_PATHS: paths = 1; break;
        case OPT_CHECK: check = optarg; break;
        case OPT_RINGS: rings = 1; break;
        case OPT_TREES: trees = 1; break;
        case OPT_PRINT_PLACEMENT: print_placement = 1; break;
        case 'n':
            if (parse_positive("--ranks", optarg, &nranks))
                return 2;
            break;
        case 'd':
            if (parse_positive("--devices-per-rank", optarg, &per_rank))
                return 2;
            break;
        case OPT_PLACEMENT:
            /* As OPENREG_PLACEMENT: a keyword in any case, else a file. */
            place.file = NULL;
            if (strcasecmp(optarg, "packed") == 0)
                place.how = OR_TOPO_PLACE_PACKED;
            else if (strcasecmp(optarg, "spread") == 0)
                place.how = OR_TOPO_PLACE_SPREAD;
            else {
                /* A name that is neither keyword nor file is a usage error;
                 * what the file says is checked against the job later. */
                FILE *f = *optarg ? fopen(optarg, "r") : NULL;
                if (!f) {
                    fprintf(stderr, "ortopo: --placement is packed, spread or a placement "
                                    "file; '%s': %s\n",
                            optarg, *optarg ? strerror(errno) : "empty name");
                    return 2;
                }
                fclose(f);
                place.file = optarg;
            }
            break;
        case OPT_PRESETS: {
            const char *const *names = or_topo_preset_names();
            for (int i = 0; names[i]; i++)
                printf("%-12s %s\n", names[i], or_topo_preset_help(names[i]));
            return 0;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    or_topo *t = NULL;
    or_topo_error err;
    if (check) {
        if (optind < argc) {
            fprintf(stderr, "ortopo: --check takes one file and nothing else\n");
            return 2;
        }
        if (or_topo_from_xml_file(check, &t, &err))
            return report(&err);
        printf("%s: valid: %d node%s, %d device%s, %d links\n", check, or_topo_node_count(t),
               or_topo_node_count(t) == 1 ? "" : "s", or_topo_device_count(t),
               or_topo_device_count(t) == 1 ? "" : "s", or_topo_link_count(t));
        or_topo_free(t);
        return 0;
    }
    if (optind + 1 < argc) {
        fprintf(stderr, "ortopo: one topology at a time (quote a synthetic string)\n");
        return 2;
    }
    const char *spec = optind < argc ? argv[optind] : getenv("OPENREG_TOPO");
    const char *source = optind < argc ? "topology" : "OPENREG_TOPO";
    if (!spec || !*spec) {
        fprintf(stderr, "ortopo: no topology: give one or set OPENREG_TOPO\n");
        usage(stderr);
        return 2;
    }
    if (or_topo_load(spec, source, &t, &err))
        return report(&err);
    int rc = 0;
    if (xml) {
        char *text;
        size_t len;
        if (or_topo_write_xml(t, &text, &len, &err)) {
            rc = report(&err);
        } else {
            fwrite(text, 1, len, stdout);
            free(text);
        }
    } else if (paths) {
        print_paths(t);
    } else if (rings || trees || print_placement) {
        if (nranks == 0)
            nranks = or_topo_device_count(t) / per_rank;
        rc = print_job(t, nranks > 0 ? nranks : 1, per_rank, place, rings, trees,
                       print_placement);
    } else {
        print_matrix(t);
    }
    or_topo_free(t);
    return rc;
}
