/*
 * The headers of calls between nodes (collectives/transport.c): with call
 * checking on, a call's first message to each peer on another node is its
 * header. Checked on every rank, each its own node, with the debug counter
 * occl_comm_net_headers and the results:
 *  1. AlltoAll of 8 bytes per peer: one header per peer and call, each
 *     with the bytes in the same message and none synchronous (the call
 *     also receives from each peer, whose header it checks).
 *  2. AlltoAll of 8 KiB per peer (more than OCCL_NET_INLINE): one header
 *     per peer and call, none with the bytes, none synchronous.
 *  3. Send and Recv of 8 bytes, rank 0 to every other rank: rank 0's
 *     headers carry the bytes and are synchronous (a Send waits for its
 *     Recv, as within a node).
 *  4. AllReduce of 4 to 16 KiB sums, across the inline size: exact.
 */
#include <string.h>

#include "occl_internal.h"
#include "occltest.h"

enum { CALLS = 50 };

typedef struct counts {
    uint64_t all, with_bytes, sync;
} counts;

static counts read_counts(occlComm_t comm)
{
    counts c;
    c.all = occl_comm_net_headers(comm, &c.with_bytes, &c.sync);
    return c;
}

static void expect_counts(const char *what, counts before, counts after, uint64_t all,
                          uint64_t with_bytes, uint64_t sync)
{
    uint64_t got_all = after.all - before.all, got_bytes = after.with_bytes - before.with_bytes,
             got_sync = after.sync - before.sync;
    if (got_all != all || got_bytes != with_bytes || got_sync != sync)
        FAIL("%s: %llu headers, %llu with bytes, %llu synchronous; expected %llu, %llu, %llu", what,
             (unsigned long long)got_all, (unsigned long long)got_bytes, (unsigned long long)got_sync,
             (unsigned long long)all, (unsigned long long)with_bytes, (unsigned long long)sync);
}

/* CALLS AlltoAlls of `count` floats per peer; each block says who sent it
 * to whom. */
static void alltoall(occlComm_t comm, const orClusterInfo *ci, size_t count, orStream_t s)
{
    int n = ci->nranks, me = ci->rank;
    size_t total = count * (size_t)n;
    float *host = malloc(total * sizeof *host), *send, *recv;
    if (!host)
        FAIL("out of memory");
    CHECK_OR(orMalloc((void **)&send, total * sizeof *send));
    CHECK_OR(orMalloc((void **)&recv, total * sizeof *recv));
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < count; i++)
            host[(size_t)j * count + i] = (float)(me * 1000 + j) + (float)i / 4096.0f;
    CHECK_OR(orMemcpy(send, host, total * sizeof *host, orMemcpyHostToDevice));
    for (int k = 0; k < CALLS; k++)
        CHECK_OCCL(occlAlltoAll(send, recv, count, occlFloat32, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    CHECK_OR(orMemcpy(host, recv, total * sizeof *host, orMemcpyDeviceToHost));
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < count; i++) {
            float want = (float)(j * 1000 + me) + (float)i / 4096.0f;
            if (host[(size_t)j * count + i] != want)
                FAIL("AlltoAll of %zu floats: element %zu from rank %d is %g, expected %g", count, i, j,
                     host[(size_t)j * count + i], want);
        }
    CHECK_OR(orFree(send));
    CHECK_OR(orFree(recv));
    free(host);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    if (ci.nranks < 2 || ci.nnodes != ci.nranks)
        FAIL("needs at least 2 ranks, each its own node (has %d ranks on %d nodes)", ci.nranks, ci.nnodes);
    CHECK_OR(orSetDevice(0));
    occlComm_t comm = occltest_comm_world(&ci);
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    uint64_t peers = (uint64_t)ci.nranks - 1;

    /* 1. Small: the header carries the bytes, eagerly. */
    counts c0 = read_counts(comm);
    alltoall(comm, &ci, 2, s);
    counts c1 = read_counts(comm);
    expect_counts("AlltoAll of 8 B per peer", c0, c1, CALLS * peers, CALLS * peers, 0);

    /* 2. Larger than OCCL_NET_INLINE: the header alone, eagerly. */
    alltoall(comm, &ci, OCCL_NET_INLINE / sizeof(float) * 2, s);
    counts c2 = read_counts(comm);
    expect_counts("AlltoAll of 8 KiB per peer", c1, c2, CALLS * peers, 0, 0);

    /* 3. A Send: synchronous, with its bytes. */
    float *buf;
    CHECK_OR(orMalloc((void **)&buf, 2 * sizeof *buf));
    for (int k = 0; k < CALLS; k++) {
        CHECK_OCCL(occlGroupStart());
        for (int j = 1; j < ci.nranks; j++) {
            if (ci.rank == 0)
                CHECK_OCCL(occlSend(buf, 2, occlFloat32, j, comm, s));
            else if (j == ci.rank)
                CHECK_OCCL(occlRecv(buf, 2, occlFloat32, 0, comm, s));
        }
        CHECK_OCCL(occlGroupEnd());
    }
    CHECK_OR(orStreamSynchronize(s));
    counts c3 = read_counts(comm);
    if (ci.rank == 0)
        expect_counts("Send of 8 B", c2, c3, CALLS * peers, CALLS * peers, CALLS * peers);
    else
        expect_counts("Recv of 8 B", c2, c3, 0, 0, 0);
    CHECK_OR(orFree(buf));

    /* 4. All-reduces around the inline size, whatever the algorithm. */
    size_t counts_of[] = {1, 2, OCCL_NET_INLINE / sizeof(float) - 1, OCCL_NET_INLINE / sizeof(float),
                          OCCL_NET_INLINE / sizeof(float) + 1, 4 * OCCL_NET_INLINE / sizeof(float)};
    for (size_t t = 0; t < sizeof counts_of / sizeof counts_of[0]; t++) {
        size_t count = counts_of[t];
        float *sum;
        CHECK_OR(orMalloc((void **)&sum, count * sizeof *sum));
        float *host = malloc(count * sizeof *host);
        if (!host)
            FAIL("out of memory");
        for (size_t i = 0; i < count; i++)
            host[i] = (float)(ci.rank + 1);
        CHECK_OR(orMemcpy(sum, host, count * sizeof *host, orMemcpyHostToDevice));
        CHECK_OCCL(occlAllReduce(sum, sum, count, occlFloat32, occlSum, comm, s));
        CHECK_OR(orStreamSynchronize(s));
        char what[64];
        snprintf(what, sizeof what, "AllReduce of %zu floats", count);
        EXPECT_FLOATS(sum, count, (float)(ci.nranks * (ci.nranks + 1) / 2), what);
        free(host);
        CHECK_OR(orFree(sum));
    }

    CHECK_OR(orStreamDestroy(s));
    CHECK_OCCL(occlCommDestroy(comm));
    if (ci.rank == 0)
        printf("occl_net_headers: %d ranks, headers with their bytes and eager where the call "
               "receives from the peer\n", ci.nranks);
    MPI_Finalize();
    return 0;
}
