/*
 * occl_grow.c - occlCommGetUniqueId and occlCommGrow on 4 processes: world
 * ranks 0 and 1 form a communicator, which grows to 4 with world ranks 2
 * and 3 joining (in swapped order: world 2 becomes rank 3). The grown
 * communicator's ranks and an all-reduce are exact, the old one still
 * works. Every error NCCL documents, and OCCL's own (the id's rules), fails
 * with its result and reason; a non-blocking grow coordinated by rank 1
 * returns occlInProgress and completes through occlCommGetAsyncError.
 * --used-id: a new rank given an id already used up (see used_id).
 */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "occltest.h"

#define N 4099

/* call must fail with want, its reason naming why. */
#define EXPECT_FAIL(call, want, why)                                                     \
    do {                                                                                 \
        occlResult_t got_ = (call);                                                      \
        if (got_ != (want) || !strstr(occlGetLastError(NULL), (why))) {                  \
            char detail_[512];                                                           \
            snprintf(detail_, sizeof detail_, "%s (%s), wanted %s and \"%s\"",           \
                     occlGetErrorString(got_), occlGetLastError(NULL),                   \
                     occlGetErrorString(want), (why));                                   \
            mpitest_fail(__FILE__, __LINE__, #call " -> ", detail_);                     \
        }                                                                                \
    } while (0)

static void wait_ready(occlComm_t comm)
{
    occlResult_t state;
    do {
        CHECK_OCCL(occlCommGetAsyncError(comm, &state));
        if (state == occlInProgress)
            usleep(1000);
    } while (state == occlInProgress);
    CHECK(state == occlSuccess);
}

/* comm has nranks ranks, this one is rank, rank r is world rank world[r],
 * and an int32 all-reduce over it is exact. */
static void check_comm(occlComm_t comm, int nranks, int rank, const int *world, int myworld,
                       orStream_t s)
{
    int count, me;
    CHECK_OCCL(occlCommCount(comm, &count));
    CHECK_OCCL(occlCommUserRank(comm, &me));
    CHECK(count == nranks);
    CHECK(me == rank);
    int32_t *dev, *who;
    static int32_t host[N];
    int32_t whohost[8];
    CHECK_OR(orMalloc((void **)&dev, N * sizeof *dev));
    CHECK_OR(orMalloc((void **)&who, (size_t)nranks * sizeof *who));
    for (int i = 0; i < N; i++)
        host[i] = (rank + 1) * 1000 + i;
    CHECK_OR(orMemcpy(dev, host, sizeof host, orMemcpyHostToDevice));
    whohost[0] = myworld;
    CHECK_OR(orMemcpy(who + rank, whohost, sizeof *who, orMemcpyHostToDevice));
    CHECK_OCCL(occlAllReduce(dev, dev, N, occlInt32, occlSum, comm, s));
    CHECK_OCCL(occlAllGather(who + rank, who, 1, occlInt32, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    CHECK_OR(orMemcpy(host, dev, sizeof host, orMemcpyDeviceToHost));
    CHECK_OR(orMemcpy(whohost, who, (size_t)nranks * sizeof *who, orMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        CHECK(host[i] == nranks * (nranks + 1) / 2 * 1000 + nranks * i);
    for (int r = 0; r < nranks; r++)
        CHECK(whohost[r] == world[r]);
    CHECK_OR(orFree(dev));
    CHECK_OR(orFree(who));
}

/* --used-id: a new rank given an id an earlier exchange used up cannot
 * tell; no existing rank bootstraps it, so it fails with occlTimeout (at
 * this run's short OCCL_TIMEOUT_MS), and a reason that says why. */
static void used_id(int w, MPI_Comm side)
{
    occlUniqueId id, gid;
    occlComm_t a = NULL, g = NULL;
    if (w < 2) {
        if (w == 0)
            CHECK_OCCL(occlGetUniqueId(&id));
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, side);
        CHECK_OCCL(occlCommInitRank(&a, 2, id, w));
        if (w == 0)
            CHECK_OCCL(occlCommGetUniqueId(a, &gid));
        EXPECT_FAIL(occlCommGrow(a, 3, NULL, -1, &g, NULL), occlInvalidArgument,
                    "no existing rank passed the uniqueId");
    }
    MPI_Bcast(&gid, sizeof gid, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (w == 2)
        EXPECT_FAIL(occlCommGrow(NULL, 3, &gid, 2, &g, NULL), occlTimeout, "used up");
    CHECK(g == NULL);
    mpitest_barrier();
    if (a)
        CHECK_OCCL(occlCommDestroy(a));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    if (ci.nranks != 4)
        mpitest_fail(__FILE__, __LINE__, "needs 4 ranks", "");
    const int w = ci.rank;
    const bool existing = w < 2;
    MPI_Comm side; /* world 0-1 (the existing ranks), world 2-3 (the new ones) */
    MPI_Comm_split(MPI_COMM_WORLD, existing, w, &side);
    if (argc > 1 && strcmp(argv[1], "--used-id") == 0) {
        used_id(w, side);
        MPI_Comm_free(&side);
        if (w == 0)
            printf("occl_grow --used-id: a new rank with a used-up id: occlTimeout: ok\n");
        MPI_Finalize();
        return 0;
    }
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));

    /* The communicator to grow, and another of the same ranks (B); the new
     * ranks make one of their own (C). */
    occlUniqueId id, idb, plain, junk;
    occlComm_t a = NULL, b = NULL, c = NULL;
    if (w % 2 == 0) {
        CHECK_OCCL(occlGetUniqueId(&id));
        CHECK_OCCL(occlGetUniqueId(&idb));
    }
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, side);
    MPI_Bcast(&idb, sizeof idb, MPI_BYTE, 0, side);
    if (existing) {
        CHECK_OCCL(occlCommInitRank(&a, 2, id, w));
        CHECK_OCCL(occlCommInitRank(&b, 2, idb, w));
    } else {
        CHECK_OCCL(occlCommInitRank(&c, 2, id, w - 2));
    }
    CHECK_OCCL(occlGetUniqueId(&plain));
    memset(&junk, 0x5a, sizeof junk);

    /* ---- errors found by the calling rank alone ---- */
    occlUniqueId gid;
    occlComm_t g = (occlComm_t)&ci; /* must come back NULL from a failed grow */
    EXPECT_FAIL(occlCommGetUniqueId(NULL, &gid), occlInvalidArgument, "live");
    EXPECT_FAIL(occlCommGetUniqueId((occlComm_t)&ci, &gid), occlInvalidArgument, "live");
    EXPECT_FAIL(occlCommGrow(a, 4, NULL, existing ? -1 : w, NULL, NULL), occlInvalidArgument,
                "newcomm is NULL");
    EXPECT_FAIL(occlCommGrow(a, 0, NULL, -1, &g, NULL), occlInvalidArgument, "not positive");
    CHECK(g == NULL);
    if (existing) {
        EXPECT_FAIL(occlCommGetUniqueId(a, NULL), occlInvalidArgument, "uniqueId is NULL");
        EXPECT_FAIL(occlCommGrow(a, 2, NULL, -1, &g, NULL), occlInvalidArgument,
                    "not more than the communicator's 2");
        EXPECT_FAIL(occlCommGrow(a, 4, NULL, w, &g, NULL), occlInvalidArgument, "passes -1");
        EXPECT_FAIL(occlCommGrow(a, 4, &plain, -1, &g, NULL), occlInvalidArgument,
                    "made by occlGetUniqueId");
        EXPECT_FAIL(occlCommGrow(a, 4, &junk, -1, &g, NULL), occlInvalidArgument,
                    "not made by occlCommGetUniqueId");
        occlConfig_t bad = OCCL_CONFIG_INITIALIZER;
        bad.magic = 0;
        EXPECT_FAIL(occlCommGrow(a, 4, NULL, -1, &g, &bad), occlInvalidArgument,
                    "OCCL_CONFIG_INITIALIZER");
        CHECK(g == NULL);
        /* One id outstanding per communicator and rank. */
        if (w == 0) {
            CHECK_OCCL(occlCommGetUniqueId(a, &gid));
            occlUniqueId again;
            EXPECT_FAIL(occlCommGetUniqueId(a, &again), occlInvalidUsage, "outstanding");
        }
        /* Neither can a suspended one, until resumed, nor a finalized one. */
        CHECK_OCCL(occlCommSuspend(a, OCCL_SUSPEND_MEM));
        EXPECT_FAIL(occlCommGetUniqueId(a, &junk), occlInvalidUsage, "suspended");
        EXPECT_FAIL(occlCommGrow(a, 4, NULL, -1, &g, NULL), occlInvalidUsage, "suspended");
        CHECK_OCCL(occlCommResume(a));
        CHECK_OCCL(occlCommFinalize(b));
        EXPECT_FAIL(occlCommGetUniqueId(b, &junk), occlInvalidUsage, "finalized");
        EXPECT_FAIL(occlCommGrow(b, 4, NULL, -1, &g, NULL), occlInvalidUsage, "finalized");
    }
    MPI_Bcast(&gid, sizeof gid, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (!existing) {
        EXPECT_FAIL(occlCommGrow(NULL, 4, NULL, w, &g, NULL), occlInvalidArgument,
                    "uniqueId is NULL");
        EXPECT_FAIL(occlCommGrow(NULL, 4, &gid, -1, &g, NULL), occlInvalidArgument,
                    "is not in [0, nRanks = 4)");
        EXPECT_FAIL(occlCommGrow(NULL, 4, &gid, 4, &g, NULL), occlInvalidArgument,
                    "is not in [0, nRanks = 4)");
        EXPECT_FAIL(occlCommGrow(NULL, 4, &gid, 1, &g, NULL), occlInvalidArgument,
                    "an existing rank's");
        EXPECT_FAIL(occlCommGrow(NULL, 2, &gid, 1, &g, NULL), occlInvalidArgument,
                    "not more than the 2 ranks");
        EXPECT_FAIL(occlCommGrow(NULL, 4, &plain, w, &g, NULL), occlInvalidArgument,
                    "made by occlGetUniqueId");
        EXPECT_FAIL(occlCommGrow(NULL, 4, &junk, w, &g, NULL), occlInvalidArgument,
                    "not made by occlCommGetUniqueId");
        occlConfig_t bad = OCCL_CONFIG_INITIALIZER;
        bad.blocking = 2;
        EXPECT_FAIL(occlCommGrow(NULL, 4, &gid, w, &g, &bad), occlInvalidArgument, "blocking");
        /* A new rank passing a communicator: a dead one, or its own. */
        EXPECT_FAIL(occlCommGrow((occlComm_t)&ci, 4, &gid, w, &g, NULL), occlInvalidArgument,
                    "not a live communicator");
        EXPECT_FAIL(occlCommGrow(c, 4, &gid, w, &g, NULL), occlInvalidArgument, "passes -1");
        CHECK(g == NULL);
        EXPECT_FAIL(occlCommGetUniqueId(NULL, &junk), occlInvalidArgument, "live");
    }

    /* ---- errors the existing ranks find together (each exchange uses up
     * the id outstanding) ---- */
    if (existing) {
        EXPECT_FAIL(occlCommGrow(a, 4, NULL, -1, &g, NULL), occlInvalidArgument,
                    "no existing rank passed the uniqueId");
        /* gid was consumed by that exchange. */
        EXPECT_FAIL(occlCommGrow(a, 4, w == 0 ? &gid : NULL, -1, &g, NULL), occlInvalidArgument,
                    "used by an earlier grow");
        /* Another communicator's id. */
        occlComm_t b2 = NULL;
        if (w == 0)
            CHECK_OCCL(occlGetUniqueId(&idb));
        MPI_Bcast(&idb, sizeof idb, MPI_BYTE, 0, side);
        CHECK_OCCL(occlCommInitRank(&b2, 2, idb, w));
        if (w == 0)
            CHECK_OCCL(occlCommGetUniqueId(b2, &gid));
        EXPECT_FAIL(occlCommGrow(a, 4, w == 0 ? &gid : NULL, -1, &g, NULL), occlInvalidArgument,
                    "another communicator's");
        CHECK_OCCL(occlCommDestroy(b2));
        /* Existing ranks disagreeing on nRanks. */
        if (w == 0)
            CHECK_OCCL(occlCommGetUniqueId(a, &gid));
        EXPECT_FAIL(occlCommGrow(a, w == 0 ? 4 : 3, w == 0 ? &gid : NULL, -1, &g, NULL),
                    occlInvalidArgument, "different nRanks");
        /* Two coordinators, each with its own id. */
        CHECK_OCCL(occlCommGetUniqueId(a, &gid));
        EXPECT_FAIL(occlCommGrow(a, 4, &gid, -1, &g, NULL), occlInvalidArgument,
                    "different uniqueIds");
        CHECK(g == NULL);
        /* The communicator is unharmed. */
        const int world_a[2] = {0, 1};
        check_comm(a, 2, w, world_a, w, s);
    }

    /* ---- a grow: world 2 and 3 join as ranks 3 and 2 ---- */
    if (w == 0)
        CHECK_OCCL(occlCommGetUniqueId(a, &gid));
    MPI_Bcast(&gid, sizeof gid, MPI_BYTE, 0, MPI_COMM_WORLD);
    const int world_g[4] = {0, 1, 3, 2};
    const int rank_g[4] = {0, 1, 3, 2}; /* by world rank */
    occlComm_t grown = NULL;
    if (existing)
        CHECK_OCCL(occlCommGrow(a, 4, w == 0 ? &gid : NULL, -1, &grown, NULL));
    else
        CHECK_OCCL(occlCommGrow(NULL, 4, &gid, rank_g[w], &grown, NULL));
    check_comm(grown, 4, rank_g[w], world_g, w, s);
    if (existing) {
        /* The parent still works, and its id was consumed. */
        const int world_a[2] = {0, 1};
        check_comm(a, 2, w, world_a, w, s);
        EXPECT_FAIL(occlCommGrow(a, 4, w == 0 ? &gid : NULL, -1, &g, NULL), occlInvalidArgument,
                    "used by an earlier grow");
        CHECK(g == NULL);
    }

    /* ---- non-blocking, coordinated by rank 1 (any existing rank may be) ---- */
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.commName = "grown";
    if (w == 1)
        CHECK_OCCL(occlCommGetUniqueId(a, &gid));
    MPI_Bcast(&gid, sizeof gid, MPI_BYTE, 1, MPI_COMM_WORLD);
    occlComm_t nb = NULL;
    occlResult_t r = existing ? occlCommGrow(a, 4, w == 1 ? &gid : NULL, -1, &nb, &cfg)
                              : occlCommGrow(NULL, 4, &gid, w, &nb, &cfg);
    CHECK(r == occlInProgress && nb != NULL);
    wait_ready(nb);
    const int world_nb[4] = {0, 1, 2, 3};
    check_comm(nb, 4, w, world_nb, w, s);

    check_comm(grown, 4, rank_g[w], world_g, w, s); /* both grown ones work side by side */
    CHECK_OCCL(occlCommDestroy(nb));
    CHECK_OCCL(occlCommDestroy(grown));
    if (existing) {
        CHECK_OCCL(occlCommDestroy(a));
        CHECK_OCCL(occlCommDestroy(b));
    } else {
        CHECK_OCCL(occlCommDestroy(c));
    }
    CHECK_OR(orStreamDestroy(s));
    MPI_Comm_free(&side);
    mpitest_barrier();
    if (w == 0)
        printf("occl_grow: 2 ranks grown to 4 (blocking, non-blocking), every error: ok\n");
    MPI_Finalize();
    return 0;
}
