/*
 * A rank leaves while a worker of its device is still busy (a host function
 * that outlasts the runtime's 2 s wait for its workers at exit). The runtime
 * then keeps the device's memory, since that code may still use it, but it
 * still finalizes MPI: the other ranks' MPI_Finalize waits for this rank's,
 * and the job must end rather than hang. Run with 2 ranks.
 */
#include <unistd.h>

#include "mpitest.h"

static void outlast_exit(void *arg)
{
    (void)arg;
    sleep(4);
}

int main(void)
{
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    CHECK(ci.nranks == 2);
    mpitest_barrier();
    if (ci.rank == 0) {
        CHECK_OR(orLaunchHostFunc(NULL, outlast_exit, NULL));
        printf("busy exit: rank 0 leaves with its device busy\n");
        fflush(stdout);
    }
    return 0; /* no synchronization: the host function is still running */
}
