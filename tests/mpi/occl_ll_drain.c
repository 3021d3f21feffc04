/*
 * occl_ll_drain.c - a small call that the calling thread handed to the
 * communicator's thread (its peers were late) does not send the calls after
 * it there too (collectives/enqueue.c, runner_drain). With
 * OCCL_CALLER_WAIT_US set (20000 in occl-ll-drain-4x1: a wait that a
 * loaded machine does not outlast between two calls that finish):
 *   1. rank 1 comes 100 ms late to the first of 20000 all-reduces that
 *      every rank issues without waiting: on the others the first call is
 *      handed over, yet the communicator's thread runs fewer than half of
 *      them (else all would queue behind the first, the calling thread
 *      being faster than the calls);
 *   2. rank 1 comes 2 s late to the first of 1000: the others issue all of
 *      them within 1 s, as a stuck peer holds a caller up for one wait per
 *      64 calls, not one per call;
 *   3. rank 1 comes 300 ms late to a 64 KiB all-reduce (never on the
 *      calling thread) and 10 small ones after it: the others issue the
 *      small ones within 10 ms, not waiting behind the large one;
 * without it, with more ranks than cores (occl-ll-drain-4x1-default):
 *   4. rank 1 comes 0.5 ms late to one all-reduce, 20 times: the others
 *      keep the call on the calling thread in more than a quarter of them
 *      (they did in 14 to 20 of 20 on a loaded machine), the default
 *      wait being longer than a scheduler slice there (with 200 us nearly
 *      every one is handed over).
 * Every result is checked. 4 ranks of one device.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mpitest.h"
#include "occl_internal.h" /* occl_comm_runner_calls: the debug counter */
#include "occltest.h"

enum { COUNT = 2, STREAM_CALLS = 20000, STUCK_CALLS = 1000, TRIALS = 20, LARGE = 16384, BEHIND = 10 };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* All ranks together, then rank 1 late_us later. */
static void rank1_late(int rank, unsigned late_us)
{
    mpitest_barrier();
    if (rank == 1)
        usleep(late_us);
}

/* n all-reduces of rank + 1 into out, issued now; returns the seconds
 * this rank took to issue them. */
static double allreduces_now(occlComm_t comm, orStream_t s, const float *in, float *out, int n)
{
    double t0 = now_s();
    for (int k = 0; k < n; k++)
        CHECK_OCCL(occlAllReduce(in, out, COUNT, occlFloat32, occlSum, comm, s));
    return now_s() - t0;
}

/* n all-reduces of rank + 1 into out, rank 1 `late_us` late to the first;
 * returns the seconds this rank took to issue them. */
static double allreduces(occlComm_t comm, orStream_t s, const float *in, float *out, int n, int rank,
                         unsigned late_us)
{
    rank1_late(rank, late_us);
    double issued = allreduces_now(comm, s, in, out, n);
    CHECK_OR(orStreamSynchronize(s));
    return issued;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    bool wait_set = getenv("OCCL_CALLER_WAIT_US") != NULL;
    if (ci.deviceCount != 1 || ci.nranks < 3 || (!wait_set && ci.nranks <= cores)) {
        char detail[96];
        snprintf(detail, sizeof detail, "%d ranks of %d devices on %ld cores", ci.nranks, ci.deviceCount, cores);
        mpitest_fail(__FILE__, __LINE__,
                     "needs 3 ranks or more of one device, and more ranks than cores without OCCL_CALLER_WAIT_US: ",
                     detail);
    }
    occlComm_t comm = occltest_comm_world(&ci);
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    float h[COUNT], *in, *out;
    for (int i = 0; i < COUNT; i++)
        h[i] = (float)(ci.rank + 1);
    CHECK_OR(orMalloc((void **)&in, sizeof h));
    CHECK_OR(orMalloc((void **)&out, sizeof h));
    CHECK_OR(orMemcpy(in, h, sizeof h, orMemcpyHostToDevice));
    bool waiter = ci.rank != 1;
    float sum = (float)(ci.nranks * (ci.nranks + 1) / 2); /* of rank + 1 */
    char detail[160], summary[320] = "";

    if (wait_set) {
        /* 1: a stream of calls after one handed over. */
        uint64_t before = occl_comm_runner_calls(comm);
        allreduces(comm, s, in, out, STREAM_CALLS, ci.rank, 100000);
        EXPECT_FLOATS(out, COUNT, sum, "all-reduces after a late peer: ");
        uint64_t ran = occl_comm_runner_calls(comm) - before;
        snprintf(detail, sizeof detail, "rank %d: the communicator's thread ran %llu of %d calls", ci.rank,
                 (unsigned long long)ran, STREAM_CALLS);
        if (waiter && ran == 0)
            mpitest_fail(__FILE__, __LINE__, "a peer 100 ms late and no call handed over: ", detail);
        if (ci.rank == 0)
            snprintf(summary, sizeof summary, "rank 0: %llu of %d calls on the communicator's thread after a "
                     "peer 100 ms late", (unsigned long long)ran, STREAM_CALLS);
        if (waiter && ran >= STREAM_CALLS / 2)
            mpitest_fail(__FILE__, __LINE__, "the calls after a handed-over one stayed with the communicator's "
                         "thread: ", detail);

        /* 2: a peer stuck for 2 s. */
        double issued = allreduces(comm, s, in, out, STUCK_CALLS, ci.rank, 2000000);
        EXPECT_FLOATS(out, COUNT, sum, "all-reduces behind a stuck peer: ");
        snprintf(detail, sizeof detail, "rank %d issued %d calls in %.1f ms", ci.rank, STUCK_CALLS, issued * 1e3);
        if (ci.rank == 0)
            snprintf(summary + strlen(summary), sizeof summary - strlen(summary),
                     "; %d calls issued in %.1f ms behind one stuck 2 s", STUCK_CALLS, issued * 1e3);
        if (waiter && issued > 1.0)
            mpitest_fail(__FILE__, __LINE__, "a stuck peer held up every call: ", detail);

        /* 3: small calls behind a large one, its peer late. */
        float *big;
        CHECK_OR(orMalloc((void **)&big, LARGE * sizeof(float)));
        CHECK_OR(orMemset(big, 0, LARGE * sizeof(float)));
        rank1_late(ci.rank, 300000);
        CHECK_OCCL(occlAllReduce(big, big, LARGE, occlFloat32, occlSum, comm, s));
        issued = allreduces_now(comm, s, in, out, BEHIND);
        CHECK_OR(orStreamSynchronize(s));
        EXPECT_FLOATS(out, COUNT, sum, "small all-reduces behind a large one: ");
        EXPECT_FLOATS(big, LARGE, 0.0f, "a large all-reduce: ");
        CHECK_OR(orFree(big));
        snprintf(detail, sizeof detail, "rank %d issued %d small calls behind a large one in %.1f ms", ci.rank,
                 BEHIND, issued * 1e3);
        if (ci.rank == 0)
            snprintf(summary + strlen(summary), sizeof summary - strlen(summary),
                     "; %d small calls behind a large one in %.1f ms", BEHIND, issued * 1e3);
        if (waiter && issued > 0.010)
            mpitest_fail(__FILE__, __LINE__, "small calls waited behind a large one: ", detail);
    } else {
        /* 4: a peer 0.5 ms late, with the default wait. */
        int handed = 0;
        for (int k = 0; k < TRIALS; k++) {
            uint64_t before = occl_comm_runner_calls(comm);
            allreduces(comm, s, in, out, 1, ci.rank, 500);
            EXPECT_FLOATS(out, COUNT, sum, "an all-reduce with a peer 0.5 ms late: ");
            handed += occl_comm_runner_calls(comm) != before;
        }
        snprintf(detail, sizeof detail, "rank %d handed %d of %d calls over", ci.rank, handed, TRIALS);
        if (ci.rank == 0)
            snprintf(summary, sizeof summary, "rank 0 handed %d of %d calls over with a peer 0.5 ms late", handed,
                     TRIALS);
        if (waiter && handed >= TRIALS * 3 / 4)
            mpitest_fail(__FILE__, __LINE__, "a peer 0.5 ms late with more ranks than cores: ", detail);
    }

    CHECK_OR(orFree(in));
    CHECK_OR(orFree(out));
    CHECK_OR(orStreamDestroy(s));
    CHECK_OCCL(occlCommDestroy(comm));
    if (ci.rank == 0)
        printf("occl ll drain: %s\n", summary);
    MPI_Finalize();
    return 0;
}
