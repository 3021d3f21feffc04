/*
 * A rank whose peers do not make their first runtime call (they wait for a
 * message this rank's program sends only afterwards) gets
 * orErrorInitialization after OPENREG_TIMEOUT_MS, with a message, instead of
 * waiting for ever: rank 1 calls the runtime while rank 0 waits for rank 1.
 */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "mpitest.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, token = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2);
    if (rank == 1) {
        int count = -1;
        EXPECT_OR(orGetDeviceCount(&count), orErrorInitialization);
        EXPECT_OR(orMalloc((void **)&argv, 16), orErrorInitialization); /* and it stays so */
    }
    /* The token goes 1 -> 0 -> 1 -> 0, each rank printing before it sends
     * on: whichever rank leaves first, the other has printed (Hydra may end
     * the job once a rank leaves without MPI_Finalize). */
    for (int hop = 0; hop < 3; hop++) {
        MPI_Request req;
        bool sends = (hop % 2 == 0) == (rank == 1);
        if (sends && hop == 1 + rank) { /* rank 0 before its ack, rank 1 before its last */
            printf("rank %d: done\n", rank);
            fflush(stdout);
        }
        if (sends)
            MPI_Isend(&token, 1, MPI_INT, 1 - rank, hop, MPI_COMM_WORLD, &req);
        else
            MPI_Irecv(&token, 1, MPI_INT, 1 - rank, hop, MPI_COMM_WORLD, &req);
        mpitest_wait(&req);
    }
    /* Rank 1's start-up request is still pending, and rank 0 never joins it:
     * MPI_Finalize could wait for it, so the ranks leave without. */
    _exit(0);
}
