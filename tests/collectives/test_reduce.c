/*
 * test_reduce.c - OCCL's reduction kernels against straightforward references.
 *
 * The references work element by element on plain values: integers as 64-bit
 * two's complement masked to the type's width, Float16/Bfloat16 decoded with
 * ldexp and encoded by explicit rounding of a scaled double, so they share no
 * code with the bit tricks under test.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"

#define KIND_AVG OCCL_RED_NKINDS /* a sixth "kind" for the tests: Sum, then finish_avg */
#define NKINDS_TESTED (OCCL_RED_NKINDS + 1)
#define BIG 1000003

static const char *kind_name(int kind)
{
    static const char *const names[] = {"sum", "prod", "max", "min", "premulsum", "avg"};
    return kind >= 0 && kind < NKINDS_TESTED ? names[kind] : "?";
}

/* ---- Reference number formats ------------------------------------------- */

/* A binary16-like format: mbits stored mantissa bits, ebits exponent bits. */
typedef struct fmt {
    int mbits, ebits;
} fmt;

static const fmt HALF = {10, 5}, BF16 = {7, 8};

static double ref_decode(fmt f, uint16_t v)
{
    int bias = (1 << (f.ebits - 1)) - 1;
    int e = (v >> f.mbits) & ((1 << f.ebits) - 1);
    int m = v & ((1 << f.mbits) - 1);
    double x;
    if (e == (1 << f.ebits) - 1)
        x = m ? NAN : INFINITY;
    else if (e == 0)
        x = ldexp(m, 1 - bias - f.mbits);
    else
        x = ldexp((1 << f.mbits) + m, e - bias - f.mbits);
    return (v >> (f.mbits + f.ebits)) & 1 ? -x : x;
}

/* Round to nearest, ties to even, by scaling to an integer significand. */
static uint16_t ref_encode(fmt f, double x)
{
    int bias = (1 << (f.ebits - 1)) - 1;
    uint16_t sign = signbit(x) ? (uint16_t)(1u << (f.mbits + f.ebits)) : 0;
    uint16_t inf = (uint16_t)(((1u << f.ebits) - 1) << f.mbits);
    if (isnan(x))
        return sign | inf | (uint16_t)(1u << (f.mbits - 1));
    double a = fabs(x);
    if (isinf(a))
        return sign | inf;
    if (a == 0)
        return sign;
    int e2;
    frexp(a, &e2);
    int E = e2 - 1; /* a in [2^E, 2^(E+1)) */
    if (E < 1 - bias)
        E = 1 - bias; /* subnormal: the quantum stops shrinking */
    double s = ldexp(a, f.mbits - E); /* exact: a is a float */
    double fl = floor(s), frac = s - fl;
    uint64_t r = (uint64_t)fl;
    if (frac > 0.5 || (frac == 0.5 && (r & 1)))
        r++;
    if (r == (uint64_t)2 << f.mbits) { /* rounded up to the next binade */
        r >>= 1;
        E++;
    }
    if (E > bias)
        return sign | inf;
    if (r < ((uint64_t)1 << f.mbits))
        return sign | (uint16_t)r; /* subnormal */
    return sign | (uint16_t)(((uint64_t)(E + bias) << f.mbits) | (r - ((uint64_t)1 << f.mbits)));
}

static int is_nan16(fmt f, uint16_t v)
{
    int e = (v >> f.mbits) & ((1 << f.ebits) - 1);
    return e == (1 << f.ebits) - 1 && (v & ((1 << f.mbits) - 1));
}

static uint32_t fbits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static uint64_t dbits(double x)
{
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
}

static double bitsd(uint64_t u)
{
    double x;
    memcpy(&x, &u, 8);
    return x;
}

/* ---- Elements as raw bits --------------------------------------------------- */

static int is_int(occlDataType_t t)
{
    return t <= occlUint64;
}

static int is_signed_int(occlDataType_t t)
{
    return t == occlInt8 || t == occlInt32 || t == occlInt64;
}

static int is16(occlDataType_t t)
{
    return t == occlFloat16 || t == occlBfloat16;
}

static fmt fmt_of(occlDataType_t t)
{
    return t == occlFloat16 ? HALF : BF16;
}

/* The sizes, spelled out here so the element accessors inline them. */
static size_t tsize(occlDataType_t t)
{
    static const size_t sizes[occlNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
    return sizes[t];
}

static uint64_t mask_of(occlDataType_t t)
{
    size_t w = tsize(t) * 8;
    return w == 64 ? ~(uint64_t)0 : ((uint64_t)1 << w) - 1;
}

static int64_t sext(occlDataType_t t, uint64_t u)
{
    size_t w = tsize(t) * 8;
    if (w < 64 && (u >> (w - 1)) & 1)
        u |= ~mask_of(t);
    int64_t v;
    memcpy(&v, &u, 8);
    return v;
}

static uint64_t get(const void *buf, size_t i, occlDataType_t t)
{
    const unsigned char *p = (const unsigned char *)buf + i * tsize(t);
    switch (tsize(t)) {
    case 1: return p[0];
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

static void put(void *buf, size_t i, occlDataType_t t, uint64_t v)
{
    unsigned char *p = (unsigned char *)buf + i * tsize(t);
    switch (tsize(t)) {
    case 1: p[0] = (unsigned char)v; break;
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

/* ---- Reference reduction ------------------------------------------------------ */

/* Inputs of a float-computed type, as the float the kernels compute with;
 * the 16-bit types through tables of ref_decode, built once. */
static float as_float(occlDataType_t t, uint64_t bits)
{
    static float half_tab[65536], bf16_tab[65536];
    static int built;
    if (t == occlFloat32)
        return bitsf((uint32_t)bits);
    if (!built) {
        for (uint32_t v = 0; v < 65536; v++) {
            half_tab[v] = (float)ref_decode(HALF, (uint16_t)v);
            bf16_tab[v] = (float)ref_decode(BF16, (uint16_t)v);
        }
        built = 1;
    }
    return t == occlFloat16 ? half_tab[bits & 0xffff] : bf16_tab[bits & 0xffff];
}

static uint64_t ref_int_op(occlDataType_t t, int kind, uint64_t x, uint64_t y)
{
    int sg = is_signed_int(t);
    switch (kind) {
    case OCCL_RED_PROD: return (x * y) & mask_of(t);
    case OCCL_RED_MAX:
        if (sg)
            return sext(t, y) > sext(t, x) ? y : x;
        return y > x ? y : x;
    case OCCL_RED_MIN:
        if (sg)
            return sext(t, y) < sext(t, x) ? y : x;
        return y < x ? y : x;
    default: return (x + y) & mask_of(t); /* Sum, PreMulSum, Avg */
    }
}

/* C's fmax/fmin (Annex F): a NaN argument is ignored unless both are. */
static double ref_max(double x, double y)
{
    if (isnan(x))
        return y;
    if (isnan(y))
        return x;
    return x > y ? x : y;
}

static double ref_min(double x, double y)
{
    if (isnan(x))
        return y;
    if (isnan(y))
        return x;
    return x < y ? x : y;
}

static float ref_float_op(int kind, float x, float y)
{
    switch (kind) {
    case OCCL_RED_PROD: return x * y;
    case OCCL_RED_MAX: return (float)ref_max(x, y);
    case OCCL_RED_MIN: return (float)ref_min(x, y);
    default: return x + y;
    }
}

static double ref_double_op(int kind, double x, double y)
{
    switch (kind) {
    case OCCL_RED_PROD: return x * y;
    case OCCL_RED_MAX: return ref_max(x, y);
    case OCCL_RED_MIN: return ref_min(x, y);
    default: return x + y;
    }
}

/* srcs[0][i] op ... op srcs[n-1][i], left to right, as bits of type t.
 * PreMulSum scales each input first; Avg divides the sum by n. */
static uint64_t ref_fold(occlDataType_t t, int kind, const void *const *srcs, int n, size_t i,
                         const occl_redop *op)
{
    int pms = kind == OCCL_RED_PREMULSUM;
    if (is_int(t)) {
        uint64_t s = is_signed_int(t) ? (uint64_t)op->scalar_i : op->scalar_u;
        uint64_t acc = 0;
        for (int k = 0; k < n; k++) {
            uint64_t x = get(srcs[k], i, t);
            if (pms)
                x = (x * s) & mask_of(t);
            acc = k == 0 ? x : ref_int_op(t, kind, acc, x);
        }
        if (kind == KIND_AVG && n > 1)
            acc = is_signed_int(t) ? (uint64_t)(sext(t, acc) / n) & mask_of(t) : acc / (uint64_t)n;
        return acc;
    }
    if (t == occlFloat64) {
        double acc = 0;
        for (int k = 0; k < n; k++) {
            double x = bitsd(get(srcs[k], i, t));
            if (pms)
                x = x * op->scalar_f;
            acc = k == 0 ? x : ref_double_op(kind, acc, x);
        }
        if (kind == KIND_AVG && n > 1)
            acc /= n;
        return dbits(acc);
    }
    float acc = 0;
    for (int k = 0; k < n; k++) {
        float x = as_float(t, get(srcs[k], i, t));
        if (pms)
            x = x * (float)op->scalar_f;
        acc = k == 0 ? x : ref_float_op(kind, acc, x);
    }
    if (t == occlFloat32) {
        if (kind == KIND_AVG && n > 1)
            acc /= (float)n;
        return fbits(acc);
    }
    if (n == 1 && !pms)
        return get(srcs[0], i, t); /* a copy keeps the bits, signalling NaNs included */
    uint16_t r = ref_encode(fmt_of(t), acc);
    if (kind == KIND_AVG && n > 1) /* the sum is rounded to the type before the division */
        r = ref_encode(fmt_of(t), (float)ref_decode(fmt_of(t), r) / (float)n);
    return r;
}

/* Equal bits; any NaN equals any NaN; for Max/Min either zero matches the other. */
static int same(occlDataType_t t, int kind, uint64_t got, uint64_t want)
{
    if (got == want)
        return 1;
    int minmax = kind == OCCL_RED_MAX || kind == OCCL_RED_MIN;
    if (t == occlFloat32) {
        float g = bitsf((uint32_t)got), w = bitsf((uint32_t)want);
        return (isnan(g) && isnan(w)) || (minmax && g == 0 && w == 0);
    }
    if (t == occlFloat64) {
        double g = bitsd(got), w = bitsd(want);
        return (isnan(g) && isnan(w)) || (minmax && g == 0 && w == 0);
    }
    if (is16(t)) {
        fmt f = fmt_of(t);
        uint16_t mag = (uint16_t)((1u << (f.mbits + f.ebits)) - 1);
        return (is_nan16(f, (uint16_t)got) && is_nan16(f, (uint16_t)want)) ||
               (minmax && !(got & mag) && !(want & mag));
    }
    return 0;
}

/* ---- Data ------------------------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Random values with the type's edges mixed in; floats half random bit
 * patterns (every class: NaN, Inf, subnormal), half small values whose sums
 * round. */
static void fill(void *buf, size_t n, occlDataType_t t)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd(), v = rnd();
        int pick = (int)(r & 15);
        if (is_int(t)) {
            uint64_t m = mask_of(t), top = (m >> 1) + 1;
            uint64_t edge[] = {0, 1, 2, m /* -1 */, top /* MIN, or 2^(w-1) */, top - 1 /* MAX */};
            if (pick < (int)(sizeof edge / sizeof edge[0]))
                v = edge[pick];
        } else if (pick >= 8) {
            double x = (double)((int)((r >> 20) % 2001) - 1000) / 16.0;
            if (t == occlFloat64)
                v = dbits(x);
            else if (t == occlFloat32)
                v = fbits((float)x);
            else
                v = ref_encode(fmt_of(t), x);
        }
        put(buf, i, t, v);
    }
}

static void *alloc(size_t n, occlDataType_t t)
{
    void *p = malloc((n + 16) * occl_type_size(t)); /* room for the guard */
    cr_assert_not_null(p);
    return p;
}

static occl_redop redop_for(occlDataType_t t, int kind)
{
    if (kind == KIND_AVG)
        return occl_redop_make(OCCL_RED_SUM);
    if (kind != OCCL_RED_PREMULSUM)
        return occl_redop_make(kind);
    /* A scalar the type represents exactly, so every form of it agrees. */
    if (is_int(t))
        return occl_redop_premulsum_value(-3, -3);
    return occl_redop_premulsum_value(-0.75, 0);
}

/* The 16 elements after the count hold a pattern that must survive. */
static void guard_set(void *buf, size_t n, occlDataType_t t)
{
    memset((char *)buf + n * occl_type_size(t), 0xa5, 16 * occl_type_size(t));
}

static void guard_check(const void *buf, size_t n, occlDataType_t t)
{
    const unsigned char *p = (const unsigned char *)buf + n * occl_type_size(t);
    for (size_t k = 0; k < 16 * occl_type_size(t); k++)
        cr_assert_eq(p[k], 0xa5, "%s: byte %zu past the count was written", occl_type_name(t), k);
}

/* dst (count elements) against the reference over the given sources. */
static void check_result(const void *dst, const void *const *srcs, int n, size_t count,
                         occlDataType_t t, int kind, const occl_redop *op, const char *what)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t want = ref_fold(t, kind, srcs, n, i, op);
        uint64_t got = get(dst, i, t);
        if (!same(t, kind, got, want)) {
            char in[256] = "";
            for (int k = 0; k < n && k < 8; k++) {
                size_t len = strlen(in);
                snprintf(in + len, sizeof in - len, " %#llx", (unsigned long long)get(srcs[k], i, t));
            }
            cr_assert_fail("%s %s %s, %d sources, count %zu: element %zu is %#llx, want %#llx "
                           "(inputs%s)",
                           what, occl_type_name(t), kind_name(kind), n, count, i,
                           (unsigned long long)got, (unsigned long long)want, in);
        }
    }
}

/* Two results of the same computation reached through different aliasing. */
static void check_same(const void *got, const void *want, size_t count, occlDataType_t t, int kind,
                       const char *what)
{
    for (size_t i = 0; i < count; i++)
        if (!same(t, kind, get(got, i, t), get(want, i, t)))
            cr_assert_fail("%s %s %s, count %zu: element %zu is %#llx, want %#llx", what,
                           occl_type_name(t), kind_name(kind), count, i,
                           (unsigned long long)get(got, i, t), (unsigned long long)get(want, i, t));
}

static void run_reduce2(void *dst, const void *a, const void *b, size_t count, occlDataType_t t,
                        int kind)
{
    occl_redop op = redop_for(t, kind);
    occl_reduce2(dst, a, b, count, t, &op);
    if (kind == KIND_AVG)
        occl_finish_avg(dst, count, t, 2);
}

static void run_reduce_n(void *dst, const void *const *srcs, int n, size_t count,
                         occlDataType_t t, int kind)
{
    occl_redop op = redop_for(t, kind);
    occl_reduce_n(dst, srcs, n, count, t, &op);
    if (kind == KIND_AVG)
        occl_finish_avg(dst, count, t, n);
}

/* ---- Every type x kind ------------------------------------------------------ */

typedef struct combo {
    occlDataType_t t;
    int kind;
} combo;

/* The types up to Bfloat16; the FP8 types have their own references in
 * test_occl_fp8.c. */
#define NTYPES_HERE (occlBfloat16 + 1)
#define NCOMBOS (NTYPES_HERE * NKINDS_TESTED)

static combo *all_combos(void)
{
    static combo c[NCOMBOS];
    for (int t = 0; t < NTYPES_HERE; t++)
        for (int k = 0; k < NKINDS_TESTED; k++)
            c[t * NKINDS_TESTED + k] = (combo){(occlDataType_t)t, k};
    return c;
}

ParameterizedTestParameters(reduce2, matches_reference)
{
    return cr_make_param_array(combo, all_combos(), NCOMBOS);
}

/* Separate buffers, and a == b, at counts around the vector chunk and big. */
ParameterizedTest(combo *c, reduce2, matches_reference)
{
    static const size_t counts[] = {0, 1, 7, 63, 64, 65, 4097, BIG};
    occlDataType_t t = c->t;
    rng_state = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(t * 31 + c->kind);
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t n = counts[ci];
        void *a = alloc(n, t), *b = alloc(n, t), *d = alloc(n, t);
        fill(a, n, t);
        fill(b, n, t);
        guard_set(d, n, t);
        run_reduce2(d, a, b, n, t, c->kind);
        occl_redop op = redop_for(t, c->kind);
        const void *ab[2] = {a, b};
        check_result(d, ab, 2, n, t, c->kind, &op, "reduce2");
        guard_check(d, n, t);

        const void *aa[2] = {a, a};
        run_reduce2(d, a, a, n, t, c->kind);
        check_result(d, aa, 2, n, t, c->kind, &op, "reduce2 a==b");
        guard_check(d, n, t);
        free(a);
        free(b);
        free(d);
    }
}

ParameterizedTestParameters(reduce2, in_place)
{
    return cr_make_param_array(combo, all_combos(), NCOMBOS);
}

/* dst == a, dst == b, dst == a == b: the result is that of the original values. */
ParameterizedTest(combo *c, reduce2, in_place)
{
    static const size_t counts[] = {1, 7, 65, 4097};
    occlDataType_t t = c->t;
    size_t sz = occl_type_size(t);
    occl_redop op = redop_for(t, c->kind);
    rng_state = 0x51ed2701a3b4c5d6ULL ^ (uint64_t)(t * 31 + c->kind);
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t n = counts[ci];
        void *a = alloc(n, t), *b = alloc(n, t), *d = alloc(n, t);
        fill(a, n, t);
        fill(b, n, t);
        const void *ab[2] = {a, b}, *aa[2] = {a, a};

        memcpy(d, a, n * sz);
        guard_set(d, n, t);
        run_reduce2(d, d, b, n, t, c->kind);
        check_result(d, ab, 2, n, t, c->kind, &op, "reduce2 dst==a");
        guard_check(d, n, t);

        memcpy(d, b, n * sz);
        run_reduce2(d, a, d, n, t, c->kind);
        check_result(d, ab, 2, n, t, c->kind, &op, "reduce2 dst==b");

        memcpy(d, a, n * sz);
        run_reduce2(d, d, d, n, t, c->kind);
        check_result(d, aa, 2, n, t, c->kind, &op, "reduce2 dst==a==b");
        guard_check(d, n, t);
        free(a);
        free(b);
        free(d);
    }
}

ParameterizedTestParameters(reduce_n, matches_reference)
{
    return cr_make_param_array(combo, all_combos(), NCOMBOS);
}

/* 1, 2, 3 and 8 sources, counts across accumulator blocks, and dst being the
 * first, a middle or the last source, or a source given twice. */
ParameterizedTest(combo *c, reduce_n, matches_reference)
{
    static const size_t counts[] = {0, 1, 7, 1023, 1025, 4097, 9000};
    static const int nsrcs[] = {1, 2, 3, 8};
    occlDataType_t t = c->t;
    size_t sz = occl_type_size(t);
    rng_state = 0x2545f4914f6cdd1dULL ^ (uint64_t)(t * 31 + c->kind);
    occl_redop op = redop_for(t, c->kind);
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t n = counts[ci];
        void *src[8], *d = alloc(n, t), *work = alloc(n, t);
        for (int k = 0; k < 8; k++) {
            src[k] = alloc(n, t);
            fill(src[k], n, t);
        }
        for (size_t ni = 0; ni < sizeof nsrcs / sizeof nsrcs[0]; ni++) {
            int ns = nsrcs[ni];
            const void *s[8] = {0};
            for (int k = 0; k < ns; k++)
                s[k] = src[k];
            guard_set(d, n, t);
            run_reduce_n(d, s, ns, n, t, c->kind);
            check_result(d, s, ns, n, t, c->kind, &op, "reduce_n");
            guard_check(d, n, t);

            /* dst is source 0, the middle one, the last one */
            int pos[3] = {0, ns / 2, ns - 1};
            for (int p = 0; p < 3; p++) {
                const void *w[8];
                memcpy(w, s, sizeof w);
                memcpy(work, s[pos[p]], n * sz);
                w[pos[p]] = work;
                run_reduce_n(work, w, ns, n, t, c->kind);
                check_result(work, s, ns, n, t, c->kind, &op, "reduce_n in place");
            }
            /* a source given twice */
            if (ns >= 3) {
                const void *w[8];
                memcpy(w, s, sizeof w);
                w[ns - 1] = s[0];
                run_reduce_n(d, w, ns, n, t, c->kind);
                check_result(d, w, ns, n, t, c->kind, &op, "reduce_n repeated source");
            }
        }
        for (int k = 0; k < 8; k++)
            free(src[k]);
        free(d);
        free(work);
    }
}

ParameterizedTestParameters(reduce_n, big)
{
    return cr_make_param_array(combo, all_combos(), NCOMBOS);
}

/* A big count: many accumulator blocks, each source read once per block. */
ParameterizedTest(combo *c, reduce_n, big)
{
    occlDataType_t t = c->t;
    size_t n = BIG;
    enum { NS = 3 };
    rng_state = 0x0123456789abcdefULL ^ (uint64_t)(t * 31 + c->kind);
    occl_redop op = redop_for(t, c->kind);
    void *src[NS], *d = alloc(n, t), *work = alloc(n, t);
    for (int k = 0; k < NS; k++) {
        src[k] = alloc(n, t);
        fill(src[k], n, t);
    }
    guard_set(d, n, t);
    run_reduce_n(d, (const void *const *)src, NS, n, t, c->kind);
    check_result(d, (const void *const *)src, NS, n, t, c->kind, &op, "reduce_n");
    guard_check(d, n, t);

    /* in place in the last source */
    const void *w[NS];
    memcpy(work, src[NS - 1], n * occl_type_size(t));
    for (int k = 0; k < NS; k++)
        w[k] = k == NS - 1 ? work : src[k];
    run_reduce_n(work, w, NS, n, t, c->kind);
    check_same(work, d, n, t, c->kind, "reduce_n in place");
    for (int k = 0; k < NS; k++)
        free(src[k]);
    free(d);
    free(work);
}

ParameterizedTestParameters(reduce_n_to, every_destination)
{
    return cr_make_param_array(combo, all_combos(), NCOMBOS);
}

/* occl_reduce_n_to: every destination gets occl_reduce_n's result, over
 * counts around its blocks (16 KiB) and with odd alignments of the
 * destinations (its streamed copies align them first); dsts[0] may be a
 * source, and each destination may be the source at its own index (what
 * nvls_all_reduce does in place). */
ParameterizedTest(combo *c, reduce_n_to, every_destination)
{
    static const size_t counts[] = {1, 63, 4096, 16385, 70001};
    occlDataType_t t = c->t;
    size_t sz = occl_type_size(t);
    rng_state = 0x5851f42d4c957f2dULL ^ (uint64_t)(t * 31 + c->kind);
    occl_redop op = redop_for(t, c->kind);
    enum { NS = 4 };
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t n = counts[ci];
        void *src[NS], *want = alloc(n, t), *raw[NS], *d[NS];
        for (int k = 0; k < NS; k++) {
            src[k] = alloc(n, t);
            fill(src[k], n, t);
            raw[k] = alloc(n + 64 / sz + 1, t);
            d[k] = (char *)raw[k] + (size_t)k * sz; /* 0, 1, 2, 3 elements in */
        }
        occl_reduce_n(want, (const void *const *)src, NS, n, t, &op);
        occl_reduce_n_to(d, NS, (const void *const *)src, NS, n, t, &op);
        for (int k = 0; k < NS; k++)
            check_same(d[k], want, n, t, c->kind, "reduce_n_to");
        /* In place: destination k holds source k. */
        const void *w[NS];
        for (int k = 0; k < NS; k++) {
            memcpy(d[k], src[k], n * sz);
            w[k] = d[k];
        }
        occl_reduce_n_to(d, NS, w, NS, n, t, &op);
        for (int k = 0; k < NS; k++)
            check_same(d[k], want, n, t, c->kind, "reduce_n_to in place");
        for (int k = 0; k < NS; k++) {
            free(src[k]);
            free(raw[k]);
        }
        free(want);
    }
}

/* ---- Integer edges, by hand ---------------------------------------------------- */

static void r2(void *d, const void *a, const void *b, occlDataType_t t, int kind)
{
    occl_redop op = occl_redop_make(kind);
    occl_reduce2(d, a, b, 1, t, &op);
}

Test(integers, int8_wraps_and_extremes)
{
    int8_t a, b, d;
    a = 127, b = 1;
    r2(&d, &a, &b, occlInt8, OCCL_RED_SUM);
    cr_assert_eq(d, -128);
    a = -128, b = -1;
    r2(&d, &a, &b, occlInt8, OCCL_RED_SUM);
    cr_assert_eq(d, 127);
    a = -128, b = -1;
    r2(&d, &a, &b, occlInt8, OCCL_RED_PROD);
    cr_assert_eq(d, -128);
    a = 16, b = 16;
    r2(&d, &a, &b, occlInt8, OCCL_RED_PROD);
    cr_assert_eq(d, 0);
    a = 11, b = 12; /* 132 = -124 mod 256 */
    r2(&d, &a, &b, occlInt8, OCCL_RED_PROD);
    cr_assert_eq(d, -124);
    a = -128, b = 127;
    r2(&d, &a, &b, occlInt8, OCCL_RED_MAX);
    cr_assert_eq(d, 127);
    r2(&d, &a, &b, occlInt8, OCCL_RED_MIN);
    cr_assert_eq(d, -128);
    a = -1, b = 0;
    r2(&d, &a, &b, occlInt8, OCCL_RED_MAX);
    cr_assert_eq(d, 0, "int8 compares signed");
}

Test(integers, uint8_wraps_and_compares_unsigned)
{
    uint8_t a = 255, b = 1, d;
    r2(&d, &a, &b, occlUint8, OCCL_RED_SUM);
    cr_assert_eq(d, 0);
    a = 16, b = 17;
    r2(&d, &a, &b, occlUint8, OCCL_RED_PROD);
    cr_assert_eq(d, 16);
    a = 255, b = 0;
    r2(&d, &a, &b, occlUint8, OCCL_RED_MAX);
    cr_assert_eq(d, 255);
    r2(&d, &a, &b, occlUint8, OCCL_RED_MIN);
    cr_assert_eq(d, 0);
}

Test(integers, wide_types_wrap)
{
    int32_t a32 = INT32_MAX, b32 = 1, d32;
    r2(&d32, &a32, &b32, occlInt32, OCCL_RED_SUM);
    cr_assert_eq(d32, INT32_MIN);
    a32 = 0x10001, b32 = 0x10001; /* 0x100020001 mod 2^32 */
    r2(&d32, &a32, &b32, occlInt32, OCCL_RED_PROD);
    cr_assert_eq(d32, 0x20001);
    a32 = INT32_MIN, b32 = -1;
    r2(&d32, &a32, &b32, occlInt32, OCCL_RED_PROD);
    cr_assert_eq(d32, INT32_MIN);

    uint32_t a = UINT32_MAX, b = UINT32_MAX, d;
    r2(&d, &a, &b, occlUint32, OCCL_RED_SUM);
    cr_assert_eq(d, UINT32_MAX - 1);
    r2(&d, &a, &b, occlUint32, OCCL_RED_PROD);
    cr_assert_eq(d, 1);

    int64_t a64 = INT64_MIN, b64 = -1, d64;
    r2(&d64, &a64, &b64, occlInt64, OCCL_RED_PROD);
    cr_assert_eq(d64, INT64_MIN);
    r2(&d64, &a64, &b64, occlInt64, OCCL_RED_SUM);
    cr_assert_eq(d64, INT64_MAX);
    a64 = -5, b64 = 3;
    r2(&d64, &a64, &b64, occlInt64, OCCL_RED_MIN);
    cr_assert_eq(d64, -5);

    uint64_t au = UINT64_MAX, bu = 2, du;
    r2(&du, &au, &bu, occlUint64, OCCL_RED_SUM);
    cr_assert_eq(du, 1);
    r2(&du, &au, &bu, occlUint64, OCCL_RED_MAX);
    cr_assert_eq(du, UINT64_MAX);
}

/* ---- Floating edges --------------------------------------------------------------- */

Test(floats, double_by_hand)
{
    double a = 1e308, b = 1e308, d;
    r2(&d, &a, &b, occlFloat64, OCCL_RED_SUM);
    cr_assert(isinf(d) && d > 0);
    a = 0.1, b = 0.2;
    r2(&d, &a, &b, occlFloat64, OCCL_RED_SUM);
    cr_assert_eq(d, 0.30000000000000004);
    a = NAN, b = 1.5;
    r2(&d, &a, &b, occlFloat64, OCCL_RED_MAX);
    cr_assert_eq(d, 1.5, "a NaN operand is ignored, as by fmax");
    r2(&d, &b, &a, occlFloat64, OCCL_RED_MIN);
    cr_assert_eq(d, 1.5);
    b = NAN;
    r2(&d, &a, &b, occlFloat64, OCCL_RED_MAX);
    cr_assert(isnan(d));
    a = -INFINITY, b = -DBL_MAX;
    r2(&d, &a, &b, occlFloat64, OCCL_RED_MIN);
    cr_assert(isinf(d) && d < 0);
    a = NAN, b = 2;
    r2(&d, &a, &b, occlFloat64, OCCL_RED_SUM);
    cr_assert(isnan(d), "Sum propagates NaN");
}

Test(floats, float_nan_in_max_min_over_many)
{
    float s0[70], s1[70], s2[70], d[70];
    for (int i = 0; i < 70; i++) {
        s0[i] = NAN;
        s1[i] = (float)i;
        s2[i] = i % 2 ? NAN : -(float)i;
    }
    const void *s[3] = {s0, s1, s2};
    occl_redop op = occl_redop_make(OCCL_RED_MAX);
    occl_reduce_n(d, s, 3, 70, occlFloat32, &op);
    for (int i = 0; i < 70; i++)
        cr_assert_eq(d[i], (float)i, "element %d", i);
    op = occl_redop_make(OCCL_RED_MIN);
    occl_reduce_n(d, s, 3, 70, occlFloat32, &op);
    for (int i = 0; i < 70; i++)
        cr_assert_eq(d[i], i % 2 ? (float)i : -(float)i, "element %d", i);
}

/* ---- Float16 and Bfloat16 conversions --------------------------------------------- */

Test(half, every_pattern_widens_exactly_and_round_trips)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = occl_half_to_float((uint16_t)h);
        double want = ref_decode(HALF, (uint16_t)h);
        uint16_t back = occl_float_to_half(f);
        if (is_nan16(HALF, (uint16_t)h)) {
            cr_assert(isnan(f), "%#x widens to %a, not NaN", h, f);
            cr_assert_eq(back, h | 0x200, "NaN %#x comes back as %#x (quieted, same payload)", h, back);
        } else {
            cr_assert_eq(fbits(f), fbits((float)want), "%#x widens to %a, want %a", h, f, want);
            cr_assert_eq(back, h, "%#x round-trips to %#x", h, back);
        }
    }
}

Test(bf16, every_pattern_widens_exactly_and_round_trips)
{
    for (uint32_t b = 0; b < 65536; b++) {
        float f = occl_bf16_to_float((uint16_t)b);
        double want = ref_decode(BF16, (uint16_t)b);
        uint16_t back = occl_float_to_bf16(f);
        if (is_nan16(BF16, (uint16_t)b)) {
            cr_assert(isnan(f), "%#x widens to %a, not NaN", b, f);
            cr_assert_eq(back, b | 0x40, "NaN %#x comes back as %#x", b, back);
        } else {
            cr_assert_eq(fbits(f), fbits((float)want), "%#x widens to %a, want %a", b, f, want);
            cr_assert_eq(back, b, "%#x round-trips to %#x", b, back);
        }
    }
}

/* For every pair of neighbours v(h) < v(h+1) of one sign: the midpoint (exact
 * in float) goes to the even one, a float ulp either side to the nearer one. */
static void check_midpoints(fmt f, uint16_t (*narrow)(float), uint16_t top)
{
    for (uint32_t h = 0; h < top; h++) {
        for (int neg = 0; neg < 2; neg++) {
            uint16_t sign = neg ? (uint16_t)(1u << (f.mbits + f.ebits)) : 0;
            uint16_t lo = (uint16_t)h | sign, hi = (uint16_t)(h + 1) | sign;
            double mid = (ref_decode(f, (uint16_t)h) + ref_decode(f, (uint16_t)(h + 1))) / 2;
            float m = (float)(neg ? -mid : mid);
            cr_assert_eq((double)fabsf(m), mid, "midpoint above %#x is not a float", h);
            uint16_t even = (h & 1) ? hi : lo;
            uint16_t got = narrow(m);
            cr_assert_eq(got, even, "midpoint %a -> %#x, want %#x", m, got, even);
            float below = nextafterf(m, 0), above = nextafterf(m, neg ? -INFINITY : INFINITY);
            cr_assert_eq(narrow(below), lo, "%a -> %#x, want %#x", below, narrow(below), lo);
            cr_assert_eq(narrow(above), hi, "%a -> %#x, want %#x", above, narrow(above), hi);
        }
    }
}

Test(half, every_rounding_boundary)
{
    check_midpoints(HALF, occl_float_to_half, 0x7bff); /* up to the last pair of finite values */
}

Test(bf16, every_rounding_boundary)
{
    check_midpoints(BF16, occl_float_to_bf16, 0x7f7f);
}

Test(half, crafted_values)
{
    static const struct {
        float in;
        uint16_t out;
    } cases[] = {
        {1.0f, 0x3c00},
        {1.0f + 0x1p-11f, 0x3c00},               /* tie, 1.0 is even */
        {1.0f + 3 * 0x1p-11f, 0x3c02},           /* tie between 1+2^-10 (odd) and 1+2^-9 */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},    /* just above the tie */
        {1.0f + 0x1p-11f - 0x1p-23f, 0x3c00},    /* just below */
        {-1.0f - 3 * 0x1p-11f, 0xbc02},
        {2048.0f + 1.0f, 0x6800},                /* ulp 2 at 2048: tie to even */
        {2048.0f + 3.0f, 0x6802},
        {65504.0f, 0x7bff},                      /* largest finite */
        {65519.99f, 0x7bff},
        {65520.0f, 0x7c00},                      /* tie between 65504 (odd) and 2^16: Inf */
        {1e10f, 0x7c00},
        {-1e10f, 0xfc00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {0x1p-14f, 0x0400},                      /* smallest normal */
        {0x1p-14f - 0x1p-25f, 0x0400},           /* tie between 0x3ff (odd) and 0x400 */
        {0x1p-14f - 0x1p-24f, 0x03ff},           /* largest subnormal */
        {0x1p-24f, 0x0001},                      /* smallest subnormal */
        {0x1p-25f, 0x0000},                      /* tie to even zero */
        {0x1.000002p-25f, 0x0001},               /* just above */
        {3 * 0x1p-25f, 0x0002},                  /* tie between 1 and 2 */
        {5 * 0x1p-25f, 0x0002},                  /* tie between 2 and 3 */
        {-0x1p-24f, 0x8001},
        {-0x1p-26f, 0x8000},                     /* underflows to -0 */
        {FLT_TRUE_MIN, 0x0000},
        {0.1f, 0x2e66},
        {-2.5f, 0xc100},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = occl_float_to_half(cases[i].in);
        cr_assert_eq(got, cases[i].out, "%a -> %#x, want %#x", cases[i].in, got, cases[i].out);
        cr_assert_eq(got, ref_encode(HALF, cases[i].in), "table and reference disagree on %a",
                     cases[i].in);
    }
    uint16_t n = occl_float_to_half(NAN);
    cr_assert(is_nan16(HALF, n));
    n = occl_float_to_half(-NAN);
    cr_assert(is_nan16(HALF, n) && (n & 0x8000), "NaN keeps its sign");
    n = occl_float_to_half(bitsf(0x7f800001)); /* signalling, payload only in low bits */
    cr_assert(is_nan16(HALF, n), "a NaN whose payload is cut off is still NaN: %#x", n);
}

Test(bf16, crafted_values)
{
    static const struct {
        float in;
        uint16_t out;
    } cases[] = {
        {1.0f, 0x3f80},
        {1.0f + 0x1p-8f, 0x3f80},                /* tie, 1.0 even */
        {1.0f + 3 * 0x1p-8f, 0x3f82},            /* tie, to 1 + 2^-6 */
        {1.0f + 0x1p-8f + 0x1p-23f, 0x3f81},
        {FLT_MAX, 0x7f80},                       /* above the largest bf16 + half ulp */
        {0x1.fep127f, 0x7f7f},                   /* largest bf16 */
        {INFINITY, 0x7f80},
        {-INFINITY, 0xff80},
        {-0.0f, 0x8000},
        {FLT_TRUE_MIN, 0x0000},
        {0x1p-133f, 0x0001},                     /* smallest bf16 subnormal */
        {0x1p-134f, 0x0000},                     /* tie to even zero */
        {3 * 0x1p-134f, 0x0002},
        {0x1p-126f, 0x0080},
        {3.140625f, 0x4049},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = occl_float_to_bf16(cases[i].in);
        cr_assert_eq(got, cases[i].out, "%a -> %#x, want %#x", cases[i].in, got, cases[i].out);
        cr_assert_eq(got, ref_encode(BF16, cases[i].in), "table and reference disagree on %a",
                     cases[i].in);
    }
    uint16_t n = occl_float_to_bf16(bitsf(0x7f800001));
    cr_assert(is_nan16(BF16, n), "a NaN whose payload is cut off is still NaN: %#x", n);
    n = occl_float_to_bf16(bitsf(0xffc00000));
    cr_assert_eq(n, 0xffc0);
}

/* Floats across the whole range, against the scaled-double reference. */
Test(half, sampled_floats_match_reference)
{
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += 4093) {
        float x = bitsf((uint32_t)u);
        uint16_t got = occl_float_to_half(x), want = ref_encode(HALF, x);
        if (isnan(x))
            cr_assert(is_nan16(HALF, got), "%#x -> %#x", (unsigned)u, got);
        else
            cr_assert_eq(got, want, "%a (%#x) -> %#x, want %#x", x, (unsigned)u, got, want);
    }
}

Test(bf16, sampled_floats_match_reference)
{
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += 4093) {
        float x = bitsf((uint32_t)u);
        uint16_t got = occl_float_to_bf16(x), want = ref_encode(BF16, x);
        if (isnan(x))
            cr_assert(is_nan16(BF16, got), "%#x -> %#x", (unsigned)u, got);
        else
            cr_assert_eq(got, want, "%a (%#x) -> %#x, want %#x", x, (unsigned)u, got, want);
    }
}

/* ---- Rounding once over many sources ------------------------------------------------ */

/* 2048 + 1 + ... + 1 (seven ones): rounded after each addition, every step is
 * a tie back to 2048 (ulp 2 there); rounded once, 2055 goes to 2056. */
Test(half, reduce_n_rounds_once)
{
    uint16_t big = occl_float_to_half(2048), one = occl_float_to_half(1);
    uint16_t src[8][3];
    for (int k = 0; k < 8; k++)
        for (int i = 0; i < 3; i++)
            src[k][i] = k == 0 ? big : one;
    const void *s[8];
    for (int k = 0; k < 8; k++)
        s[k] = src[k];
    uint16_t d[3], pair[3];
    occl_redop sum = occl_redop_make(OCCL_RED_SUM);
    occl_reduce_n(d, s, 8, 3, occlFloat16, &sum);
    memcpy(pair, src[0], sizeof pair);
    for (int k = 1; k < 8; k++)
        occl_reduce2(pair, pair, src[k], 3, occlFloat16, &sum);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(occl_half_to_float(d[i]), 2056.0f, "one rounding: %a", occl_half_to_float(d[i]));
        cr_assert_eq(occl_half_to_float(pair[i]), 2048.0f, "pairwise: %a", occl_half_to_float(pair[i]));
    }
}

Test(bf16, reduce_n_rounds_once)
{
    uint16_t src[8][2];
    for (int k = 0; k < 8; k++)
        for (int i = 0; i < 2; i++)
            src[k][i] = occl_float_to_bf16(k == 0 ? 256.0f : 1.0f);
    const void *s[8];
    for (int k = 0; k < 8; k++)
        s[k] = src[k];
    uint16_t d[2], pair[2];
    occl_redop sum = occl_redop_make(OCCL_RED_SUM);
    occl_reduce_n(d, s, 8, 2, occlBfloat16, &sum);
    memcpy(pair, src[0], sizeof pair);
    for (int k = 1; k < 8; k++)
        occl_reduce2(pair, pair, src[k], 2, occlBfloat16, &sum);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(occl_bf16_to_float(d[i]), 264.0f);
        cr_assert_eq(occl_bf16_to_float(pair[i]), 256.0f);
    }
}

/* ---- PreMulSum ----------------------------------------------------------------------- */

Test(premulsum, integers_wrap)
{
    int8_t a = 100, b = 50, d;
    int8_t s8 = -3;
    occl_redop op = occl_redop_premulsum(&s8, occlInt8);
    occl_reduce2(&d, &a, &b, 1, occlInt8, &op);
    cr_assert_eq(d, 62, "-450 mod 256 is 62, got %d", d);

    uint32_t s32 = 0x80000000u, x = 3, y = 4, r;
    op = occl_redop_premulsum(&s32, occlUint32);
    occl_reduce2(&r, &x, &y, 1, occlUint32, &op);
    cr_assert_eq(r, 0x80000000u, "3*2^31 + 4*2^31 mod 2^32");

    int64_t s64 = -1, v[3] = {INT64_MIN, 1, 2}, out;
    const void *srcs[3] = {&v[0], &v[1], &v[2]};
    op = occl_redop_premulsum(&s64, occlInt64);
    occl_reduce_n(&out, srcs, 3, 1, occlInt64, &op);
    cr_assert_eq(out, INT64_MAX - 2, "-MIN wraps to MIN; MIN - 1 - 2 wraps to MAX - 2");
}

Test(premulsum, floats_and_half)
{
    float s = 0.5f, a[3] = {1, 2, 3}, b[3] = {4, 6, 8}, d[3];
    occl_redop op = occl_redop_premulsum(&s, occlFloat32);
    occl_reduce2(d, a, b, 3, occlFloat32, &op);
    cr_assert(d[0] == 2.5f && d[1] == 4.0f && d[2] == 5.5f);

    double sd = -2, ad[2] = {1.5, 1e308}, bd[2] = {2, 1e308}, dd[2];
    op = occl_redop_premulsum(&sd, occlFloat64);
    occl_reduce2(dd, ad, bd, 2, occlFloat64, &op);
    cr_assert(dd[0] == -7.0 && isinf(dd[1]) && dd[1] < 0);

    /* Half: 8 ranks of 0.1 scaled by 1/8 (an average as NCCL builds it). */
    uint16_t eighth = occl_float_to_half(0.125f), h[8], out;
    const void *hs[8];
    for (int k = 0; k < 8; k++) {
        h[k] = occl_float_to_half(0.1f);
        hs[k] = &h[k];
    }
    op = occl_redop_premulsum(&eighth, occlFloat16);
    cr_assert_eq(op.scalar_f, 0.125);
    occl_reduce_n(&out, hs, 8, 1, occlFloat16, &op);
    cr_assert_eq(out, h[0], "8 * (x/8) is x exactly in float");
}

Test(premulsum, premul_scales_in_place_and_not)
{
    size_t n = 1000;
    int32_t *x = malloc(n * 4), *y = malloc(n * 4);
    uint16_t *hx = malloc(n * 2), *hy = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        x[i] = (int32_t)i - 500;
        hx[i] = occl_float_to_half((float)i / 7);
    }
    occl_redop op = occl_redop_premulsum_value(3.0, 3);
    occl_premul(y, x, n, occlInt32, &op);
    occl_premul(x, x, n, occlInt32, &op);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(y[i], ((int32_t)i - 500) * 3);
        cr_assert_eq(x[i], y[i]);
    }
    occl_premul(hy, hx, n, occlFloat16, &op);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(hy[i], ref_encode(HALF, 3.0f * (float)ref_decode(HALF, hx[i])), "element %zu", i);
    occl_premul(hx, hx, n, occlFloat16, &op);
    cr_assert_eq(memcmp(hx, hy, n * 2), 0);
    free(x);
    free(y);
    free(hx);
    free(hy);
}

/* ---- Avg ------------------------------------------------------------------------------ */

Test(avg, integers_truncate_toward_zero)
{
    int32_t v[3][4] = {{-7, 7, -8, INT32_MIN}, {0, 0, 0, 0}, {0, 0, 0, 0}}, d[4];
    const void *s[3] = {v[0], v[1], v[2]};
    occl_redop sum = occl_redop_make(OCCL_RED_SUM);
    occl_reduce_n(d, s, 3, 4, occlInt32, &sum);
    occl_finish_avg(d, 4, occlInt32, 3);
    cr_assert_eq(d[0], -2);
    cr_assert_eq(d[1], 2);
    cr_assert_eq(d[2], -2);
    cr_assert_eq(d[3], INT32_MIN / 3);

    /* The sum wraps in the type before the division, as NCCL's. */
    int8_t a[3] = {100, 100, 100}, r;
    const void *s8[3] = {&a[0], &a[1], &a[2]};
    occl_reduce_n(&r, s8, 3, 1, occlInt8, &sum);
    occl_finish_avg(&r, 1, occlInt8, 3);
    cr_assert_eq(r, 14, "300 wraps to 44, 44/3 = 14; got %d", r);

    uint8_t u = 255;
    occl_finish_avg(&u, 1, occlUint8, 200); /* more ranks than int8 holds */
    cr_assert_eq(u, 1);
    int8_t m = -128;
    occl_finish_avg(&m, 1, occlInt8, 129);
    cr_assert_eq(m, 0);
    m = -128;
    occl_finish_avg(&m, 1, occlInt8, 128);
    cr_assert_eq(m, -1);

    int64_t big = INT64_MIN;
    occl_finish_avg(&big, 1, occlInt64, 2);
    cr_assert_eq(big, INT64_MIN / 2);
    uint64_t ub = UINT64_MAX;
    occl_finish_avg(&ub, 1, occlUint64, 1000);
    cr_assert_eq(ub, UINT64_MAX / 1000);
}

Test(avg, floats_divide)
{
    float f[3] = {1, 2, 4}, d;
    const void *s[3] = {&f[0], &f[1], &f[2]};
    occl_redop sum = occl_redop_make(OCCL_RED_SUM);
    occl_reduce_n(&d, s, 3, 1, occlFloat32, &sum);
    occl_finish_avg(&d, 1, occlFloat32, 3);
    cr_assert_eq(d, 7.0f / 3.0f);

    double x = 1.0;
    occl_finish_avg(&x, 1, occlFloat64, 3);
    cr_assert_eq(x, 1.0 / 3.0);

    uint16_t h = occl_float_to_half(1.0f);
    occl_finish_avg(&h, 1, occlFloat16, 3);
    cr_assert_eq(h, 0x3555, "1/3 in half is 0x3555, got %#x", h);
    uint16_t b = occl_float_to_bf16(1.0f);
    occl_finish_avg(&b, 1, occlBfloat16, 3);
    cr_assert_eq(b, ref_encode(BF16, 1.0 / 3.0));
}

Test(avg, one_rank_or_none_leaves_values)
{
    int32_t v = 7;
    occl_finish_avg(&v, 1, occlInt32, 1);
    cr_assert_eq(v, 7);
    occl_finish_avg(&v, 1, occlInt32, 0);
    cr_assert_eq(v, 7);
    occl_finish_avg(&v, 1, occlInt32, -2);
    cr_assert_eq(v, 7);
}

/* ---- Descriptors, names, bad arguments -------------------------------------------------- */

Test(api, sizes_and_names)
{
    static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    for (int t = 0; t < occlNumTypes; t++)
        cr_assert_eq(occl_type_size((occlDataType_t)t), sizes[t]);
    cr_assert_eq(occl_type_size((occlDataType_t)occlNumTypes), 0);
    cr_assert_eq(occl_type_size((occlDataType_t)-1), 0);
    cr_assert_str_eq(occl_type_name(occlFloat16), "float16");
    cr_assert_str_eq(occl_type_name(occlBfloat16), "bfloat16");
    cr_assert_str_eq(occl_type_name(occlFloat8e4m3), "float8e4m3");
    cr_assert_str_eq(occl_type_name(occlFloat8e5m2), "float8e5m2");
    cr_assert_str_eq(occl_type_name(occlInt8), "int8");
    cr_assert_str_eq(occl_type_name((occlDataType_t)42), "unknown");
    cr_assert_str_eq(occl_op_name(occlSum), "sum");
    cr_assert_str_eq(occl_op_name(occlAvg), "avg");
    cr_assert_str_eq(occl_op_name((occlRedOp_t)occlNumOps), "premulsum");
    cr_assert_str_eq(occl_op_name((occlRedOp_t)-1), "unknown");
}

Test(api, builtin_ops)
{
    occl_redop r;
    int avg = -1;
    cr_assert_eq(occl_redop_builtin(occlMax, &r, &avg), 0);
    cr_assert_eq(r.kind, OCCL_RED_MAX);
    cr_assert_eq(avg, 0);
    cr_assert_eq(occl_redop_builtin(occlAvg, &r, &avg), 0);
    cr_assert_eq(r.kind, OCCL_RED_SUM);
    cr_assert_eq(avg, 1);
    cr_assert_eq(occl_redop_builtin((occlRedOp_t)occlNumOps, &r, &avg), -1);
    cr_assert_eq(occl_redop_builtin((occlRedOp_t)-1, &r, &avg), -1);
}

Test(api, premulsum_scalar_of_each_type)
{
    int8_t i8 = -5;
    occl_redop r = occl_redop_premulsum(&i8, occlInt8);
    cr_assert(r.kind == OCCL_RED_PREMULSUM && r.scalar_i == -5 && r.scalar_f == -5.0);
    uint64_t u64 = UINT64_MAX;
    r = occl_redop_premulsum(&u64, occlUint64);
    cr_assert_eq(r.scalar_u, UINT64_MAX);
    uint16_t h = 0xc100; /* -2.5 */
    r = occl_redop_premulsum(&h, occlFloat16);
    cr_assert_eq(r.scalar_f, -2.5);
    uint16_t b = 0x4049;
    r = occl_redop_premulsum(&b, occlBfloat16);
    cr_assert_eq(r.scalar_f, 3.140625);
    double dv = 0.1;
    r = occl_redop_premulsum(&dv, occlFloat64);
    cr_assert_eq(r.scalar_f, 0.1);
    r = occl_redop_make(OCCL_RED_PREMULSUM);
    cr_assert(r.scalar_f == 1.0 && r.scalar_i == 1 && r.scalar_u == 1);
}

Test(api, bad_type_or_kind_touch_nothing)
{
    int32_t a[4] = {1, 2, 3, 4}, b[4] = {1, 1, 1, 1}, d[4] = {9, 9, 9, 9};
    occl_redop op = occl_redop_make(OCCL_RED_SUM);
    occl_reduce2(d, a, b, 4, (occlDataType_t)occlNumTypes, &op);
    op.kind = OCCL_RED_NKINDS;
    occl_reduce2(d, a, b, 4, occlInt32, &op);
    op.kind = -1;
    const void *s[3] = {a, b, a};
    occl_reduce_n(d, s, 3, 4, occlInt32, &op);
    occl_reduce2(d, a, b, 4, occlInt32, NULL);
    op = occl_redop_make(OCCL_RED_SUM);
    occl_reduce_n(d, s, 0, 4, occlInt32, &op);
    occl_reduce2(d, a, b, 0, occlInt32, &op);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(d[i], 9);
}
