/*
 * test_occl_fp8.c - the OCP FP8 types (occlFloat8e4m3, occlFloat8e5m2): their
 * conversions against a reference that decodes with ldexp and encodes by
 * searching all codes for the nearest value (ties to the even code,
 * saturating), and every reduction kind against that reference.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "reduce.h"

typedef struct fmt {
    const char *name;
    occlDataType_t type;
    int mbits, bias;
    uint8_t maxcode, nancode;
    double max;
    float (*decode)(uint8_t);
    uint8_t (*encode)(float);
} fmt;

static const fmt E4M3 = {"e4m3", occlFloat8e4m3, 3, 7, 0x7e, 0x7f, 448.0,
                         occl_e4m3_to_float, occl_float_to_e4m3};
static const fmt E5M2 = {"e5m2", occlFloat8e5m2, 2, 15, 0x7b, 0x7e, 57344.0,
                         occl_e5m2_to_float, occl_float_to_e5m2};

/* The value of code b per the OCP FP8 specification. */
static double ref_decode(const fmt *f, uint8_t b)
{
    int e = (b & 0x7f) >> f->mbits, m = b & ((1 << f->mbits) - 1);
    int emax = (1 << (7 - f->mbits)) - 1;
    double v;
    if (f->type == occlFloat8e4m3 && (b & 0x7f) == 0x7f)
        return NAN;
    if (f->type == occlFloat8e5m2 && e == emax)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp(m, 1 - f->bias - f->mbits);
    else
        v = ldexp((1 << f->mbits) + m, e - f->bias - f->mbits);
    return b & 0x80 ? -v : v;
}

/* Nearest finite code, ties to the even code; beyond the largest finite
 * value (infinities included) the largest; NaN the format's NaN. */
static uint8_t ref_encode(const fmt *f, double x)
{
    uint8_t sign = signbit(x) ? 0x80 : 0;
    double a = fabs(x);
    if (isnan(x))
        return sign | f->nancode;
    if (a >= f->max)
        return sign | f->maxcode;
    /* The non-negative codes' values, decoded once per format. */
    static double values[2][128];
    static int ready[2];
    int k = f->type == occlFloat8e5m2;
    if (!ready[k]) {
        for (int c = 0; c < 128; c++)
            values[k][c] = ref_decode(f, (uint8_t)c);
        ready[k] = 1;
    }
    uint8_t best = 0;
    for (int c = 1; c <= f->maxcode; c++) {
        double dc = fabs(values[k][c] - a), db = fabs(values[k][best] - a);
        if (dc < db || (dc == db && !(c & 1)))
            best = (uint8_t)c;
    }
    return sign | best;
}

static void check_decode(const fmt *f)
{
    for (int b = 0; b < 256; b++) {
        double want = ref_decode(f, (uint8_t)b);
        float got = f->decode((uint8_t)b);
        if (isnan(want))
            cr_assert(isnan(got) && !signbit(got) == !(b & 0x80), "%s 0x%02x", f->name, b);
        else
            cr_assert(got == want && !signbit(got) == !signbit(want), "%s 0x%02x: %g, want %g",
                      f->name, b, (double)got, want);
    }
}

Test(fp8, decode_every_code)
{
    check_decode(&E4M3);
    check_decode(&E5M2);
}

static void check_encode(const fmt *f, float x)
{
    uint8_t want = ref_encode(f, x), got = f->encode(x);
    cr_assert_eq(got, want, "%s(%a) = 0x%02x, want 0x%02x", f->name, (double)x, got, want);
}

/* Every code's value, the midpoints between neighbours (ties) and values
 * one float ulp either side of them, then a sweep over float bit patterns. */
static void check_encode_all(const fmt *f)
{
    for (int b = 0; b < 256; b++) {
        float v = f->decode((uint8_t)b);
        check_encode(f, v);
        if (isnan(v) || (b & 0x7f) >= f->maxcode)
            continue;
        float next = f->decode((uint8_t)(b + 1));
        if (isnan(next) || isinf(next))
            continue;
        float mid = (float)(((double)v + next) / 2);
        check_encode(f, mid);
        check_encode(f, nextafterf(mid, INFINITY));
        check_encode(f, nextafterf(mid, -INFINITY));
    }
    for (uint64_t u = 0; u <= 0xffffffffu; u += 0x1003) {
        uint32_t w = (uint32_t)u;
        float x;
        memcpy(&x, &w, sizeof x);
        check_encode(f, x);
    }
}

Test(fp8, encode_matches_nearest_even_search)
{
    check_encode_all(&E4M3);
    check_encode_all(&E5M2);
}

Test(fp8, encode_edge_cases)
{
    /* E4M3: saturation at 448 (464, the tie above it, would round to the
     * NaN code), infinities saturate, NaN keeps its sign. */
    cr_assert_eq(occl_float_to_e4m3(448.0f), 0x7e);
    cr_assert_eq(occl_float_to_e4m3(464.0f), 0x7e);
    cr_assert_eq(occl_float_to_e4m3(1e30f), 0x7e);
    cr_assert_eq(occl_float_to_e4m3(-INFINITY), 0xfe);
    cr_assert_eq(occl_float_to_e4m3(INFINITY), 0x7e);
    cr_assert_eq(occl_float_to_e4m3(NAN), 0x7f);
    cr_assert_eq(occl_float_to_e4m3(-NAN), 0xff);
    /* Ties to even: 1 + 1/16 lies between 1 (0x38) and 1.125 (0x39). */
    cr_assert_eq(occl_float_to_e4m3(1.0625f), 0x38);
    cr_assert_eq(occl_float_to_e4m3(1.1875f), 0x3a);
    /* Subnormals: step 2^-9; half a step ties to 0, 1.5 steps to 2. */
    cr_assert_eq(occl_float_to_e4m3(0x1p-9f), 0x01);
    cr_assert_eq(occl_float_to_e4m3(0x1p-10f), 0x00);
    cr_assert_eq(occl_float_to_e4m3(0x1.8p-9f), 0x02);
    cr_assert_eq(occl_float_to_e4m3(-0x1p-11f), 0x80);
    cr_assert_eq(occl_float_to_e4m3(0x1.ep-7f), 0x08); /* 7.5 steps: rounds up to 2^-6 */
    cr_assert_eq(occl_e4m3_to_float(0x01), 0x1p-9f);
    cr_assert(isnan(occl_e4m3_to_float(0x7f)));
    cr_assert_eq(occl_e4m3_to_float(0x7e), 448.0f);
    /* E5M2: largest 57344, infinities saturate as NCCL's SATFINITE does,
     * NaN quiet. */
    cr_assert_eq(occl_float_to_e5m2(57344.0f), 0x7b);
    cr_assert_eq(occl_float_to_e5m2(61440.0f), 0x7b);
    cr_assert_eq(occl_float_to_e5m2(INFINITY), 0x7b);
    cr_assert_eq(occl_float_to_e5m2(-INFINITY), 0xfb);
    cr_assert_eq(occl_float_to_e5m2(NAN), 0x7e);
    cr_assert_eq(occl_float_to_e5m2(0x1p-16f), 0x01);
    cr_assert_eq(occl_float_to_e5m2(0x1p-17f), 0x00);
    cr_assert_eq(occl_float_to_e5m2(0x1.8p-16f), 0x02);
    cr_assert_eq(occl_float_to_e5m2(1.125f), 0x3c); /* tie between 1 and 1.25 */
    cr_assert_eq(occl_float_to_e5m2(1.375f), 0x3e); /* tie between 1.25 and 1.5 */
    cr_assert(isinf(occl_e5m2_to_float(0x7c)));
    cr_assert(isnan(occl_e5m2_to_float(0x7d)));
}

/* ---- Reductions --------------------------------------------------------------- */

#define KIND_AVG OCCL_RED_NKINDS

/* The kernels' fmax/fmin rule: y if it is larger (smaller) or x is NaN. */
static float ref_op(int kind, float x, float y)
{
    switch (kind) {
    case OCCL_RED_PROD: return x * y;
    case OCCL_RED_MAX: return y > x || isnan(x) ? y : x;
    case OCCL_RED_MIN: return y < x || isnan(x) ? y : x;
    default: return x + y;
    }
}

static uint32_t rng_state = 12345;

static uint8_t rnd8(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (uint8_t)(rng_state >> 16);
}

#define N 257
#define MAXSRC 5

static void check_kind(const fmt *f, int kind, int nsrc, int in_place)
{
    static uint8_t src[MAXSRC][N], dst[N];
    const void *srcs[MAXSRC];
    float scale = 0.375f; /* PreMulSum's scalar */
    uint8_t scale_code = f->encode(scale);
    occl_redop op = kind == OCCL_RED_PREMULSUM ? occl_redop_premulsum(&scale_code, f->type)
                                               : occl_redop_make(kind == KIND_AVG ? OCCL_RED_SUM : kind);
    for (int s = 0; s < nsrc; s++) {
        for (int i = 0; i < N; i++)
            src[s][i] = rnd8();
        srcs[s] = src[s];
    }
    uint8_t want[N];
    for (int i = 0; i < N; i++) {
        float acc = f->decode(src[0][i]);
        if (kind == OCCL_RED_PREMULSUM)
            acc *= scale;
        for (int s = 1; s < nsrc; s++) {
            float x = f->decode(src[s][i]);
            acc = ref_op(kind, acc, kind == OCCL_RED_PREMULSUM ? x * scale : x);
        }
        want[i] = ref_encode(f, acc);
        if (kind == KIND_AVG)
            want[i] = ref_encode(f, (float)ref_decode(f, want[i]) / (float)nsrc);
    }
    void *out = in_place ? src[0] : dst;
    if (nsrc == 2)
        occl_reduce2(out, srcs[0], srcs[1], N, f->type, &op);
    else
        occl_reduce_n(out, srcs, nsrc, N, f->type, &op);
    if (kind == KIND_AVG)
        occl_finish_avg(out, N, f->type, nsrc);
    const uint8_t *got = out;
    for (int i = 0; i < N; i++)
        if (isnan(ref_decode(f, want[i]))) /* a NaN's sign depends on operand order */
            cr_assert(isnan(ref_decode(f, got[i])), "%s kind %d elem %d: 0x%02x not NaN", f->name,
                      kind, i, got[i]);
        else
            cr_assert_eq(got[i], want[i], "%s kind %d nsrc %d in_place %d elem %d: 0x%02x want 0x%02x",
                     f->name, kind, nsrc, in_place, i, got[i], want[i]);
}

Test(fp8, reductions_match_reference)
{
    const fmt *fs[] = {&E4M3, &E5M2};
    for (int k = 0; k < 2; k++)
        for (int kind = 0; kind <= KIND_AVG; kind++)
            for (int nsrc = 2; nsrc <= MAXSRC; nsrc++)
                for (int ip = 0; ip < 2; ip++)
                    check_kind(fs[k], kind, nsrc, ip);
}

Test(fp8, sum_saturates_and_keeps_nan)
{
    occl_redop sum = occl_redop_make(OCCL_RED_SUM);
    uint8_t a[3] = {0x7e, 0xfe, 0x7f}, b[3] = {0x7e, 0x38, 0x38}, d[3]; /* 448, -448, NaN; 448, 1, 1 */
    occl_reduce2(d, a, b, 3, occlFloat8e4m3, &sum);
    cr_assert_eq(d[0], 0x7e); /* 896 saturates to 448 */
    cr_assert_eq(d[1], 0xfe); /* -447: the nearest of -416 and -448 */
    cr_assert_eq(d[2], 0x7f);
    uint8_t x[2] = {0x7c, 0x7b}, y[2] = {0x3c, 0x7b}, z[2]; /* Inf, 57344; 1, 57344 */
    occl_reduce2(z, x, y, 2, occlFloat8e5m2, &sum);
    cr_assert_eq(z[0], 0x7b); /* Inf + 1 saturates, as NCCL's SATFINITE conversion */
    cr_assert_eq(z[1], 0x7b);
    cr_assert_eq(occl_type_size(occlFloat8e4m3), 1);
    cr_assert_eq(occl_type_size(occlFloat8e5m2), 1);
}
