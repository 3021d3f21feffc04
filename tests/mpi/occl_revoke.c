/*
 * occl_revoke.c - occlCommRevoke across processes: rank 0's all-reduce,
 * which no other rank joins, is stopped by the revoke long before
 * OCCL_TIMEOUT_MS (its stream reports the error); a call queued behind it
 * is skipped; afterwards new calls, finalize and split are refused, the
 * state is occlSuccess, a shrink excluding no rank makes a working
 * communicator and destroy frees the revoked one. A non-blocking
 * communicator's revoke returns occlInProgress and settles to occlSuccess.
 * NCCL's errors: flags other than OCCL_REVOKE_DEFAULT, a revoked or
 * finalized communicator; NULL is a no-op.
 */
#include <string.h>
#include <unistd.h>

#include "occltest.h"

#define N 1024

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    if (ci.nranks < 2)
        mpitest_fail(__FILE__, __LINE__, "needs at least 2 ranks", "");
    occlComm_t comm = occltest_comm_world(&ci);
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    float *buf, host[N];
    CHECK_OR(orMalloc((void **)&buf, N * sizeof(float)));

    CHECK(occlCommRevoke(NULL, OCCL_REVOKE_DEFAULT) == occlSuccess);
    CHECK(occlCommRevoke(comm, 1) == occlInvalidArgument);
    CHECK(strstr(occlGetLastError(NULL), "OCCL_REVOKE_DEFAULT") != NULL);
    CHECK(occlCommRevoke((occlComm_t)&ci, OCCL_REVOKE_DEFAULT) == occlInvalidArgument);

    /* Rank 0's all-reduce waits for peers that never come; revoked after
     * 200 ms, it stops at once (OCCL_TIMEOUT_MS is 60 s). */
    if (ci.rank == 0) {
        CHECK_OCCL(occlAllReduce(buf, buf, N, occlFloat, occlSum, comm, s));
        CHECK_OCCL(occlBroadcast(buf, buf, N, occlFloat, 0, comm, s));
        usleep(200000);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    CHECK_OCCL(occlCommRevoke(comm, OCCL_REVOKE_DEFAULT));
    if (ci.rank == 0) {
        CHECK(orStreamSynchronize(s) != orSuccess);
        CHECK(now_s() - t0 < 20.0);
    }
    CHECK_OR(orStreamSynchronize(s)); /* the stream goes on */
    occlResult_t state;
    CHECK_OCCL(occlCommGetAsyncError(comm, &state));
    CHECK(state == occlSuccess);

    /* Refused from now on. */
    CHECK(occlAllReduce(buf, buf, N, occlFloat, occlSum, comm, s) == occlInvalidUsage);
    CHECK(strstr(occlGetLastError(NULL), "revoked") != NULL);
    CHECK(occlCommRevoke(comm, OCCL_REVOKE_DEFAULT) == occlInvalidArgument);
    CHECK(occlCommFinalize(comm) == occlInvalidUsage);
    occlComm_t child = NULL;
    CHECK(occlCommSplit(comm, 0, ci.rank, &child, NULL) == occlInvalidUsage && !child);

    /* A shrink excluding no rank: a working communicator of every rank. */
    CHECK_OCCL(occlCommShrink(comm, NULL, 0, &child, NULL, OCCL_SHRINK_DEFAULT));
    for (int i = 0; i < N; i++)
        host[i] = (float)(ci.rank + i);
    CHECK_OR(orMemcpy(buf, host, sizeof host, orMemcpyHostToDevice));
    CHECK_OCCL(occlAllReduce(buf, buf, N, occlFloat, occlSum, child, s));
    CHECK_OR(orStreamSynchronize(s));
    CHECK_OR(orMemcpy(host, buf, sizeof host, orMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        CHECK(host[i] == (float)(ci.nranks * (ci.nranks - 1) / 2 + ci.nranks * i));
    CHECK_OCCL(occlCommDestroy(comm));

    /* A finalized communicator cannot be revoked. */
    CHECK_OCCL(occlCommFinalize(child));
    CHECK(occlCommRevoke(child, OCCL_REVOKE_DEFAULT) == occlInvalidArgument);
    CHECK_OCCL(occlCommDestroy(child));

    /* Non-blocking: occlInProgress, then the state settles. */
    occlUniqueId id;
    if (ci.rank == 0)
        CHECK_OCCL(occlGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    occlComm_t nb = NULL;
    occlResult_t r = occlCommInitRankConfig(&nb, ci.nranks, id, ci.rank, &cfg);
    CHECK(r == occlSuccess || r == occlInProgress);
    do {
        CHECK_OCCL(occlCommGetAsyncError(nb, &state));
        if (state == occlInProgress)
            usleep(1000);
    } while (state == occlInProgress);
    CHECK(state == occlSuccess);
    if (ci.rank == 0)
        CHECK_OCCL(occlAllReduce(buf, buf, N, occlFloat, occlSum, nb, s));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(occlCommRevoke(nb, OCCL_REVOKE_DEFAULT) == occlInProgress);
    do {
        CHECK_OCCL(occlCommGetAsyncError(nb, &state));
        if (state == occlInProgress)
            usleep(1000);
    } while (state == occlInProgress);
    CHECK(state == occlSuccess);
    if (ci.rank == 0)
        CHECK(orStreamSynchronize(s) != orSuccess);
    CHECK_OCCL(occlCommDestroy(nb));

    CHECK_OR(orFree(buf));
    CHECK_OR(orStreamDestroy(s));
    MPI_Barrier(MPI_COMM_WORLD);
    if (ci.rank == 0)
        printf("occl_revoke: %d ranks, a waiting call stopped, calls refused, shrink after it, "
               "non-blocking: ok\n", ci.nranks);
    MPI_Finalize();
    return 0;
}
