/*
 * A tuner plugin written only against NCCL's plugin ABI (nccl_plugin_abi.h,
 * as NCCL's plugins/tuner/example is against NCCL's headers): it forces the
 * algorithm named by TEST_TUNER_ALGO ("RING", "TREE", "COLLNET_DIRECT",
 * "COLLNET_CHAIN", "NVLS") with the protocol TEST_TUNER_PROTO (default
 * "SIMPLE") wherever the core offers it ("KEEP": the v5 build leaves the
 * core's table as it is), and at finalize
 * appends what it was asked to the file TEST_TUNER_LOG:
 *   tuner v<N> nranks=<n> nnodes=<n> calls=<n> funcs=<ncclFunc_t ids>
 * Built as the v5 interface, as v2 with -DTUNER_V2, or as v6 and v5 with
 * -DTUNER_V6.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_plugin_abi.h"

static const char *const algos[NCCL_NUM_ALGORITHMS] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN",
                                                       "NVLS", "NVLS_TREE", "PAT"};

typedef struct {
    int algo, proto;
    size_t nranks, nnodes;
    int calls;
    char funcs[256];
} context;

static ncclResult_t make(void **ctx, size_t nRanks, size_t nNodes, ncclDebugLogger_t logfn)
{
    const char *want = getenv("TEST_TUNER_ALGO");
    int algo = want && strcmp(want, "KEEP") == 0 ? NCCL_NUM_ALGORITHMS : -1;
    for (int a = 0; want && a < NCCL_NUM_ALGORITHMS; a++)
        if (strcmp(want, algos[a]) == 0)
            algo = a;
    if (algo < 0)
        return ncclInvalidArgument;
    context *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    c->algo = algo;
    /* TEST_TUNER_PROTO: "LL", "LL128" or (the default) "SIMPLE". */
    const char *proto = getenv("TEST_TUNER_PROTO");
    c->proto = !proto || strcmp(proto, "SIMPLE") == 0 ? NCCL_PROTO_SIMPLE
               : strcmp(proto, "LL128") == 0           ? NCCL_PROTO_LL128
               : strcmp(proto, "LL") == 0              ? NCCL_PROTO_LL
                                                       : -1;
    if (c->proto < 0) {
        free(c);
        return ncclInvalidArgument;
    }
    c->nranks = nRanks;
    c->nnodes = nNodes;
    logfn(NCCL_LOG_INFO, NCCL_TUNING, __FILE__, __LINE__, "test tuner: forcing %s on %zu ranks", want, nRanks);
    *ctx = c;
    return ncclSuccess;
}

static void note(context *c, ncclFunc_t f)
{
    size_t len = strlen(c->funcs);
    if (len + 4 < sizeof c->funcs)
        snprintf(c->funcs + len, sizeof c->funcs - len, "%s%d", len ? "," : "", (int)f);
    c->calls++;
}

static ncclResult_t finish(void *ctx, int version)
{
    context *c = ctx;
    const char *path = getenv("TEST_TUNER_LOG");
    if (path) {
        char line[400];
        int n = snprintf(line, sizeof line, "tuner v%d nranks=%zu nnodes=%zu calls=%d funcs=%s\n", version,
                         c->nranks, c->nnodes, c->calls, c->funcs);
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            if (write(fd, line, (size_t)n) != n)
                n = -1;
            close(fd);
        }
    }
    free(c);
    return ncclSuccess;
}

#ifdef TUNER_V2
static ncclResult_t init_v2(size_t nRanks, size_t nNodes, ncclDebugLogger_t logfn, void **ctx)
{
    return make(ctx, nRanks, nNodes, logfn);
}

static ncclResult_t get_v2(void *ctx, ncclFunc_t f, size_t nBytes, int collNetSupport, int nvlsSupport,
                           int numPipeOps, int *algorithm, int *protocol, int *nChannels)
{
    context *c = ctx;
    note(c, f);
    *algorithm = c->algo;
    *protocol = c->proto;
    return ncclSuccess;
}

static ncclResult_t destroy_v2(void *ctx) { return finish(ctx, 2); }

const ncclTuner_v2_t ncclTunerPlugin_v2 = {"test-force-v2", init_v2, get_v2, destroy_v2};
#else
static ncclResult_t init_v5(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logfn,
                            ncclNvlDomainInfo_v5_t *nvl, ncclTunerConstants_v5_t *constants)
{
    if (!nvl || nvl->nNvlDomains != (int)nNodes)
        return ncclInternalError;
    return make(ctx, nRanks, nNodes, logfn);
}

static ncclResult_t get_v5(void *ctx, ncclFunc_t f, size_t nBytes, int numPipeOps, float **collCostTable,
                           int numAlgo, int numProto, int regBuff, int *nChannels)
{
    context *c = ctx;
    note(c, f);
    /* As NCCL's example: the table is float[numAlgo][numProto]. */
    float(*table)[NCCL_NUM_PROTOCOLS] = (float(*)[NCCL_NUM_PROTOCOLS])collCostTable;
    if (numAlgo != NCCL_NUM_ALGORITHMS || numProto != NCCL_NUM_PROTOCOLS)
        return ncclInternalError;
    if (c->algo < NCCL_NUM_ALGORITHMS && table[c->algo][c->proto] != NCCL_ALGO_PROTO_IGNORE)
        table[c->algo][c->proto] = 0.0f;
    return ncclSuccess;
}

static ncclResult_t finalize_v5(void *ctx) { return finish(ctx, 5); }

const ncclTuner_v5_t ncclTunerPlugin_v5 = {"test-force", init_v5, get_v5, finalize_v5};

#ifdef TUNER_V6
/* Both v6 and v5, as NCCL's example: the newest must be the one used. */
static ncclResult_t finalize_v6(void *ctx) { return finish(ctx, 6); }

const ncclTuner_v6_t ncclTunerPlugin_v6 = {"test-force-v6", init_v5, get_v5, finalize_v6, NULL};
#endif
#endif
