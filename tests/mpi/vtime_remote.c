/*
 * vtime_remote.c - copies between ranks in virtual time. Each rank opens its
 * neighbour's buffer with an IPC handle, writes its own buffer there (a put)
 * and reads the neighbour's back (a get), each between timed events. In
 * virtual mode each copy costs latency + bytes / bandwidth of the path
 * between the two devices: the network across virtual nodes, the peer link
 * within one (docs/virtual-time.md), or with OPENREG_TOPO the topology's
 * path, whose latency and bandwidth the test is given (--peer and --net,
 * written from docs/topology.md). The data must arrive in either mode.
 * --nodes checks each rank's virtual node first (a placement file's), so
 * that the costs above are those of the intended paths.
 *
 * usage: vtime_remote BYTES [--skip-atexit] [--peer NS,BPS] [--net NS,BPS]
 *        [--nodes N0,N1,...]  (2 or more ranks)
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
    int skip_atexit = 0;
    long long peer_ns = PEER_NS, peer_bps = PEER_BPS, net_ns = NET_NS, net_bps = NET_BPS;
    const char *nodes = NULL;
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--skip-atexit") == 0)
            skip_atexit = 1;
        else if (strcmp(argv[i], "--peer") == 0 && i + 1 < argc)
            CHECK(sscanf(argv[++i], "%lld,%lld", &peer_ns, &peer_bps) == 2);
        else if (strcmp(argv[i], "--net") == 0 && i + 1 < argc)
            CHECK(sscanf(argv[++i], "%lld,%lld", &net_ns, &net_bps) == 2);
        else if (strcmp(argv[i], "--nodes") == 0 && i + 1 < argc)
            nodes = argv[++i];
        else
            CHECK(!"usage: vtime_remote BYTES [--skip-atexit] [--peer NS,BPS] [--net NS,BPS] "
                   "[--nodes N0,N1,...]");
    }
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    CHECK(ci.nranks >= 2 && bytes > 0 && bytes % 4 == 0 && peer_bps > 0 && net_bps > 0);
    if (nodes) {
        const char *p = nodes;
        for (int r = 0; r < ci.rank; r++) {
            p = strchr(p, ',');
            CHECK(p != NULL);
            p++;
        }
        if (atoi(p) != ci.node) {
            fprintf(stderr, "rank %d: virtual node %d, expected %d (--nodes %s)\n", ci.rank,
                    ci.node, atoi(p), nodes);
            CHECK(0);
        }
    }
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
    int *node = malloc(sizeof *node * (size_t)ci.nranks);
    CHECK(node != NULL);
    MPI_Allgather(&ci.node, 1, MPI_INT, node, 1, MPI_INT, MPI_COMM_WORLD);
    int put_across = node[next] != ci.node, get_across = node[prev] != ci.node;
    long long want_put = put_across ? xfer(bytes, net_ns, net_bps) : xfer(bytes, peer_ns, peer_bps);
    long long want_get = get_across ? xfer(bytes, net_ns, net_bps) : xfer(bytes, peer_ns, peer_bps);
    printf("rank %d: put %lld ns (%s; model %lld ns), get %lld ns (%s; model %lld ns)\n", ci.rank,
           put_ns, put_across ? "network" : "peer link", want_put, get_ns,
           get_across ? "network" : "peer link", want_get);
    free(node);
    if (virtual_time) {
        CHECK(put_ns == want_put);
        CHECK(get_ns == want_get);
    }

    /* The get brought the previous rank's data; after everyone's put, our
     * inbox holds the previous rank's too. */
    CHECK_OR(orMemcpy(host, back, (size_t)bytes, orMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i += n / 7 + 1)
        CHECK(host[i] == prev * 1000000 + (int)i);
    mpitest_barrier();
    CHECK_OR(orMemcpy(host, inbox, (size_t)bytes, orMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i += n / 7 + 1)
        CHECK(host[i] == prev * 1000000 + (int)i);
    mpitest_barrier();
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
