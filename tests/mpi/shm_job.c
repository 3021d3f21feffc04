/*
 * A job whose ranks share device memory, for shm_cleanup.sh: prints the
 * job's id (the part of its shared-memory names), uses the memory, and with
 * --kill-rank R has rank R die by SIGKILL mid-run.
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "mpitest.h"

int main(int argc, char **argv)
{
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    CHECK(ci.nodeRanks > 1); /* so device memory is shared */
    if (ci.rank == 0) {
        printf("job %016llx\n", (unsigned long long)or_cl.job_id);
        fflush(stdout);
    }
    void *p;
    CHECK_OR(orMalloc(&p, 1 << 20));
    CHECK_OR(orMemset(p, 1, 1 << 20));
    mpitest_barrier();
    if (argc == 3 && strcmp(argv[1], "--kill-rank") == 0 && ci.rank == atoi(argv[2]))
        raise(SIGKILL);
    mpitest_barrier();
    CHECK_OR(orFree(p));
    return 0;
}
