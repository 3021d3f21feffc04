/*
 * Plugins OCCL must refuse, one per build flag, written against NCCL's
 * plugin ABI (nccl_plugin_abi.h):
 *   BROKEN_NOSYM    a library with no plugin symbol in it
 *   BROKEN_TUNER_V9 a tuner of a version that does not exist (ncclTunerPlugin_v9)
 *   BROKEN_PROF_V1  a profiler of a version OCCL does not take (ncclProfiler_v1)
 *   BROKEN_INIT     a v4 tuner whose init fails
 *   BROKEN_NULLFN   a v4 tuner without its destroy function
 */
#include <stddef.h>

#include "nccl_plugin_abi.h"

static ncclResult_t init_v4(size_t nRanks, size_t nNodes, ncclDebugLogger_t logfn, void **ctx)
{
#ifdef BROKEN_INIT
    return ncclInternalError;
#else
    *ctx = NULL;
    return ncclSuccess;
#endif
}

static ncclResult_t get_v4(void *ctx, ncclFunc_t f, size_t nBytes, int numPipeOps, float **table, int numAlgo,
                           int numProto, int regBuff, int *nChannels)
{
    return ncclSuccess;
}

/* Unused by the variant whose destroy is NULL. */
__attribute__((unused)) static ncclResult_t destroy_v4(void *ctx) { return ncclSuccess; }

#if defined(BROKEN_NOSYM)
const ncclTuner_v4_t ncclTunerPlugin = {"misnamed", init_v4, get_v4, destroy_v4};
#elif defined(BROKEN_TUNER_V9)
const ncclTuner_v4_t ncclTunerPlugin_v9 = {"future", init_v4, get_v4, destroy_v4};
#elif defined(BROKEN_PROF_V1)
const ncclTuner_v4_t ncclProfiler_v1 = {"old", init_v4, get_v4, destroy_v4}; /* only its name is looked at */
#elif defined(BROKEN_INIT)
const ncclTuner_v4_t ncclTunerPlugin_v4 = {"init-fails", init_v4, get_v4, destroy_v4};
#elif defined(BROKEN_NULLFN)
const ncclTuner_v4_t ncclTunerPlugin_v4 = {"no-destroy", init_v4, get_v4, NULL};
#endif
