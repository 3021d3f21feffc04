/*
 * A rank stops in the middle of a collective and never comes back: the
 * survivors' collective ends within OCCL_TIMEOUT_MS with occlTimeout (or
 * occlRemoteError), seen by occlCommGetAsyncError and by the stream's
 * synchronization, and occlCommAbort then frees the communicator.
 *
 * The victim stops itself (SIGSTOP) rather than dying: MPICH's process
 * manager takes the whole job down the moment a rank dies, before survivors
 * could report anything, while a stopped rank looks exactly like a dead one
 * to its peers. Survivors write their verdict to DIR/rank.N, wait until
 * every survivor has, and leave; their exit makes mpiexec kill the victim.
 *
 *   occl_kill VICTIM DIR
 */
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "occltest.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int victim = atoi(argv[1]);
    const char *dir = argv[2];
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    occlUniqueId id;
    if (ci.rank == 0)
        CHECK_OCCL(occlGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    occlComm_t comm;
    CHECK_OCCL(occlCommInitRank(&comm, ci.nranks, id, ci.rank));
    size_t n = 1 << 20;
    float *buf;
    CHECK_OR(orMalloc((void **)&buf, n * sizeof *buf));
    CHECK_OR(orMemset(buf, 0, n * sizeof *buf));
    CHECK_OCCL(occlAllReduce(buf, buf, n, occlFloat32, occlSum, comm, NULL));
    CHECK_OR(orStreamSynchronize(NULL)); /* one that works */
    mpitest_barrier();
    if (ci.rank == victim)
        raise(SIGSTOP);
    double t0 = now_s();
    CHECK_OCCL(occlAllReduce(buf, buf, n, occlFloat32, occlSum, comm, NULL));
    orError_t sync = orStreamSynchronize(NULL);
    double waited = now_s() - t0;
    occlResult_t async;
    CHECK_OCCL(occlCommGetAsyncError(comm, &async));
    const char *t = getenv("OCCL_TIMEOUT_MS");
    bool ok = (sync == orErrorTimeout || sync == orErrorRemote) &&
              (async == occlTimeout || async == occlRemoteError) &&
              /* Slack for a loaded host, whose threads may start late; without
               * the timeout the survivors would wait for the stopped victim
               * until the harness's 60 s limit. */
              waited <= (t ? atof(t) / 1000.0 : 300.0) + 10.0;
    occlResult_t aborted = occlCommAbort(comm);
    ok = ok && aborted == occlSuccess;
    char path[512];
    snprintf(path, sizeof path, "%s/rank.%d", dir, ci.rank);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%s: stream %s, comm %s, after %.2f s, abort %s\n", ok ? "ok" : "FAIL",
                orGetErrorName(sync), occlGetErrorString(async), waited,
                occlGetErrorString(aborted));
        fclose(f);
    }
    /* Leave once every survivor has written (our exit ends the job), or
     * after 40 s: a survivor starved on a loaded host may write late, and
     * the harness's limit is 60 s. */
    for (int tries = 0; tries < 4000; tries++) {
        int written = 0;
        for (int r = 0; r < ci.nranks; r++) {
            snprintf(path, sizeof path, "%s/rank.%d", dir, r);
            written += r != victim && access(path, F_OK) == 0;
        }
        if (written == ci.nranks - 1)
            break;
        usleep(10000);
    }
    _exit(ok ? 0 : 1); /* MPI cannot finalize with a stopped peer */
}
