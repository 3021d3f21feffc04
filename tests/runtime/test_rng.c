/*
 * test_rng.c - orRandGenerateUniform / orRandGenerateNormal: Philox4x32-10
 * known answers, the element definition (checked bit for bit against a host
 * reference built from philox.h), offset continuation, distribution sanity,
 * independence from the device's thread count, stream ordering and errors.
 */
#include "helpers.h"
#include "philox.h"

#include <math.h>

TestSuite(rng, .timeout = 60);

/* ---- host reference: the element definition of openreg.h, written out ---- */

static uint32_t ref_word(uint64_t seed, uint64_t j)
{
    uint64_t b = j / 4;
    const uint32_t ctr[4] = {(uint32_t)b, (uint32_t)(b >> 32), 0, 0};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t w[4];
    or_philox4x32_10(ctr, key, w);
    return w[j % 4];
}

static float ref_uniform(uint64_t seed, uint64_t j)
{
    return or_philox_uniform(ref_word(seed, j));
}

static float ref_normal(uint64_t seed, uint64_t j, float mean, float stddev)
{
    uint64_t first = j & ~(uint64_t)1; /* word 2*(j/2) */
    double z0, z1;
    or_philox_box_muller(ref_word(seed, first), ref_word(seed, first + 1), &z0, &z1);
    return or_philox_scale(j % 2 ? z1 : z0, mean, stddev);
}

/* ---- helpers --------------------------------------------------------------- */

static float *dalloc(size_t n)
{
    void *p = NULL;
    CHECK_OR(orMalloc(&p, n * sizeof(float)));
    cr_assert_not_null(p);
    return p;
}

static float *halloc(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    cr_assert_not_null(p);
    return p;
}

static void fetch(float *host, const float *dev, size_t n)
{
    CHECK_OR(orMemcpy(host, dev, n * sizeof(float), orMemcpyDeviceToHost));
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void expect_same_bits(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(bits(got[i]), bits(want[i]), "%s: element %zu is %a (0x%08x), expected %a (0x%08x)",
                     what, i, (double)got[i], bits(got[i]), (double)want[i], bits(want[i]));
}

static float *uniform_host(size_t n, uint64_t seed, uint64_t offset, orStream_t s)
{
    float *d = dalloc(n), *h = halloc(n);
    CHECK_OR(orRandGenerateUniform(d, n, seed, offset, s));
    fetch(h, d, n);
    CHECK_OR(orFree(d));
    return h;
}

static float *normal_host(size_t n, float mean, float stddev, uint64_t seed, uint64_t offset)
{
    float *d = dalloc(n), *h = halloc(n);
    CHECK_OR(orRandGenerateNormal(d, n, mean, stddev, seed, offset, NULL));
    fetch(h, d, n);
    CHECK_OR(orFree(d));
    return h;
}

static void check_uniform_against_ref(size_t n, uint64_t seed, uint64_t offset)
{
    float *got = uniform_host(n, seed, offset, NULL), *want = halloc(n);
    for (size_t i = 0; i < n; i++)
        want[i] = ref_uniform(seed, offset + i);
    char what[128];
    snprintf(what, sizeof what, "uniform n=%zu seed=%#llx offset=%#llx", n,
             (unsigned long long)seed, (unsigned long long)offset);
    expect_same_bits(got, want, n, what);
    free(got);
    free(want);
}

static void check_normal_against_ref(size_t n, float mean, float stddev, uint64_t seed,
                                     uint64_t offset)
{
    float *got = normal_host(n, mean, stddev, seed, offset), *want = halloc(n);
    for (size_t i = 0; i < n; i++)
        want[i] = ref_normal(seed, offset + i, mean, stddev);
    char what[128];
    snprintf(what, sizeof what, "normal n=%zu seed=%#llx offset=%#llx", n,
             (unsigned long long)seed, (unsigned long long)offset);
    expect_same_bits(got, want, n, what);
    free(got);
    free(want);
}

/* ---- known answers ---------------------------------------------------------- */

/* Random123's kat_vectors for philox4x32_10. */
static const struct {
    uint32_t ctr[4], key[2], out[4];
} kat[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

Test(rng, kat_vectors_pure_function)
{
    for (size_t v = 0; v < sizeof kat / sizeof kat[0]; v++) {
        uint32_t out[4];
        or_philox4x32_10(kat[v].ctr, kat[v].key, out);
        for (int w = 0; w < 4; w++)
            cr_assert_eq(out[w], kat[v].out[w], "vector %zu word %d: 0x%08x, expected 0x%08x", v,
                         w, out[w], kat[v].out[w]);
    }
}

Test(rng, uniform_mapping_edges)
{
    cr_assert_eq(or_philox_uniform(0), 0x1p-24f);
    cr_assert_eq(or_philox_uniform(0xff), 0x1p-24f);
    cr_assert_eq(or_philox_uniform(0x100), 0x2p-24f);
    cr_assert_eq(or_philox_uniform(0xffffffff), 1.0f);
    double z0, z1;
    or_philox_box_muller(0xffffffff, 0, &z0, &z1); /* u1 = 1: radius 0 */
    cr_assert_eq(fabs(z0), 0.0);
    cr_assert_eq(fabs(z1), 0.0);
}

Test(rng, kat_public_uniform)
{
    /* seed 0, offset 0: elements 0..3 are the words of counter {0,0,0,0}, key {0,0}. */
    float *h = uniform_host(8, 0, 0, NULL);
    for (int w = 0; w < 4; w++) {
        float want = (float)((kat[0].out[w] >> 8) + 1) * 0x1p-24f;
        cr_assert_eq(bits(h[w]), bits(want), "element %d: %a, expected %a", w, (double)h[w],
                     (double)want);
    }
    /* Elements 4..7 come from the next counter, not the same one again. */
    cr_assert_neq(bits(h[4]), bits(h[0]));
    free(h);
    /* Offset 2 starts at word 2 of that block. */
    h = uniform_host(2, 0, 2, NULL);
    cr_assert_eq(bits(h[0]), bits((float)((kat[0].out[2] >> 8) + 1) * 0x1p-24f));
    cr_assert_eq(bits(h[1]), bits((float)((kat[0].out[3] >> 8) + 1) * 0x1p-24f));
    free(h);
}

Test(rng, kat_public_normal)
{
    /* Elements 0..3 are Box-Muller on words (0,1) and (2,3) of the first vector. */
    const float mean = 0.5f, stddev = 3.0f;
    float *h = normal_host(4, mean, stddev, 0, 0);
    for (int j = 0; j < 4; j++) {
        double u1 = ((kat[0].out[j & ~1] >> 8) + 1) * 0x1p-24;
        double u2 = ((kat[0].out[(j & ~1) + 1] >> 8) + 1) * 0x1p-24;
        double r = sqrt(-2.0 * log(u1)), t = 2.0 * M_PI * u2;
        double want = mean + stddev * (j % 2 ? r * sin(t) : r * cos(t));
        cr_assert(fabs(h[j] - want) <= 1e-6 * (1.0 + fabs(want)), "element %d: %.9g, expected %.9g",
                  j, (double)h[j], want);
    }
    free(h);
}

/* ---- element definition, bit for bit ------------------------------------------ */

Test(rng, uniform_matches_reference)
{
    check_uniform_against_ref(50000, 0, 0);
    check_uniform_against_ref(1000, 0x0123456789abcdefULL, 3);
    /* b >= 2^32: the high counter word is used. */
    check_uniform_against_ref(37, 0xfedcba9876543210ULL, ((uint64_t)5 << 34) + 1);
    /* offset + i wraps modulo 2^64 like the counter. */
    check_uniform_against_ref(13, 42, UINT64_MAX - 5);
}

Test(rng, normal_matches_reference)
{
    check_normal_against_ref(50001, 0.0f, 1.0f, 0, 0);
    check_normal_against_ref(999, -2.5f, 0.25f, 0x0123456789abcdefULL, 7);
    check_normal_against_ref(37, 10.0f, 4.0f, 0xfedcba9876543210ULL, ((uint64_t)5 << 34) + 3);
    check_normal_against_ref(13, 1.0f, 1.0f, 42, UINT64_MAX - 6);
}

Test(rng, seeds_differ_in_both_halves)
{
    float *a = uniform_host(64, 1, 0, NULL);
    float *b = uniform_host(64, 1 + ((uint64_t)1 << 32), 0, NULL);
    cr_assert(memcmp(a, b, 64 * sizeof(float)) != 0, "the high half of the seed is ignored");
    free(a);
    free(b);
}

/* ---- offset continuation -------------------------------------------------------- */

/* Pieces generated at offset = start + elements so far equal one call. */
static void check_uniform_pieces(uint64_t seed, uint64_t start, const size_t *pieces, int npieces)
{
    size_t total = 0;
    for (int k = 0; k < npieces; k++)
        total += pieces[k];
    float *whole = uniform_host(total, seed, start, NULL);
    float *d = dalloc(total), *h = halloc(total);
    size_t at = 0;
    for (int k = 0; k < npieces; k++) {
        CHECK_OR(orRandGenerateUniform(d + at, pieces[k], seed, start + at, NULL));
        at += pieces[k];
    }
    fetch(h, d, total);
    expect_same_bits(h, whole, total, "uniform pieces");
    CHECK_OR(orFree(d));
    free(whole);
    free(h);
}

static void check_normal_pieces(uint64_t seed, uint64_t start, const size_t *pieces, int npieces)
{
    size_t total = 0;
    for (int k = 0; k < npieces; k++)
        total += pieces[k];
    float *whole = normal_host(total, 1.5f, 2.0f, seed, start);
    float *d = dalloc(total), *h = halloc(total);
    size_t at = 0;
    for (int k = 0; k < npieces; k++) {
        CHECK_OR(orRandGenerateNormal(d + at, pieces[k], 1.5f, 2.0f, seed, start + at, NULL));
        at += pieces[k];
    }
    fetch(h, d, total);
    expect_same_bits(h, whole, total, "normal pieces");
    CHECK_OR(orFree(d));
    free(whole);
    free(h);
}

Test(rng, uniform_offset_continuation)
{
    const size_t two[] = {1000, 3000};
    check_uniform_pieces(7, 0, two, 2);
    const size_t odd[] = {1, 2, 5, 3, 16384, 7, 20000};
    check_uniform_pieces(7, 0, odd, 7);
    const size_t across_blocks[] = {16387, 23613};
    check_uniform_pieces(0xdeadbeefcafef00dULL, 0, across_blocks, 2);
    const size_t from_odd_start[] = {3, 6, 9, 1001};
    check_uniform_pieces(99, 5, from_odd_start, 4);
}

Test(rng, normal_offset_continuation_odd_offsets)
{
    /* Odd split points cut a Box-Muller pair between two calls. */
    const size_t two[] = {1, 999};
    check_normal_pieces(7, 0, two, 2);
    const size_t odd[] = {3, 1, 1, 5, 16385, 7, 20001};
    check_normal_pieces(7, 0, odd, 7);
    const size_t from_odd_start[] = {2, 5, 1, 1000};
    check_normal_pieces(0xdeadbeefcafef00dULL, 11, from_odd_start, 4);
}

/* ---- distributions ----------------------------------------------------------------- */

#define NSAMPLES (1u << 20)

Test(rng, uniform_range_mean_variance)
{
    float *h = uniform_host(NSAMPLES, 1234, 0, NULL);
    double sum = 0, sum2 = 0;
    float lo = 2, hi = -1;
    for (size_t i = 0; i < NSAMPLES; i++) {
        float x = h[i];
        cr_assert(x > 0.0f && x <= 1.0f, "element %zu = %a outside (0, 1]", i, (double)x);
        lo = fminf(lo, x);
        hi = fmaxf(hi, x);
        sum += x;
        sum2 += (double)x * x;
    }
    double mean = sum / NSAMPLES, var = sum2 / NSAMPLES - mean * mean;
    /* Standard errors: 2.8e-4 for the mean, 7.4e-5 for the variance. */
    cr_assert(fabs(mean - 0.5) < 0.002, "mean %f", mean);
    cr_assert(fabs(var - 1.0 / 12) < 0.0008, "variance %f", var);
    cr_assert(lo < 1e-4 && hi > 1 - 1e-4, "range [%g, %g] not covered", (double)lo, (double)hi);
    free(h);
}

Test(rng, normal_mean_stddev)
{
    const float mean = 3.0f, stddev = 2.0f;
    float *h = normal_host(NSAMPLES, mean, stddev, 0x5eed, 1);
    double sum = 0, sum2 = 0;
    size_t beyond3 = 0;
    for (size_t i = 0; i < NSAMPLES; i++) {
        double x = h[i];
        cr_assert(isfinite(x), "element %zu not finite", i);
        sum += x;
        sum2 += x * x;
        if (fabs(x - mean) > 3 * stddev)
            beyond3++;
    }
    double m = sum / NSAMPLES, sd = sqrt(sum2 / NSAMPLES - m * m);
    /* Standard errors: 2e-3 for the mean, 1.4e-3 for the stddev. */
    cr_assert(fabs(m - mean) < 0.01, "mean %f", m);
    cr_assert(fabs(sd - stddev) < 0.01, "stddev %f", sd);
    /* 0.27% of a normal lies beyond 3 sigma. */
    double tail = (double)beyond3 / NSAMPLES;
    cr_assert(tail > 0.0020 && tail < 0.0034, "beyond 3 sigma: %f", tail);
    free(h);
}

Test(rng, normal_zero_stddev_is_mean)
{
    float *h = normal_host(1001, -7.25f, 0.0f, 3, 0);
    for (size_t i = 0; i < 1001; i++)
        cr_assert_eq(h[i], -7.25f, "element %zu = %g", i, (double)h[i]);
    free(h);
}

/* ---- independence from the device's thread count --------------------------- */

static void check_threads(const char *threads)
{
    set_env("OPENREG_DEVICE_THREADS", threads);
    orDeviceProp prop;
    CHECK_OR(orGetDeviceProperties(&prop, 0));
    cr_assert_eq(prop.multiProcessorCount, atoi(threads));
    /* Several kernel blocks, starting mid-counter and mid-pair. */
    check_uniform_against_ref(5 * 16384 + 77, 0x0123456789abcdefULL, 3);
    check_normal_against_ref(5 * 16384 + 77, 0.25f, 1.75f, 0x0123456789abcdefULL, 3);
}

Test(rng, same_output_1_thread) { check_threads("1"); }
Test(rng, same_output_2_threads) { check_threads("2"); }
Test(rng, same_output_8_threads) { check_threads("8"); }

/* ---- streams ------------------------------------------------------------------ */

Test(rng, stream_ordering)
{
    enum { N = 3 * 16384 + 5 };
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    float *d = dalloc(N);
    CHECK_OR(orMemset(d, 0, N * sizeof(float)));
    float *h = halloc(N);
    memset(h, 0xff, N * sizeof(float));
    /* Hold the stream so both operations are queued before either runs. */
    gate_t gate = {0};
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &gate));
    CHECK_OR(orRandGenerateUniform(d, N, 77, 9, s));
    CHECK_OR(orMemcpyAsync(h, d, N * sizeof(float), orMemcpyDeviceToHost, s));
    cr_assert_eq(wait_atomic_ge(&gate.entered, 1, DEADLINE_MS), 1);
    EXPECT_CODE(orStreamQuery(s), orErrorNotReady);
    cr_assert_eq(bits(h[0]), 0xffffffffu, "the copy ran before the stream reached it");
    gate_open(&gate);
    CHECK_OR(orStreamSynchronize(s));
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(bits(h[i]), bits(ref_uniform(77, 9 + i)), "element %zu", i);
    CHECK_OR(orFree(d));
    CHECK_OR(orStreamDestroy(s));
    free(h);
}

Test(rng, null_stream_is_default_stream)
{
    /* orMemcpy is ordered after the current device's default stream. */
    enum { N = 20000 };
    float *d = dalloc(N), *h = halloc(N);
    CHECK_OR(orRandGenerateNormal(d, N, 0.0f, 1.0f, 5, 1, NULL));
    fetch(h, d, N);
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(bits(h[i]), bits(ref_normal(5, 1 + i, 0.0f, 1.0f)), "element %zu", i);
    CHECK_OR(orFree(d));
    free(h);
}

Test(rng, runs_on_the_streams_device)
{
    enum { N = 1000 };
    CHECK_OR(orSetDevice(1));
    float *d = dalloc(N);
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    CHECK_OR(orSetDevice(0));
    CHECK_OR(orRandGenerateUniform(d, N, 11, 0, s));
    float *h = halloc(N);
    CHECK_OR(orMemcpyAsync(h, d, N * sizeof(float), orMemcpyDeviceToHost, s));
    CHECK_OR(orStreamSynchronize(s));
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(bits(h[i]), bits(ref_uniform(11, i)), "element %zu", i);
    CHECK_OR(orStreamDestroy(s));
    CHECK_OR(orFree(d));
    free(h);
}

Test(rng, strict_mode)
{
    set_env("OPENREG_STRICT", "1");
    /* Small arenas keep the protection changes cheap under valgrind. */
    set_env("OPENREG_DEVICES", "1");
    set_env("OPENREG_DEVICE_MEM", "16M");
    check_uniform_against_ref(40000, 8, 1);
    check_normal_against_ref(40000, 0.0f, 1.0f, 8, 1);
}

/* ---- errors ------------------------------------------------------------------------ */

/* Failing calls must not enqueue anything: the buffer keeps its pattern. */
static void expect_untouched(const float *d, size_t n)
{
    unsigned char *h = malloc(n * sizeof(float));
    cr_assert_not_null(h);
    CHECK_OR(orMemcpy(h, d, n * sizeof(float), orMemcpyDeviceToHost));
    for (size_t i = 0; i < n * sizeof(float); i++)
        cr_assert_eq(h[i], 0xab, "byte %zu was written by a failed call", i);
    free(h);
}

Test(rng, zero_elements)
{
    float *d = dalloc(4);
    CHECK_OR(orMemset(d, 0xab, 4 * sizeof(float)));
    CHECK_OR(orRandGenerateUniform(d, 0, 1, 0, NULL));
    CHECK_OR(orRandGenerateNormal(d, 0, 0.0f, 1.0f, 1, 0, NULL));
    /* No pointer is looked at when there is nothing to write. */
    CHECK_OR(orRandGenerateUniform(NULL, 0, 1, 0, NULL));
    CHECK_OR(orRandGenerateNormal(NULL, 0, 0.0f, 1.0f, 1, 0, NULL));
    expect_untouched(d, 4);
    cr_assert_eq(orGetLastError(), orSuccess);
    /* The stream is still checked first. */
    EXPECT_OR(orRandGenerateUniform(d, 0, 1, 0, (orStream_t)0x1234), orErrorInvalidResourceHandle);
    EXPECT_OR(orRandGenerateNormal(d, 0, 0.0f, 1.0f, 1, 0, (orStream_t)0x1234),
              orErrorInvalidResourceHandle);
    CHECK_OR(orFree(d));
}

Test(rng, bad_streams)
{
    float *d = dalloc(16);
    CHECK_OR(orMemset(d, 0xab, 16 * sizeof(float)));
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    CHECK_OR(orStreamDestroy(s));
    EXPECT_OR(orRandGenerateUniform(d, 16, 1, 0, s), orErrorInvalidResourceHandle);
    EXPECT_OR(orRandGenerateNormal(d, 16, 0.0f, 1.0f, 1, 0, s), orErrorInvalidResourceHandle);
    EXPECT_OR(orRandGenerateUniform(d, 16, 1, 0, (orStream_t)0x1234),
              orErrorInvalidResourceHandle);
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    EXPECT_OR(orRandGenerateUniform(d, 16, 1, 0, (orStream_t)e), orErrorInvalidResourceHandle);
    CHECK_OR(orEventDestroy(e));
    expect_untouched(d, 16);
    CHECK_OR(orFree(d));
}

Test(rng, null_pointer)
{
    EXPECT_OR(orRandGenerateUniform(NULL, 1, 1, 0, NULL), orErrorInvalidValue);
    EXPECT_OR(orRandGenerateNormal(NULL, 1, 0.0f, 1.0f, 1, 0, NULL), orErrorInvalidValue);
}

Test(rng, host_pointers)
{
    float stack[8];
    float *heap = malloc(8 * sizeof(float));
    cr_assert_not_null(heap);
    void *pinned = NULL;
    CHECK_OR(orMallocHost(&pinned, 8 * sizeof(float)));
    float *ptrs[] = {stack, heap, pinned};
    for (int k = 0; k < 3; k++) {
        EXPECT_OR(orRandGenerateUniform(ptrs[k], 8, 1, 0, NULL), orErrorInvalidValue);
        EXPECT_OR(orRandGenerateNormal(ptrs[k], 8, 0.0f, 1.0f, 1, 0, NULL), orErrorInvalidValue);
    }
    CHECK_OR(orDeviceSynchronize());
    CHECK_OR(orFreeHost(pinned));
    free(heap);
}

Test(rng, freed_device_memory)
{
    float *d = dalloc(64);
    CHECK_OR(orFree(d));
    EXPECT_OR(orRandGenerateUniform(d, 64, 1, 0, NULL), orErrorInvalidDevicePointer);
    EXPECT_OR(orRandGenerateNormal(d, 64, 0.0f, 1.0f, 1, 0, NULL), orErrorInvalidDevicePointer);
}

Test(rng, range_past_allocation)
{
    enum { N = 100 };
    float *d = dalloc(N); /* 400 bytes: the bound is what was asked, not the rounded block */
    CHECK_OR(orMemset(d, 0xab, N * sizeof(float)));
    EXPECT_OR(orRandGenerateUniform(d, N + 1, 1, 0, NULL), orErrorInvalidValue);
    EXPECT_OR(orRandGenerateNormal(d, N + 1, 0.0f, 1.0f, 1, 0, NULL), orErrorInvalidValue);
    EXPECT_OR(orRandGenerateUniform(d + 50, N - 49, 1, 0, NULL), orErrorInvalidValue);
    EXPECT_OR(orRandGenerateNormal(d + 50, N - 49, 0.0f, 1.0f, 1, 0, NULL), orErrorInvalidValue);
    expect_untouched(d, N);
    /* Exactly up to the end is fine. */
    CHECK_OR(orRandGenerateUniform(d + 50, N - 50, 1, 0, NULL));
    CHECK_OR(orFree(d));
}

Test(rng, size_overflow)
{
    float *d = dalloc(16);
    CHECK_OR(orMemset(d, 0xab, 16 * sizeof(float)));
    /* n * sizeof(float) wraps to a small size if not checked. */
    const size_t wraps = SIZE_MAX / sizeof(float) + 2;
    EXPECT_OR(orRandGenerateUniform(d, wraps, 1, 0, NULL), orErrorInvalidValue);
    EXPECT_OR(orRandGenerateNormal(d, wraps, 0.0f, 1.0f, 1, 0, NULL), orErrorInvalidValue);
    EXPECT_OR(orRandGenerateUniform(d, SIZE_MAX, 1, 0, NULL), orErrorInvalidValue);
    expect_untouched(d, 16);
    CHECK_OR(orFree(d));
}

Test(rng, bad_normal_parameters)
{
    float *d = dalloc(16);
    CHECK_OR(orMemset(d, 0xab, 16 * sizeof(float)));
    const float bad_stddev[] = {-1.0f, -0x1p-149f, NAN, INFINITY, -INFINITY};
    for (size_t k = 0; k < sizeof bad_stddev / sizeof bad_stddev[0]; k++)
        EXPECT_OR(orRandGenerateNormal(d, 16, 0.0f, bad_stddev[k], 1, 0, NULL),
                  orErrorInvalidValue);
    const float bad_mean[] = {NAN, INFINITY, -INFINITY};
    for (size_t k = 0; k < sizeof bad_mean / sizeof bad_mean[0]; k++)
        EXPECT_OR(orRandGenerateNormal(d, 16, bad_mean[k], 1.0f, 1, 0, NULL),
                  orErrorInvalidValue);
    expect_untouched(d, 16);
    CHECK_OR(orFree(d));
}

Test(rng, success_keeps_last_error)
{
    float *d = dalloc(8);
    cr_assert_eq(orRandGenerateNormal(d, 8, 0.0f, -1.0f, 1, 0, NULL), orErrorInvalidValue);
    CHECK_OR(orRandGenerateUniform(d, 8, 1, 0, NULL));
    CHECK_OR(orRandGenerateNormal(d, 8, 0.0f, 1.0f, 1, 0, NULL));
    cr_assert_eq(orGetLastError(), orErrorInvalidValue);
    CHECK_OR(orFree(d));
}
