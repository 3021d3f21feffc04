/*
 * OPENREG_MEMCHECK=1 in a job of 2 ranks: opened IPC memory and copies with
 * the peer work as without the checker, copies past the end are refused,
 * and then each rank makes one illegal access (its error is sticky, so one
 * per process) that must be orErrorIllegalAddress with its neighbour's
 * bytes intact. Run with 2 ranks, as one node or as two.
 *
 *   memcheck A B    rank 0 makes illegal access A, rank 1 B: overflow
 *                   (one element past the end), underflow (one before the
 *                   start), free (use after free), reuse (a freed pointer
 *                   after a new allocation)
 */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

enum { N = 1000 }; /* ints: not a whole page */

typedef struct {
    int *p;
    long index;
    int value;
} poke_args;

static void poke_kernel(const orKernelContext *ctx, void *args)
{
    (void)ctx;
    const poke_args *a = args;
    ((volatile int *)a->p)[a->index] = a->value;
}

/* dst[i] = src[i] + 1 */
typedef struct {
    int *dst;
    const int *src;
} inc_args;

static void inc_kernel(const orKernelContext *ctx, void *args)
{
    (void)ctx;
    const inc_args *a = args;
    for (int i = 0; i < N; i++)
        a->dst[i] = a->src[i] + 1;
}

static orError_t poke(int *p, long index)
{
    poke_args a = {p, index, 99};
    orError_t err = orLaunchKernel(poke_kernel, (orDim3){1, 1, 1}, (orDim3){1, 1, 1}, &a,
                                   sizeof a, 0, NULL);
    return err != orSuccess ? err : orDeviceSynchronize();
}

static int *dfill(int value)
{
    int h[N], *d;
    for (int i = 0; i < N; i++)
        h[i] = value;
    CHECK_OR(orMalloc((void **)&d, sizeof h));
    CHECK_OR(orMemcpy(d, h, sizeof h, orMemcpyHostToDevice));
    return d;
}

/* Read from the host: copies fail once the error is sticky. */
static void check_all(const int *d, int value)
{
    for (int i = 0; i < N; i++)
        CHECK(d[i] == value);
}

static void illegal_access(const char *what)
{
    int *a = dfill(1), *b = dfill(2);
    if (!strcmp(what, "overflow")) {
        EXPECT_OR(poke(a, N), orErrorIllegalAddress);
    } else if (!strcmp(what, "underflow")) {
        EXPECT_OR(poke(b, -1), orErrorIllegalAddress);
    } else if (!strcmp(what, "free")) {
        CHECK_OR(orFree(a));
        EXPECT_OR(poke(a, 0), orErrorIllegalAddress);
        a = NULL;
    } else if (!strcmp(what, "reuse")) {
        CHECK_OR(orFree(a));
        int *c = dfill(3);
        CHECK(c != a);
        EXPECT_OR(poke(a, 0), orErrorIllegalAddress);
        check_all(c, 3);
        a = NULL;
    } else {
        mpitest_fail(__FILE__, __LINE__, "unknown case ", what);
    }
    if (a)
        check_all(a, 1);
    check_all(b, 2);
    EXPECT_OR(orGetLastError(), orErrorIllegalAddress);
    EXPECT_OR(orMalloc((void **)&a, 16), orErrorIllegalAddress);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: memcheck CASE_OF_RANK_0 CASE_OF_RANK_1\n");
        return 2;
    }
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    CHECK(ci.nranks == 2);
    int peer = 1 - ci.rank;
    int remote = ci.nnodes == 2;

    /* Shared memory with the peer, as the collectives use it. */
    int *mine = dfill(10 * (ci.rank + 1)), *out = dfill(0);
    orIpcMemHandle_t h, theirs;
    CHECK_OR(orIpcGetMemHandle(&h, mine));
    mpitest_exchange(&h, &theirs, sizeof h, peer, 0);
    int *peer_buf;
    CHECK_OR(orIpcOpenMemHandle((void **)&peer_buf, theirs, 0));
    int host[N];
    if (!remote) { /* a kernel reads the peer's memory directly */
        inc_args a = {out, peer_buf};
        CHECK_OR(orLaunchKernel(inc_kernel, (orDim3){1, 1, 1}, (orDim3){1, 1, 1}, &a, sizeof a,
                                0, NULL));
        CHECK_OR(orMemcpy(host, out, sizeof host, orMemcpyDeviceToHost));
        for (int i = 0; i < N; i++)
            CHECK(host[i] == 10 * (peer + 1) + 1);
    }
    CHECK_OR(orMemcpy(host, peer_buf, sizeof host, orMemcpyDefault));
    for (int i = 0; i < N; i++)
        CHECK(host[i] == 10 * (peer + 1));
    /* Copies past the end of the peer's allocation, and of ours: refused. */
    int big[N + 1];
    EXPECT_OR(orMemcpy(big, peer_buf, sizeof big, orMemcpyDefault), orErrorInvalidValue);
    EXPECT_OR(orMemcpy(mine, big, sizeof big, orMemcpyHostToDevice), orErrorInvalidValue);
    (void)orGetLastError();
    mpitest_barrier(); /* the peer is done with our memory */
    CHECK_OR(orIpcCloseMemHandle(peer_buf));

    illegal_access(argv[1 + ci.rank]);
    mpitest_barrier();
    if (ci.rank == 0)
        printf("memcheck: both ranks caught %s and %s\n", argv[1], argv[2]);
    return 0;
}
