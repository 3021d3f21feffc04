/*
 * vreplay_perf.c - host time of a collective's replay in virtual time
 * (collectives/vcost.c, through occl_vmodel_replay_steps), which every
 * rank runs for every collective.
 *
 * Schedules of OCCL's ring all-reduce (2(n-1) steps, n transfers each) and
 * direct AlltoAll (one step, n(n-1) transfers) on nodes of 4 devices, each
 * device with a link up and down, each node a NIC out and in; "spread" puts
 * rank r on node r mod nodes, so every ring hop crosses the network and
 * hops share NICs. The baseline, in the same run, is the replay without
 * links: each transfer costs its path alone and the ranks' steps are swept
 * until none moves (what the replay did before links were contended). The
 * table gives the best of 5 repetitions per replay and the collective's
 * virtual time under each.
 *
 * usage: vreplay_perf [MAX_RANKS]   (default 64)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_util.h"
#include "vmodel.h"

#define DEVS_PER_NODE 4
static const uint64_t LAT_IN = 2000, BW_IN = 300000000000ull, LAT_X = 6000, BW_X = 25000000000ull;

typedef struct xfer_t {
    int src, dst, src_step, dst_step; /* global step numbers */
    uint64_t bytes;
    or_vpath path;
} xfer_t;

typedef struct sched {
    int n, spread;
    int *step0, *end0;
    occl_vstep_end *ends;
    uint64_t *compute, *entry, *start, *end, *bps;
    xfer_t *x;
    size_t nx;
    int *hops; /* 4 per ordered pair of ranks */
} sched;

static int node_of(int r, int n, int spread)
{
    int nodes = (n + DEVS_PER_NODE - 1) / DEVS_PER_NODE;
    return spread ? r % nodes : r / DEVS_PER_NODE;
}

/* The path from a to b; typed PIX and replayed with NVLS's family and
 * Simple, which add no per-hop latency and no wire bytes (test_vreplay). */
static or_vpath path(void *ctx, int a, int b)
{
    sched *s = ctx;
    int *h = &s->hops[4 * ((size_t)a * (size_t)s->n + (size_t)b)];
    int na = node_of(a, s->n, s->spread), nb = node_of(b, s->n, s->spread);
    h[0] = 2 * a;
    if (na == nb) {
        h[1] = 2 * b + 1;
        return (or_vpath){.latency_ns = LAT_IN, .bytes_per_s = BW_IN, .type = "PIX", .nhops = 2, .hops = h};
    }
    h[1] = 1000000 + 2 * na;
    h[2] = 1000001 + 2 * nb;
    h[3] = 2 * b + 1;
    return (or_vpath){.latency_ns = LAT_X, .bytes_per_s = BW_X, .type = "PIX", .nhops = 4, .hops = h};
}

static void add(sched *s, int src, int ss, int dst, int ds, uint64_t bytes)
{
    size_t i = s->nx++;
    s->x[i] = (xfer_t){.src = src, .dst = dst, .src_step = s->step0[src] + ss, .dst_step = s->step0[dst] + ds,
                       .bytes = bytes, .path = path(s, src, dst)};
}

static sched *build(int n, int alltoall, int spread, uint64_t bytes)
{
    sched *s = perf_xmalloc(sizeof *s);
    int steps = alltoall ? 1 : 2 * (n - 1);
    size_t nx = alltoall ? (size_t)n * (size_t)(n - 1) : (size_t)n * (size_t)steps;
    s->n = n;
    s->spread = spread;
    s->step0 = perf_xmalloc((size_t)(n + 1) * sizeof *s->step0);
    for (int r = 0; r <= n; r++)
        s->step0[r] = r * steps;
    s->compute = calloc((size_t)(n * steps), sizeof *s->compute);
    s->entry = calloc((size_t)n, sizeof *s->entry);
    s->start = perf_xmalloc((size_t)(n * steps) * sizeof *s->start);
    s->end = perf_xmalloc((size_t)n * sizeof *s->end);
    s->bps = perf_xmalloc((size_t)n * sizeof *s->bps);
    s->x = perf_xmalloc(nx * sizeof *s->x);
    s->hops = perf_xmalloc(4 * (size_t)n * (size_t)n * sizeof *s->hops);
    s->end0 = perf_xmalloc(((size_t)n * (size_t)steps + 1) * sizeof *s->end0);
    s->ends = perf_xmalloc(2 * nx * sizeof *s->ends);
    if (!s->compute || !s->entry) {
        fprintf(stderr, "vreplay_perf: out of memory\n");
        exit(1);
    }
    for (int r = 0; r < n; r++)
        s->bps[r] = 10000000000ull;
    s->nx = 0;
    for (int p = 0; p < n; p++) {
        if (alltoall) {
            for (int j = 0; j < n; j++)
                if (j != p)
                    add(s, p, 0, j, 0, bytes / (uint64_t)n);
        } else {
            for (int k = 0; k < steps; k++)
                add(s, p, k, (p + 1) % n, k, bytes / (uint64_t)n);
        }
    }
    /* The replay's input: each step's ends, its sends then its receives. */
    size_t ne = 0;
    for (int p = 0; p < n; p++)
        for (int k = 0; k < steps; k++) {
            s->end0[p * steps + k] = (int)ne;
            if (alltoall) {
                for (int j = 0; j < n; j++)
                    if (j != p)
                        s->ends[ne++] = (occl_vstep_end){.peer = j, .send = true, .bytes = bytes / (uint64_t)n};
                for (int j = 0; j < n; j++)
                    if (j != p)
                        s->ends[ne++] = (occl_vstep_end){.peer = j, .bytes = bytes / (uint64_t)n};
            } else {
                s->ends[ne++] = (occl_vstep_end){.peer = (p + 1) % n, .send = true, .bytes = bytes / (uint64_t)n};
                s->ends[ne++] = (occl_vstep_end){.peer = (p + n - 1) % n, .bytes = bytes / (uint64_t)n};
            }
        }
    s->end0[n * steps] = (int)ne;
    return s;
}

static void sched_free(sched *s)
{
    free(s->step0);
    free(s->end0);
    free(s->ends);
    free(s->compute);
    free(s->entry);
    free(s->start);
    free(s->end);
    free(s->bps);
    free(s->x);
    free(s->hops);
    free(s);
}

static uint64_t slowest(const sched *s)
{
    uint64_t m = 0;
    for (int r = 0; r < s->n; r++)
        m = s->end[r] > m ? s->end[r] : m;
    return m;
}

/* vcost.c's replay, as every collective's model runs it. */
static long run_replay(void *ctx, long count, double deadline)
{
    (void)deadline;
    sched *s = ctx;
    occl_vsystem sys = {.nranks = s->n, .path = path, .ctx = s, .rails = 1};
    occl_vsteps st = {.nranks = s->n, .step0 = s->step0, .end0 = s->end0, .ends = s->ends, .compute = s->compute};
    for (long i = 0; i < count; i++) {
        if (occl_vmodel_replay_steps(&sys, &st, OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE, s->entry, s->bps, NULL,
                                     s->end) != OCCL_VSTEPS_OK) {
            fprintf(stderr, "vreplay_perf: the replay failed\n");
            exit(1);
        }
    }
    return count;
}

/* The baseline: every transfer alone on its path; sweep the ranks, each
 * going on while its current step's transfers have both ends started. */
static long run_sweep(void *ctx, long count, double deadline)
{
    (void)deadline;
    sched *s = ctx;
    int n = s->n, nsteps = s->step0[n];
    int *cur = perf_xmalloc((size_t)n * sizeof *cur);
    size_t *first = calloc((size_t)nsteps + 1, sizeof *first), *list = perf_xmalloc(2 * s->nx * sizeof *list);
    if (!first) {
        fprintf(stderr, "vreplay_perf: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < s->nx; i++) { /* transfers by step */
        first[s->x[i].src_step + 1]++;
        first[s->x[i].dst_step + 1]++;
    }
    for (int st = 0; st < nsteps; st++)
        first[st + 1] += first[st];
    size_t *fill = perf_xmalloc((size_t)nsteps * sizeof *fill);
    memcpy(fill, first, (size_t)nsteps * sizeof *fill);
    for (size_t i = 0; i < s->nx; i++) {
        list[fill[s->x[i].src_step]++] = i;
        list[fill[s->x[i].dst_step]++] = i;
    }
    for (long it = 0; it < count; it++) {
        for (int r = 0; r < n; r++) {
            cur[r] = s->step0[r];
            if (s->step0[r] < s->step0[r + 1])
                s->start[s->step0[r]] = s->entry[r];
        }
        for (int moved = 1; moved;) {
            moved = 0;
            for (int r = 0; r < n; r++) {
                while (cur[r] < s->step0[r + 1]) {
                    int st = cur[r];
                    int ready = 1;
                    for (size_t i = first[st]; i < first[st + 1] && ready; i++) {
                        const xfer_t *x = &s->x[list[i]];
                        int other = x->src_step == st ? x->dst_step : x->src_step;
                        int owner = x->src_step == st ? x->dst : x->src;
                        ready = cur[owner] >= other;
                    }
                    if (!ready)
                        break;
                    uint64_t end = s->start[st];
                    for (size_t i = first[st]; i < first[st + 1]; i++) {
                        const xfer_t *x = &s->x[list[i]];
                        uint64_t go = s->start[x->src_step] > s->start[x->dst_step] ? s->start[x->src_step]
                                                                                    : s->start[x->dst_step];
                        uint64_t e = go + x->path.latency_ns + or_vclock_bytes_ns(x->bytes, x->path.bytes_per_s);
                        end = e > end ? e : end;
                    }
                    end += s->compute[st];
                    if (st + 1 < s->step0[r + 1])
                        s->start[st + 1] = end;
                    else
                        s->end[r] = end;
                    cur[r]++;
                    moved = 1;
                }
            }
        }
    }
    free(cur);
    free(first);
    free(list);
    free(fill);
    return count;
}

int main(int argc, char **argv)
{
    perf_prog = "vreplay_perf";
    int max = argc > 1 ? atoi(argv[1]) : 64;
    if (max < 2) {
        fprintf(stderr, "usage: vreplay_perf [MAX_RANKS >= 2]\n");
        return 2;
    }
    char load[64];
    perf_load_average(load, sizeof load);
    printf("replay host time, best of 5, 16 MiB; load before: %s\n", load);
    printf("%-10s %-7s %5s %9s %12s %12s %7s %14s %14s\n", "schedule", "place", "ranks", "transfers",
           "replay us", "sweep us", "x", "vtime ns", "alone ns");
    perf_plan plan = {1, 0.05, 1.0, 1000000};
    for (int alltoall = 0; alltoall < 2; alltoall++)
        for (int spread = 0; spread < 2; spread++)
            for (int n = 8; n <= max; n *= 2) {
                sched *s = build(n, alltoall, spread, 16u << 20);
                long c1 = perf_calibrate(run_replay, s, &plan);
                double t1 = perf_best_time(run_replay, s, c1, 5) / (double)c1;
                uint64_t v1 = slowest(s);
                long c2 = perf_calibrate(run_sweep, s, &plan);
                double t2 = perf_best_time(run_sweep, s, c2, 5) / (double)c2;
                uint64_t v2 = slowest(s);
                printf("%-10s %-7s %5d %9zu %12.1f %12.1f %7.2f %14llu %14llu\n",
                       alltoall ? "alltoall" : "allreduce", spread ? "spread" : "packed", n, s->nx, t1 * 1e6,
                       t2 * 1e6, t1 / t2, (unsigned long long)v1, (unsigned long long)v2);
                sched_free(s);
            }
    return 0;
}
