/*
 * src/rng.c - orRandGenerateUniform / orRandGenerateNormal: a kernel whose
 * blocks each fill a fixed slice of the output from Philox4x32-10.
 *
 * Every element depends only on (seed, offset + i), so the slicing and the
 * number of compute threads never change the result.
 */
#include "internal.h"
#include "philox.h"

#include <math.h>
#include <string.h>

/* Elements per kernel block: big enough to amortize the block hand-out,
 * small enough that a few MB split across all compute threads. */
#define RNG_BLOCK_ELEMS ((uint64_t)16384)

typedef struct {
    unsigned char *out; /* bytes, since devPtr need not be float-aligned */
    uint64_t n, seed, offset;
    float mean, stddev;
    bool normal;
} rng_args;

static void philox_block(uint64_t b, uint64_t seed, uint32_t w[4])
{
    const uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), 0, 0};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    or_philox4x32_10(ctr, key, w);
}

static void rng_kernel(const orKernelContext *ctx, void *p)
{
    const rng_args *a = p;
    const orDim3 g = ctx->gridDim, bi = ctx->blockIdx;
    uint64_t blk = bi.x + (uint64_t)g.x * (bi.y + (uint64_t)g.y * bi.z);
    uint64_t begin = blk * RNG_BLOCK_ELEMS;
    if (begin >= a->n)
        return; /* padding block of a grid rounded up to a rectangle */
    uint64_t end = a->n - begin < RNG_BLOCK_ELEMS ? a->n : begin + RNG_BLOCK_ELEMS;

    uint32_t w[4];
    uint64_t have = 0; /* counter in w, valid once filled */
    bool filled = false;
    double z[2] = {0, 0};
    unsigned have_pair = 2; /* which word pair of w z holds; 2 = none */
    for (uint64_t i = begin; i < end; i++) {
        uint64_t j = a->offset + i; /* wraps mod 2^64, as the counter does */
        uint64_t b = j / 4;
        unsigned word = (unsigned)(j % 4);
        if (!filled || b != have) {
            philox_block(b, a->seed, w);
            have = b;
            filled = true;
            have_pair = 2;
        }
        float v;
        if (a->normal) {
            /* Words 2k and 2k+1 share a counter, so a pair never spans two. */
            unsigned pair = word / 2;
            if (pair != have_pair) {
                or_philox_box_muller(w[2 * pair], w[2 * pair + 1], &z[0], &z[1]);
                have_pair = pair;
            }
            v = or_philox_scale(z[word % 2], a->mean, a->stddev);
        } else {
            v = or_philox_uniform(w[word]);
        }
        memcpy(a->out + i * sizeof(float), &v, sizeof v);
    }
}

static orError_t rng_enqueue(float *devPtr, size_t n, bool normal, float mean, float stddev,
                             unsigned long long seed, unsigned long long offset,
                             orStream_t stream)
{
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err != orSuccess)
        return err;
    if (n == 0)
        return orSuccess;
    if (!devPtr || n > SIZE_MAX / sizeof(float))
        return orErrorInvalidValue;
    if (normal && (!isfinite(mean) || !isfinite(stddev) || stddev < 0.0f))
        return orErrorInvalidValue;
    or_mem_region r;
    if ((err = or_mem_classify(devPtr, n * sizeof(float), &r)) != orSuccess)
        return err;
    if (r.cls == OR_MEM_HOST)
        return orErrorInvalidValue;
    if (r.cls == OR_MEM_REMOTE)
        return orErrorNotSupported; /* kernels cannot reach another node's memory */

    rng_args args = {(unsigned char *)devPtr, n, seed, offset, mean, stddev, normal};
    uint64_t nblocks = (n + RNG_BLOCK_ELEMS - 1) / RNG_BLOCK_ELEMS;
    /* One row of blocks unless n is beyond any real arena; then a rectangle. */
    const uint64_t max_x = 2147483647u;
    orDim3 grid = {1, 1, 1};
    grid.x = (unsigned)(nblocks < max_x ? nblocks : max_x);
    grid.y = (unsigned)((nblocks + grid.x - 1) / grid.x);

    or_op *op = or_op_new(OR_OP_KERNEL, sizeof args);
    if (!op)
        return orErrorMemoryAllocation;
    op->u.kernel.fn = rng_kernel;
    op->u.kernel.grid = grid;
    op->u.kernel.block = (orDim3){1, 1, 1};
    op->u.kernel.shared_mem = 0;
    op->u.kernel.nblocks = (uint64_t)grid.x * grid.y;
    op->u.kernel.args = memcpy(op->payload, &args, sizeof args);
    op->cost.bytes = (uint64_t)n * sizeof(float);
    /* Virtual time: memory-bound, the numbers written once. */
    op->cost.declared = true;
    op->cost.kernel_bytes = (double)n * sizeof(float);
    if (or_recording())
        op->u.kernel.name =
            or_trace_intern(normal ? "orRandGenerateNormal" : "orRandGenerateUniform");
    or_stream_enqueue(s, op);
    return orSuccess;
}

orError_t orRandGenerateUniform(float *devPtr, size_t n, unsigned long long seed,
                                unsigned long long offset, orStream_t stream)
{
    OR_API_BEGIN();
    orError_t err = rng_enqueue(devPtr, n, false, 0.0f, 1.0f, seed, offset, stream);
    if (err != orSuccess)
        OR_RETURN(err);
    return orSuccess;
}

orError_t orRandGenerateNormal(float *devPtr, size_t n, float mean, float stddev,
                               unsigned long long seed, unsigned long long offset,
                               orStream_t stream)
{
    OR_API_BEGIN();
    orError_t err = rng_enqueue(devPtr, n, true, mean, stddev, seed, offset, stream);
    if (err != orSuccess)
        OR_RETURN(err);
    return orSuccess;
}
