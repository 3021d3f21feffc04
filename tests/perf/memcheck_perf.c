/*
 * memcheck_perf.c - what OPENREG_MEMCHECK=1 costs.
 *
 * Runs itself twice, without and with the checker (the mode is fixed when
 * the runtime starts), and prints one table:
 *   - orMalloc + orFree of 4 KiB and of 1 MiB (median, microseconds): the
 *     checker adds an mprotect per call and the guard pages;
 *   - an empty kernel + orStreamSynchronize with no allocation live, and
 *     with 1000 allocations of 1000 bytes live (median, microseconds):
 *     after each kernel the checker reads the bytes before every
 *     allocation (its canaries);
 *   - a kernel sweeping a 64 MiB float buffer (y = 2y + 1, 64 blocks) +
 *     orStreamSynchronize (best of 10, milliseconds): the memory itself
 *     is plain memory either way.
 * The load average before the run is printed with the table: on a shared
 * 2-core machine read the figures with it.
 *
 * Usage: memcheck_perf [-h]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "openreg.h"
#include "perf_util.h"

#define CHECK(call)                                                                   \
    do {                                                                              \
        orError_t check_err_ = (call);                                                \
        if (check_err_ != orSuccess) {                                                \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,       \
                    orGetErrorName(check_err_));                                      \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

enum { PAIRS = 2000, LAUNCHES = 2000, LIVE = 1000, SWEEPS = 10 };
#define SWEEP_BYTES (64 * MiB)
#define NFIGURES 5

static double alloc_pair_us(size_t size)
{
    double *t = perf_xmalloc(PAIRS * sizeof *t);
    for (int i = 0; i < PAIRS; i++) {
        void *p;
        double t0 = perf_now_s();
        CHECK(orMalloc(&p, size));
        CHECK(orFree(p));
        t[i] = (perf_now_s() - t0) * 1e6;
    }
    double median, p99;
    perf_percentiles(t, PAIRS, &median, &p99);
    free(t);
    return median;
}

static void empty_kernel(const orKernelContext *ctx, void *args)
{
    (void)ctx;
    (void)args;
}

static double launch_us(int nlive)
{
    void *live[LIVE];
    for (int i = 0; i < nlive; i++)
        CHECK(orMalloc(&live[i], 1000));
    orStream_t s;
    CHECK(orStreamCreate(&s));
    double *t = perf_xmalloc(LAUNCHES * sizeof *t);
    orDim3 one = {1, 1, 1};
    for (int i = 0; i < LAUNCHES; i++) {
        double t0 = perf_now_s();
        CHECK(orLaunchKernel(empty_kernel, one, one, NULL, 0, 0, s));
        CHECK(orStreamSynchronize(s));
        t[i] = (perf_now_s() - t0) * 1e6;
    }
    double median, p99;
    perf_percentiles(t, LAUNCHES, &median, &p99);
    free(t);
    CHECK(orStreamDestroy(s));
    for (int i = 0; i < nlive; i++)
        CHECK(orFree(live[i]));
    return median;
}

typedef struct {
    float *y;
    size_t n;
} sweep_args;

static void sweep_kernel(const orKernelContext *ctx, void *args)
{
    const sweep_args *a = args;
    size_t chunk = a->n / ctx->gridDim.x;
    float *y = a->y + (size_t)ctx->blockIdx.x * chunk;
    for (size_t i = 0; i < chunk; i++)
        y[i] = 2.0f * y[i] + 1.0f;
}

static double sweep_ms(void)
{
    sweep_args a = {NULL, SWEEP_BYTES / sizeof(float)};
    CHECK(orMalloc((void **)&a.y, SWEEP_BYTES));
    CHECK(orMemset(a.y, 0, SWEEP_BYTES));
    double best = 1e30;
    orDim3 grid = {64, 1, 1}, one = {1, 1, 1};
    for (int i = 0; i < SWEEPS; i++) {
        double t0 = perf_now_s();
        CHECK(orLaunchKernel(sweep_kernel, grid, one, &a, sizeof a, 0, NULL));
        CHECK(orStreamSynchronize(NULL));
        double t = (perf_now_s() - t0) * 1e3;
        best = t < best ? t : best;
    }
    CHECK(orFree(a.y));
    return best;
}

/* One mode, in this process: the figures on one line of stdout. */
static int measure(void)
{
    double a = alloc_pair_us(4 * KiB), b = alloc_pair_us(MiB), c = launch_us(0);
    double d = launch_us(LIVE), e = sweep_ms();
    printf("%.3f %.3f %.3f %.3f %.3f\n", a, b, c, d, e);
    return 0;
}

/* Run this program with OPENREG_MEMCHECK=mode; its figures. */
static int run_child(const char *self, const char *mode, double fig[NFIGURES])
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        setenv("OPENREG_MEMCHECK", mode, 1);
        execl(self, self, "--measure", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    int got = f ? fscanf(f, "%lf %lf %lf %lf %lf", &fig[0], &fig[1], &fig[2], &fig[3], &fig[4]) : 0;
    if (f)
        fclose(f);
    int status;
    waitpid(pid, &status, 0);
    return got == NFIGURES && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    perf_prog = "memcheck_perf";
    if (argc == 2 && !strcmp(argv[1], "--measure"))
        return measure();
    if (argc > 1) {
        fprintf(stderr, "usage: memcheck_perf (no arguments; see the comment at its top)\n");
        return !(argc == 2 && !strcmp(argv[1], "-h")) * 2;
    }
    char load[64];
    perf_load_average(load, sizeof load);
    double plain[NFIGURES], checked[NFIGURES];
    if (run_child("/proc/self/exe", "0", plain) || run_child("/proc/self/exe", "1", checked)) {
        fprintf(stderr, "memcheck_perf: a measuring run failed\n");
        return 1;
    }
    static const char *const what[NFIGURES] = {
        "orMalloc+orFree 4 KiB (us, median)", "orMalloc+orFree 1 MiB (us, median)",
        "empty kernel + sync, none live (us, median)",
        "empty kernel + sync, 1000 live (us, median)", "64 MiB sweep kernel + sync (ms, best)"};
    printf("OPENREG_MEMCHECK=0 vs 1; load before: %s\n", load);
    printf("%-44s %10s %10s %7s\n", "operation", "plain", "memcheck", "x");
    for (int i = 0; i < NFIGURES; i++)
        printf("%-44s %10.2f %10.2f %7.1f\n", what[i], plain[i], checked[i],
               plain[i] > 0 ? checked[i] / plain[i] : 0.0);
    return 0;
}
