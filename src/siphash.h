/*
 * src/siphash.h - SipHash-2-4 (Aumasson and Bernstein), a keyed hash: with
 * the job's secret key it authenticates IPC handles, so a forged or
 * corrupted handle is rejected instead of naming arbitrary memory.
 */
#ifndef OR_SIPHASH_H
#define OR_SIPHASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define OR_ROTL64(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define OR_SIPROUND                                                                      \
    do {                                                                                 \
        v0 += v1; v1 = OR_ROTL64(v1, 13); v1 ^= v0; v0 = OR_ROTL64(v0, 32);              \
        v2 += v3; v3 = OR_ROTL64(v3, 16); v3 ^= v2;                                      \
        v0 += v3; v3 = OR_ROTL64(v3, 21); v3 ^= v0;                                      \
        v2 += v1; v1 = OR_ROTL64(v1, 17); v1 ^= v2; v2 = OR_ROTL64(v2, 32);              \
    } while (0)

static inline uint64_t or_siphash24(const void *data, size_t len, const uint64_t key[2])
{
    uint64_t v0 = 0x736f6d6570736575ULL ^ key[0], v1 = 0x646f72616e646f6dULL ^ key[1];
    uint64_t v2 = 0x6c7967656e657261ULL ^ key[0], v3 = 0x7465646279746573ULL ^ key[1];
    const unsigned char *p = data;
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = 0;
        for (int b = 0; b < 8; b++) /* little-endian, whatever the host */
            m |= (uint64_t)p[i + b] << (8 * b);
        v3 ^= m;
        OR_SIPROUND;
        OR_SIPROUND;
        v0 ^= m;
    }
    uint64_t last = (uint64_t)len << 56;
    for (size_t b = 0; b < (len & 7); b++)
        last |= (uint64_t)p[whole + b] << (8 * b);
    v3 ^= last;
    OR_SIPROUND;
    OR_SIPROUND;
    v0 ^= last;
    v2 ^= 0xff;
    OR_SIPROUND;
    OR_SIPROUND;
    OR_SIPROUND;
    OR_SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

#endif
