/*
 * occltest.h - mpitest.h for programs that call OCCL: a failed OCCL call
 * prints its result and OCCL's reason, then aborts the job.
 */
#ifndef OR_OCCLTEST_H
#define OR_OCCLTEST_H

#include <stdlib.h>

#include "mpitest.h"
#include "occl.h"

#define CHECK_OCCL(call)                                                                 \
    do {                                                                                 \
        occlResult_t check_occl_ = (call);                                               \
        if (check_occl_ != occlSuccess) {                                                \
            char detail_[512];                                                           \
            snprintf(detail_, sizeof detail_, "%s (%s)", occlGetErrorString(check_occl_), \
                     occlGetLastError(NULL));                                            \
            mpitest_fail(__FILE__, __LINE__, #call " -> ", detail_);                     \
        }                                                                                \
    } while (0)

/* A communicator of every rank of the job, on the current device: rank 0
 * makes the id and broadcasts it, as NCCL's examples do. */
static inline occlComm_t occltest_comm_world(const orClusterInfo *ci)
{
    occlUniqueId id;
    if (ci->rank == 0)
        CHECK_OCCL(occlGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    occlComm_t comm;
    CHECK_OCCL(occlCommInitRank(&comm, ci->nranks, id, ci->rank));
    return comm;
}

/* Every one of the n floats at dev (device memory) is want; else the job
 * fails at the caller's line, naming the first element that is not. */
#define EXPECT_FLOATS(dev, n, want, what) occltest_expect_floats((dev), (n), (want), (what), __FILE__, __LINE__)
static inline void occltest_expect_floats(const float *dev, size_t n, float want, const char *what,
                                          const char *file, int line)
{
    float *host = malloc(n * sizeof *host);
    if (!host)
        mpitest_fail(file, line, what, "out of memory to check the result");
    CHECK_OR(orMemcpy(host, dev, n * sizeof *host, orMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (host[i] != want) {
            char detail[128];
            snprintf(detail, sizeof detail, "element %zu is %g, expected %g", i, host[i], want);
            free(host);
            mpitest_fail(file, line, what, detail);
        }
    free(host);
}

#endif
