/*
 * demo.c - a first tour of the OpenReg Cluster runtime.
 *
 * Two devices cooperate on a small pipeline:
 *
 *   device 0, stream s0:  H2D x, y  ->  saxpy kernel (y = a*x + y)  -> record "saxpy done"
 *   device 1, stream s1:  wait "saxpy done"  ->  D2D copy of y from device 0
 *                         ->  5-point stencil kernel  ->  D2H result
 *   device 0, stream s0:  D2H y (so the saxpy stage is checked on its own too)
 *
 * Both kernels run on a 2-D grid of 16x16 blocks. A kernel is called once per
 * block and walks over its block's threads itself. Timing events on each
 * stream measure every stage; the results are checked against a host
 * reference.
 *
 * Runs on the built-in defaults (OPENREG_DEVICES=2). Exit status 0 means
 * "result: OK".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "openreg.h"

/* Every runtime call is checked: on failure print the call, the error's
 * name and text, and stop. */
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

enum { NX = 1024, NY = 1024, BLOCK = 16 };
static const float ALPHA = 2.5f;

struct saxpy_args {
    float a;
    const float *x;
    float *y;
    unsigned nx, ny;
};

struct stencil_args {
    const float *in;
    float *out;
    unsigned nx, ny;
};

/* The element a thread of a 2-D block owns, and whether it is inside the
 * array (the grid is rounded up to whole blocks). */
static int element(const orKernelContext *ctx, unsigned tx, unsigned ty, unsigned nx,
                   unsigned ny, size_t *idx, unsigned *i, unsigned *j)
{
    *i = ctx->blockIdx.x * ctx->blockDim.x + tx;
    *j = ctx->blockIdx.y * ctx->blockDim.y + ty;
    if (*i >= nx || *j >= ny)
        return 0;
    *idx = (size_t)*j * nx + *i;
    return 1;
}

static void saxpy_kernel(const orKernelContext *ctx, void *argp)
{
    const struct saxpy_args *a = argp;
    for (unsigned ty = 0; ty < ctx->blockDim.y; ty++)
        for (unsigned tx = 0; tx < ctx->blockDim.x; tx++) {
            size_t k;
            unsigned i, j;
            if (element(ctx, tx, ty, a->nx, a->ny, &k, &i, &j))
                a->y[k] = a->a * a->x[k] + a->y[k];
        }
}

/* Jacobi step: interior points become the mean of their four neighbours,
 * the boundary is copied. */
static float stencil_at(const float *in, unsigned nx, unsigned ny, unsigned i, unsigned j)
{
    size_t k = (size_t)j * nx + i;
    if (i == 0 || j == 0 || i == nx - 1 || j == ny - 1)
        return in[k];
    return 0.25f * (in[k - 1] + in[k + 1] + in[k - nx] + in[k + nx]);
}

static void stencil_kernel(const orKernelContext *ctx, void *argp)
{
    const struct stencil_args *a = argp;
    for (unsigned ty = 0; ty < ctx->blockDim.y; ty++)
        for (unsigned tx = 0; tx < ctx->blockDim.x; tx++) {
            size_t k;
            unsigned i, j;
            if (element(ctx, tx, ty, a->nx, a->ny, &k, &i, &j))
                a->out[k] = stencil_at(a->in, a->nx, a->ny, i, j);
        }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void print_time(const char *label, orEvent_t start, orEvent_t end)
{
    float ms = 0.0f;
    CHECK(orEventElapsedTime(&ms, start, end));
    printf("  %-28s %9.3f ms\n", label, ms);
}

/* Largest relative difference, so the check does not depend on magnitudes. */
static double max_rel_error(const float *got, const float *want, size_t n)
{
    double worst = 0.0;
    for (size_t k = 0; k < n; k++) {
        double d = fabs((double)got[k] - want[k]) / fmax(1.0, fabs((double)want[k]));
        if (!(d <= worst)) /* also catches NaN */
            worst = d;
    }
    return worst;
}

static void print_device(int dev)
{
    orDeviceProp p;
    CHECK(orGetDeviceProperties(&p, dev));
    printf("  device %d: %s, %.2f GiB, %d compute thread%s, cpus %s, NUMA node %d, "
           "%d copy engine%s\n",
           dev, p.name, p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.multiProcessorCount,
           p.multiProcessorCount == 1 ? "" : "s", p.cpuList, p.numaNode, p.asyncEngineCount,
           p.asyncEngineCount == 1 ? "" : "s");
}

int main(void)
{
    const size_t n = (size_t)NX * NY;
    const size_t bytes = n * sizeof(float);
    int count = 0;

    printf("OpenReg Cluster demo\n");
    CHECK(orGetDeviceCount(&count));
    printf("devices: %d\n", count);
    for (int d = 0; d < count; d++)
        print_device(d);
    if (count < 2) {
        fflush(stdout);
        fprintf(stderr, "demo: needs 2 devices, have %d (unset OPENREG_DEVICES or set it >= 2)\n",
                count);
        return 1;
    }

    /* Pinned host buffers: the staging memory async copies are meant for. */
    float *hx, *hy, *hsaxpy, *hout;
    CHECK(orMallocHost((void **)&hx, bytes));
    CHECK(orMallocHost((void **)&hy, bytes));
    CHECK(orMallocHost((void **)&hsaxpy, bytes));
    CHECK(orMallocHost((void **)&hout, bytes));
    for (size_t k = 0; k < n; k++) {
        hx[k] = (float)(k % 1000) * 0.001f;
        hy[k] = (float)((k * 7) % 113) - 56.0f;
    }

    const orDim3 block = {BLOCK, BLOCK, 1};
    const orDim3 grid = {(NX + BLOCK - 1) / BLOCK, (NY + BLOCK - 1) / BLOCK, 1};
    printf("problem: %d x %d floats (%.1f MiB per array), grid %u x %u blocks of %u x %u\n",
           NX, NY, bytes / (1024.0 * 1024.0), grid.x, grid.y, block.x, block.y);

    double wall0 = now_ms();

    /* Stage 1 on device 0. */
    orStream_t s0;
    orEvent_t e0_start, e0_h2d, e0_saxpy, e0_d2h;
    float *dx0, *dy0;
    CHECK(orSetDevice(0));
    CHECK(orStreamCreate(&s0));
    CHECK(orEventCreateWithFlags(&e0_start, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&e0_h2d, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&e0_saxpy, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&e0_d2h, orEventEnableTiming));
    CHECK(orMalloc((void **)&dx0, bytes));
    CHECK(orMalloc((void **)&dy0, bytes));

    CHECK(orEventRecord(e0_start, s0));
    CHECK(orMemcpyAsync(dx0, hx, bytes, orMemcpyHostToDevice, s0));
    CHECK(orMemcpyAsync(dy0, hy, bytes, orMemcpyHostToDevice, s0));
    CHECK(orEventRecord(e0_h2d, s0));
    struct saxpy_args sa = {ALPHA, dx0, dy0, NX, NY};
    CHECK(orLaunchKernel(saxpy_kernel, grid, block, &sa, sizeof sa, 0, s0));
    CHECK(orEventRecord(e0_saxpy, s0));
    /* Reads dy0 only, so it may overlap with device 1's copy of it. */
    CHECK(orMemcpyAsync(hsaxpy, dy0, bytes, orMemcpyDeviceToHost, s0));
    CHECK(orEventRecord(e0_d2h, s0));

    /* Stage 2 on device 1, ordered after device 0's kernel by the event
     * alone: the host never blocks between the two stages. */
    orStream_t s1;
    orEvent_t e1_start, e1_d2d, e1_stencil, e1_d2h;
    float *din1, *dout1;
    CHECK(orSetDevice(1));
    CHECK(orStreamCreate(&s1));
    CHECK(orEventCreateWithFlags(&e1_start, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&e1_d2d, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&e1_stencil, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&e1_d2h, orEventEnableTiming));
    CHECK(orMalloc((void **)&din1, bytes));
    CHECK(orMalloc((void **)&dout1, bytes));

    CHECK(orStreamWaitEvent(s1, e0_saxpy, 0));
    /* Recorded after the wait: it completes when device 0's result is ready,
     * so the device-1 timings below start there. */
    CHECK(orEventRecord(e1_start, s1));
    CHECK(orMemcpyAsync(din1, dy0, bytes, orMemcpyDeviceToDevice, s1));
    CHECK(orEventRecord(e1_d2d, s1));
    struct stencil_args st = {din1, dout1, NX, NY};
    CHECK(orLaunchKernel(stencil_kernel, grid, block, &st, sizeof st, 0, s1));
    CHECK(orEventRecord(e1_stencil, s1));
    CHECK(orMemcpyAsync(hout, dout1, bytes, orMemcpyDeviceToHost, s1));
    CHECK(orEventRecord(e1_d2h, s1));

    /* The host reference is computed while the devices work. */
    float *ref_saxpy = malloc(bytes), *ref_out = malloc(bytes);
    if (!ref_saxpy || !ref_out) {
        fprintf(stderr, "demo: out of host memory\n");
        return 1;
    }
    for (size_t k = 0; k < n; k++)
        ref_saxpy[k] = ALPHA * hx[k] + hy[k];
    for (unsigned j = 0; j < NY; j++)
        for (unsigned i = 0; i < NX; i++)
            ref_out[(size_t)j * NX + i] = stencil_at(ref_saxpy, NX, NY, i, j);

    CHECK(orStreamSynchronize(s1));
    CHECK(orStreamSynchronize(s0));
    double wall_ms = now_ms() - wall0;

    char h2d_label[64];
    snprintf(h2d_label, sizeof h2d_label, "H2D x, y (%.1f MiB)", 2 * bytes / (1024.0 * 1024.0));
    printf("device 0, stream s0:\n");
    print_time(h2d_label, e0_start, e0_h2d);
    print_time("saxpy kernel", e0_h2d, e0_saxpy);
    print_time("D2H y", e0_saxpy, e0_d2h);
    printf("device 1, stream s1 (waits on device 0's saxpy event):\n");
    print_time("D2D y from device 0", e1_start, e1_d2d);
    print_time("stencil kernel", e1_d2d, e1_stencil);
    print_time("D2H result", e1_stencil, e1_d2h);
    printf("wall time, first enqueue to both streams done: %.3f ms\n", wall_ms);

    double err_saxpy = max_rel_error(hsaxpy, ref_saxpy, n);
    double err_out = max_rel_error(hout, ref_out, n);
    printf("max relative error: saxpy %.3g, stencil %.3g\n", err_saxpy, err_out);
    int ok = err_saxpy <= 1e-6 && err_out <= 1e-6;

    CHECK(orFree(din1));
    CHECK(orFree(dout1));
    CHECK(orEventDestroy(e1_start));
    CHECK(orEventDestroy(e1_d2d));
    CHECK(orEventDestroy(e1_stencil));
    CHECK(orEventDestroy(e1_d2h));
    CHECK(orStreamDestroy(s1));
    CHECK(orSetDevice(0));
    CHECK(orFree(dx0));
    CHECK(orFree(dy0));
    CHECK(orEventDestroy(e0_start));
    CHECK(orEventDestroy(e0_h2d));
    CHECK(orEventDestroy(e0_saxpy));
    CHECK(orEventDestroy(e0_d2h));
    CHECK(orStreamDestroy(s0));
    CHECK(orFreeHost(hx));
    CHECK(orFreeHost(hy));
    CHECK(orFreeHost(hsaxpy));
    CHECK(orFreeHost(hout));
    free(ref_saxpy);
    free(ref_out);

    if (!ok) {
        printf("result: FAILED (device results differ from the host reference)\n");
        return 1;
    }
    printf("result: OK\n");
    return 0;
}
