/*
 * occl_wait_notices.c - a rank that waits for a network peer tells it which
 * call it waits in (collectives/fingerprint.c); the peer takes these
 * messages only when it waits itself. Here rank 1 is late to every call, so
 * rank 0 waits in each (well past the 2 ms after which it tells) and rank 1
 * seldom does: the messages to rank 1 must stay bounded (at most one in
 * flight per peer), not pile up in MPI's unexpected queue, where UCX's tcp
 * holds about 1 KiB each for as long as the process lives.
 *
 * Needs 2 ranks on 2 virtual nodes (OPENREG_RANKS_PER_NODE=1). At the end
 * rank 1 counts the messages addressed to it that it never took.
 */
#include <unistd.h>

#include "occl_internal.h"
#include "occltest.h"

#define ROUNDS 120
#define LATE_US 6000 /* rank 1's delay before each call: > 2 ms */

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    if (ci.nranks != 2 || ci.nnodes != 2)
        mpitest_fail(__FILE__, __LINE__, "needs 2 ranks on 2 nodes", "");
    CHECK_OR(orSetDevice(0));
    occlComm_t comm = occltest_comm_world(&ci);
    float *buf;
    CHECK_OR(orMalloc((void **)&buf, 64 * sizeof *buf));
    CHECK_OR(orMemset(buf, 0, 64 * sizeof *buf));
    for (int k = 0; k < ROUNDS; k++) {
        if (ci.rank == 1)
            usleep(LATE_US);
        CHECK_OCCL(occlAllReduce(buf, buf, 64, occlFloat32, occlSum, comm, NULL));
        CHECK_OR(orDeviceSynchronize());
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* Let what was sent arrive, then take every message left for rank 1. */
    int left = 0;
    if (ci.rank == 1) {
        for (int look = 0; look < 200; look++) {
            int flag = 0;
            MPI_Message msg;
            MPI_Status st;
            MPI_Improbe(MPI_ANY_SOURCE, occl_ctl_tag(comm, 1), comm->job.ctl_comm, &flag, &msg, &st);
            if (!flag) {
                usleep(1000);
                continue;
            }
            int bytes = 0;
            MPI_Get_count(&st, MPI_BYTE, &bytes);
            char sink[1024];
            if (bytes > (int)sizeof sink)
                mpitest_fail(__FILE__, __LINE__, "an unexpected control message", "");
            MPI_Mrecv(sink, bytes, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
            left++;
        }
    }
    MPI_Bcast(&left, 1, MPI_INT, 1, MPI_COMM_WORLD);
    CHECK_OCCL(occlCommDestroy(comm));
    CHECK_OR(orFree(buf));
    if (left > 1) {
        char detail[128];
        snprintf(detail, sizeof detail, "%d messages for rank 1 after %d calls it was late to; at most 1 expected",
                 left, ROUNDS);
        mpitest_fail(__FILE__, __LINE__, "waiting messages pile up: ", detail);
    }
    if (ci.rank == 0)
        printf("occl_wait_notices: %d calls with rank 1 late to each; %d waiting message left for it\n",
               ROUNDS, left);
    MPI_Finalize();
    return 0;
}
