/*
 * vtime_workload.c - a program with every kind of op on several streams of
 * two devices: copies that contend for a link, declared and undeclared
 * kernels, memsets, peer copies, host functions, cross-stream event waits,
 * host synchronizations. It prints a checksum of its results and the
 * elapsed time between its events, so that two runs can be compared byte for
 * byte (virtual time must not depend on threads or load) and a wall-mode run
 * must give the same checksum.
 *
 * usage: vtime_workload [ITERATIONS [BYTES]]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openreg.h"

#define CHECK(call)                                                                        \
    do {                                                                                   \
        orError_t e_ = (call);                                                             \
        if (e_ != orSuccess) {                                                             \
            fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call,                \
                    orGetErrorName(e_));                                                   \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

typedef struct {
    float *x, *y;
    float a;
    size_t n;
} saxpy_args;

/* y = a * x + y, one block per 256 elements. */
static void saxpy(const orKernelContext *c, void *p)
{
    saxpy_args *s = p;
    size_t base = (size_t)c->blockIdx.x * c->blockDim.x;
    for (size_t i = base; i < base + c->blockDim.x && i < s->n; i++)
        s->y[i] = s->a * s->x[i] + s->y[i];
}

static void scale(const orKernelContext *c, void *p)
{
    saxpy_args *s = p;
    size_t base = (size_t)c->blockIdx.x * c->blockDim.x;
    for (size_t i = base; i < base + c->blockDim.x && i < s->n; i++)
        s->y[i] *= s->a;
}

static void count_fn(void *p) { ++*(int *)p; }

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 4;
    size_t bytes = argc > 2 ? (size_t)atoll(argv[2]) : (size_t)1 << 20;
    size_t n = bytes / sizeof(float);
    if (iters < 1 || n < 1) {
        fprintf(stderr, "usage: vtime_workload [ITERATIONS [BYTES]]\n");
        return 2;
    }
    float *h, *hout;
    float *x0, *y0, *z0, *y1;
    CHECK(orMallocHost((void **)&h, bytes));
    CHECK(orMallocHost((void **)&hout, bytes));
    for (size_t i = 0; i < n; i++)
        h[i] = (float)(i % 97);
    CHECK(orSetDevice(1));
    CHECK(orMalloc((void **)&y1, bytes));
    orStream_t p1;
    CHECK(orStreamCreate(&p1));
    CHECK(orSetDevice(0));
    CHECK(orMalloc((void **)&x0, bytes));
    CHECK(orMalloc((void **)&y0, bytes));
    CHECK(orMalloc((void **)&z0, bytes));
    orStream_t s[3];
    CHECK(orStreamCreateWithPriority(&s[0], 0, 0));
    CHECK(orStreamCreateWithPriority(&s[1], 0, -1));
    CHECK(orStreamCreateWithPriority(&s[2], 0, -2));
    orEvent_t start, ev[4];
    CHECK(orEventCreateWithFlags(&start, orEventEnableTiming));
    for (int i = 0; i < 4; i++)
        CHECK(orEventCreateWithFlags(&ev[i], orEventEnableTiming));
    int host_calls = 0;
    unsigned grid = (unsigned)((n + 255) / 256);

    CHECK(orEventRecord(start, s[0]));
    for (int it = 0; it < iters; it++) {
        /* Two uploads on the same host link, from two streams. */
        CHECK(orMemcpyAsync(x0, h, bytes, orMemcpyHostToDevice, s[0]));
        CHECK(orMemcpyAsync(y0, h, bytes, orMemcpyHostToDevice, s[1]));
        CHECK(orEventRecord(ev[0], s[1]));
        CHECK(orStreamWaitEvent(s[0], ev[0], 0));
        saxpy_args sa = {x0, y0, 2.0f, n};
        orLaunchCost cost = {2.0 * (double)n, 12.0 * (double)n};
        orLaunchConfig cfg = {{grid, 1, 1}, {256, 1, 1}, 0, s[0], &cost, "saxpy"};
        CHECK(orLaunchKernelEx(&cfg, saxpy, &sa, sizeof sa));
        CHECK(orEventRecord(ev[1], s[0]));
        /* Meanwhile a memset on another stream. */
        CHECK(orMemsetAsync(z0, 0, bytes, s[2]));
        CHECK(orLaunchHostFunc(s[2], count_fn, &host_calls));
        /* The result goes to device 1 and is scaled there. */
        CHECK(orStreamWaitEvent(s[2], ev[1], 0));
        CHECK(orMemcpyPeerAsync(y1, 1, y0, 0, bytes, s[2]));
        CHECK(orEventRecord(ev[2], s[2]));
        CHECK(orSetDevice(1));
        CHECK(orStreamWaitEvent(p1, ev[2], 0));
        saxpy_args sc = {NULL, y1, 0.5f, n};
        CHECK(orLaunchKernel(scale, (orDim3){grid, 1, 1}, (orDim3){256, 1, 1}, &sc, sizeof sc, 0,
                             p1));
        CHECK(orMemcpyAsync(hout, y1, bytes, orMemcpyDeviceToHost, p1));
        CHECK(orEventRecord(ev[3], p1));
        CHECK(orSetDevice(0));
        /* The host waits: the next iteration's work starts after, and its
         * uploads cannot overwrite what this one still reads. */
        CHECK(orEventSynchronize(ev[3]));
        long long t[4];
        for (int k = 0; k < 4; k++)
            CHECK(orEventElapsedTimeNs(&t[k], start, ev[k]));
        printf("iteration %d: uploads %lld kernel %lld peer %lld download %lld ns\n", it, t[0],
               t[1], t[2], t[3]);
    }
    CHECK(orDeviceSynchronize());
    CHECK(orSetDevice(1));
    CHECK(orDeviceSynchronize());
    CHECK(orSetDevice(0));
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += hout[i];
    printf("host functions %d\nchecksum %.6f\n", host_calls, sum);
    return 0;
}
