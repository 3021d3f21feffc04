/*
 * collectives/reduce.h - the element-wise reduction kernels of OCCL.
 *
 * Host loops over the ten occlDataType_t types and the reduction kinds,
 * written so the compiler vectorizes them. Conventions shared by every
 * kernel:
 *
 * - Buffers may alias only exactly: dst may be the same pointer as a source
 *   (in place), or must not overlap it at all. Partial overlap is undefined.
 * - Integers wrap on Sum, Prod and PreMulSum (computed in unsigned arithmetic,
 *   so signed types wrap two's-complement instead of overflowing).
 * - Max/Min on floating types follow C's fmax/fmin: a NaN operand is ignored
 *   unless both are NaN (as NCCL's fmaxf/fminf). Which of +0 and -0 wins
 *   between equal zeros is unspecified, as for fmax.
 * - Float16, Bfloat16 and the FP8 types are computed in float and rounded to
 *   nearest even once per result element; occl_reduce_n rounds once after
 *   all sources. FP8 results saturate (see occl_float_to_e4m3).
 * - A count of 0 touches nothing. An unknown type or kind does nothing:
 *   callers validate with occl_type_size() and occl_redop_builtin().
 * - Results assume the default floating-point environment (round to nearest).
 */
#ifndef OCCL_REDUCE_H
#define OCCL_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "occl.h"

/* Kinds of reduction the kernels know. Avg is not one: it is Sum followed by
 * occl_finish_avg(). */
enum { OCCL_RED_SUM = 0, OCCL_RED_PROD, OCCL_RED_MAX, OCCL_RED_MIN, OCCL_RED_PREMULSUM, OCCL_RED_NKINDS };

/* The scalar of PreMulSum, in the form each type family reads: scalar_f for
 * floating types (Float16/Bfloat16/Float32 use it as a float), scalar_i for
 * signed integers, scalar_u for unsigned ones, all three truncated to the
 * element type's width. The constructors below fill all three consistently. */
typedef struct occl_redop {
    int kind; /* OCCL_RED_* */
    double scalar_f;
    int64_t scalar_i;
    uint64_t scalar_u;
} occl_redop;

/* 0 for an unknown type. Inline: a small call asks it several times. */
static inline size_t occl_type_size(occlDataType_t t)
{
    static const unsigned char sizes[occlNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return (unsigned)t < occlNumTypes ? sizes[t] : 0;
}
const char *occl_type_name(occlDataType_t t); /* "float32", ...; "unknown" */
const char *occl_op_name(occlRedOp_t op);     /* "sum", ..., "avg", "premulsum" for created ops */

/* A descriptor of kind `kind`, scalar 1 (so PreMulSum made here is a Sum). */
occl_redop occl_redop_make(int kind);
/* PreMulSum by the scalar *scalar of type t (as occlRedOpCreatePreMulSum
 * reads it). Unknown t gives scalar 1. */
occl_redop occl_redop_premulsum(const void *scalar, occlDataType_t t);
/* PreMulSum from a value: floating types use f, integer types use i (as
 * two's complement for the unsigned ones). */
occl_redop occl_redop_premulsum_value(double f, int64_t i);
/* The descriptor of a built-in op: 0, and *post_avg set to 1 for occlAvg
 * (run Sum, then occl_finish_avg) and 0 otherwise; -1 for any other op
 * (created PreMulSum ops live in their communicator). */
int occl_redop_builtin(occlRedOp_t op, occl_redop *out, int *post_avg);

/* dst[i] = a[i] (op) b[i]. For PreMulSum both a and b are inputs:
 * dst = a*s + b*s. To add an input to a partial result that is already
 * scaled, scale the input with occl_premul and reduce with Sum. */
void occl_reduce2(void *dst, const void *a, const void *b, size_t count, occlDataType_t t,
                  const occl_redop *op);

/* dst[i] = srcs[0][i] (op) srcs[1][i] (op) ... (op) srcs[nsrc-1][i], folded
 * left to right. Blocked so each source is read once while the accumulator
 * stays in L1; Float16/Bfloat16 accumulate in float and round once. nsrc 1
 * copies (PreMulSum: scales); nsrc <= 0 does nothing. dst may be any of
 * srcs; sources may repeat. */
void occl_reduce_n(void *dst, const void *const *srcs, int nsrc, size_t count, occlDataType_t t,
                   const occl_redop *op);

/* occl_reduce_n into every one of dsts[0..ndst-1], in blocks small enough
 * that each block is written to the other destinations from the cache. A
 * destination may be one of the sources only as dsts[0] or where that
 * source's block is not read after being written (each block is read before
 * any destination's is written). */
void occl_reduce_n_to(void *const *dsts, int ndst, const void *const *srcs, int nsrc, size_t count,
                      occlDataType_t t, const occl_redop *op);

/* dst[i] = src[i] * scalar of op (whatever op's kind); dst may be src. */
void occl_premul(void *dst, const void *src, size_t count, occlDataType_t t, const occl_redop *op);

/* dst[i] /= n, Avg's last step: integers divide truncating toward zero (as
 * NCCL), floating types divide correctly rounded. n <= 1 leaves dst as is. */
void occl_finish_avg(void *dst, size_t count, occlDataType_t t, int n);

/* IEEE binary16 and bfloat16 <-> float. Widening is exact (NaN payloads and
 * signalling bits kept); narrowing rounds to nearest even, overflows to Inf,
 * rounds into subnormals, and keeps a NaN a NaN of the same sign (quieted,
 * payload truncated to its top bits). */
float occl_half_to_float(uint16_t h);
uint16_t occl_float_to_half(float f);
float occl_bf16_to_float(uint16_t b);
uint16_t occl_float_to_bf16(float f);

/* OCP FP8 E4M3 / E5M2 <-> float. Widening is exact. Narrowing rounds to
 * nearest even and saturates like NCCL's (__NV_SATFINITE): finite values
 * beyond the largest finite one (448 / 57344) and infinities become that
 * largest value of their sign; NaN stays NaN (E4M3 0x7f, E5M2 0x7e, signed). */
float occl_e4m3_to_float(uint8_t b);
uint8_t occl_float_to_e4m3(float f);
float occl_e5m2_to_float(uint8_t b);
uint8_t occl_float_to_e5m2(float f);

#endif
