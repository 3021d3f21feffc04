/*
 * Every device of the job passes a buffer to the next one around a ring of
 * all devices: neighbours on the same rank, on another rank of the same
 * virtual node (shared memory), and on another node (MPI). Both directions
 * are exercised: writing into the next device's buffer, and reading the
 * previous device's, first one after the other, then both at once in pieces
 * over several streams. Verified by data.
 *
 *   ring            the runtime starts MPI itself and finalizes it at exit
 *   ring --adopt    the program initializes and finalizes MPI itself
 */
#include <stdint.h>
#include <string.h>

#include "mpitest.h"

enum { N = 1 << 18 }; /* ints per buffer: 1 MiB */

static int value(int g, int i) { return g * 1000003 + i; }

int main(int argc, char **argv)
{
    int adopt = argc > 1 && strcmp(argv[1], "--adopt") == 0;
    if (adopt) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    }
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    int initialized = 0;
    MPI_Initialized(&initialized);
    CHECK(initialized); /* started by the runtime when not adopted */

    /* The cluster view agrees with MPI and with every rank's device count. */
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(ci.rank == rank && ci.nranks == size);
    int first = 0, total = 0;
    MPI_Exscan(&ci.deviceCount, &first, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&ci.deviceCount, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(ci.firstGlobalDevice == (rank ? first : 0));
    CHECK(ci.globalDeviceCount == total);
    const char *k = getenv("OPENREG_RANKS_PER_NODE");
    if (k && atoi(k) > 0) {
        CHECK(ci.node == rank / atoi(k));
        CHECK(ci.nnodes == (size + atoi(k) - 1) / atoi(k));
    }

    int nd = ci.deviceCount, G = ci.globalDeviceCount;
    int **in = calloc((size_t)nd, sizeof *in), **out = calloc((size_t)nd, sizeof *out);
    int *host = malloc(N * sizeof *host);
    orIpcMemHandle_t *mine = calloc((size_t)nd * 2, sizeof *mine);
    orIpcMemHandle_t *all = calloc((size_t)G * 2, sizeof *all);
    for (int d = 0; d < nd; d++) {
        int g = ci.firstGlobalDevice + d;
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orMalloc((void **)&in[d], N * sizeof(int)));
        CHECK_OR(orMalloc((void **)&out[d], N * sizeof(int)));
        for (int i = 0; i < N; i++)
            host[i] = value(g, i);
        CHECK_OR(orMemcpy(out[d], host, N * sizeof(int), orMemcpyHostToDevice));
        CHECK_OR(orMemset(in[d], 0, N * sizeof(int)));
        CHECK_OR(orIpcGetMemHandle(&mine[2 * d], in[d]));
        CHECK_OR(orIpcGetMemHandle(&mine[2 * d + 1], out[d]));
    }
    int *counts = malloc((size_t)size * sizeof *counts), *displs = malloc((size_t)size * sizeof *displs);
    int bytes = nd * 2 * (int)sizeof *mine;
    MPI_Allgather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0, at = 0; r < size; at += counts[r], r++)
        displs[r] = at;
    MPI_Allgatherv(mine, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, MPI_COMM_WORLD);

    /* Write: device g puts its data into device g+1's buffer. */
    for (int d = 0; d < nd; d++) {
        int g = ci.firstGlobalDevice + d, next = (g + 1) % G;
        CHECK_OR(orSetDevice(d));
        void *p;
        CHECK_OR(orIpcOpenMemHandle(&p, all[2 * next], orIpcMemLazyEnablePeerAccess));
        orStream_t s;
        CHECK_OR(orStreamCreate(&s));
        CHECK_OR(orMemcpyAsync(p, out[d], N * sizeof(int), orMemcpyDeviceToDevice, s));
        CHECK_OR(orStreamSynchronize(s));
        CHECK_OR(orStreamDestroy(s));
        CHECK_OR(orIpcCloseMemHandle(p));
    }
    mpitest_barrier();
    for (int d = 0; d < nd; d++) {
        int prev = (ci.firstGlobalDevice + d + G - 1) % G;
        CHECK_OR(orMemcpy(host, in[d], N * sizeof(int), orMemcpyDeviceToHost));
        for (int i = 0; i < N; i++)
            if (host[i] != value(prev, i))
                mpitest_fail(__FILE__, __LINE__, "written data wrong at device ", "");
    }
    mpitest_barrier();

    /* Read: device g fetches device g-1's data straight into host memory. */
    for (int d = 0; d < nd; d++) {
        int g = ci.firstGlobalDevice + d, prev = (g + G - 1) % G;
        CHECK_OR(orSetDevice(d));
        void *p;
        CHECK_OR(orIpcOpenMemHandle(&p, all[2 * prev + 1], 0));
        memset(host, 0, N * sizeof *host);
        CHECK_OR(orMemcpy(host, p, N * sizeof(int), orMemcpyDefault));
        for (int i = 0; i < N; i++)
            if (host[i] != value(prev, i))
                mpitest_fail(__FILE__, __LINE__, "read data wrong", "");
        CHECK_OR(orIpcCloseMemHandle(p));
    }
    mpitest_barrier();

    /* Both ways at once: every device writes into the next device's buffer
     * and reads the previous one's, in pieces spread over several streams,
     * so that many reads and writes between the same two ranks are in
     * flight together, in both directions. What is written (~value) differs
     * from what is read (value), so bytes delivered to the wrong transfer
     * show. */
    enum { STREAMS = 4, PIECES = 256, PIECE = N / PIECES };
    int **alt = calloc((size_t)nd, sizeof *alt);
    CHECK(alt != NULL);
    for (int d = 0; d < nd; d++) {
        int g = ci.firstGlobalDevice + d;
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orMemset(in[d], 0, N * sizeof(int)));
        for (int i = 0; i < N; i++)
            host[i] = ~value(g, i);
        CHECK_OR(orMalloc((void **)&alt[d], N * sizeof(int)));
        CHECK_OR(orMemcpy(alt[d], host, N * sizeof(int), orMemcpyHostToDevice));
    }
    mpitest_barrier();
    int *got = calloc((size_t)nd * N, sizeof *got);
    void **pw = calloc((size_t)nd, sizeof *pw), **pr = calloc((size_t)nd, sizeof *pr);
    orStream_t *st = calloc((size_t)nd * 2 * STREAMS, sizeof *st);
    CHECK(got && pw && pr && st);
    for (int d = 0; d < nd; d++) {
        int g = ci.firstGlobalDevice + d, next = (g + 1) % G, prev = (g + G - 1) % G;
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orIpcOpenMemHandle(&pw[d], all[2 * next], 0));
        CHECK_OR(orIpcOpenMemHandle(&pr[d], all[2 * prev + 1], 0));
        for (int j = 0; j < 2 * STREAMS; j++)
            CHECK_OR(orStreamCreate(&st[d * 2 * STREAMS + j]));
    }
    for (int j = 0; j < PIECES; j++)
        for (int d = 0; d < nd; d++) {
            size_t at = (size_t)j * PIECE;
            orStream_t *s = &st[d * 2 * STREAMS];
            CHECK_OR(orSetDevice(d));
            CHECK_OR(orMemcpyAsync((int *)pw[d] + at, alt[d] + at, PIECE * sizeof(int),
                                   orMemcpyDeviceToDevice, s[j % STREAMS]));
            CHECK_OR(orMemcpyAsync(got + (size_t)d * N + at, (int *)pr[d] + at,
                                   PIECE * sizeof(int), orMemcpyDefault,
                                   s[STREAMS + j % STREAMS]));
        }
    for (int d = 0; d < nd; d++) {
        int prev = (ci.firstGlobalDevice + d + G - 1) % G;
        CHECK_OR(orSetDevice(d));
        for (int j = 0; j < 2 * STREAMS; j++) {
            CHECK_OR(orStreamSynchronize(st[d * 2 * STREAMS + j]));
            CHECK_OR(orStreamDestroy(st[d * 2 * STREAMS + j]));
        }
        for (int i = 0; i < N; i++)
            if (got[(size_t)d * N + i] != value(prev, i))
                mpitest_fail(__FILE__, __LINE__, "data read during writes wrong", "");
        CHECK_OR(orIpcCloseMemHandle(pw[d]));
        CHECK_OR(orIpcCloseMemHandle(pr[d]));
    }
    mpitest_barrier();
    for (int d = 0; d < nd; d++) {
        int prev = (ci.firstGlobalDevice + d + G - 1) % G;
        CHECK_OR(orMemcpy(host, in[d], N * sizeof(int), orMemcpyDeviceToHost));
        for (int i = 0; i < N; i++)
            if (host[i] != ~value(prev, i))
                mpitest_fail(__FILE__, __LINE__, "data written during reads wrong", "");
        CHECK_OR(orFree(alt[d]));
    }
    free(alt);
    free(got);
    free(pw);
    free(pr);
    free(st);
    mpitest_barrier();
    for (int d = 0; d < nd; d++) {
        CHECK_OR(orFree(in[d]));
        CHECK_OR(orFree(out[d]));
    }
    if (rank == 0)
        printf("ring of %d devices on %d ranks, %d nodes: ok\n", G, size, ci.nnodes);
    free(in);
    free(out);
    free(host);
    free(mine);
    free(all);
    free(counts);
    free(displs);
    if (adopt)
        MPI_Finalize();
    return 0;
}
