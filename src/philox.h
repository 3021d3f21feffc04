/*
 * src/philox.h - Philox4x32-10 (Salmon et al., "Parallel random numbers: as
 * easy as 1, 2, 3", SC'11; the Random123 reference) and the mappings of its
 * words to floats. Pure functions, so the runtime's kernel and a host-side
 * reference compute bit-identical results.
 */
#ifndef OR_PHILOX_H
#define OR_PHILOX_H

#include <math.h>
#include <stdint.h>

#define OR_PHILOX_M0 UINT32_C(0xD2511F53)
#define OR_PHILOX_M1 UINT32_C(0xCD9E8D57)
#define OR_PHILOX_W0 UINT32_C(0x9E3779B9) /* golden ratio */
#define OR_PHILOX_W1 UINT32_C(0xBB67AE85) /* sqrt(3) - 1 */

static inline void or_philox4x32_round(uint32_t c[4], const uint32_t k[2])
{
    uint64_t p0 = (uint64_t)OR_PHILOX_M0 * c[0];
    uint64_t p1 = (uint64_t)OR_PHILOX_M1 * c[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c[1] ^ k[0];
    uint32_t n2 = hi0 ^ c[3] ^ k[1];
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
}

/* The 4 output words for one counter; out may alias ctr. */
static inline void or_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                    uint32_t out[4])
{
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
    uint32_t k[2] = {key[0], key[1]};
    for (int r = 0; r < 10; r++) {
        if (r > 0) { /* the key is bumped between rounds, not before the first */
            k[0] += OR_PHILOX_W0;
            k[1] += OR_PHILOX_W1;
        }
        or_philox4x32_round(c, k);
    }
    out[0] = c[0];
    out[1] = c[1];
    out[2] = c[2];
    out[3] = c[3];
}

/* ((x >> 8) + 1) * 2^-24: exact in a float, never 0 (so log() below is finite),
 * at most 1. */
static inline float or_philox_uniform(uint32_t x)
{
    return (float)((x >> 8) + 1) * 0x1p-24f;
}

/* Box-Muller on the uniforms of two words: z0 is the cosine branch, z1 the
 * sine branch. Both are computed together so every caller evaluates the
 * same expressions (the compiler may fuse sin and cos into sincos). */
static inline void or_philox_box_muller(uint32_t x0, uint32_t x1, double *z0, double *z1)
{
    double u1 = or_philox_uniform(x0), u2 = or_philox_uniform(x1);
    double r = sqrt(-2.0 * log(u1));
    double theta = 6.283185307179586476925286766559 * u2;
    *z0 = r * cos(theta);
    *z1 = r * sin(theta);
}

/* mean + stddev * z, rounded once to float. Needs FMA contraction off (GCC's
 * default under -std=c11), or host and device results could differ. */
static inline float or_philox_scale(double z, float mean, float stddev)
{
    double s = (double)stddev * z;
    return (float)((double)mean + s);
}

#endif /* OR_PHILOX_H */
