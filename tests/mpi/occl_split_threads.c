/*
 * occl_split_threads.c - occlCommSplit and occlCommInitRank called from one
 * thread per device, as NCCL allows: every process drives two devices, each
 * from a thread of its own, and the threads split their device's
 * communicator at the same time. Three shapes of child:
 *   1. color = device: two children at once, each with one rank in every
 *      process (their bootstraps cross between the processes);
 *   2. color = 0: one child whose ranks in a process come from two threads
 *      (the bootstrap's root process gathers them from both);
 *   3. color = process: a child within each process, made by two threads;
 * then an occlCommInitRank of a fresh id from both threads, and again in a
 * loop, each child checked with an all-reduce and destroyed concurrently.
 * Run with 2 devices per process.
 */
#include <pthread.h>
#include <string.h>

#include "mpitest.h"
#include "occltest.h"

enum { COUNT = 1024, ROUNDS = 3 };

typedef struct worker {
    int device, proc, nprocs;
    occlComm_t parent;
    occlUniqueId fresh[ROUNDS];
} worker;

/* An all-reduce of (rank + 1) over comm: every element must be the sum. */
static void check_sum(occlComm_t comm, int device, const char *what)
{
    int n, rank;
    CHECK_OCCL(occlCommCount(comm, &n));
    CHECK_OCCL(occlCommUserRank(comm, &rank));
    orStream_t s;
    float *buf, host[COUNT];
    CHECK_OR(orSetDevice(device));
    CHECK_OR(orStreamCreate(&s));
    CHECK_OR(orMalloc((void **)&buf, sizeof host));
    for (int i = 0; i < COUNT; i++)
        host[i] = (float)(rank + 1);
    CHECK_OR(orMemcpy(buf, host, sizeof host, orMemcpyHostToDevice));
    CHECK_OCCL(occlAllReduce(buf, buf, COUNT, occlFloat32, occlSum, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    CHECK_OR(orMemcpy(host, buf, sizeof host, orMemcpyDeviceToHost));
    float want = (float)(n * (n + 1) / 2);
    for (int i = 0; i < COUNT; i++)
        if (host[i] != want) {
            char detail[160];
            snprintf(detail, sizeof detail, "element %d is %g, expected %g (%d ranks)", i,
                     host[i], want, n);
            mpitest_fail(__FILE__, __LINE__, what, detail);
        }
    CHECK_OR(orFree(buf));
    CHECK_OR(orStreamDestroy(s));
}

static void split_and_check(worker *w, int color, int want_ranks, const char *what)
{
    occlComm_t child = NULL;
    CHECK_OCCL(occlCommSplit(w->parent, color, 0, &child, NULL));
    CHECK(child != NULL);
    int n;
    CHECK_OCCL(occlCommCount(child, &n));
    if (n != want_ranks)
        mpitest_fail(__FILE__, __LINE__, what, "child has the wrong rank count");
    check_sum(child, w->device, what);
    CHECK_OCCL(occlCommDestroy(child));
}

static void *work(void *arg)
{
    worker *w = arg;
    CHECK_OR(orSetDevice(w->device));
    for (int round = 0; round < ROUNDS; round++) {
        split_and_check(w, w->device, w->nprocs, "split by device");
        split_and_check(w, 0, 2 * w->nprocs, "split into one child");
        split_and_check(w, w->proc, 2, "split by process");
        /* A fresh id, one occlCommInitRank per thread (rank = parent's). */
        int rank;
        CHECK_OCCL(occlCommUserRank(w->parent, &rank));
        occlComm_t comm = NULL;
        CHECK_OCCL(occlCommInitRank(&comm, 2 * w->nprocs, w->fresh[round], rank));
        check_sum(comm, w->device, "init rank per thread");
        CHECK_OCCL(occlCommDestroy(comm));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    if (ci.deviceCount != 2)
        mpitest_fail(__FILE__, __LINE__, "needs 2 devices per process (OPENREG_DEVICES=2)", "");
    int nranks = 2 * ci.nranks;
    /* Ids: the parent's and one per round for the per-thread inits, each made
     * by a different process so that every process is a root in turn. */
    occlUniqueId ids[1 + ROUNDS];
    for (int i = 0; i <= ROUNDS; i++) {
        int root = i % ci.nranks;
        if (ci.rank == root)
            CHECK_OCCL(occlGetUniqueId(&ids[i]));
        MPI_Bcast(&ids[i], sizeof ids[i], MPI_BYTE, root, MPI_COMM_WORLD);
    }
    worker w[2];
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++) {
        w[d] = (worker){d, ci.rank, ci.nranks, NULL, {{{0}}}};
        memcpy(w[d].fresh, ids + 1, sizeof w[d].fresh);
        CHECK_OR(orSetDevice(d));
        CHECK_OCCL(occlCommInitRank(&w[d].parent, nranks, ids[0], 2 * ci.rank + d));
    }
    CHECK_OCCL(occlGroupEnd());

    pthread_t t[2];
    for (int d = 0; d < 2; d++)
        CHECK(pthread_create(&t[d], NULL, work, &w[d]) == 0);
    for (int d = 0; d < 2; d++)
        CHECK(pthread_join(t[d], NULL) == 0);

    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlCommDestroy(w[d].parent));
    mpitest_barrier();
    if (ci.rank == 0)
        printf("occl_split_threads: %d processes x 2 devices, %d rounds of splits and inits from "
               "one thread per device: ok\n", ci.nranks, ROUNDS);
    MPI_Finalize();
    return 0;
}
