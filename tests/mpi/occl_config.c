/*
 * occl_config.c - occlCommInitRankConfig and occlCommSplit with a config
 * across processes: a non-blocking init returns occlInProgress and
 * completes through occlCommGetAsyncError (rank 0 starts late, so the
 * others see it in progress); the communicator then all-reduces both FP8
 * types with every built-in op against a host reference, saturation
 * included; a split with a blocking config of its own and one inheriting the
 * parent's non-blocking config (so it returns occlInProgress) work; a bad
 * config fails locally with occlInvalidArgument before any exchange;
 * occlBcast moves FP8 bytes in place;
 * occlCommShrink called by the remaining ranks only (the last rank left
 * out, then rank 0, the usual bootstrap root, left out).
 */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "occltest.h"

#define N 64

/* The FP8 value of code b (the OCP formats: E4M3 mbits 3 bias 7, E5M2 2 15). */
static double fp8_value(unsigned char b, int mbits, int bias)
{
    int e = (b & 0x7f) >> mbits, m = b & ((1 << mbits) - 1);
    double v = e == 0 ? ldexp(m, 1 - bias - mbits) : ldexp((1 << mbits) + m, e - bias - mbits);
    return b & 0x80 ? -v : v;
}

/* The nearest code to x (ties to even), saturating; x is never NaN here. */
static unsigned char fp8_code(double x, int mbits, int bias, unsigned char maxcode)
{
    unsigned char s = signbit(x) ? 0x80 : 0, best = 0;
    double a = fabs(x);
    for (int c = 1; c <= maxcode; c++) {
        double dc = fabs(fp8_value((unsigned char)c, mbits, bias) - a);
        double db = fabs(fp8_value(best, mbits, bias) - a);
        if (dc < db || (dc == db && !(c & 1)))
            best = (unsigned char)c;
    }
    return s | best;
}

/* Every built-in op over one FP8 type on comm: inputs in {-1, -0.5, 0, 0.5,
 * 1} (every partial sum of up to 4 ranks has at most 3 significant bits, so
 * it is exact in both types whatever the order), products of {1, 2, -1},
 * and one element that saturates (the largest value from every rank). */
static void allreduce_fp8(occlComm_t comm, int rank, int nranks, occlDataType_t t, orStream_t s,
                          unsigned char *dev)
{
    int mbits = t == occlFloat8e4m3 ? 3 : 2, bias = t == occlFloat8e4m3 ? 7 : 15;
    unsigned char maxcode = t == occlFloat8e4m3 ? 0x7e : 0x7b;
    for (int op = occlSum; op < occlNumOps; op++) {
        unsigned char in[N], out[N];
        for (int i = 0; i < N; i++) {
            double v = op == occlProd ? (double)((int[]){1, 2, -1}[(i + rank) % 3])
                                      : ((i * 7 + rank * 3) % 5 - 2) * 0.5;
            in[i] = fp8_code(i == N - 1 ? 1e9 : v, mbits, bias, maxcode);
        }
        CHECK_OR(orMemcpy(dev, in, N, orMemcpyHostToDevice));
        CHECK_OCCL(occlAllReduce(dev, dev, N, t, (occlRedOp_t)op, comm, s));
        CHECK_OR(orStreamSynchronize(s));
        CHECK_OR(orMemcpy(out, dev, N, orMemcpyDeviceToHost));
        for (int i = 0; i < N; i++) {
            double acc = 0;
            for (int r = 0; r < nranks; r++) {
                double v = op == occlProd ? (double)((int[]){1, 2, -1}[(i + r) % 3])
                                          : ((i * 7 + r * 3) % 5 - 2) * 0.5;
                if (i == N - 1)
                    v = fp8_value(maxcode, mbits, bias);
                if (r == 0)
                    acc = v;
                else if (op == occlProd)
                    acc *= v;
                else if (op == occlMax)
                    acc = v > acc ? v : acc;
                else if (op == occlMin)
                    acc = v < acc ? v : acc;
                else
                    acc += v;
            }
            /* Avg: the sum rounded to the type (exact here), then divided. */
            double want_v = op == occlAvg
                                ? fp8_value(fp8_code(acc, mbits, bias, maxcode), mbits, bias) / nranks
                                : acc;
            unsigned char want = fp8_code(want_v, mbits, bias, maxcode);
            if (out[i] != want) {
                char detail[160];
                snprintf(detail, sizeof detail, "type %d op %d element %d: 0x%02x, expected 0x%02x",
                         (int)t, op, i, out[i], want);
                mpitest_fail(__FILE__, __LINE__, "FP8 all-reduce ", detail);
            }
        }
    }
}

static void wait_init(occlComm_t comm, int *saw_progress)
{
    occlResult_t async = occlInProgress;
    for (;;) {
        CHECK_OCCL(occlCommGetAsyncError(comm, &async));
        if (async != occlInProgress)
            break;
        *saw_progress = 1;
        usleep(1000);
    }
    if (async != occlSuccess)
        mpitest_fail(__FILE__, __LINE__, "non-blocking init: ", occlGetLastError(comm));
}

int main(void)
{
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    if (ci.nranks < 2)
        mpitest_fail(__FILE__, __LINE__, "needs at least 2 ranks", "");
    occlUniqueId id;
    if (ci.rank == 0)
        CHECK_OCCL(occlGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);

    /* A bad config: refused here and now, no peer involved. */
    occlConfig_t bad = OCCL_CONFIG_INITIALIZER;
    bad.magic = 1;
    occlComm_t none = NULL;
    if (occlCommInitRankConfig(&none, ci.nranks, id, ci.rank, &bad) != occlInvalidArgument || none)
        mpitest_fail(__FILE__, __LINE__, "a config with a bad magic was not refused", "");

    /* Non-blocking: rank 0 joins 300 ms late, so the others' init is in
     * progress for a while. */
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.commName = "world";
    if (ci.rank == 0)
        usleep(300000);
    occlComm_t comm = NULL;
    occlResult_t r = occlCommInitRankConfig(&comm, ci.nranks, id, ci.rank, &cfg);
    if (r != occlInProgress || !comm)
        mpitest_fail(__FILE__, __LINE__, "non-blocking init did not return occlInProgress: ",
                     occlGetErrorString(r));
    int saw_progress = 0;
    wait_init(comm, &saw_progress);
    if (ci.rank != 0 && !saw_progress)
        mpitest_fail(__FILE__, __LINE__, "the init never showed occlInProgress", "");

    orStream_t s;
    unsigned char *dev;
    CHECK_OR(orStreamCreate(&s));
    CHECK_OR(orMalloc((void **)&dev, N));
    allreduce_fp8(comm, ci.rank, ci.nranks, occlFloat8e4m3, s, dev);
    allreduce_fp8(comm, ci.rank, ci.nranks, occlFloat8e5m2, s, dev);

    /* occlBcast: in place, from the last rank, FP8 bytes unchanged (0x7f and
     * 0xff, the NaNs, among them). */
    {
        unsigned char in[N], out[N];
        for (int i = 0; i < N; i++)
            in[i] = (unsigned char)(ci.rank == ci.nranks - 1 ? i * 4 + 3 : 0);
        CHECK_OR(orMemcpy(dev, in, N, orMemcpyHostToDevice));
        CHECK_OCCL(occlBcast(dev, N, occlFloat8e4m3, ci.nranks - 1, comm, s));
        CHECK_OR(orStreamSynchronize(s));
        CHECK_OR(orMemcpy(out, dev, N, orMemcpyDeviceToHost));
        for (int i = 0; i < N; i++)
            if (out[i] != (unsigned char)(i * 4 + 3))
                mpitest_fail(__FILE__, __LINE__, "occlBcast: wrong byte", "");
    }

    /* Splits: one with a blocking config of its own, one inheriting the
     * parent's (non-blocking) config. Both halves by parity. */
    occlConfig_t child_cfg = OCCL_CONFIG_INITIALIZER;
    child_cfg.commName = "half";
    child_cfg.blocking = 1;
    occlComm_t half = NULL, inherit = NULL;
    CHECK_OCCL(occlCommSplit(comm, ci.rank % 2, ci.rank, &half, &child_cfg));
    r = occlCommSplit(comm, ci.rank % 2, -ci.rank, &inherit, NULL);
    if (r != occlInProgress || !inherit)
        mpitest_fail(__FILE__, __LINE__, "a split with the parent's non-blocking config did not "
                     "return occlInProgress: ", occlGetErrorString(r));
    wait_init(inherit, &saw_progress);
    int n = 0, rk = -1;
    CHECK_OCCL(occlCommCount(half, &n));
    CHECK_OCCL(occlCommUserRank(half, &rk));
    if (n != (ci.nranks + 1 - ci.rank % 2) / 2 || rk != ci.rank / 2)
        mpitest_fail(__FILE__, __LINE__, "split with a config: wrong size or rank", "");
    CHECK_OCCL(occlCommUserRank(inherit, &rk));
    if (rk != n - 1 - ci.rank / 2)
        mpitest_fail(__FILE__, __LINE__, "split inheriting the config: wrong rank", "");
    allreduce_fp8(half, ci.rank / 2, n, occlFloat8e4m3, s, dev);
    allreduce_fp8(inherit, n - 1 - ci.rank / 2, n, occlFloat8e5m2, s, dev);

    /* Shrink: the last rank is left out and does not call it (as a dead
     * rank would not); the others make a communicator of n - 1 ranks. */
    int gone = ci.nranks - 1;
    if (ci.rank != gone) {
        occlComm_t shrunk = NULL;
        occlConfig_t shrink_cfg = OCCL_CONFIG_INITIALIZER;
        shrink_cfg.commName = "survivors";
        CHECK_OCCL(occlCommShrink(comm, &gone, 1, &shrunk, &shrink_cfg, OCCL_SHRINK_DEFAULT));
        CHECK_OCCL(occlCommCount(shrunk, &n));
        CHECK_OCCL(occlCommUserRank(shrunk, &rk));
        if (n != ci.nranks - 1 || rk != ci.rank)
            mpitest_fail(__FILE__, __LINE__, "shrink: wrong size or rank", "");
        allreduce_fp8(shrunk, ci.rank, n, occlFloat8e4m3, s, dev);
        CHECK_OCCL(occlCommDestroy(shrunk));
    }
    /* Excluding rank 0: the bootstrap's root is then rank 1. */
    int first = 0;
    if (ci.rank != 0) {
        occlComm_t shrunk = NULL;
        /* The parent's non-blocking config is inherited: occlInProgress. */
        r = occlCommShrink(comm, &first, 1, &shrunk, NULL, OCCL_SHRINK_DEFAULT);
        if (r != occlInProgress || !shrunk)
            mpitest_fail(__FILE__, __LINE__, "shrink inheriting a non-blocking config: ",
                         occlGetErrorString(r));
        occlResult_t st = occlInProgress;
        while (st == occlInProgress) {
            CHECK_OCCL(occlCommGetAsyncError(shrunk, &st));
            usleep(1000);
        }
        if (st != occlSuccess)
            mpitest_fail(__FILE__, __LINE__, "shrink without rank 0: ", occlGetLastError(shrunk));
        CHECK_OCCL(occlCommUserRank(shrunk, &rk));
        if (rk != ci.rank - 1)
            mpitest_fail(__FILE__, __LINE__, "shrink without rank 0: wrong rank", "");
        allreduce_fp8(shrunk, ci.rank - 1, ci.nranks - 1, occlFloat8e5m2, s, dev);
        CHECK_OCCL(occlCommDestroy(shrunk));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OCCL(occlCommDestroy(half));
    CHECK_OCCL(occlCommDestroy(inherit));
    CHECK_OCCL(occlCommFinalize(comm));
    CHECK_OCCL(occlCommDestroy(comm));
    CHECK_OR(orFree(dev));
    CHECK_OR(orStreamDestroy(s));
    MPI_Barrier(MPI_COMM_WORLD);
    if (ci.rank == 0)
        printf("occl_config: %d ranks, non-blocking init, FP8 all-reduce of every op, splits with "
               "and without a config, shrinks: ok\n", ci.nranks);
    return 0;
}
