/*
 * A rank whose peers do not make their first runtime call (they wait for a
 * message this rank's program sends only afterwards) gets
 * orErrorInitialization after OPENREG_TIMEOUT_MS, with a message, instead of
 * waiting for ever: rank 1 calls the runtime while rank 0 waits for rank 1.
 */
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
    MPI_Request req;
    if (rank == 1) {
        int count = -1;
        EXPECT_OR(orGetDeviceCount(&count), orErrorInitialization);
        EXPECT_OR(orMalloc((void **)&argv, 16), orErrorInitialization); /* and it stays so */
        MPI_Isend(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &req);
    } else {
        MPI_Irecv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &req);
    }
    mpitest_wait(&req);
    printf("rank %d: done\n", rank);
    fflush(stdout);
    /* Rank 1's start-up request is still pending, and rank 0 never joins it:
     * MPI_Finalize could wait for it, so the ranks leave without. */
    _exit(0);
}
