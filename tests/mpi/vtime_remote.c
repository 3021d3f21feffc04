/*
 * vtime_remote.c - copies between ranks in virtual time. Each rank opens its
 * neighbour's buffer with an IPC handle, writes its own buffer there (a put)
 * and reads the neighbour's back (a get), each between timed events. In
 * virtual mode each copy costs latency + bytes / bandwidth of the path
 * between the two devices: the network across virtual nodes, the peer link
 * within one (docs/virtual-time.md). The data must arrive in either mode.
 *
 * usage: vtime_remote BYTES [--skip-atexit]    (2 or more ranks)
 * The program initializes and finalizes MPI itself; with --skip-atexit it
 * leaves with _exit right after MPI_Finalize, so its trace must have been
 * written by the runtime's MPI_Finalize hook.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpitest.h"

#define NET_NS 10000ll
#define NET_BPS 12500000000ll
#define PEER_NS 5000ll
#define PEER_BPS 25000000000ll

static long long xfer(long long bytes, long long lat, long long bps)
{
    return lat + (bytes * 1000000000ll + bps - 1) / bps;
}

int main(int argc, char **argv)
{
    long long bytes = argc > 1 ? atoll(argv[1]) : 1 << 20;
    int skip_atexit = argc > 2 && strcmp(argv[2], "--skip-atexit") == 0;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    CHECK(ci.nranks >= 2 && bytes > 0 && bytes % 4 == 0);
    const char *mode = getenv("OPENREG_TIME");
    int virtual_time = mode && strcmp(mode, "virtual") == 0;
    int next = (ci.rank + 1) % ci.nranks, prev = (ci.rank + ci.nranks - 1) % ci.nranks;
    size_t n = (size_t)bytes / 4;

    int *mine, *back, *host;
    CHECK_OR(orMalloc((void **)&mine, (size_t)bytes));
    CHECK_OR(orMalloc((void **)&back, (size_t)bytes));
    CHECK_OR(orMallocHost((void **)&host, (size_t)bytes));
    for (size_t i = 0; i < n; i++)
        host[i] = ci.rank * 1000000 + (int)i;
    CHECK_OR(orMemcpy(mine, host, (size_t)bytes, orMemcpyHostToDevice));

    /* Everyone's handle; every rank has a receive area beside its buffer. */
    int *inbox;
    CHECK_OR(orMalloc((void **)&inbox, (size_t)bytes));
    orIpcMemHandle_t h[2], *all = malloc(sizeof h * (size_t)ci.nranks);
    CHECK(all != NULL);
    CHECK_OR(orIpcGetMemHandle(&h[0], mine));
    CHECK_OR(orIpcGetMemHandle(&h[1], inbox));
    MPI_Allgather(h, (int)sizeof h, MPI_BYTE, all, (int)sizeof h, MPI_BYTE, MPI_COMM_WORLD);
    int *next_inbox, *prev_mine;
    CHECK_OR(orIpcOpenMemHandle((void **)&next_inbox, all[2 * next + 1], 0));
    CHECK_OR(orIpcOpenMemHandle((void **)&prev_mine, all[2 * prev], 0));

    orEvent_t a, b, c;
    CHECK_OR(orEventCreateWithFlags(&a, orEventEnableTiming));
    CHECK_OR(orEventCreateWithFlags(&b, orEventEnableTiming));
    CHECK_OR(orEventCreateWithFlags(&c, orEventEnableTiming));
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    CHECK_OR(orEventRecord(a, s));
    CHECK_OR(orMemcpyAsync(next_inbox, mine, (size_t)bytes, orMemcpyDefault, s)); /* put */
    CHECK_OR(orEventRecord(b, s));
    CHECK_OR(orMemcpyAsync(back, prev_mine, (size_t)bytes, orMemcpyDefault, s)); /* get */
    CHECK_OR(orEventRecord(c, s));
    CHECK_OR(orStreamSynchronize(s));
    long long put_ns, get_ns;
    CHECK_OR(orEventElapsedTimeNs(&put_ns, a, b));
    CHECK_OR(orEventElapsedTimeNs(&get_ns, b, c));

    /* Same node: a peer copy through shared memory; else the network. */
    int across = ci.nnodes > 1;
    long long want = across ? xfer(bytes, NET_NS, NET_BPS) : xfer(bytes, PEER_NS, PEER_BPS);
    printf("rank %d: put %lld ns, get %lld ns (%s; model %lld ns)\n", ci.rank, put_ns, get_ns,
           across ? "network" : "peer link", want);
    if (virtual_time) {
        CHECK(put_ns == want);
        CHECK(get_ns == want);
    }

    /* The get brought the previous rank's data; after everyone's put, our
     * inbox holds the previous rank's too. */
    CHECK_OR(orMemcpy(host, back, (size_t)bytes, orMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i += n / 7 + 1)
        CHECK(host[i] == prev * 1000000 + (int)i);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OR(orMemcpy(host, inbox, (size_t)bytes, orMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i += n / 7 + 1)
        CHECK(host[i] == prev * 1000000 + (int)i);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OR(orIpcCloseMemHandle(next_inbox));
    CHECK_OR(orIpcCloseMemHandle(prev_mine));
    free(all);
    MPI_Finalize();
    if (skip_atexit) {
        fflush(stdout);
        _exit(0);
    }
    return 0;
}
