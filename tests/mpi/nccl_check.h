/*
 * tests/mpi/nccl_check.h - what the NCCL example ports add to NCCL's code:
 * a check of the all-reduce's result, which NCCL's examples leave out. Every
 * line the ports add is marked "added:".
 */
#ifndef NCCL_CHECK_H
#define NCCL_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "openreg.h"

/* NCCL's cudaMemset(buf, 1, ...) of floats: every float is 0x01010101. */
static inline float nccl_check_memset1(void)
{
    union { unsigned u; float f; } v = {0x01010101u};
    return v.f;
}

/* Every element of the device buffer recv (count floats) is expect, within
 * float rounding (a ring adds in its own order); 0 if so, else 1 with the
 * first wrong element printed. */
static inline int nccl_check_result(const char *who, const float *recv, size_t count, float expect)
{
    enum { CHUNK = 1 << 20 };
    float *host = malloc(CHUNK * sizeof *host);
    if (!host)
        return 1;
    int bad = 0;
    for (size_t at = 0; at < count && !bad; at += CHUNK) {
        size_t n = count - at < CHUNK ? count - at : CHUNK;
        orError_t e = orMemcpy(host, recv + at, n * sizeof *host, orMemcpyDeviceToHost);
        if (e != orSuccess) {
            printf("%s: orMemcpy: %s\n", who, orGetErrorString(e));
            bad = 1;
        }
        for (size_t i = 0; i < n && !bad; i++)
            if (!(fabsf(host[i] - expect) <= 1e-5f * fabsf(expect))) {
                printf("%s: element %zu is %g, expected %g\n", who, at + i, (double)host[i],
                       (double)expect);
                bad = 1;
            }
    }
    free(host);
    return bad;
}

#endif
