/*
 * occl_simulate.c - occlGroupSimulateEnd under OPENREG_TIME=virtual: the
 * estimate of a group equals the virtual time the same group then takes
 * (from a common start to its last rank's end), for collectives the planner
 * chooses among (an all-reduce, an all-gather, a reduce) and for a ring of
 * sends and receives; the simulated group runs nothing (the buffers keep
 * their contents, and the next real calls match across ranks); and every
 * error NCCL documents: outside a group, a simInfo not initialized (and
 * NULL), a failed call of the group; a nested end simulates nothing.
 */
#include <math.h>
#include <string.h>

#include "occltest.h"
#include "runtime_ext.h"

#define COUNT (256 * 1024) /* floats: 1 MiB */

static occlComm_t comm;
static orStream_t s;
static float *send, *recv, *gath, *p2p;
static int rank, nranks;

/* The calls of the group under test (kind 0: collectives, 1: a ring of
 * sends and receives). */
static void issue(int kind)
{
    if (kind == 0) {
        CHECK_OCCL(occlAllReduce(send, recv, COUNT, occlFloat, occlSum, comm, s));
        CHECK_OCCL(occlAllGather(send, gath, COUNT / 4, occlFloat, comm, s));
        CHECK_OCCL(occlReduce(send, recv, COUNT / 2, occlFloat, occlMax, 1, comm, s));
    } else {
        CHECK_OCCL(occlSend(send, COUNT, occlFloat, (rank + 1) % nranks, comm, s));
        CHECK_OCCL(occlRecv(p2p, COUNT, occlFloat, (rank + nranks - 1) % nranks, comm, s));
    }
}

/* Every stream moved to the latest rank's clock, the issuing thread's own
 * included (an event waits for it): the group starts there. */
static uint64_t common_start(void)
{
    orEvent_t e;
    CHECK_OR(orEventCreate(&e));
    CHECK_OR(orEventRecord(e, s));
    CHECK_OR(orEventSynchronize(e));
    CHECK_OR(orEventDestroy(e));
    unsigned long long here = or_stream_vclock(s), latest;
    MPI_Allreduce(&here, &latest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    CHECK_OR(or_stream_advance_vclock(s, latest, 0, NULL));
    return latest;
}

static void estimate_matches(int kind)
{
    /* recv holds a pattern the simulated group must leave alone. */
    float mark = 1234.5f + (float)rank;
    CHECK_OR(orMemset(recv, 0, COUNT * sizeof(float)));
    CHECK_OR(orMemcpy(recv, &mark, sizeof mark, orMemcpyHostToDevice));
    CHECK_OR(orMemcpy(p2p, &mark, sizeof mark, orMemcpyHostToDevice));
    uint64_t before = or_stream_vclock(s);

    occlSimInfo_t info = OCCL_SIM_INFO_INITIALIZER;
    CHECK(info.estimatedTime == OCCL_UNDEF_FLOAT);
    CHECK_OCCL(occlGroupStart());
    issue(kind);
    CHECK_OCCL(occlGroupSimulateEnd(&info));
    CHECK(info.estimatedTime > 0);
    CHECK(info.magic == OCCL_SIM_INFO_MAGIC && info.size == sizeof info);
    CHECK_OR(orStreamSynchronize(s));
    CHECK(or_stream_vclock(s) == before); /* nothing was charged */
    float got[2];
    CHECK_OR(orMemcpy(&got[0], recv, sizeof(float), orMemcpyDeviceToHost));
    CHECK_OR(orMemcpy(&got[1], p2p, sizeof(float), orMemcpyDeviceToHost));
    CHECK(got[0] == mark && got[1] == mark);

    uint64_t start = common_start();
    CHECK_OCCL(occlGroupStart());
    issue(kind);
    CHECK_OCCL(occlGroupEnd());
    CHECK_OR(orStreamSynchronize(s));
    uint64_t t = or_stream_vclock(s) - start;
    unsigned long long took = (unsigned long long)t, last;
    MPI_Allreduce(&took, &last, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    double est_ns = (double)info.estimatedTime * 1e3;
    if (rank == 0)
        printf("group %d: estimated %.3f us, took %.3f us in virtual time\n", kind,
               (double)info.estimatedTime, (double)last / 1e3);
    /* Exact but for the float's rounding of the microseconds. */
    if (fabs(est_ns - (double)last) > 1e-6 * (double)last + 1)
        mpitest_fail(__FILE__, __LINE__, "the estimate is not the virtual time taken", "");
    if (kind == 0) { /* and the group really ran: rank 0's first element gathered */
        CHECK_OR(orMemcpy(&got[0], gath, sizeof(float), orMemcpyDeviceToHost));
        CHECK(got[0] == 1.0f);
    }
}

static void errors(void)
{
    occlSimInfo_t info = OCCL_SIM_INFO_INITIALIZER;
    /* Not in a group. */
    CHECK(occlGroupSimulateEnd(&info) == occlInvalidUsage);
    CHECK(info.estimatedTime == OCCL_UNDEF_FLOAT);

    /* Not initialized: refused, and the group is over (nothing runs). */
    occlSimInfo_t raw;
    memset(&raw, 0, sizeof raw);
    raw.size = sizeof raw;
    CHECK_OCCL(occlGroupStart());
    issue(0);
    CHECK(occlGroupSimulateEnd(&raw) == occlInvalidArgument);
    CHECK(strstr(occlGetLastError(NULL), "OCCL_SIM_INFO_INITIALIZER") != NULL);
    CHECK(raw.estimatedTime == 0);
    CHECK(occlGroupEnd() == occlInvalidUsage);
    CHECK_OCCL(occlGroupStart());
    CHECK(occlGroupSimulateEnd(NULL) == occlInvalidArgument);

    /* A call of the group failed: its error, nothing estimated. */
    CHECK_OCCL(occlGroupStart());
    CHECK(occlBroadcast(send, recv, COUNT, occlFloat, nranks, comm, s) == occlInvalidArgument);
    CHECK(occlGroupSimulateEnd(&info) == occlInvalidArgument);
    CHECK(info.estimatedTime == OCCL_UNDEF_FLOAT);

    /* Calls of one communicator on two streams. */
    orStream_t s2;
    CHECK_OR(orStreamCreate(&s2));
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlAllReduce(send, recv, 16, occlFloat, occlSum, comm, s));
    CHECK_OCCL(occlAllReduce(send, recv, 16, occlFloat, occlSum, comm, s2));
    CHECK(occlGroupSimulateEnd(&info) == occlInvalidUsage);
    CHECK_OR(orStreamDestroy(s2));

    /* Nested: the inner end ends nothing; the outer one estimates. */
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlAllReduce(send, recv, COUNT, occlFloat, occlSum, comm, s));
    CHECK_OCCL(occlGroupSimulateEnd(&info));
    CHECK(info.estimatedTime == OCCL_UNDEF_FLOAT);
    CHECK_OCCL(occlGroupSimulateEnd(&info));
    CHECK(info.estimatedTime > 0);

    /* An empty group takes no time. */
    occlSimInfo_t none = OCCL_SIM_INFO_INITIALIZER;
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlGroupSimulateEnd(&none));
    CHECK(none.estimatedTime == 0);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    rank = ci.rank;
    nranks = ci.nranks;
    if (nranks < 2)
        mpitest_fail(__FILE__, __LINE__, "needs at least 2 ranks", "");
    CHECK(or_vclock_virtual());
    comm = occltest_comm_world(&ci);
    CHECK_OR(orStreamCreate(&s));
    CHECK_OR(orMalloc((void **)&send, COUNT * sizeof(float)));
    CHECK_OR(orMalloc((void **)&recv, COUNT * sizeof(float)));
    CHECK_OR(orMalloc((void **)&gath, COUNT * sizeof(float)));
    CHECK_OR(orMalloc((void **)&p2p, COUNT * sizeof(float)));
    float one = 1.0f;
    CHECK_OR(orMemset(send, 0, COUNT * sizeof(float)));
    CHECK_OR(orMemcpy(send, &one, sizeof one, orMemcpyHostToDevice));

    errors();
    estimate_matches(0);
    estimate_matches(1);

    CHECK_OCCL(occlCommDestroy(comm));
    CHECK_OR(orStreamDestroy(s));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("occl_simulate: %d ranks, estimates equal the virtual time taken, errors: ok\n",
               nranks);
    MPI_Finalize();
    return 0;
}
