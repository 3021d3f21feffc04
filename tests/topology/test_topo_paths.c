/* tests/topology/test_topo_paths.c - the paths or_topo_path_between computes
 * per pair, on demand (two searches stopped at the target), against the
 * whole-fabric searches that define them (ot_path_full_row): type,
 * bandwidth, latency and every hop, bit for bit, for every pair of small
 * topologies and sampled sources of large ones, asked in a scattered order
 * so the kept pairs and the reused search scratch are exercised. */
#include "topo_internal.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static or_topo *load(const char *spec)
{
    char buf[512];
    size_t n = strlen(spec);
    if (n > 4 && strcmp(spec + n - 4, ".xml") == 0)
        snprintf(buf, sizeof buf, "%s/data/%s", TOPO_DATA_DIR, spec);
    else
        snprintf(buf, sizeof buf, "%s", spec);
    or_topo *t = NULL;
    or_topo_error err;
    or_topo_status rc = or_topo_load(buf, "test", &t, &err);
    cr_assert_eq(rc, OR_TOPO_OK, "%s: %s", spec, err.message);
    return t;
}

static void same_path(const char *spec, int d, int e, const or_topo_path *got,
                      const or_topo_path *want)
{
    cr_assert_not_null(got, "%s: %d->%d: no path", spec, d, e);
    cr_assert_eq(got->type, want->type, "%s: %d->%d: type %s, the full search %s", spec, d, e,
                 or_topo_path_type_name(got->type), or_topo_path_type_name(want->type));
    cr_assert(memcmp(&got->bandwidth, &want->bandwidth, sizeof got->bandwidth) == 0,
              "%s: %d->%d: bandwidth %.17g, the full search %.17g", spec, d, e, got->bandwidth,
              want->bandwidth);
    cr_assert(memcmp(&got->latency_ns, &want->latency_ns, sizeof got->latency_ns) == 0,
              "%s: %d->%d: latency %.17g, the full search %.17g", spec, d, e, got->latency_ns,
              want->latency_ns);
    cr_assert_eq(got->nhops, want->nhops, "%s: %d->%d: %d hops, the full search %d", spec, d, e,
                 got->nhops, want->nhops);
    for (int h = 0; h < got->nhops; h++)
        cr_assert_eq(got->hops[h], want->hops[h], "%s: %d->%d: hop %d is %d, the full search %d",
                     spec, d, e, h, got->hops[h], want->hops[h]);
}

/* Compare the sources s = first, first + step, ... (all when step is 1),
 * each against every destination, destinations visited with a stride prime
 * to n and sources interleaved, so a source's pairs are not asked in a row. */
static void compare(const char *spec, int step)
{
    or_topo *t = load(spec);
    int n = or_topo_device_count(t);
    cr_assert_gt(n, 1, "%s", spec);
    int nsrc = (n + step - 1) / step;
    or_topo_path **full = calloc((size_t)nsrc, sizeof *full);
    int **pools = calloc((size_t)nsrc, sizeof *pools);
    cr_assert(full && pools);
    for (int i = 0; i < nsrc; i++) {
        full[i] = malloc(sizeof **full * ((size_t)n + 1));
        cr_assert_not_null(full[i]);
        cr_assert_eq(ot_path_full_row(t, i * step, full[i], &pools[i]), 0, "%s", spec);
    }
    int stride = 1;
    for (int c = 7; c < n + 7; c += 2)
        if (n % c != 0 && c % n != 0) {
            int a = c, b = n; /* gcd */
            while (b) {
                int r = a % b;
                a = b;
                b = r;
            }
            if (a == 1) {
                stride = c % n ? c % n : 1;
                break;
            }
        }
    long checked = 0;
    for (int round = 0; round < 2; round++) /* the second round reads the kept pairs */
        for (int k = 0; k < n; k++) {
            int e = (int)(((long)k * stride) % n);
            for (int i = 0; i < nsrc; i++) {
                int d = i * step;
                same_path(spec, d, e, or_topo_path_between(t, d, e), &full[i][e]);
                checked++;
            }
        }
    for (int i = 0; i < nsrc; i++) {
        int d = i * step;
        const or_topo_path *h = or_topo_host_path(t, d);
        if (full[i][n].nhops == 0)
            cr_assert_null(h, "%s: device %d: a host path the full search has not", spec, d);
        else
            same_path(spec, d, -1, h, &full[i][n]);
    }
    cr_assert_eq(checked, 2L * n * nsrc);
    for (int i = 0; i < nsrc; i++) {
        free(full[i]);
        free(pools[i]);
    }
    free(full);
    free(pools);
    or_topo_free(t);
}

Test(paths, presets_every_pair)
{
    const char *specs[] = {"full8", "ring8", "torus4x4", "switch8", "dgx-a100", "dgx-a100x2",
                           "dgx-h100x2"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
        compare(specs[i], 1);
}

Test(paths, synthetic_every_pair)
{
    const char *specs[] = {
        "nodes:3 devices:4 intra:300GB/s,1us inter:25GB/s,5us",
        "nodes:5 devices:2 shape:full",
        "box:dgx-h100 nodes:4 fabric:rails",
        "box:dgx-a100 nodes:6 fabric:leaf-spine leaf:2 oversub:2",
        "nodes:8 devices:4 fabric:leaf-spine leaf:3",
    };
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
        compare(specs[i], 1);
}

Test(paths, xml_every_pair)
{
    const char *specs[] = {"azure-ndv4-topo.xml", "fat-tree.xml", "nccl-dgx-a100-dump.xml",
                           "nccl-two-hosts.xml", "nccl-v100-p2p.xml"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++)
        compare(specs[i], 1);
}

/* Large fabrics: every destination from a sample of sources (all of one
 * node, then one device in several). */
Test(paths, large_sampled)
{
    compare("nvl72x2", 7);
    compare("box:dgx-h100 nodes:32 fabric:rails", 9);
    compare("box:dgx-h100 nodes:24 fabric:leaf-spine leaf:4 oversub:3", 13);
}

/* Out of range: no path, as before. */
Test(paths, out_of_range)
{
    or_topo *t = load("dgx-a100");
    cr_assert_null(or_topo_path_between(t, -1, 0));
    cr_assert_null(or_topo_path_between(t, 0, 8));
    cr_assert_null(or_topo_host_path(t, 8));
    or_topo_path row[9];
    int *pool = NULL;
    cr_assert_eq(ot_path_full_row(t, 8, row, &pool), -1);
    const or_topo_path *loc = or_topo_path_between(t, 3, 3);
    cr_assert_not_null(loc);
    cr_assert_eq(loc->type, OR_TOPO_PATH_LOC);
    cr_assert_eq(loc->nhops, 0);
    cr_assert_eq(loc->bandwidth, 0);
    /* Asked twice: the kept path itself. */
    cr_assert_eq(or_topo_path_between(t, 1, 6), or_topo_path_between(t, 1, 6));
    or_topo_free(t);
}

/* Threads asking for the same pairs at once, each in its own order: every
 * caller gets the one kept path of a pair (the loser of a race drops its
 * copy), equal to the full search's. */
#define NTHREADS 4
typedef struct {
    const or_topo *t;
    int n, id;
    const or_topo_path **got; /* n*n */
} asker;

static void *ask_all(void *arg)
{
    asker *a = arg;
    for (int k = 0; k < a->n * a->n; k++) {
        int idx = (int)(((long)k * (2 * a->id + 1) + a->id * 7) % (a->n * a->n));
        a->got[idx] = or_topo_path_between(a->t, idx / a->n, idx % a->n);
        (void)or_topo_host_path(a->t, idx / a->n);
    }
    return NULL;
}

Test(paths, threads_share_kept_paths)
{
    const char *spec = "box:dgx-h100 nodes:4 fabric:rails";
    or_topo *t = load(spec);
    int n = or_topo_device_count(t);
    asker a[NTHREADS];
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        a[i] = (asker){t, n, i, calloc((size_t)n * n, sizeof(const or_topo_path *))};
        cr_assert_not_null(a[i].got);
    }
    for (int i = 0; i < NTHREADS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, ask_all, &a[i]), 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    or_topo_path *full = malloc(sizeof *full * ((size_t)n + 1));
    cr_assert_not_null(full);
    for (int d = 0; d < n; d++) {
        int *pool = NULL;
        cr_assert_eq(ot_path_full_row(t, d, full, &pool), 0);
        for (int e = 0; e < n; e++) {
            for (int i = 1; i < NTHREADS; i++)
                cr_assert_eq(a[i].got[d * n + e], a[0].got[d * n + e],
                             "%d->%d: threads got different copies", d, e);
            same_path(spec, d, e, a[0].got[d * n + e], &full[e]);
        }
        free(pool);
    }
    free(full);
    for (int i = 0; i < NTHREADS; i++)
        free(a[i].got);
    or_topo_free(t);
}
