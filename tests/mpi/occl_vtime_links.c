/*
 * occl_vtime_links.c - collectives whose transfers share links, in virtual
 * time on a declared topology (docs/virtual-time.md#collectives).
 *
 * OCCL's ring follows the topology (collectives/topo_ring.c): it leaves each
 * node once and uses a device's links once per step, so ring steps never
 * share a link on these topologies (occl_topo_spread.sh: spread costs what
 * packed does). The algorithms that do share are those where one rank talks
 * to several at once:
 *
 *   switch  n ranks, one node, devices on one switch (each pair: latency a,
 *           bandwidth b through the device's link up to the switch and the
 *           other's link down). The hierarchical all-reduce's n-1 members
 *           send to their leader together over the switch's one link down to
 *           it, and it sends back over its one link up:
 *             2 (a + (n-1) S / b) + (n+1) S / memory bandwidth
 *           Gather's n-1 blocks B share the root's link down, Scatter's its
 *           link up: a + (n-1) B / b.
 *   nodes2  4 ranks on 2 nodes of 2 devices (packed or spread: the same),
 *           the network path a, b (the NIC is its bottleneck; within a node
 *           the devices' own links are faster). The direct all-reduce sends
 *           S from every rank to every other at once: 2 devices x 2 peers
 *           leave each node by its one NIC, so the last of them ends after
 *           4 transfer times:
 *             a + 4 S / b + (n+1) S / memory bandwidth
 *           and AlltoAll's blocks B the same without the reduction.
 *
 * Each closed form also holds the protocol's figures (OCCL_PROTO=Simple:
 * collectives/vproto.h): its base latency once (the tree's for the
 * hierarchical all-reduce, the ring's for the rest), its hop latency added
 * to a, and its bytes on the links w(x) in place of x.
 *
 * Without link contention each would cost one transfer time. Every check is
 * on the slowest rank, within 1%, every collective started by all ranks at
 * the same virtual time; the all-reduce, run again, costs each rank exactly
 * the same.
 *
 * usage: occl_vtime_links {switch|nodes2} LATENCY_NS,BYTES_PER_NS MiB
 *        (env OPENREG_TIME=virtual, a100 profile, one device per rank)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "occltest.h"
#include "runtime_ext.h"
#include "vclock.h"
#include "vproto.h"

#define A100_BYTES_PER_NS 2039.0

static int me, n;
static orStream_t s;
static orEvent_t origin, ea, eb;

static long long now_of(orEvent_t e)
{
    long long t;
    CHECK_OR(orEventElapsedTimeNs(&t, origin, e));
    return t;
}

/* Every rank's stream moves to the latest rank's clock, and ea marks it. */
static void begin(void)
{
    CHECK_OR(orEventRecord(ea, s));
    CHECK_OR(orEventSynchronize(ea));
    long long here = now_of(ea), latest;
    MPI_Allreduce(&here, &latest, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    CHECK_OR(or_stream_advance_vclock(s, (uint64_t)latest, 0, NULL));
    CHECK_OR(orEventRecord(ea, s));
}

static long long mine; /* this rank's time of the last call timed */

/* The slowest rank's time from the common start. */
static long long finish(void)
{
    long long slowest;
    CHECK_OR(orEventRecord(eb, s));
    CHECK_OR(orStreamSynchronize(s));
    CHECK_OR(orEventElapsedTimeNs(&mine, ea, eb));
    MPI_Allreduce(&mine, &slowest, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

static void expect(const char *what, long long t, double want, double alone)
{
    if (me == 0)
        printf("%-28s %12lld ns  closed form %12.0f  (links not shared: %.0f)\n", what, t, want, alone);
    if (!(fabs((double)t - want) <= 0.01 * want)) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s: %lld ns, closed form %.0f ns", what, t, want);
        mpitest_fail(__FILE__, __LINE__, msg, "");
    }
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
    double a = 0, b = 0;
    CHECK(argc == 4 && sscanf(argv[2], "%lf,%lf", &a, &b) == 2 && a >= 0 && b > 0);
    bool sw = strcmp(argv[1], "switch") == 0;
    CHECK(sw || strcmp(argv[1], "nodes2") == 0);
    CHECK(sw || n == 4);
    size_t S = (size_t)atoi(argv[3]) << 20, count = S / sizeof(float);
    CHECK(S >= (4u << 20) && count % (size_t)(n * n) == 0);
    const char *mode = getenv("OPENREG_TIME");
    CHECK(mode && strcmp(mode, "virtual") == 0);

    CHECK_OR(orStreamCreate(&s));
    CHECK_OR(orEventCreateWithFlags(&origin, orEventEnableTiming));
    CHECK_OR(orEventCreateWithFlags(&ea, orEventEnableTiming));
    CHECK_OR(orEventCreateWithFlags(&eb, orEventEnableTiming));
    CHECK_OR(orEventRecord(origin, s));
    occlUniqueId id;
    if (me == 0)
        CHECK_OCCL(occlGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    occlComm_t comm;
    CHECK_OCCL(occlCommInitRank(&comm, n, id, me));
    const char *pe = getenv("OCCL_PROTO");
    CHECK(pe && strcmp(pe, "Simple") == 0);
    /* The class of the paths that share: the switch's, or the network's. */
    occl_hw hw = occl_proto_hw(or_vclock_path(or_global_device(0, 0), or_global_device(1, 0)).type);
    for (int r = 2; !sw && r < n; r++) /* packed or spread: the path to the other node */
        if (occl_proto_hw(or_vclock_path(or_global_device(0, 0), or_global_device(r, 0)).type) == OCCL_HW_NET)
            hw = OCCL_HW_NET;
    occl_proto P = OCCL_PROTO_SIMPLE;
    double w = (double)occl_proto_wire_bytes(OCCL_PFAM_RING, P, hw, n, false, 1u << 30) / (double)(1u << 30);
    double base_tree = (double)occl_proto_base_ns(OCCL_PFAM_TREE, P), base_ring = (double)occl_proto_base_ns(OCCL_PFAM_RING, P);
    double a_tree = a + (double)occl_proto_hop_ns(OCCL_PFAM_TREE, P, hw);
    double a_ring = a + (double)occl_proto_hop_ns(OCCL_PFAM_RING, P, hw);

    float *send, *recv, *host;
    CHECK_OR(orMalloc((void **)&send, S));
    CHECK_OR(orMalloc((void **)&recv, S * (size_t)n));
    CHECK_OR(orMallocHost((void **)&host, S));
    for (size_t i = 0; i < count; i++)
        host[i] = (float)(me + 1);
    CHECK_OR(orMemcpy(send, host, S, orMemcpyHostToDevice));
    double reduction = (double)(n + 1) * (double)S / A100_BYTES_PER_NS;
    long long t;

    /* The all-reduce (OCCL_ALGO forces the algorithm that shares links). */
    TIME(t, occlAllReduce(send, recv, count, occlFloat, occlSum, comm, s));
    if (sw)
        expect("allreduce hierarchical", t, base_tree + 2 * (a_tree + (n - 1) * w * (double)S / b) + reduction,
               base_tree + 2 * (a_tree + w * (double)S / b) + reduction);
    else
        expect("allreduce direct", t, base_ring + a_ring + 4 * w * (double)S / b + reduction,
               base_ring + a_ring + w * (double)S / b + reduction);
    CHECK_OR(orMemcpy(host, recv, S, orMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i += 4099)
        CHECK(host[i] == (float)(n * (n + 1) / 2));
    /* Deterministic: the same call from a common start costs every rank
     * exactly what it did. */
    long long first = mine;
    TIME(t, occlAllReduce(send, recv, count, occlFloat, occlSum, comm, s));
    CHECK(mine == first);

    size_t block = count / (size_t)n; /* floats */
    double B = (double)block * sizeof(float);
    if (sw) {
        TIME(t, occlGather(send, recv, block, occlFloat, 0, comm, s));
        expect("gather", t, base_ring + a_ring + (n - 1) * w * B / b, base_ring + a_ring + w * B / b);
        TIME(t, occlScatter(recv, send, block, occlFloat, 0, comm, s));
        expect("scatter", t, base_ring + a_ring + (n - 1) * w * B / b, base_ring + a_ring + w * B / b);
    } else {
        TIME(t, occlAlltoAll(send, recv, block, occlFloat, comm, s));
        expect("alltoall", t, base_ring + a_ring + 4 * w * B / b, base_ring + a_ring + w * B / b);
    }

    CHECK_OCCL(occlCommDestroy(comm));
    MPI_Finalize();
    return 0;
}
