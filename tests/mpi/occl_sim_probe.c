/*
 * occl_sim_probe.c - the virtual times a real job gives a sequence of
 * collectives, for comparison with occl-sim (tests/mpi/occl_sim_agree.sh).
 *
 * usage (under mpiexec, OPENREG_TIME=virtual): occl_sim_probe G CALL...
 * Every process drives G devices, comm rank p * G + d being device d of
 * process p (as occl_perf -g). A CALL is COLL:COUNT[:ROOT] (the count the
 * call is given, float, sum). The calls are issued back to back on one
 * stream per device, and an event recorded before and after each gives its
 * entry and its end; each rank prints "call I rank R entry NS end NS" per
 * call, in ns from an event recorded before anything else, as
 * `occl-sim --per-rank` does. No data is initialised: no copy or memset
 * moves a clock before the calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "occltest.h"

enum { MAX_CALLS = 64, MAX_G = 8 };

typedef struct pcall {
    char coll[32];
    size_t count;
    int root;
} pcall;

static size_t recv_elems(const pcall *c, int n)
{
    if (!strcmp(c->coll, "allgather") || !strcmp(c->coll, "gather") || !strcmp(c->coll, "alltoall"))
        return c->count * (size_t)n;
    return c->count;
}

static size_t send_elems(const pcall *c, int n)
{
    if (!strcmp(c->coll, "reducescatter") || !strcmp(c->coll, "scatter") || !strcmp(c->coll, "alltoall"))
        return c->count * (size_t)n;
    return c->count;
}

static void issue(const pcall *c, void *sb, void *rb, occlComm_t comm, orStream_t s)
{
    if (!strcmp(c->coll, "allreduce"))
        CHECK_OCCL(occlAllReduce(sb, rb, c->count, occlFloat, occlSum, comm, s));
    else if (!strcmp(c->coll, "broadcast"))
        CHECK_OCCL(occlBroadcast(sb, rb, c->count, occlFloat, c->root, comm, s));
    else if (!strcmp(c->coll, "reduce"))
        CHECK_OCCL(occlReduce(sb, rb, c->count, occlFloat, occlSum, c->root, comm, s));
    else if (!strcmp(c->coll, "allgather"))
        CHECK_OCCL(occlAllGather(sb, rb, c->count, occlFloat, comm, s));
    else if (!strcmp(c->coll, "reducescatter"))
        CHECK_OCCL(occlReduceScatter(sb, rb, c->count, occlFloat, occlSum, comm, s));
    else if (!strcmp(c->coll, "alltoall"))
        CHECK_OCCL(occlAlltoAll(sb, rb, c->count, occlFloat, comm, s));
    else if (!strcmp(c->coll, "gather"))
        CHECK_OCCL(occlGather(sb, rb, c->count, occlFloat, c->root, comm, s));
    else if (!strcmp(c->coll, "scatter"))
        CHECK_OCCL(occlScatter(sb, rb, c->count, occlFloat, c->root, comm, s));
    else
        CHECK(!"known collective");
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    CHECK(argc >= 3);
    int g = atoi(argv[1]), ncalls = argc - 2, n = ci.nranks * g;
    CHECK(g >= 1 && g <= MAX_G && g <= ci.deviceCount && ncalls <= MAX_CALLS);
    pcall calls[MAX_CALLS];
    size_t most = 1;
    for (int i = 0; i < ncalls; i++) {
        pcall *c = &calls[i];
        c->root = 0;
        unsigned long long count;
        CHECK(sscanf(argv[i + 2], "%31[a-z]:%llu:%d", c->coll, &count, &c->root) >= 2);
        c->count = (size_t)count;
        size_t e = send_elems(c, n) > recv_elems(c, n) ? send_elems(c, n) : recv_elems(c, n);
        most = e > most ? e : most;
    }
    orStream_t streams[MAX_G];
    void *sb[MAX_G], *rb[MAX_G];
    orEvent_t origin[MAX_G], before[MAX_G][MAX_CALLS], after[MAX_G][MAX_CALLS];
    for (int d = 0; d < g; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orStreamCreate(&streams[d]));
        CHECK_OR(orEventCreateWithFlags(&origin[d], orEventEnableTiming));
        for (int i = 0; i < ncalls; i++) {
            CHECK_OR(orEventCreateWithFlags(&before[d][i], orEventEnableTiming));
            CHECK_OR(orEventCreateWithFlags(&after[d][i], orEventEnableTiming));
        }
        CHECK_OR(orEventRecord(origin[d], streams[d]));
        CHECK_OR(orMalloc(&sb[d], most * sizeof(float)));
        CHECK_OR(orMalloc(&rb[d], most * sizeof(float)));
    }
    occlUniqueId id;
    if (ci.rank == 0)
        CHECK_OCCL(occlGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    occlComm_t comms[MAX_G];
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < g; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OCCL(occlCommInitRank(&comms[d], n, id, ci.rank * g + d));
    }
    CHECK_OCCL(occlGroupEnd());
    for (int i = 0; i < ncalls; i++) {
        for (int d = 0; d < g; d++)
            CHECK_OR(orEventRecord(before[d][i], streams[d]));
        if (g > 1)
            CHECK_OCCL(occlGroupStart());
        for (int d = 0; d < g; d++)
            issue(&calls[i], sb[d], rb[d], comms[d], streams[d]);
        if (g > 1)
            CHECK_OCCL(occlGroupEnd());
        for (int d = 0; d < g; d++)
            CHECK_OR(orEventRecord(after[d][i], streams[d]));
    }
    char out[MAX_G * MAX_CALLS * 96];
    size_t len = 0;
    for (int d = 0; d < g; d++) {
        CHECK_OR(orStreamSynchronize(streams[d]));
        for (int i = 0; i < ncalls; i++) {
            long long e, f;
            CHECK_OR(orEventElapsedTimeNs(&e, origin[d], before[d][i]));
            CHECK_OR(orEventElapsedTimeNs(&f, origin[d], after[d][i]));
            len += (size_t)snprintf(out + len, sizeof out - len, "call %d rank %d entry %lld end %lld\n", i,
                                    ci.rank * g + d, e, f);
        }
    }
    fputs(out, stdout);
    fflush(stdout);
    for (int d = 0; d < g; d++)
        CHECK_OCCL(occlCommDestroy(comms[d]));
    MPI_Finalize();
    return 0;
}
