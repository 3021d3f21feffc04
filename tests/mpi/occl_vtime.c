/*
 * occl_vtime.c - OCCL collectives in virtual time (OPENREG_TIME=virtual).
 *
 * One device per process, one communicator of all ranks, every path of the
 * same kind (one virtual node: the peer link; one node per rank: the
 * network; or a declared topology where every pair has the same path), so
 * the alpha-beta closed forms hold, with the protocol OCCL_PROTO holds
 * (one name: its base latency once per call, its hop latency on every
 * step, its bytes on the links, collectives/vproto.h) written into
 * base, alpha = path latency + hop and w(x) = x's bytes on the links:
 *   ring all-reduce     base + 2(n-1) (alpha + w(S/n) / beta)
 *   all-gather          base + (n-1)  (alpha + w(B) / beta)      B = one rank's block
 *   reduce-scatter      base + (n-1)  (alpha + w(B) / beta)
 *   broadcast           base + (n - 2 + S / C) (alpha + w(C) / beta), C = 4 MiB chunks
 * Each is timed with events recorded around it on its stream (so an event
 * recorded after a collective must wait for it) and compared within 1% on
 * every rank (the broadcast: the chain's last rank), and Reduce's chain
 *   reduce (chain)      base + (n - 2 + S / K) (alpha + w(K) / beta), K = S/4 here
 * on its root. Then: a late rank
 * delays everyone (all ranks end at the late entry plus the cost), a
 * second stream waiting on the event after a collective starts at its end,
 * every other collective and algorithm costs at least one hop, and results
 * are right. Rank 0 prints every time (ns) for the determinism test.
 *
 * With `tree2` (OCCL_ALGO=tree in the environment, 2 ranks on 2 nodes, the
 * path between them alike both ways) only the tree all-reduce is timed,
 * against the closed form of NCCL's double binary tree: each half of S (S/2)
 * goes up one tree and down it in C chunks of K = S/(2C) (K: a quarter of the
 * half, 1 to 16 MiB), both trees at once. Tree 0 is rooted at rank 0, tree 1
 * at rank 1, so each direction of the link carries one tree's chunks up and
 * the other's down: step 0 moves chunk 0 up each tree (K per direction),
 * steps 1..C-1 move chunk j up and chunk j-1 down, which share the link (2K),
 * and step C moves the last chunk down (K):
 *   tree all-reduce     base + (C + 1) alpha + 2 C w(K) / beta
 * (the tree's base and hop latency).
 * (each direction carries S in all: the tree moves what a ring of 2 moves).
 *
 * usage: occl_vtime {pix|net|path:NS,BYTES_PER_NS} [MiB [wall|tree2]]
 *        (env OPENREG_TIME=virtual, a100; path: every pair's path in a
 *        uniform OPENREG_TOPO has this latency and bandwidth;
 *        with `wall`, OPENREG_TIME=wall and only the calls and results)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "occltest.h"
#include "runtime_ext.h"
#include "vclock.h"
#include "vproto.h"

static int me, n, wall; /* wall: run the calls only (traces in wall time) */
static double alpha, beta; /* ns, bytes per ns: the path's */
static occl_proto proto;
static occl_hw hw;         /* the path's class */
static occl_pfam fam = OCCL_PFAM_RING;
static orStream_t s;
static orEvent_t origin, ea, eb;
static occlComm_t comm;

static long long now_of(orEvent_t e)
{
    long long t;
    CHECK_OR(orEventElapsedTimeNs(&t, origin, e));
    return t;
}

/* A step of `bytes` of data, and the call's base latency, with the
 * protocol's figures. */
static double hop(double bytes)
{
    return alpha + (double)occl_proto_hop_ns(fam, proto, hw) +
           (double)occl_proto_wire_bytes(fam, proto, hw, n, false, (uint64_t)bytes) / beta;
}
static double base(void) { return (double)occl_proto_base_ns(fam, proto); }

#define SLOWEST (-2) /* only_rank: check the slowest rank's time */

/* Check t against the closed form on this rank (every rank when only_rank
 * is -1; the slowest one's when SLOWEST), within 1%; print on rank 0. */
static void expect(const char *what, long long t, double want, int only_rank)
{
    if (wall)
        return;
    long long shown = t; /* the rank checked, or the slowest */
    MPI_Allreduce(&t, &shown, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (only_rank == SLOWEST)
        t = shown;
    if (only_rank < 0 || only_rank == me) {
        if (!(fabs((double)t - want) <= 0.01 * want)) {
            char msg[256];
            snprintf(msg, sizeof msg, "%s: %lld ns, closed form %.0f ns", what, t, want);
            mpitest_fail(__FILE__, __LINE__, msg, "");
        }
    }
    if (me == 0)
        printf("%-40s %12lld ns  closed form %12.0f\n", what, shown, want);
}

/* Times a call between two events on s (ea before, eb after). */
static void begin(void) { CHECK_OR(orEventRecord(ea, s)); }
static long long finish(void)
{
    long long t;
    CHECK_OR(orEventRecord(eb, s));
    CHECK_OR(orStreamSynchronize(s));
    CHECK_OR(orEventElapsedTimeNs(&t, ea, eb));
    return t;
}
#define TIME(var, call)                                                                    \
    do {                                                                                   \
        begin();                                                                           \
        CHECK_OCCL(call);                                                                  \
        (var) = finish();                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int net = argc > 1 && strcmp(argv[1], "net") == 0;
    size_t mib = argc > 2 ? (size_t)atoi(argv[2]) : 16;
    alpha = net ? 10000 : 5000;
    beta = net ? 12.5 : 25.0;
    /* A declared uniform topology: its path's latency and bandwidth. */
    if (argc > 1 && strncmp(argv[1], "path:", 5) == 0)
        CHECK(sscanf(argv[1] + 5, "%lf,%lf", &alpha, &beta) == 2 && alpha >= 0 && beta > 0);
    CHECK(mib >= 4 && mib % 4 == 0 && n >= 2);
    wall = argc > 3 && strcmp(argv[3], "wall") == 0;
    int tree2 = argc > 3 && strcmp(argv[3], "tree2") == 0;
    CHECK(!tree2 || n == 2);
    const char *mode = getenv("OPENREG_TIME");
    CHECK(mode && strcmp(mode, wall ? "wall" : "virtual") == 0);

    CHECK_OR(orStreamCreate(&s));
    CHECK_OR(orEventCreateWithFlags(&origin, orEventEnableTiming));
    CHECK_OR(orEventCreateWithFlags(&ea, orEventEnableTiming));
    CHECK_OR(orEventCreateWithFlags(&eb, orEventEnableTiming));
    CHECK_OR(orEventRecord(origin, s)); /* every rank's virtual 0 */

    occlUniqueId id;
    if (me == 0)
        CHECK_OCCL(occlGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK_OCCL(occlCommInitRank(&comm, n, id, me));
    /* The closed forms need one protocol, and the class of the paths. */
    const char *pe = getenv("OCCL_PROTO");
    int pk = 0;
    while (pk < OCCL_NUM_PROTOS && !(pe && strcasecmp(pe, occl_proto_name((occl_proto)pk)) == 0))
        pk++;
    CHECK(wall || pk < OCCL_NUM_PROTOS);
    proto = pk < OCCL_NUM_PROTOS ? (occl_proto)pk : OCCL_PROTO_SIMPLE;
    hw = occl_proto_hw(or_vclock_path(or_global_device(0, 0), or_global_device(1, 0)).type);

    size_t S = mib << 20, count = S / sizeof(float);
    float *send, *recv, *host;
    CHECK_OR(orMalloc((void **)&send, S));
    CHECK_OR(orMalloc((void **)&recv, S * (size_t)n));
    CHECK_OR(orMallocHost((void **)&host, S * (size_t)n));
    for (size_t i = 0; i < count; i++)
        host[i] = (float)(me + 1);
    CHECK_OR(orMemcpy(send, host, S, orMemcpyHostToDevice));
    double hops = 2.0 * (n - 1);
    long long t;

    if (tree2) { /* The double binary tree (OCCL_ALGO=tree in the environment). */
        double half = (double)S / 2, K = half / 4;
        K = K < (1 << 20) ? (1 << 20) : K > (16 << 20) ? (16 << 20) : K;
        double C = ceil(half / K);
        TIME(t, occlAllReduce(send, recv, count, occlFloat, occlSum, comm, s));
        fam = OCCL_PFAM_TREE;
        double a = alpha + (double)occl_proto_hop_ns(fam, proto, hw);
        double wk = (double)occl_proto_wire_bytes(fam, proto, hw, n, false, (uint64_t)K);
        expect("allreduce tree (double binary)", t, base() + (C + 1) * a + 2 * C * wk / beta, SLOWEST);
        CHECK_OR(orMemcpy(host, recv, S, orMemcpyDeviceToHost));
        for (size_t i = 0; i < count; i += 4097)
            CHECK(host[i] == (float)(n * (n + 1) / 2));
        CHECK(host[count - 1] == (float)(n * (n + 1) / 2));
        CHECK_OCCL(occlCommDestroy(comm));
        MPI_Finalize();
        return 0;
    }

    /* Ring all-reduce (OCCL_ALGO=ring in the environment). */
    TIME(t, occlAllReduce(send, recv, count, occlFloat, occlSum, comm, s));
    expect("allreduce ring", t, base() + hops * hop((double)S / n), -1);
    CHECK_OR(orMemcpy(host, recv, S, orMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i += 4097)
        CHECK(host[i] == (float)(n * (n + 1) / 2));

    /* All-gather and reduce-scatter: S/n per rank's block. */
    size_t block = count / (size_t)n;
    TIME(t, occlAllGather(send, recv, block, occlFloat, comm, s));
    expect("allgather", t, base() + (n - 1) * hop((double)block * 4), -1);
    TIME(t, occlReduceScatter(recv, send, block, occlFloat, occlSum, comm, s));
    expect("reducescatter", t, base() + (n - 1) * hop((double)block * 4), -1);

    /* A late rank (all ranks ended the reduce-scatter together): rank 0 first sets S bytes (its memory's time). Every rank
     * ends at the latest entry plus the all-reduce, and a second stream
     * waiting on the event after it starts there. */
    orStream_t s2;
    CHECK_OR(orStreamCreate(&s2));
    if (me == 0)
        CHECK_OR(orMemsetAsync(recv, 0, S, s));
    CHECK_OR(orEventRecord(ea, s));
    CHECK_OCCL(occlAllReduce(send, recv, count, occlFloat, occlSum, comm, s));
    CHECK_OR(orEventRecord(eb, s));
    orEvent_t ec;
    CHECK_OR(orEventCreateWithFlags(&ec, orEventEnableTiming));
    CHECK_OR(orStreamWaitEvent(s2, eb, 0));
    CHECK_OR(orEventRecord(ec, s2));
    CHECK_OR(orStreamSynchronize(s));
    CHECK_OR(orStreamSynchronize(s2));
    long long entry = now_of(ea), end = now_of(eb), entry_max, end_min, end_max;
    MPI_Allreduce(&entry, &entry_max, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&end, &end_min, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&end, &end_max, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (!wall) {
        CHECK(end_min == end_max);
        CHECK(now_of(ec) == end);
        if (me != 0)
            CHECK(entry_max > entry); /* rank 0 was late */
    }
    expect("allreduce after a late rank (from latest)", end - entry_max, base() + hops * hop((double)S / n), -1);

    /* Broadcast: the chain's last rank (just before the root on the ring:
     * rank n-1 in rank order, another on a topology's ring) ends last. */
    for (size_t i = 0; i < count; i++)
        host[i] = (float)i;
    CHECK_OR(orMemcpy(send, host, S, orMemcpyHostToDevice));
    TIME(t, occlBroadcast(send, recv, count, occlFloat, 0, comm, s));
    double chunks = (double)S / (4 << 20);
    expect("broadcast", t, base() + (n - 2 + chunks) * hop(4 << 20), SLOWEST);
    CHECK_OR(orMemcpy(host, recv, S, orMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i += 4093)
        CHECK(host[i] == (float)i);

    /* Reduce's chain (to root 1), from a common start: every stream is first
     * moved to the latest rank's clock (the broadcast's root ended first). Its
     * chunk is a quarter of the buffer here (1-16 MiB): S/K = 4 chunks
     * pipelined over n-1 links. */
    CHECK_OR(orEventRecord(ea, s));
    CHECK_OR(orEventSynchronize(ea));
    long long here = now_of(ea), latest;
    MPI_Allreduce(&here, &latest, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (!wall)
        CHECK_OR(or_stream_advance_vclock(s, (uint64_t)latest, 0, NULL));
    TIME(t, occlReduce(send, recv, count, occlFloat, occlSum, 1 % n, comm, s));
    double K = (double)S / 4;
    expect("reduce chain (root)", t, base() + (n - 2 + (double)S / K) * hop(K), 1 % n);

    /* Everything else costs at least one hop and is timed the same way. */
    struct {
        const char *name;
        long long t;
    } other[8];
    int k = 0;
    other[k].name = "alltoall";
    TIME(other[k++].t, occlAlltoAll(send, recv, block / (size_t)n, occlFloat, comm, s));
    other[k].name = "gather";
    TIME(other[k++].t, occlGather(send, recv, block, occlFloat, 0, comm, s));
    other[k].name = "scatter";
    TIME(other[k++].t, occlScatter(recv, send, block, occlFloat, 0, comm, s));
    CHECK_OR(orEventRecord(ea, s));
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlSend(send, block, occlFloat, (me + 1) % n, comm, s));
    CHECK_OCCL(occlRecv(recv, block, occlFloat, (me + n - 1) % n, comm, s));
    CHECK_OCCL(occlGroupEnd());
    CHECK_OR(orEventRecord(eb, s));
    CHECK_OR(orStreamSynchronize(s));
    CHECK_OR(orEventElapsedTimeNs(&other[k].t, ea, eb));
    other[k++].name = "send/recv";
    for (int i = 0; i < k; i++) {
        if (!wall && other[i].t < (long long)alpha) {
            char msg[128];
            snprintf(msg, sizeof msg, "%s: %lld ns, less than one hop", other[i].name, other[i].t);
            mpitest_fail(__FILE__, __LINE__, msg, "");
        }
        if (me == 0 && !wall)
            printf("%-40s %12lld ns\n", other[i].name, other[i].t);
    }
    CHECK_OR(orEventSynchronize(eb));
    if (me == 0 && !wall)
        printf("end %lld ns\n", now_of(eb));

    CHECK_OCCL(occlCommDestroy(comm));
    MPI_Finalize();
    return 0;
}
