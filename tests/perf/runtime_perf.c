/*
 * runtime_perf.c - latency and copy bandwidth of the OpenReg runtime.
 *
 * Prints three tables:
 *   1. launch latency: an empty kernel launch + orStreamSynchronize, and the
 *      same with one block per compute thread when the device has several
 *      (median and p99, microseconds);
 *   2. event latency: orEventRecord on an idle stream + orEventSynchronize;
 *   3. copy bandwidth: H2D (pinned host), D2H (pinned host), D2D on one
 *      device and D2D between two devices, each as orMemcpyAsync +
 *      orStreamSynchronize, next to plain memcpy between ordinary buffers of
 *      the same size measured in the same run. The ratio runtime/memcpy says
 *      how much of the machine's copy speed the runtime delivers.
 *
 * Bandwidth is the best of several repetitions, each timing enough copies to
 * move 32 MiB and last at least 10 ms, so that a 2-core machine shared with
 * the runtime's own worker threads still gives stable numbers. Small sizes
 * are cache-resident for the runtime and for memcpy alike. GB/s = 1e9 B/s.
 *
 * Usage: runtime_perf [-i iterations] [-s max_size] [-r repetitions] [-h]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "openreg.h"

#define CHECK(call)                                                                    \
    do {                                                                               \
        orError_t check_err_ = (call);                                                 \
        if (check_err_ != orSuccess) {                                                 \
            fflush(stdout); /* keep the report after what was printed before */       \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,  \
                    orGetErrorName(check_err_), orGetErrorString(check_err_));         \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#define KiB ((size_t)1024)
#define MiB (KiB * KiB)

/* A bandwidth repetition moves at least BYTES_PER_REP and lasts at least
 * MIN_REP_SECONDS: long enough that one preemption on a busy 2-core machine
 * does not decide the result. */
#define BYTES_PER_REP (32 * MiB)
#define MIN_REP_SECONDS 0.01
#define MAX_COPIES_PER_REP (1 << 20)

/* Through a volatile pointer, so the compiler cannot drop or shorten the
 * reference copies whose results nobody reads. */
static void *(*volatile memcpy_fn)(void *, const void *, size_t) = memcpy;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "runtime_perf: out of host memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and 99th percentile (nearest rank) of n samples; sorts them. */
static void percentiles(double *v, size_t n, double *median, double *p99)
{
    qsort(v, n, sizeof *v, cmp_double);
    *median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    size_t rank = (size_t)((n * 99 + 99) / 100); /* ceil(0.99 n) */
    *p99 = v[rank > 0 ? rank - 1 : 0];
}

static void empty_kernel(const orKernelContext *ctx, void *args)
{
    (void)ctx;
    (void)args;
}

/* ---- latency ---------------------------------------------------------- */

struct latency {
    const char *name;
    double median_us, p99_us;
};

static struct latency launch_latency(const char *name, orStream_t s, orDim3 grid, int warmup,
                                     int iters, double *samples)
{
    const orDim3 one = {1, 1, 1};
    for (int k = 0; k < warmup; k++) {
        CHECK(orLaunchKernel(empty_kernel, grid, one, NULL, 0, 0, s));
        CHECK(orStreamSynchronize(s));
    }
    for (int k = 0; k < iters; k++) {
        double t0 = now_s();
        CHECK(orLaunchKernel(empty_kernel, grid, one, NULL, 0, 0, s));
        CHECK(orStreamSynchronize(s));
        samples[k] = (now_s() - t0) * 1e6;
    }
    struct latency r = {name, 0, 0};
    percentiles(samples, (size_t)iters, &r.median_us, &r.p99_us);
    return r;
}

static struct latency event_latency(const char *name, orStream_t s, int warmup, int iters,
                                    double *samples)
{
    orEvent_t e;
    CHECK(orEventCreate(&e));
    for (int k = 0; k < warmup; k++) {
        CHECK(orEventRecord(e, s));
        CHECK(orEventSynchronize(e));
    }
    for (int k = 0; k < iters; k++) {
        double t0 = now_s();
        CHECK(orEventRecord(e, s));
        CHECK(orEventSynchronize(e));
        samples[k] = (now_s() - t0) * 1e6;
    }
    CHECK(orEventDestroy(e));
    struct latency r = {name, 0, 0};
    percentiles(samples, (size_t)iters, &r.median_us, &r.p99_us);
    return r;
}

/* ---- bandwidth -------------------------------------------------------- */

/* One bandwidth measurement: a copy function and its arguments. */
struct copy_op {
    void *dst;
    const void *src;
    size_t size;
    orMemcpyKind kind;
    orStream_t stream; /* NULL: plain memcpy, the reference */
};

/* Each runtime copy is synchronized on its own: that is what a caller
 * waiting for its data sees, enqueue and wake-up costs included. */
static void run_copies(const struct copy_op *op, long copies)
{
    for (long c = 0; c < copies; c++) {
        if (op->stream) {
            CHECK(orMemcpyAsync(op->dst, op->src, op->size, op->kind, op->stream));
            CHECK(orStreamSynchronize(op->stream));
        } else {
            memcpy_fn(op->dst, op->src, op->size);
        }
    }
}

/* Best GB/s over reps repetitions. The first, untimed round warms caches,
 * page tables and workers, and calibrates the copies per repetition. */
static double bandwidth(const struct copy_op *op, int reps)
{
    long copies = (long)(BYTES_PER_REP / op->size);
    if (copies < 1)
        copies = 1;
    double t0 = now_s();
    run_copies(op, copies);
    double t = now_s() - t0;
    if (t < MIN_REP_SECONDS) {
        double want = (t > 0 ? MIN_REP_SECONDS / t : MAX_COPIES_PER_REP) * copies;
        copies = want > MAX_COPIES_PER_REP ? MAX_COPIES_PER_REP : (long)want + 1;
    }

    double best = 0.0;
    for (int r = 0; r < reps; r++) {
        t0 = now_s();
        run_copies(op, copies);
        double gbs = (double)op->size * copies / (now_s() - t0) / 1e9;
        if (gbs > best)
            best = gbs;
    }
    return best;
}

static void format_size(char *buf, size_t len, size_t bytes)
{
    if (bytes >= MiB && bytes % MiB == 0)
        snprintf(buf, len, "%zu MiB", bytes / MiB);
    else if (bytes >= KiB && bytes % KiB == 0)
        snprintf(buf, len, "%zu KiB", bytes / KiB);
    else
        snprintf(buf, len, "%zu B", bytes);
}

/* "64M", "4k", "1G", "65536": binary units, like OPENREG_DEVICE_MEM. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: return -1;
    }
    if (*end == 'i' && end[1] == 'B')
        end += 2;
    else if (*end == 'B')
        end++;
    if (*end != '\0' || v == 0 || v > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)v << shift;
    return 0;
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [-i iterations] [-s max_size] [-r repetitions] [-h]\n"
            "  -i N   timed iterations of each latency test (default 20000; warm-up is N/10)\n"
            "  -s S   largest copy size, K/M/G suffixes allowed (default 64M; sizes go\n"
            "         from 4K up in powers of 4)\n"
            "  -r N   repetitions per bandwidth point, the best is reported (default 5)\n"
            "  -h     this help\n"
            "Environment: OPENREG_DEVICES, OPENREG_DEVICE_MEM, OPENREG_DEVICE_THREADS apply.\n",
            prog);
}

int main(int argc, char **argv)
{
    int iters = 20000, reps = 5;
    size_t max_size = 64 * MiB;
    int opt;
    while ((opt = getopt(argc, argv, "i:s:r:h")) != -1) {
        switch (opt) {
        case 'i':
            iters = atoi(optarg);
            if (iters < 1) {
                fprintf(stderr, "runtime_perf: -i needs a positive number\n");
                return 2;
            }
            break;
        case 's':
            if (parse_size(optarg, &max_size) != 0 || max_size < 4 * KiB) {
                fprintf(stderr, "runtime_perf: -s needs a size of at least 4K (e.g. 16M)\n");
                return 2;
            }
            break;
        case 'r':
            reps = atoi(optarg);
            if (reps < 1) {
                fprintf(stderr, "runtime_perf: -r needs a positive number\n");
                return 2;
            }
            break;
        case 'h':
            usage(stdout, argv[0]);
            return 0;
        default:
            usage(stderr, argv[0]);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr, argv[0]);
        return 2;
    }

    int count = 0;
    CHECK(orGetDeviceCount(&count));
    orDeviceProp prop;
    CHECK(orGetDeviceProperties(&prop, 0));
    printf("OpenReg runtime benchmark: %d device%s; device 0: %s, %d compute thread%s, "
           "cpus %s, NUMA node %d; host has %ld online cpus\n",
           count, count == 1 ? "" : "s", prop.name, prop.multiProcessorCount,
           prop.multiProcessorCount == 1 ? "" : "s", prop.cpuList, prop.numaNode,
           sysconf(_SC_NPROCESSORS_ONLN));

    CHECK(orSetDevice(0));
    orStream_t s;
    CHECK(orStreamCreate(&s));

    /* Latency tables. */
    int warmup = iters / 10 > 100 ? iters / 10 : 100;
    double *samples = xmalloc((size_t)iters * sizeof *samples);
    orDim3 one = {1, 1, 1};
    orDim3 wide = {(unsigned)(prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1), 1, 1};
    char wide_name[64];
    snprintf(wide_name, sizeof wide_name, "launch (%u blocks) + stream sync", wide.x);
    struct latency lat[3];
    int nlat = 0;
    lat[nlat++] = launch_latency("launch (1 block) + stream sync", s, one, warmup, iters, samples);
    /* One block per compute thread wakes them all; with one thread it is the row above. */
    if (wide.x > 1)
        lat[nlat++] = launch_latency(wide_name, s, wide, warmup, iters, samples);
    lat[nlat++] = event_latency("event record + event sync", s, warmup, iters, samples);
    free(samples);

    printf("\nlatency, microseconds (%d iterations after %d warm-up)\n", iters, warmup);
    printf("  %-36s %10s %10s\n", "operation", "median", "p99");
    for (int k = 0; k < nlat; k++)
        printf("  %-36s %10.2f %10.2f\n", lat[k].name, lat[k].median_us, lat[k].p99_us);

    /* Bandwidth table. Buffers are allocated once at the largest size and
     * touched first, so no size pays for page faults the others skip. */
    void *hsrc, *hdst, *d0a, *d0b, *d1 = NULL;
    CHECK(orMallocHost(&hsrc, max_size));
    CHECK(orMallocHost(&hdst, max_size));
    CHECK(orMalloc(&d0a, max_size));
    CHECK(orMalloc(&d0b, max_size));
    int peer = count >= 2;
    if (peer) {
        CHECK(orSetDevice(1));
        CHECK(orMalloc(&d1, max_size));
        CHECK(orSetDevice(0));
    }
    char *msrc = xmalloc(max_size), *mdst = xmalloc(max_size);
    memset(hsrc, 1, max_size);
    memset(hdst, 2, max_size);
    memset(msrc, 3, max_size);
    memset(mdst, 4, max_size);
    CHECK(orMemsetAsync(d0a, 5, max_size, s));
    CHECK(orMemsetAsync(d0b, 6, max_size, s));
    if (peer)
        CHECK(orMemsetAsync(d1, 7, max_size, s));
    CHECK(orStreamSynchronize(s));

    printf("\ncopy bandwidth, GB/s, orMemcpyAsync + orStreamSynchronize per copy "
           "(best of %d; x = runtime / memcpy)\n",
           reps);
    printf("  %8s %8s %15s %15s %15s %15s\n", "size", "memcpy", "H2D (pinned)", "D2H (pinned)",
           "D2D", "D2D dev0->dev1");
    for (size_t size = 4 * KiB; size <= max_size; size *= 4) {
        const struct copy_op ops[5] = {
            {mdst, msrc, size, orMemcpyHostToHost, NULL},
            {d0a, hsrc, size, orMemcpyHostToDevice, s},
            {hdst, d0a, size, orMemcpyDeviceToHost, s},
            {d0b, d0a, size, orMemcpyDeviceToDevice, s},
            {d1, d0a, size, orMemcpyDeviceToDevice, s},
        };
        double ref = bandwidth(&ops[0], reps);
        double bw[4];
        for (int k = 0; k < 4; k++)
            bw[k] = (k < 3 || peer) ? bandwidth(&ops[k + 1], reps) : 0.0;
        char sz[32];
        format_size(sz, sizeof sz, size);
        printf("  %8s %8.2f", sz, ref);
        for (int k = 0; k < 4; k++) {
            if (k == 3 && !peer)
                printf(" %15s", "(1 device)");
            else
                printf(" %8.2f x%5.2f", bw[k], ref > 0 ? bw[k] / ref : 0.0);
        }
        printf("\n");
        if (size > max_size / 4)
            break; /* the next power of 4 would overflow or exceed -s */
    }

    free(msrc);
    free(mdst);
    CHECK(orFree(d0a));
    CHECK(orFree(d0b));
    if (peer)
        CHECK(orFree(d1));
    CHECK(orFreeHost(hsrc));
    CHECK(orFreeHost(hdst));
    CHECK(orStreamDestroy(s));
    return 0;
}
