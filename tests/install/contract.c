/*
 * A user's program written only against the documented contract, built the
 * way users build: `cc contract.c $(pkg-config --cflags --libs openreg)`.
 * `make installcheck` (and so `make distcheck`) compiles and runs it against
 * the installed library.
 */
#include <openreg.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        orError_t err_ = (call);                                                      \
        if (err_ != orSuccess) {                                                      \
            fprintf(stderr, "%s: %s (%s)\n", #call, orGetErrorName(err_),             \
                    orGetErrorString(err_));                                          \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

typedef struct {
    int *data;
    int add;
} add_args;

static void add_kernel(const orKernelContext *ctx, void *p)
{
    const add_args *a = p;
    unsigned base = ctx->blockIdx.x * ctx->blockDim.x;
    for (unsigned t = 0; t < ctx->blockDim.x; t++)
        a->data[base + t] += a->add;
}

int main(void)
{
    enum { N = 4096 };
    int count;
    CHECK(orGetDeviceCount(&count));
    int last = count - 1;

    int *host, *d0, *d1;
    CHECK(orMallocHost((void **)&host, N * sizeof *host));
    CHECK(orMalloc((void **)&d0, N * sizeof *d0));
    CHECK(orSetDevice(last));
    CHECK(orMalloc((void **)&d1, N * sizeof *d1));
    CHECK(orSetDevice(0));
    for (int i = 0; i < N; i++)
        host[i] = i;

    orStream_t s0, s1;
    orEvent_t start, done;
    CHECK(orStreamCreate(&s0));
    CHECK(orEventCreateWithFlags(&start, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&done, orEventEnableTiming));
    CHECK(orSetDevice(last));
    CHECK(orStreamCreate(&s1));
    CHECK(orSetDevice(0));

    add_args args = {d0, 1};
    CHECK(orEventRecord(start, s0));
    CHECK(orMemcpyAsync(d0, host, N * sizeof *host, orMemcpyHostToDevice, s0));
    CHECK(orLaunchKernel(add_kernel, (orDim3){N / 256, 1, 1}, (orDim3){256, 1, 1}, &args,
                         sizeof args, 0, s0));
    CHECK(orEventRecord(done, s0));
    CHECK(orStreamWaitEvent(s1, done, 0));
    CHECK(orMemcpyAsync(d1, d0, N * sizeof *d0, orMemcpyDefault, s1));
    args = (add_args){d1, 2};
    CHECK(orLaunchKernel(add_kernel, (orDim3){N / 256, 1, 1}, (orDim3){256, 1, 1}, &args,
                         sizeof args, 0, s1));
    CHECK(orMemcpyAsync(host, d1, N * sizeof *host, orMemcpyDeviceToHost, s1));
    CHECK(orStreamSynchronize(s1));

    float ms;
    CHECK(orEventElapsedTime(&ms, start, done));
    for (int i = 0; i < N; i++)
        if (host[i] != i + 3) {
            fprintf(stderr, "element %d: %d, expected %d\n", i, host[i], i + 3);
            return 1;
        }

    CHECK(orStreamDestroy(s0));
    CHECK(orStreamDestroy(s1));
    CHECK(orEventDestroy(start));
    CHECK(orEventDestroy(done));
    CHECK(orFree(d0));
    CHECK(orFree(d1));
    CHECK(orFreeHost(host));
    printf("contract program: %d devices, %d elements verified, %.3f ms\n", count, N, ms);
    return 0;
}
