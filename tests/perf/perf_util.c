/* tests/perf/perf_util.c - helpers shared by the benchmark programs. */
#include "perf_util.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void *(*volatile perf_memcpy)(void *, const void *, size_t) = memcpy;

const char *perf_prog = "perf";

static void exit_failure(void) { exit(1); }
void (*perf_fatal)(void) = exit_failure;

double perf_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void *perf_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1); /* malloc(0) may return NULL: not a failure */
    if (!p) {
        fflush(stdout);
        fprintf(stderr, "%s: out of host memory (%zu bytes)\n", perf_prog, n);
        perf_fatal();
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void perf_percentiles(double *v, size_t n, double *median, double *p99)
{
    qsort(v, n, sizeof *v, cmp_double);
    *median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    size_t rank = (n * 99 + 99) / 100; /* ceil(0.99 n) */
    *p99 = v[rank > 0 ? rank - 1 : 0];
}

long perf_calibrate(perf_body body, void *ctx, const perf_plan *plan)
{
    long count = plan->initial > 0 ? plan->initial : 1;
    double t0 = perf_now_s();
    long done = body(ctx, count, plan->max_s > 0 ? t0 + plan->max_s : 0);
    double per_op = done > 0 ? (perf_now_s() - t0) / (double)done : 0;
    double want = (double)count;
    if (per_op <= 0) {
        want = (double)plan->max_count;
    } else {
        if (want * per_op < plan->min_s)
            want = plan->min_s / per_op;
        if (plan->max_s > 0 && want * per_op > plan->max_s)
            want = plan->max_s / per_op;
    }
    if (want >= (double)plan->max_count)
        return plan->max_count;
    return want < 1 ? 1 : (long)want + (want > (double)(long)want);
}

double perf_best_time(perf_body body, void *ctx, long count, int reps)
{
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = perf_now_s();
        body(ctx, count, 0);
        double t = perf_now_s() - t0;
        if (r == 0 || t < best)
            best = t;
    }
    return best;
}

void perf_format_size(char *buf, size_t len, size_t bytes)
{
    if (bytes >= MiB && bytes % MiB == 0)
        snprintf(buf, len, "%zu MiB", bytes / MiB);
    else if (bytes >= KiB && bytes % KiB == 0)
        snprintf(buf, len, "%zu KiB", bytes / KiB);
    else
        snprintf(buf, len, "%zu B", bytes);
}

int perf_parse_size(const char *s, size_t *out)
{
    /* strtoull alone would take spaces, signs and wrap "-5" around. */
    if (!isdigit((unsigned char)s[0]))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: break;
    }
    if (shift) {
        end++;
        if ((*end == 'i' || *end == 'I') && (end[1] == 'B' || end[1] == 'b'))
            end++;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || v > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)v << shift;
    return 0;
}

void perf_load_average(char *buf, size_t len)
{
    snprintf(buf, len, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f)
        return;
    if (!fgets(buf, (int)len, f))
        snprintf(buf, len, "?");
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
}
