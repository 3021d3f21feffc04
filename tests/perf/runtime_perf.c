/*
 * runtime_perf.c - latency and copy bandwidth of the OpenReg runtime.
 *
 * Prints three tables:
 *   1. latency: an empty kernel launch + orStreamSynchronize, the same with
 *      one block per compute thread when the device has several, and
 *      orEventRecord on an idle stream + orEventSynchronize (median and p99,
 *      microseconds);
 *   2. copy bandwidth: H2D (pinned host), D2H (pinned host), D2D on one
 *      device and D2D between two devices, each as orMemcpyAsync +
 *      orStreamSynchronize, next to plain memcpy between ordinary buffers of
 *      the same size measured in the same run. The ratio runtime/memcpy says
 *      how much of the machine's copy speed the runtime delivers;
 *   3. streaming kernel: SAXPY (y = a*x + y) over float arrays too large for
 *      the caches (64 MiB per array by default), on device 0 alone and on all
 *      devices at once (each its own stream and arrays, everything launched
 *      before any synchronize), next to the same loop run by this thread over
 *      ordinary malloc'd arrays (the baseline) and over device 0's arrays (a
 *      control: where memory pages differ in speed, device 0 should match the
 *      control, not the baseline). It shows whether the devices' compute
 *      threads are placed so that several devices add up: with
 *      OPENREG_BIND=core and one core per device, all devices together should
 *      beat one.
 *
 * Bandwidth is the best of several repetitions, each timing enough copies to
 * move 32 MiB and last at least 10 ms, so that a 2-core machine shared with
 * the runtime's own worker threads still gives stable numbers. Small sizes
 * are cache-resident for the runtime and for memcpy alike. GB/s = 1e9 B/s.
 * The streaming kernel counts 12 bytes per element (read x, read y, write y).
 *
 * Usage: runtime_perf [-i iterations] [-s max_size] [-r repetitions]
 *                     [-m array_size] [-h]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "openreg.h"
#include "perf_util.h"

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

/* A bandwidth repetition moves at least BYTES_PER_REP and lasts at least
 * MIN_REP_SECONDS: long enough that one preemption on a busy 2-core machine
 * does not decide the result. */
#define BYTES_PER_REP (32 * MiB)
#define MIN_REP_SECONDS 0.01
#define MAX_COPIES_PER_REP (1 << 20)


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
        double t0 = perf_now_s();
        CHECK(orLaunchKernel(empty_kernel, grid, one, NULL, 0, 0, s));
        CHECK(orStreamSynchronize(s));
        samples[k] = (perf_now_s() - t0) * 1e6;
    }
    struct latency r = {name, 0, 0};
    perf_percentiles(samples, (size_t)iters, &r.median_us, &r.p99_us);
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
        double t0 = perf_now_s();
        CHECK(orEventRecord(e, s));
        CHECK(orEventSynchronize(e));
        samples[k] = (perf_now_s() - t0) * 1e6;
    }
    CHECK(orEventDestroy(e));
    struct latency r = {name, 0, 0};
    perf_percentiles(samples, (size_t)iters, &r.median_us, &r.p99_us);
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
static long run_copies(void *ctx, long copies, double deadline)
{
    const struct copy_op *op = ctx;
    (void)deadline; /* a repetition is short: no deadline needed */
    for (long c = 0; c < copies; c++) {
        if (op->stream) {
            CHECK(orMemcpyAsync(op->dst, op->src, op->size, op->kind, op->stream));
            CHECK(orStreamSynchronize(op->stream));
        } else {
            perf_memcpy(op->dst, op->src, op->size);
        }
    }
    return copies;
}

/* Best GB/s over reps repetitions, each moving at least BYTES_PER_REP and
 * lasting at least MIN_REP_SECONDS. */
static double bandwidth(const struct copy_op *op, int reps)
{
    long initial = (long)(BYTES_PER_REP / op->size);
    const perf_plan plan = {initial, MIN_REP_SECONDS, 0, MAX_COPIES_PER_REP};
    long copies = perf_calibrate(run_copies, (void *)op, &plan);
    return (double)op->size * copies / perf_best_time(run_copies, (void *)op, copies, reps) / 1e9;
}

/* ---- streaming kernel ------------------------------------------------- */

/* A block covers SAXPY_BLOCK_THREADS x SAXPY_ELEMS_PER_THREAD = 64K
 * consecutive elements, so every compute thread takes many blocks (256 for
 * 16M floats) and the dynamic block scheduler balances them. */
#define SAXPY_BLOCK_THREADS 1024u
#define SAXPY_ELEMS_PER_THREAD 64u
#define SAXPY_BLOCK_ELEMS ((size_t)SAXPY_BLOCK_THREADS * SAXPY_ELEMS_PER_THREAD)
#define SAXPY_BYTES_PER_ELEM 12.0 /* read x, read y, write y */
#define SAXPY_A 0.5f
/* A streaming repetition lasts at least this long: several passes over
 * 2 x 64 MiB, each 5-20 ms on current machines. */
#define STREAM_MIN_REP_SECONDS 0.05
#define STREAM_MAX_PASSES_PER_REP 100000L

struct saxpy_args {
    const float *x;
    float *y;
    float a;
    size_t n;
};

/* The one loop both the kernel and the host baseline run: same code, same
 * compiler flags, so the ratio measures the runtime and the placement. */
static void saxpy_range(const float *restrict x, float *restrict y, float a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a * x[i] + y[i];
}

/* Through a volatile pointer, so the compiler cannot drop the host loop's
 * stores to arrays nobody reads before they are checked. */
static void (*volatile saxpy_fn)(const float *restrict, float *restrict, float,
                                 size_t) = saxpy_range;

static void saxpy_kernel(const orKernelContext *ctx, void *args)
{
    const struct saxpy_args *p = args;
    size_t per_block = (size_t)ctx->blockDim.x * SAXPY_ELEMS_PER_THREAD;
    size_t first = (size_t)ctx->blockIdx.x * per_block;
    if (first >= p->n)
        return;
    size_t len = p->n - first < per_block ? p->n - first : per_block;
    saxpy_range(p->x + first, p->y + first, p->a, len);
}

/* x = 1, y = 0, written by the device's own compute threads: the pages are
 * first touched where the kernel will run, as a GPU's would be in its HBM. */
static void init_kernel(const orKernelContext *ctx, void *args)
{
    const struct saxpy_args *p = args;
    size_t per_block = (size_t)ctx->blockDim.x * SAXPY_ELEMS_PER_THREAD;
    size_t first = (size_t)ctx->blockIdx.x * per_block;
    for (size_t i = first; i < p->n && i < first + per_block; i++) {
        ((float *)p->x)[i] = 1.0f;
        p->y[i] = 0.0f;
    }
}

static orDim3 saxpy_grid(size_t n)
{
    return (orDim3){(unsigned)((n + SAXPY_BLOCK_ELEMS - 1) / SAXPY_BLOCK_ELEMS), 1, 1};
}

/* One participant of the streaming test: a device with its own stream and
 * arrays, or (device < 0) this thread running the loop over host arrays. */
struct stream_run {
    int device;
    orStream_t stream;
    orEvent_t start, end; /* timing events around the device's launches */
    struct saxpy_args args;
    long passes_done; /* each pass adds SAXPY_A to every y (x = 1) */
    double pass_s;    /* seconds per pass in the best repetition */
};

/* passes SAXPY passes on each of n runs: either one host loop run, or
 * devices whose launches are all enqueued (round-robin, so every device
 * starts at once) before the first synchronize. Returns the wall time from
 * the first launch to the last stream done; busy[k] gets run k's own time
 * (between its timing events). */
static double run_saxpy(struct stream_run *runs, int n, long passes, double *busy)
{
    const orDim3 block = {SAXPY_BLOCK_THREADS, 1, 1};
    double t0 = perf_now_s();
    if (runs[0].device < 0) {
        for (long p = 0; p < passes; p++)
            saxpy_fn(runs[0].args.x, runs[0].args.y, runs[0].args.a, runs[0].args.n);
        busy[0] = perf_now_s() - t0;
        runs[0].passes_done += passes;
        return busy[0];
    }
    for (int k = 0; k < n; k++) {
        CHECK(orSetDevice(runs[k].device));
        CHECK(orEventRecord(runs[k].start, runs[k].stream));
    }
    for (long p = 0; p < passes; p++)
        for (int k = 0; k < n; k++) {
            CHECK(orSetDevice(runs[k].device));
            CHECK(orLaunchKernel(saxpy_kernel, saxpy_grid(runs[k].args.n), block,
                                 &runs[k].args, sizeof runs[k].args, 0, runs[k].stream));
        }
    for (int k = 0; k < n; k++) {
        CHECK(orSetDevice(runs[k].device));
        CHECK(orEventRecord(runs[k].end, runs[k].stream));
    }
    for (int k = 0; k < n; k++)
        CHECK(orStreamSynchronize(runs[k].stream));
    double wall = perf_now_s() - t0;
    for (int k = 0; k < n; k++) {
        float ms;
        CHECK(orEventElapsedTime(&ms, runs[k].start, runs[k].end));
        busy[k] = ms * 1e-3;
        runs[k].passes_done += passes;
    }
    return wall;
}

/* The runs of one streaming case, as a perf_body (its count is passes). */
struct saxpy_set {
    struct stream_run *runs;
    int n;
    double *busy;
};

static long saxpy_passes(void *ctx, long passes, double deadline)
{
    struct saxpy_set *set = ctx;
    (void)deadline;
    run_saxpy(set->runs, set->n, passes, set->busy);
    return passes;
}

/* Best wall seconds per pass over reps repetitions, after an untimed pass
 * that warms up and calibrates the passes per repetition; each run's own
 * time per pass in that best repetition goes to its pass_s (which is why
 * the repetitions are not perf_best_time's). */
static double stream_best(struct stream_run *runs, int n, int reps)
{
    struct saxpy_set set = {runs, n, perf_xmalloc((size_t)n * sizeof(double))};
    const perf_plan plan = {1, STREAM_MIN_REP_SECONDS, 0, STREAM_MAX_PASSES_PER_REP};
    long passes = perf_calibrate(saxpy_passes, &set, &plan);
    double best = 0.0;
    for (int r = 0; r < reps; r++) {
        double t = run_saxpy(runs, n, passes, set.busy) / (double)passes;
        if (best == 0.0 || t < best) {
            best = t;
            for (int k = 0; k < n; k++)
                runs[k].pass_s = set.busy[k] / (double)passes;
        }
    }
    free(set.busy);
    return best;
}

/* y must be exactly passes_done * SAXPY_A everywhere (exact in float:
 * multiples of 0.5 far below 2^24). Checks the first, the last and a spread
 * of elements. */
static int saxpy_check(const struct stream_run *run)
{
    const size_t n = run->args.n;
    const float want = (float)run->passes_done * SAXPY_A;
    for (int k = 0; k <= 64; k++) {
        size_t i = k == 64 ? n - 1 : (n / 64) * (size_t)k;
        float v;
        if (run->device >= 0)
            CHECK(orMemcpy(&v, run->args.y + i, sizeof v, orMemcpyDeviceToHost));
        else
            v = run->args.y[i];
        if (v != want) {
            fprintf(stderr, "runtime_perf: saxpy check failed (%s %d): y[%zu] = %g, want %g\n",
                    run->device >= 0 ? "device" : "host loop", run->device, i, (double)v,
                    (double)want);
            return -1;
        }
    }
    return 0;
}


/* Table 3. Returns 0, or 1 if a result check failed. */
static int streaming_table(int count, size_t array_bytes, int reps)
{
    const size_t n = array_bytes / sizeof(float);
    const double bytes = SAXPY_BYTES_PER_ELEM * (double)n; /* per pass of one device */
    const char *bind = getenv("OPENREG_BIND");
    const orDim3 block = {SAXPY_BLOCK_THREADS, 1, 1};

    orDeviceProp *props = calloc((size_t)count, sizeof *props);
    struct stream_run *devs = calloc((size_t)count, sizeof *devs);
    float *hx = malloc(n * sizeof *hx), *hy = malloc(n * sizeof *hy);
    if (!props || !devs || !hx || !hy) {
        fprintf(stderr, "runtime_perf: out of host memory\n");
        exit(1);
    }
    /* The baseline's ordinary arrays, first touched by this thread. */
    for (size_t i = 0; i < n; i++) {
        hx[i] = 1.0f;
        hy[i] = 0.0f;
    }
    struct stream_run host = {.device = -1, .args = {hx, hy, SAXPY_A, n}};
    for (int d = 0; d < count; d++) {
        struct stream_run *r = &devs[d];
        float *x, *y;
        r->device = d;
        CHECK(orGetDeviceProperties(&props[d], d));
        CHECK(orSetDevice(d));
        CHECK(orStreamCreate(&r->stream));
        CHECK(orEventCreateWithFlags(&r->start, orEventEnableTiming));
        CHECK(orEventCreateWithFlags(&r->end, orEventEnableTiming));
        CHECK(orMalloc((void **)&x, n * sizeof *x));
        CHECK(orMalloc((void **)&y, n * sizeof *y));
        r->args = (struct saxpy_args){x, y, SAXPY_A, n};
        CHECK(orLaunchKernel(init_kernel, saxpy_grid(n), block, &r->args, sizeof r->args, 0,
                             r->stream));
    }
    for (int d = 0; d < count; d++)
        CHECK(orStreamSynchronize(devs[d].stream));

    double host_t = stream_best(&host, 1, reps);
    /* Control: the same host loop over device 0's arrays. Where it differs
     * from the baseline, the memory (its pages) differs, not the runtime. */
    struct stream_run ctl = {.device = -1, .args = devs[0].args};
    CHECK(orMemoryUnprotect((void *)devs[0].args.x)); /* strict mode */
    CHECK(orMemoryUnprotect(devs[0].args.y));
    double ctl_t = stream_best(&ctl, 1, reps);
    CHECK(orMemoryProtect(devs[0].args.y));
    CHECK(orMemoryProtect((void *)devs[0].args.x));
    devs[0].passes_done += ctl.passes_done;
    double one_t = stream_best(devs, 1, reps);
    double all_t = count > 1 ? stream_best(devs, count, reps) : 0.0;

    int failed = saxpy_check(&host) != 0;
    for (int d = 0; d < count; d++)
        failed |= saxpy_check(&devs[d]) != 0;

    int same_threads = 1;
    for (int d = 1; d < count; d++)
        same_threads &= props[d].multiProcessorCount == props[0].multiProcessorCount;
    char threads[16], cpus[512] = "";
    snprintf(threads, sizeof threads, same_threads ? "%d" : "mixed",
             props[0].multiProcessorCount);
    size_t used = 0;
    for (int d = 0; d < count && used < sizeof cpus; d++)
        used += (size_t)snprintf(cpus + used, sizeof cpus - used, "%s%s", d ? " | " : "",
                                 props[d].cpuList);
    char sz[32];
    perf_format_size(sz, sizeof sz, n * sizeof(float));
    const double host_gbs = bytes / host_t / 1e9;

    printf("\nstreaming kernel (y = a*x + y), %zu floats (%s) per array, grid %u blocks of %zu "
           "elements\n(GB/s counts 12 B per element; best of %d; x = GB/s total / host loop "
           "over malloc'd arrays)\n",
           n, sz, saxpy_grid(n).x, SAXPY_BLOCK_ELEMS, reps);
    printf("  OPENREG_BIND=%s%s: %s\n", bind ? bind : "core", bind ? "" : " (default)",
           !bind || strcasecmp(bind, "core") == 0
               ? "each compute thread bound to one core of its device"
           : strcasecmp(bind, "numa") == 0 ? "compute threads bound to their device's NUMA node"
                                       : "compute threads not bound, the OS places them");
    printf("  %-28s %7s %11s %8s %9s %10s %6s  %s\n", "case", "devices", "threads/dev",
           "ms/pass", "GB/s/dev", "GB/s total", "x", "cpus of each device");
    printf("  %-28s %7s %11d %8.3f %9.2f %10.2f %6.2f  %s\n", "host loop, malloc'd arrays", "-",
           1, host_t * 1e3, host_gbs, host_gbs, 1.0, "(this thread, not bound)");
    printf("  %-28s %7s %11d %8.3f %9.2f %10.2f %6.2f  %s\n", "host loop, device 0's arrays",
           "-", 1, ctl_t * 1e3, bytes / ctl_t / 1e9, bytes / ctl_t / 1e9,
           host_t / ctl_t, "(this thread, not bound)");
    printf("  %-28s %7d %11d %8.3f %9.2f %10.2f %6.2f  %s\n", "device 0 alone", 1,
           props[0].multiProcessorCount, one_t * 1e3, bytes / one_t / 1e9, bytes / one_t / 1e9,
           host_t / one_t, props[0].cpuList);
    if (count > 1) {
        double total = bytes * count / all_t / 1e9;
        printf("  %-28s %7d %11s %8.3f %9.2f %10.2f %6.2f  %s\n", "all devices at once", count,
               threads, all_t * 1e3, total / count, total, total / host_gbs, cpus);
        for (int d = 0; d < count; d++) {
            char name[48];
            snprintf(name, sizeof name, "  device %d (own events)", d);
            printf("  %-28s %7s %11d %8.3f %9.2f %10s %6s  %s\n", name, "",
                   props[d].multiProcessorCount, devs[d].pass_s * 1e3,
                   bytes / devs[d].pass_s / 1e9, "", "", props[d].cpuList);
        }
    } else {
        printf("  (1 device: all devices at once is device 0 alone)\n");
    }
    printf("  result check: %s\n", failed ? "FAILED" : "OK");

    for (int d = 0; d < count; d++) {
        CHECK(orSetDevice(d));
        CHECK(orFree((void *)devs[d].args.x));
        CHECK(orFree(devs[d].args.y));
        CHECK(orEventDestroy(devs[d].start));
        CHECK(orEventDestroy(devs[d].end));
        CHECK(orStreamDestroy(devs[d].stream));
    }
    free(devs);
    free(props);
    free(hx);
    free(hy);
    return failed;
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [-i iterations] [-s max_size] [-r repetitions] [-m array_size] [-h]\n"
            "  -i N   timed iterations of each latency test (default 20000; warm-up is N/10)\n"
            "  -s S   largest copy size, K/M/G suffixes allowed (default 64M; sizes go\n"
            "         from 4K up in powers of 4)\n"
            "  -r N   repetitions per bandwidth point and streaming case, the best is\n"
            "         reported (default 5)\n"
            "  -m S   bytes per array of the streaming kernel (SAXPY over x and y), K/M/G\n"
            "         suffixes allowed (default 64M, i.e. 16M floats; at least 4K)\n"
            "  -h     this help\n"
            "Environment: OPENREG_DEVICES, OPENREG_DEVICE_MEM, OPENREG_DEVICE_THREADS and\n"
            "OPENREG_BIND apply; each device needs 2 arrays of -m bytes.\n",
            prog);
}

int main(int argc, char **argv)
{
    int iters = 20000, reps = 5;
    size_t max_size = 64 * MiB, stream_size = 64 * MiB;
    int opt;
    perf_prog = "runtime_perf";
    while ((opt = getopt(argc, argv, "i:s:r:m:h")) != -1) {
        switch (opt) {
        case 'i':
            iters = atoi(optarg);
            if (iters < 1) {
                fprintf(stderr, "runtime_perf: -i needs a positive number\n");
                return 2;
            }
            break;
        case 's':
            if (perf_parse_size(optarg, &max_size) != 0 || max_size < 4 * KiB) {
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
        case 'm':
            if (perf_parse_size(optarg, &stream_size) != 0 || stream_size < 4 * KiB) {
                fprintf(stderr, "runtime_perf: -m needs a size of at least 4K (e.g. 256M)\n");
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
    double *samples = perf_xmalloc((size_t)iters * sizeof *samples);
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
    char *msrc = perf_xmalloc(max_size), *mdst = perf_xmalloc(max_size);
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
        perf_format_size(sz, sizeof sz, size);
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

    int failed = streaming_table(count, stream_size, reps);

    CHECK(orSetDevice(0));
    CHECK(orStreamDestroy(s));
    return failed;
}
