/*
 * test_kernels.c - kernel launch geometry, argument copying, shared memory,
 * parallel blocks, launch validation, host functions, and blocking calls
 * made from worker threads.
 */
#include "helpers.h"

/* A hang (e.g. a wait that never completes) fails the test instead of the run. */
TestSuite(kernels, .timeout = 60);

static orStream_t new_stream(void)
{
    orStream_t s = NULL;
    CHECK_OR(orStreamCreate(&s));
    return s;
}

/* ---- geometry --------------------------------------------------------- */

typedef struct {
    int *blocks;  /* one record of 8 ints per block */
    int *threads; /* one int per (block, thread) */
} geom_args;

static void geom_kernel(const orKernelContext *c, void *p)
{
    geom_args *a = p;
    unsigned b = block_linear(c);
    int *r = a->blocks + 8 * (size_t)b;
    r[0] = (int)b;
    r[1] = (int)c->blockIdx.x;
    r[2] = (int)c->blockIdx.y;
    r[3] = (int)c->blockIdx.z;
    r[4] = (int)(c->gridDim.x * 10000 + c->gridDim.y * 100 + c->gridDim.z);
    r[5] = (int)(c->blockDim.x * 10000 + c->blockDim.y * 100 + c->blockDim.z);
    r[6] += 1; /* counts how often this block ran */
    r[7] = c->device;
    unsigned nt = block_threads(c);
    for (unsigned t = 0; t < nt; t++)
        a->threads[(size_t)b * nt + t] = (int)(b * 1000 + t);
}

Test(kernels, grid_3d_every_block_once)
{
    const unsigned gx = 3, gy = 4, gz = 5, bx = 2, by = 3, bz = 4;
    const size_t nb = gx * gy * gz, nt = bx * by * bz;
    orStream_t s = new_stream();
    int *blocks = NULL, *threads = NULL;
    CHECK_OR(orMalloc((void **)&blocks, nb * 8 * sizeof(int)));
    CHECK_OR(orMalloc((void **)&threads, nb * nt * sizeof(int)));
    CHECK_OR(orMemsetAsync(blocks, 0, nb * 8 * sizeof(int), s));
    CHECK_OR(orMemsetAsync(threads, 0xff, nb * nt * sizeof(int), s));
    geom_args a = {blocks, threads};
    CHECK_OR(orLaunchKernel(geom_kernel, dim3(gx, gy, gz), dim3(bx, by, bz), &a, sizeof a, 0, s));
    int *hb = malloc(nb * 8 * sizeof(int)), *ht = malloc(nb * nt * sizeof(int));
    CHECK_OR(orMemcpyAsync(hb, blocks, nb * 8 * sizeof(int), orMemcpyDeviceToHost, s));
    CHECK_OR(orMemcpyAsync(ht, threads, nb * nt * sizeof(int), orMemcpyDeviceToHost, s));
    CHECK_OR(orStreamSynchronize(s));
    for (unsigned z = 0; z < gz; z++)
        for (unsigned y = 0; y < gy; y++)
            for (unsigned x = 0; x < gx; x++) {
                size_t b = x + gx * (y + gy * (size_t)z);
                int *r = hb + 8 * b;
                cr_assert_eq(r[6], 1, "block (%u,%u,%u) ran %d times", x, y, z, r[6]);
                cr_assert_eq(r[0], (int)b);
                cr_assert_eq(r[1], (int)x);
                cr_assert_eq(r[2], (int)y);
                cr_assert_eq(r[3], (int)z);
                cr_assert_eq(r[4], 30405, "gridDim");
                cr_assert_eq(r[5], 20304, "blockDim");
                cr_assert_eq(r[7], 0, "device");
            }
    for (size_t i = 0; i < nb * nt; i++)
        cr_assert_eq(ht[i], (int)((i / nt) * 1000 + i % nt), "thread slot %zu", i);
    free(hb);
    free(ht);
    CHECK_OR(orFree(blocks));
    CHECK_OR(orFree(threads));
    CHECK_OR(orStreamDestroy(s));
}

Test(kernels, large_1d_grid)
{
    enum { N = 100000 };
    int *d = NULL;
    CHECK_OR(orMalloc((void **)&d, N * sizeof(int)));
    CHECK_OR(orMemset(d, 0, N * sizeof(int)));
    CHECK_OR(launch_axpb(d, N, 1, 7, NULL)); /* 1563 blocks on the default stream */
    int *h = malloc(N * sizeof(int));
    CHECK_OR(orMemcpy(h, d, N * sizeof(int), orMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        cr_assert_eq(h[i], 7, "element %d", i);
    free(h);
    CHECK_OR(orFree(d));
}

/* ---- arguments ------------------------------------------------------------ */

typedef struct {
    int *out;
    int value;
    char pad[100];
} args_struct;

static void store_kernel(const orKernelContext *c, void *p)
{
    args_struct *a = p;
    a->out[block_linear(c)] = a->value + a->pad[99];
}

Test(kernels, args_copied_at_launch)
{
    orStream_t s = new_stream();
    int *pin = NULL, *other = NULL;
    CHECK_OR(orMallocHost((void **)&pin, 4 * sizeof(int)));
    CHECK_OR(orMallocHost((void **)&other, 4 * sizeof(int)));
    memset(pin, 0, 4 * sizeof(int));
    memset(other, 0, 4 * sizeof(int));
    /* Keep the kernel from running until the struct has been overwritten. */
    gate_t g = {0};
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &g));
    args_struct a = {.out = pin, .value = 11};
    a.pad[99] = 1;
    CHECK_OR(orLaunchKernel(store_kernel, dim3(4, 1, 1), dim3(1, 1, 1), &a, sizeof a, 0, s));
    a.out = other;
    a.value = 999;
    a.pad[99] = 50;
    gate_open(&g);
    CHECK_OR(orStreamSynchronize(s));
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(pin[i], 12, "block %d saw %d", i, pin[i]);
        cr_assert_eq(other[i], 0);
    }
    CHECK_OR(orFreeHost(pin));
    CHECK_OR(orFreeHost(other));
    CHECK_OR(orStreamDestroy(s));
}

typedef struct {
    int *out;
    unsigned char big[32768 - sizeof(int *)];
} max_args;

static void max_args_kernel(const orKernelContext *c, void *p)
{
    max_args *a = p;
    int sum = 0;
    for (size_t i = 0; i < sizeof a->big; i++)
        sum += a->big[i];
    *a->out = sum;
}

Test(kernels, largest_args_copied)
{
    static max_args a;
    cr_assert_eq(sizeof a, 32768);
    int *pin = NULL;
    CHECK_OR(orMallocHost((void **)&pin, sizeof(int)));
    *pin = -1;
    a.out = pin;
    int want = 0;
    for (size_t i = 0; i < sizeof a.big; i++) {
        a.big[i] = (unsigned char)(i * 7);
        want += a.big[i];
    }
    orStream_t s = new_stream();
    gate_t g = {0};
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &g));
    CHECK_OR(orLaunchKernel(max_args_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &a, sizeof a, 0, s));
    memset(a.big, 0, sizeof a.big);
    gate_open(&g);
    CHECK_OR(orStreamSynchronize(s));
    cr_assert_eq(*pin, want);
    CHECK_OR(orFreeHost(pin));
    CHECK_OR(orStreamDestroy(s));
}

/* ---- shared memory ------------------------------------------------------- */

typedef struct {
    int *ok; /* per block: 1 if its shared buffer stayed private */
    size_t bytes;
} shm_args;

static void shm_kernel(const orKernelContext *c, void *p)
{
    shm_args *a = p;
    unsigned b = block_linear(c);
    unsigned char *m = c->sharedMem;
    if (!m) {
        a->ok[b] = -1;
        return;
    }
    unsigned char tag = (unsigned char)(b * 37 + 1);
    memset(m, tag, a->bytes);
    sleep_ms(1); /* give other blocks the chance to scribble on a shared buffer */
    int good = 1;
    for (size_t i = 0; i < a->bytes; i++)
        if (m[i] != tag)
            good = 0;
    a->ok[b] = good;
}

Test(kernels, shared_memory_is_per_block)
{
    set_env("OPENREG_DEVICE_THREADS", "4");
    enum { NB = 16 };
    int *ok = NULL;
    CHECK_OR(orMalloc((void **)&ok, NB * sizeof(int)));
    CHECK_OR(orMemset(ok, 0, NB * sizeof(int)));
    shm_args a = {ok, 49152};
    CHECK_OR(orLaunchKernel(shm_kernel, dim3(NB, 1, 1), dim3(32, 1, 1), &a, sizeof a, 49152, NULL));
    int h[NB];
    CHECK_OR(orMemcpy(h, ok, sizeof h, orMemcpyDeviceToHost));
    for (int i = 0; i < NB; i++)
        cr_assert_eq(h[i], 1, "block %d: %s", i, h[i] < 0 ? "sharedMem NULL" : "buffer shared");
    CHECK_OR(orFree(ok));
}

static void shm_null_kernel(const orKernelContext *c, void *p)
{
    ((int *)*(void **)p)[block_linear(c)] = c->sharedMem == NULL ? 1 : 2;
}

Test(kernels, no_shared_memory_gives_null)
{
    int *pin = NULL;
    CHECK_OR(orMallocHost((void **)&pin, 2 * sizeof(int)));
    pin[0] = pin[1] = 0;
    CHECK_OR(orLaunchKernel(shm_null_kernel, dim3(2, 1, 1), dim3(1, 1, 1), &pin, sizeof pin, 0,
                            NULL));
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq(pin[0], 1);
    cr_assert_eq(pin[1], 1);
    CHECK_OR(orFreeHost(pin));
}

/* ---- parallel blocks ------------------------------------------------------ */

static atomic_int arrived;

static void rendezvous_kernel(const orKernelContext *c, void *p)
{
    int *ok = *(int **)p;
    atomic_fetch_add(&arrived, 1);
    /* Only possible if all 4 blocks are running at the same time. */
    ok[block_linear(c)] = wait_atomic_ge(&arrived, 4, 3000);
}

Test(kernels, blocks_run_in_parallel)
{
    set_env("OPENREG_DEVICE_THREADS", "4");
    orDeviceProp prop;
    CHECK_OR(orGetDeviceProperties(&prop, 0));
    cr_assert_eq(prop.multiProcessorCount, 4);
    int *ok = NULL;
    CHECK_OR(orMalloc((void **)&ok, 4 * sizeof(int)));
    CHECK_OR(orMemset(ok, 0, 4 * sizeof(int)));
    CHECK_OR(orLaunchKernel(rendezvous_kernel, dim3(4, 1, 1), dim3(1, 1, 1), &ok, sizeof ok, 0,
                            NULL));
    int h[4];
    CHECK_OR(orMemcpy(h, ok, sizeof h, orMemcpyDeviceToHost));
    for (int i = 0; i < 4; i++)
        cr_assert_eq(h[i], 1, "block %d never saw all 4 blocks running", i);
    CHECK_OR(orFree(ok));
}

/* ---- device in context ---------------------------------------------------- */

static void device_kernel(const orKernelContext *c, void *p)
{
    int *out = *(int **)p;
    out[block_linear(c)] = c->device;
}

Test(kernels, context_device_is_stream_device)
{
    int *pin = NULL;
    CHECK_OR(orMallocHost((void **)&pin, 4 * sizeof(int)));
    memset(pin, 0xff, 4 * sizeof(int));
    CHECK_OR(orSetDevice(1));
    orStream_t s1 = new_stream();
    CHECK_OR(orSetDevice(0));
    /* Current device is 0, but the stream belongs to device 1. */
    CHECK_OR(orLaunchKernel(device_kernel, dim3(2, 1, 1), dim3(1, 1, 1), &pin, sizeof pin, 0, s1));
    CHECK_OR(orStreamSynchronize(s1));
    cr_assert_eq(pin[0], 1);
    cr_assert_eq(pin[1], 1);
    /* The default stream follows the current device. */
    int *second = pin + 2;
    CHECK_OR(orSetDevice(1));
    CHECK_OR(orLaunchKernel(device_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &second, sizeof second,
                            0, NULL));
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq(pin[2], 1);
    CHECK_OR(orSetDevice(0));
    int *third = pin + 3;
    CHECK_OR(orLaunchKernel(device_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &third, sizeof third, 0,
                            NULL));
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq(pin[3], 0);
    CHECK_OR(orStreamDestroy(s1));
    CHECK_OR(orFreeHost(pin));
}

/* ---- launch validation ---------------------------------------------------- */

static atomic_int ran;

static void count_kernel(const orKernelContext *c, void *p)
{
    atomic_fetch_add(&ran, 1);
}

Test(kernels, launch_validation)
{
    orStream_t s = new_stream(), dead = new_stream();
    CHECK_OR(orStreamDestroy(dead));
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    int arg = 0;
    const orDim3 one = {1, 1, 1};
    struct {
        orDim3 grid, block;
        size_t shm;
    } bad[] = {
        {{0, 1, 1}, {1, 1, 1}, 0},         {{1, 0, 1}, {1, 1, 1}, 0},
        {{1, 1, 0}, {1, 1, 1}, 0},         {{1, 1, 1}, {0, 1, 1}, 0},
        {{1, 1, 1}, {1, 0, 1}, 0},         {{1, 1, 1}, {1, 1, 0}, 0},
        {{1, 1, 1}, {1025, 1, 1}, 0},      {{1, 1, 1}, {32, 32, 2}, 0},
        {{1, 1, 1}, {1, 1, 65}, 0},        {{1, 1, 1}, {1, 1025, 1}, 0},
        {{2147483648u, 1, 1}, one, 0},     {{1, 65536, 1}, one, 0},
        {{1, 1, 65536}, one, 0},           {{1, 1, 1}, {1, 1, 1}, 49153},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_log_info("case %zu", i);
        EXPECT_OR(orLaunchKernel(count_kernel, bad[i].grid, bad[i].block, &arg, sizeof arg,
                                 bad[i].shm, s),
                  orErrorInvalidValue);
    }
    EXPECT_OR(orLaunchKernel(NULL, one, one, &arg, sizeof arg, 0, s), orErrorInvalidValue);
    EXPECT_OR(orLaunchKernel(count_kernel, one, one, NULL, 4, 0, s), orErrorInvalidValue);
    static char huge[32769];
    EXPECT_OR(orLaunchKernel(count_kernel, one, one, huge, sizeof huge, 0, s),
              orErrorInvalidValue);
    EXPECT_OR(orLaunchKernel(count_kernel, one, one, &arg, sizeof arg, 0, dead),
              orErrorInvalidResourceHandle);
    EXPECT_OR(orLaunchKernel(count_kernel, one, one, &arg, sizeof arg, 0, (orStream_t)0x1234),
              orErrorInvalidResourceHandle);
    EXPECT_OR(orLaunchKernel(count_kernel, one, one, &arg, sizeof arg, 0, (orStream_t)e),
              orErrorInvalidResourceHandle);
    CHECK_OR(orStreamSynchronize(s));
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq(atomic_load(&ran), 0, "a rejected launch ran %d blocks", atomic_load(&ran));
    CHECK_OR(orEventDestroy(e));
    CHECK_OR(orStreamDestroy(s));
}

Test(kernels, launch_limits_accepted)
{
    orStream_t s = new_stream();
    const orDim3 one = {1, 1, 1};
    CHECK_OR(orLaunchKernel(count_kernel, one, dim3(1024, 1, 1), NULL, 0, 0, s));
    CHECK_OR(orLaunchKernel(count_kernel, one, dim3(1, 1024, 1), NULL, 0, 0, s));
    CHECK_OR(orLaunchKernel(count_kernel, one, dim3(1, 1, 64), NULL, 0, 0, s));
    CHECK_OR(orLaunchKernel(count_kernel, one, dim3(16, 16, 4), NULL, 0, 0, s));
    CHECK_OR(orLaunchKernel(count_kernel, one, one, NULL, 0, 49152, s));
    CHECK_OR(orLaunchKernel(count_kernel, dim3(1, 2, 3), one, NULL, 0, 0, s)); /* 6 blocks */
    CHECK_OR(orStreamSynchronize(s));
    cr_assert_eq(atomic_load(&ran), 11);
    CHECK_OR(orStreamDestroy(s));
}

/* ---- host functions ------------------------------------------------------- */

static void set_one_kernel(const orKernelContext *c, void *p)
{
    **(int **)p = 1;
}

static void host_step(void *p)
{
    int *v = p;
    v[1] = v[0]; /* what the kernel before left */
    v[0] = 2;
}

static void double_kernel(const orKernelContext *c, void *p)
{
    int *v = *(int **)p;
    v[2] = v[0] * 10;
}

Test(kernels, host_func_in_stream_order)
{
    orStream_t s = new_stream();
    int *v = NULL;
    CHECK_OR(orMallocHost((void **)&v, 3 * sizeof(int)));
    v[0] = v[1] = v[2] = 0;
    CHECK_OR(orLaunchHostFunc(s, sleep_fn, (void *)(intptr_t)20));
    CHECK_OR(orLaunchKernel(set_one_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &v, sizeof v, 0, s));
    CHECK_OR(orLaunchHostFunc(s, host_step, v));
    CHECK_OR(orLaunchKernel(double_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &v, sizeof v, 0, s));
    CHECK_OR(orStreamSynchronize(s));
    cr_assert_eq(v[1], 1, "host function ran before the kernel");
    cr_assert_eq(v[2], 20, "kernel ran before the host function");
    CHECK_OR(orFreeHost(v));
    CHECK_OR(orStreamDestroy(s));
}

Test(kernels, host_func_errors)
{
    orStream_t s = new_stream(), dead = new_stream();
    CHECK_OR(orStreamDestroy(dead));
    EXPECT_OR(orLaunchHostFunc(s, NULL, NULL), orErrorInvalidValue);
    EXPECT_OR(orLaunchHostFunc(NULL, NULL, NULL), orErrorInvalidValue);
    EXPECT_OR(orLaunchHostFunc(dead, sleep_fn, NULL), orErrorInvalidResourceHandle);
    EXPECT_OR(orLaunchHostFunc((orStream_t)0x1234, sleep_fn, NULL), orErrorInvalidResourceHandle);
    CHECK_OR(orStreamDestroy(s));
}

/* ---- blocking calls from worker threads ------------------------------- */

typedef struct {
    orStream_t own, other;
    orEvent_t event;
    void *dev;
    orError_t stream_sync, other_sync, device_sync, memcpy_err, memset_err, event_sync,
        stream_destroy, device_sync_default;
    atomic_int done;
} blocking_calls;

static void blocking_host_fn(void *p)
{
    blocking_calls *b = p;
    int x = 0;
    b->stream_sync = orStreamSynchronize(b->own);
    b->other_sync = orStreamSynchronize(b->other);
    b->device_sync_default = orStreamSynchronize(NULL);
    b->device_sync = orDeviceSynchronize();
    b->memcpy_err = orMemcpy(b->dev, &x, sizeof x, orMemcpyHostToDevice);
    b->memset_err = orMemset(b->dev, 0, sizeof x);
    b->event_sync = orEventSynchronize(b->event);
    b->stream_destroy = orStreamDestroy(b->other);
    atomic_store(&b->done, 1);
}

static void check_blocking(blocking_calls *b)
{
    cr_assert_eq(atomic_load(&b->done), 1);
    CR_ASSERT_OR_EQ(b->stream_sync, orErrorNotPermitted, "orStreamSynchronize(own)");
    CR_ASSERT_OR_EQ(b->other_sync, orErrorNotPermitted, "orStreamSynchronize(other)");
    CR_ASSERT_OR_EQ(b->device_sync_default, orErrorNotPermitted, "orStreamSynchronize(NULL)");
    CR_ASSERT_OR_EQ(b->device_sync, orErrorNotPermitted, "orDeviceSynchronize");
    CR_ASSERT_OR_EQ(b->memcpy_err, orErrorNotPermitted, "orMemcpy");
    CR_ASSERT_OR_EQ(b->memset_err, orErrorNotPermitted, "orMemset");
    CR_ASSERT_OR_EQ(b->event_sync, orErrorNotPermitted, "orEventSynchronize");
    CR_ASSERT_OR_EQ(b->stream_destroy, orErrorNotPermitted, "orStreamDestroy");
}

static void setup_blocking(blocking_calls *b)
{
    memset(b, 0, sizeof *b);
    b->stream_sync = b->other_sync = b->device_sync = b->memcpy_err = b->memset_err =
        b->event_sync = b->stream_destroy = b->device_sync_default = orErrorUnknown;
    CHECK_OR(orStreamCreate(&b->own));
    CHECK_OR(orStreamCreate(&b->other));
    CHECK_OR(orEventCreate(&b->event));
    CHECK_OR(orEventRecord(b->event, b->other));
    CHECK_OR(orMalloc(&b->dev, 64));
}

static void teardown_blocking(blocking_calls *b)
{
    CHECK_OR(orStreamDestroy(b->other)); /* the call inside must not have destroyed it */
    CHECK_OR(orStreamDestroy(b->own));
    CHECK_OR(orEventDestroy(b->event));
    CHECK_OR(orFree(b->dev));
}

Test(kernels, blocking_calls_from_host_function)
{
    static blocking_calls b;
    setup_blocking(&b);
    CHECK_OR(orLaunchHostFunc(b.own, blocking_host_fn, &b));
    CHECK_OR(orStreamSynchronize(b.own));
    check_blocking(&b);
    teardown_blocking(&b);
}

static void blocking_kernel(const orKernelContext *c, void *p)
{
    blocking_host_fn(*(blocking_calls **)p);
}

Test(kernels, blocking_calls_from_kernel)
{
    static blocking_calls b;
    setup_blocking(&b);
    blocking_calls *bp = &b;
    CHECK_OR(orLaunchKernel(blocking_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &bp, sizeof bp, 0,
                            b.own));
    CHECK_OR(orStreamSynchronize(b.own));
    check_blocking(&b);
    teardown_blocking(&b);
}

static void async_from_host_fn(void *p)
{
    /* Non-blocking calls stay allowed on worker threads. */
    int **v = p;
    orError_t *err = (orError_t *)v[1];
    *err = orLaunchKernel(set_one_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &v[0], sizeof v[0], 0,
                          (orStream_t)v[2]);
}

Test(kernels, async_calls_from_host_function_allowed)
{
    orStream_t a = new_stream(), b = new_stream();
    int *pin = NULL;
    CHECK_OR(orMallocHost((void **)&pin, sizeof(int)));
    *pin = 0;
    orError_t err = orErrorUnknown;
    int *v[3] = {pin, (int *)&err, (int *)b};
    CHECK_OR(orLaunchHostFunc(a, async_from_host_fn, v));
    CHECK_OR(orStreamSynchronize(a));
    CR_ASSERT_OR_EQ(err, orSuccess, "orLaunchKernel from a host function");
    CHECK_OR(orStreamSynchronize(b));
    cr_assert_eq(*pin, 1);
    CHECK_OR(orStreamDestroy(a));
    CHECK_OR(orStreamDestroy(b));
    CHECK_OR(orFreeHost(pin));
}
