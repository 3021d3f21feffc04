/*
 * IPC handles that must be refused, and uses of opened memory that must be:
 * forged and corrupted handles, truncated ones, a handle of a freed
 * allocation, closing twice, copies past the end, kernels and memsets on
 * another node's memory, copies another node's owner refuses (every size
 * class of the proxies' protocol). Run with 2 ranks, as one node or as two.
 *
 *   ipc_errors                 the checks above
 *   ipc_errors --write FILE    rank 0 writes a handle to FILE and exits
 *   ipc_errors --open FILE     rank 0 opens FILE's handle: another job's
 */
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"

static void touch(const orKernelContext *ctx, void *args)
{
    int *p = *(int **)args;
    p[0] = 1; /* never runs: the launch is refused */
}

/* Copies with another node that its owner refuses, of every size class of
 * the proxies' protocol: a small write (its bytes travel with the request
 * and the owner drains them), a write larger than 1 MiB (it waits for the
 * owner's go-ahead), and reads of both sizes (the reader cancels the receive
 * it posted for the data). Afterwards copies with the same owner still work
 * and carry the right bytes. */
static void refused_copies(int peer)
{
    enum { BIG = (2 << 20) + 4096 }; /* above the 1 MiB of an eager write */
    char *host = malloc(BIG), *back = malloc(BIG);
    CHECK(host && back);
    void *gone, *kept;
    CHECK_OR(orMalloc(&gone, BIG));
    CHECK_OR(orMalloc(&kept, BIG));
    orIpcMemHandle_t h[2], theirs[2];
    CHECK_OR(orIpcGetMemHandle(&h[0], gone));
    CHECK_OR(orIpcGetMemHandle(&h[1], kept));
    mpitest_exchange(h, theirs, sizeof h, peer, 2);
    char *r_gone, *r_kept;
    CHECK_OR(orIpcOpenMemHandle((void **)&r_gone, theirs[0], 0));
    CHECK_OR(orIpcOpenMemHandle((void **)&r_kept, theirs[1], 0));
    mpitest_barrier();
    CHECK_OR(orFree(gone));
    mpitest_barrier();

    memset(host, 0x5a, BIG);
    /* 512 KiB: MPI moves it by rendezvous, so an owner that did not drain it
     * would leave the writer waiting forever. */
    EXPECT_OR(orMemcpy(r_gone + 8, host, 512 << 10, orMemcpyHostToDevice),
              orErrorInvalidDevicePointer);
    EXPECT_OR(orMemcpy(r_gone + 8, host, 4096, orMemcpyHostToDevice), orErrorInvalidDevicePointer);
    EXPECT_OR(orMemcpy(r_gone, host, BIG, orMemcpyHostToDevice), orErrorInvalidDevicePointer);
    EXPECT_OR(orMemcpy(back, r_gone + 8, 4096, orMemcpyDeviceToHost), orErrorInvalidDevicePointer);
    EXPECT_OR(orMemcpy(back, r_gone, BIG, orMemcpyDeviceToHost), orErrorInvalidDevicePointer);
    /* Asynchronous too: reported by the synchronization, later work still runs. */
    CHECK_OR(orMemcpyAsync(r_gone, host, 4096, orMemcpyHostToDevice, NULL));
    CHECK_OR(orMemcpyAsync(r_kept, host, 4096, orMemcpyHostToDevice, NULL));
    EXPECT_OR(orDeviceSynchronize(), orErrorInvalidDevicePointer);

    /* Nothing refused lingers: copies both ways, small and large, are exact. */
    for (int i = 0; i < BIG; i++)
        host[i] = (char)(i * 7 + peer);
    CHECK_OR(orMemcpy(r_kept, host, BIG, orMemcpyHostToDevice));
    CHECK_OR(orMemcpy(r_kept + 3, host + 100, 4000, orMemcpyHostToDevice));
    memset(back, 0, BIG);
    CHECK_OR(orMemcpy(back, r_kept, BIG, orMemcpyDeviceToHost));
    CHECK(memcmp(back, host, 3) == 0 && memcmp(back + 3, host + 100, 4000) == 0 &&
          memcmp(back + 4003, host + 4003, BIG - 4003) == 0);
    memset(back, 0, 64);
    CHECK_OR(orMemcpy(back, r_kept + 5, 64, orMemcpyDeviceToHost));
    CHECK(memcmp(back, host + 102, 64) == 0);

    CHECK_OR(orIpcCloseMemHandle(r_gone));
    CHECK_OR(orIpcCloseMemHandle(r_kept));
    mpitest_barrier();
    CHECK_OR(orFree(kept));
    free(host);
    free(back);
}

static int other_job(const char *mode, const char *path)
{
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    if (ci.rank != 0)
        return 0;
    if (strcmp(mode, "--write") == 0) {
        void *p;
        orIpcMemHandle_t h;
        CHECK_OR(orMalloc(&p, 4096));
        CHECK_OR(orIpcGetMemHandle(&h, p));
        FILE *f = fopen(path, "wb");
        CHECK(f && fwrite(&h, sizeof h, 1, f) == 1);
        fclose(f);
        return 0;
    }
    orIpcMemHandle_t h;
    FILE *f = fopen(path, "rb");
    CHECK(f && fread(&h, sizeof h, 1, f) == 1);
    fclose(f);
    void *p = NULL;
    EXPECT_OR(orIpcOpenMemHandle(&p, h, 0), orErrorInvalidResourceHandle);
    CHECK(p == NULL);
    printf("another job's handle: refused\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3)
        return other_job(argv[1], argv[2]);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    CHECK(ci.nranks == 2);
    int peer = 1 - ci.rank;
    int remote = ci.nnodes == 2;

    enum { N = 1024 };
    int *buf, *dead;
    CHECK_OR(orMalloc((void **)&buf, N * sizeof(int)));
    CHECK_OR(orMalloc((void **)&dead, N * sizeof(int)));
    orIpcMemHandle_t h[2], theirs[2];
    CHECK_OR(orIpcGetMemHandle(&h[0], buf + 10)); /* interior pointer: names the allocation */
    CHECK_OR(orIpcGetMemHandle(&h[1], dead));
    mpitest_exchange(h, theirs, sizeof h, peer, 0);
    /* Each rank frees its second allocation before the peer opens it. */
    CHECK_OR(orFree(dead));
    mpitest_barrier();

    /* Bad arguments. */
    void *p = NULL;
    orIpcMemHandle_t junk;
    EXPECT_OR(orIpcGetMemHandle(NULL, buf), orErrorInvalidValue);
    EXPECT_OR(orIpcGetMemHandle(&junk, NULL), orErrorInvalidValue);
    int local_int;
    EXPECT_OR(orIpcGetMemHandle(&junk, &local_int), orErrorInvalidValue); /* host memory */
    EXPECT_OR(orIpcGetMemHandle(&junk, dead), orErrorInvalidDevicePointer); /* freed */
    EXPECT_OR(orIpcOpenMemHandle(NULL, theirs[0], 0), orErrorInvalidValue);
    EXPECT_OR(orIpcOpenMemHandle(&p, theirs[0], 0x10), orErrorInvalidValue);

    /* Forged: random bytes, and every single-byte corruption of a real one. */
    for (size_t i = 0; i < sizeof junk.reserved; i++)
        junk.reserved[i] = (char)(rand() & 0xff);
    EXPECT_OR(orIpcOpenMemHandle(&p, junk, 0), orErrorInvalidResourceHandle);
    for (size_t i = 0; i < 56; i++) {
        orIpcMemHandle_t bad = theirs[0];
        bad.reserved[i] ^= 0x20;
        EXPECT_OR(orIpcOpenMemHandle(&p, bad, 0), orErrorInvalidResourceHandle);
    }
    /* Truncated: only the first half arrived. */
    orIpcMemHandle_t half = theirs[0];
    memset(half.reserved + 32, 0, 32);
    EXPECT_OR(orIpcOpenMemHandle(&p, half, 0), orErrorInvalidResourceHandle);
    CHECK(p == NULL);

    /* Stale: the allocation was freed. */
    EXPECT_OR(orIpcOpenMemHandle(&p, theirs[1], 0), orErrorInvalidDevicePointer);

    /* A good one: opened twice gives the same pointer, closed twice is fine,
     * a third close is refused. */
    int *q, *q2;
    CHECK_OR(orIpcOpenMemHandle((void **)&q, theirs[0], 0));
    CHECK_OR(orIpcOpenMemHandle((void **)&q2, theirs[0], 0));
    CHECK(q == q2);
    orPointerAttributes a;
    CHECK_OR(orPointerGetAttributes(&a, q + 5));
    CHECK(a.type == (remote ? orMemoryTypeRemote : orMemoryTypeDevice));

    int host[N];
    EXPECT_OR(orMemcpy(host, q, (N + 1) * sizeof(int), orMemcpyDeviceToHost), orErrorInvalidValue);
    EXPECT_OR(orMemcpy(host, q, sizeof host, orMemcpyHostToDevice), orErrorInvalidValue); /* kind */
    if (remote) {
        EXPECT_OR(orLaunchKernel(touch, (orDim3){1, 1, 1}, (orDim3){1, 1, 1}, &q, sizeof q, 0, NULL),
                  orErrorNotSupported);
        EXPECT_OR(orMemset(q, 0, 16), orErrorNotSupported);
        EXPECT_OR(orMemcpy(q, q, 16, orMemcpyDeviceToDevice), orErrorNotSupported);
    } else {
        /* Same node: the owner's memory itself, usable by kernels. */
        CHECK_OR(orLaunchKernel(touch, (orDim3){1, 1, 1}, (orDim3){1, 1, 1}, &q, sizeof q, 0, NULL));
        CHECK_OR(orDeviceSynchronize());
    }
    /* A real copy works both ways. */
    for (int i = 0; i < N; i++)
        host[i] = ci.rank * 100000 + i;
    mpitest_barrier();
    CHECK_OR(orMemcpy(q + 1, host, (N - 1) * sizeof(int), orMemcpyHostToDevice));
    mpitest_barrier();
    CHECK_OR(orMemcpy(host, buf, N * sizeof(int), orMemcpyDeviceToHost));
    for (int i = 1; i < N; i++)
        CHECK(host[i] == peer * 100000 + i - 1);

    CHECK_OR(orIpcCloseMemHandle(q));
    CHECK_OR(orIpcCloseMemHandle(q2));
    EXPECT_OR(orIpcCloseMemHandle(q), orErrorInvalidDevicePointer);
    /* Closed memory is no longer usable, and is never mistaken for host memory. */
    EXPECT_OR(orMemcpy(host, q, 16, orMemcpyDefault), orErrorInvalidDevicePointer);
    EXPECT_OR(orIpcCloseMemHandle(NULL), orErrorInvalidValue);
    EXPECT_OR(orIpcCloseMemHandle(host), orErrorInvalidDevicePointer);

    /* A copy the owner refuses after the open (it freed the memory meanwhile)
     * reports at the synchronization. */
    int *late;
    CHECK_OR(orMalloc((void **)&late, 4096));
    orIpcMemHandle_t lh, their_late;
    CHECK_OR(orIpcGetMemHandle(&lh, late));
    mpitest_exchange(&lh, &their_late, sizeof lh, peer, 1);
    int *r;
    CHECK_OR(orIpcOpenMemHandle((void **)&r, their_late, 0));
    mpitest_barrier();
    CHECK_OR(orFree(late));
    mpitest_barrier();
    if (remote)
        EXPECT_OR(orMemcpy(host, r, 64, orMemcpyDeviceToHost), orErrorInvalidDevicePointer);
    CHECK_OR(orIpcCloseMemHandle(r));
    /* Both copies above are done before either rank allocates again, which
     * could reuse the freed range. */
    mpitest_barrier();
    if (remote)
        refused_copies(peer);

    mpitest_barrier();
    CHECK_OR(orFree(buf));
    if (ci.rank == 0)
        printf("ipc errors (%s): ok\n", remote ? "two nodes" : "one node");
    return 0;
}
