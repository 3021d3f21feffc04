/*
 * collectives/nccl_plugin_abi.h - the binary interface of NCCL's tuner and
 * profiler plugins, so that a plugin built for NCCL loads into OCCL as it is.
 *
 * This mirrors NCCL's published plugin ABI (NVIDIA/nccl,
 * src/include/plugin/nccl_tuner.h, tuner/tuner_v2..v6.h, nccl_profiler.h,
 * profiler/profiler_v4..v6.h, nccl_common.h and nccl.h): the struct
 * layouts, the exported symbol names and the constants below are NCCL's
 * values and must not change. It is written in C (NCCL's headers are C++)
 * and holds only what a tuner or profiler plugin sees; a plugin may include
 * this file instead of NCCL's headers.
 */
#ifndef NCCL_PLUGIN_ABI_H
#define NCCL_PLUGIN_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* nccl.h */
typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclTimeout = 8,
    ncclNumResults = 9
} ncclResult_t;

/* nccl_common.h: the logger NCCL hands to plugins. */
typedef enum {
    NCCL_LOG_NONE = 0,
    NCCL_LOG_VERSION = 1,
    NCCL_LOG_WARN = 2,
    NCCL_LOG_INFO = 3,
    NCCL_LOG_ABORT = 4,
    NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
    NCCL_INIT = 0x1,
    NCCL_COLL = 0x2,
    NCCL_P2P = 0x4,
    NCCL_SHM = 0x8,
    NCCL_NET = 0x10,
    NCCL_GRAPH = 0x20,
    NCCL_TUNING = 0x40,
    NCCL_ENV = 0x80,
    NCCL_ALLOC = 0x100,
    NCCL_CALL = 0x200,
    NCCL_PROXY = 0x400,
    NCCL_NVLS = 0x800,
    NCCL_BOOTSTRAP = 0x1000,
    NCCL_REG = 0x2000,
    NCCL_PROFILE = 0x4000,
    NCCL_RAS = 0x8000,
    NCCL_DESTROY = 0x10000,
    NCCL_ALLOC_HOST = 0x20000,
    NCCL_ALL = ~0
} ncclDebugLogSubSys;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                                  const char *fmt, ...);

#define NCCL_NUM_FUNCTIONS 5 /* the collectives a tuner is asked about */
typedef enum {
    ncclFuncBroadcast = 0,
    ncclFuncReduce = 1,
    ncclFuncAllGather = 2,
    ncclFuncReduceScatter = 3,
    ncclFuncAllReduce = 4,
    ncclFuncSendRecv = 5,
    ncclFuncSend = 6,
    ncclFuncRecv = 7,
    ncclFuncAlltoAll = 8,
    ncclFuncScatter = 9,
    ncclFuncGather = 10,
    ncclFuncAllGatherV = 11,
    ncclFuncPutSignal = 12,
    ncclFuncSignal = 13,
    ncclFuncWaitSignal = 14,
    ncclNumFuncs = 15
} ncclFunc_t;

/* ---- tuner (nccl_tuner.h) ------------------------------------------------------ */

#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_NUM_ALGORITHMS 7

#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_NUM_PROTOCOLS 3

/* A cost-table entry the core does not offer (the plugin must not pick it). */
#define NCCL_ALGO_PROTO_IGNORE -1.0

#define NCCL_HW_NVLINK 0
#define NCCL_HW_PCI 1
#define NCCL_HW_NET 2
#define NCCL_NUM_HW_LINKS 3

#define NCCL_VOLTA_COMPCAP_IDX 0
#define NCCL_AMPERE_COMPCAP_IDX 1
#define NCCL_HOPPER_COMPCAP_IDX 2
#define NCCL_BLACKWELL_COMPCAP_IDX 3
#define NCCL_NUM_COMPCAPS 4

#define NCCL_TUNING_SCALE_1NODE 0
#define NCCL_TUNING_SCALE_2NODES 1
#define NCCL_TUNING_SCALE_4NODES 2
#define NCCL_NUM_TUNING_SCALES 3

typedef struct {
    int nNvlDomains;          /* number of NVLink domains */
    int minRanksPerNvlDomain; /* fewest ranks in one of them */
    int maxRanksPerNvlDomain; /* most ranks in one of them */
} ncclNvlDomainInfo_v5_t;
typedef ncclNvlDomainInfo_v5_t ncclNvlDomainInfo_v6_t;

typedef struct {
    double baseLatencies[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
    double hwLatencies[NCCL_NUM_HW_LINKS][NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
    double llMaxBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
    double perChMaxRingLL128Bws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
    double perChMaxTreeLL128Bws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
    double perChMaxTreeBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
    double perChMaxNVLSTreeBws[NCCL_NUM_COMPCAPS][NCCL_NUM_TUNING_SCALES];
} ncclTunerConstants_v5_t;
typedef ncclTunerConstants_v5_t ncclTunerConstants_v6_t;

/* collCostTable points to float[numAlgo][numProto] (NCCL passes it as
 * float**): the plugin lowers the entry it wants picked. */
typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                         ncclNvlDomainInfo_v6_t *nvlDomainInfo, ncclTunerConstants_v6_t *constants);
    ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                float **collCostTable, int numAlgo, int numProto, int regBuff, int *nChannels);
    ncclResult_t (*finalize)(void *context);
    ncclResult_t (*getChunkSize)(void *context, ncclFunc_t collType, size_t nBytes, int algo, int proto,
                                 int nChannels, size_t *chunkSize);
} ncclTuner_v6_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                         ncclNvlDomainInfo_v5_t *nvlDomainInfo, ncclTunerConstants_v5_t *constants);
    ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                float **collCostTable, int numAlgo, int numProto, int regBuff, int *nChannels);
    ncclResult_t (*finalize)(void *context);
} ncclTuner_v5_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
    ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                float **collCostTable, int numAlgo, int numProto, int regBuff, int *nChannels);
    ncclResult_t (*destroy)(void *context);
} ncclTuner_v4_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
    ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                float **collCostTable, int numAlgo, int numProto, int *nChannels);
    ncclResult_t (*destroy)(void *context);
} ncclTuner_v3_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
    ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                                int nvlsSupport, int numPipeOps, int *algorithm, int *protocol, int *nChannels);
    ncclResult_t (*destroy)(void *context);
} ncclTuner_v2_t;

/* ---- profiler (nccl_profiler.h) ---------------------------------------------------- */

enum {
    ncclProfileGroup = (1 << 0),
    ncclProfileColl = (1 << 1),
    ncclProfileP2p = (1 << 2),
    ncclProfileProxyOp = (1 << 3),
    ncclProfileProxyStep = (1 << 4),
    ncclProfileProxyCtrl = (1 << 5),
    ncclProfileKernelCh = (1 << 6),
    ncclProfileNetPlugin = (1 << 7),
    ncclProfileGroupApi = (1 << 8),
    ncclProfileCollApi = (1 << 9),
    ncclProfileP2pApi = (1 << 10),
    ncclProfileKernelLaunch = (1 << 11),
    ncclProfileCeColl = (1 << 12),
    ncclProfileCeSync = (1 << 13),
    ncclProfileCeBatch = (1 << 14),
};

typedef enum {
    ncclProfilerProxyOpSendPosted = 0,
    ncclProfilerProxyOpSendRemFifoWait = 1,
    ncclProfilerProxyOpSendTransmitted = 2,
    ncclProfilerProxyOpSendDone = 3,
    ncclProfilerProxyOpRecvPosted = 4,
    ncclProfilerProxyOpRecvReceived = 5,
    ncclProfilerProxyOpRecvTransmitted = 6,
    ncclProfilerProxyOpRecvDone = 7,
    ncclProfilerProxyOpInProgress_v4 = 19,
    ncclProfilerProxyStepSendGPUWait = 8,
    ncclProfilerProxyStepSendPeerWait_v4 = 20,
    ncclProfilerProxyStepSendWait = 9,
    ncclProfilerProxyStepRecvWait = 10,
    ncclProfilerProxyStepRecvFlushWait = 11,
    ncclProfilerProxyStepRecvGPUWait = 12,
    ncclProfilerProxyCtrlIdle = 13,
    ncclProfilerProxyCtrlActive = 14,
    ncclProfilerProxyCtrlSleep = 15,
    ncclProfilerProxyCtrlWakeup = 16,
    ncclProfilerProxyCtrlAppend = 17,
    ncclProfilerProxyCtrlAppendEnd = 18,
    ncclProfilerNetPluginUpdate = 21,
    ncclProfilerKernelChStop = 22,
    ncclProfilerGroupStartApiStop = 23,
    ncclProfilerGroupEndApiStart = 24,
    ncclProfilerCeCollStart = 25,
    ncclProfilerCeCollComplete = 26,
    ncclProfilerCeSyncStart = 27,
    ncclProfilerCeSyncComplete = 28,
    ncclProfilerCeBatchStart = 29,
    ncclProfilerCeBatchComplete = 30,
} ncclProfilerEventState_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v4_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v5_t;
typedef ncclProfilerEventState_t ncclProfilerEventState_v6_t;

typedef pid_t ncclPid_t;

/* The v5 descriptor's union, which v6 extends with copy-engine events. */
#define NCCL_PROFILER_DESCR_V5_UNION                                                                      \
    struct {                                                                                          \
        bool graphCaptured;                                                                           \
        int groupDepth;                                                                               \
    } groupApi;                                                                                       \
    struct {                                                                                          \
        const char *func;                                                                             \
        size_t count;                                                                                 \
        const char *datatype;                                                                         \
        int root;                                                                                     \
        void *stream;                                                                                 \
        bool graphCaptured;                                                                           \
    } collApi;                                                                                        \
    struct {                                                                                          \
        const char *func;                                                                             \
        size_t count;                                                                                 \
        const char *datatype;                                                                         \
        void *stream;                                                                                 \
        bool graphCaptured;                                                                           \
    } p2pApi;                                                                                         \
    struct {                                                                                          \
        void *stream;                                                                                 \
    } kernelLaunch;                                                                                   \
    struct {                                                                                          \
        uint64_t seqNumber;                                                                           \
        const char *func;                                                                             \
        void const *sendBuff;                                                                         \
        void *recvBuff;                                                                               \
        size_t count;                                                                                 \
        int root;                                                                                     \
        const char *datatype;                                                                         \
        uint8_t nChannels;                                                                            \
        uint8_t nWarps;                                                                               \
        const char *algo;                                                                             \
        const char *proto;                                                                            \
        void *parentGroup;                                                                            \
    } coll;                                                                                           \
    struct {                                                                                          \
        const char *func;                                                                             \
        void *buff;                                                                                   \
        const char *datatype;                                                                         \
        size_t count;                                                                                 \
        int peer;                                                                                     \
        uint8_t nChannels;                                                                            \
        void *parentGroup;                                                                            \
    } p2p;                                                                                            \
    struct {                                                                                          \
        ncclPid_t pid;                                                                                \
        uint8_t channelId;                                                                            \
        int peer;                                                                                     \
        int nSteps;                                                                                   \
        int chunkSize;                                                                                \
        int isSend;                                                                                   \
    } proxyOp;                                                                                        \
    struct {                                                                                          \
        int step;                                                                                     \
    } proxyStep;                                                                                      \
    struct {                                                                                          \
        uint8_t channelId;                                                                            \
        uint64_t pTimer;                                                                              \
    } kernelCh;                                                                                       \
    struct {                                                                                          \
        int64_t id;                                                                                   \
        void *data;                                                                                   \
    } netPlugin;

typedef struct {
    uint64_t type; /* one ncclProfile* bit */
    void *parentObj;
    int rank;
    union {
        NCCL_PROFILER_DESCR_V5_UNION
    };
} ncclProfilerEventDescr_v5_t;

typedef struct {
    uint64_t type;
    void *parentObj;
    int rank;
    union {
        NCCL_PROFILER_DESCR_V5_UNION
        struct {
            uint64_t seqNumber;
            const char *func;
            void const *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            const char *datatype;
            const char *syncStrategy;
            bool intraBatchSync;
            uint32_t batchSize;
            uint32_t numBatches;
            uint32_t ceSeqNum;
            void *stream;
        } ceColl;
        struct {
            bool isComplete;
            int nRanks;
        } ceCollSync;
        struct {
            int numOps;
            size_t totalBytes;
            bool useIntraSync;
        } ceCollBatch;
    };
} ncclProfilerEventDescr_v6_t;

typedef struct {
    uint8_t type; /* v4: one byte */
    void *parentObj;
    int rank;
    union {
        struct {
            uint64_t seqNumber;
            const char *func;
            void const *sendBuff;
            void *recvBuff;
            size_t count;
            int root;
            const char *datatype;
            uint8_t nChannels;
            uint8_t nWarps;
            const char *algo;
            const char *proto;
        } coll;
        struct {
            const char *func;
            void *buff;
            const char *datatype;
            size_t count;
            int peer;
            uint8_t nChannels;
        } p2p;
        struct {
            ncclPid_t pid;
            uint8_t channelId;
            int peer;
            int nSteps;
            int chunkSize;
            int isSend;
        } proxyOp;
        struct {
            int step;
        } proxyStep;
        struct {
            uint8_t channelId;
            uint64_t pTimer;
        } kernelCh;
        struct {
            int64_t id;
            void *data;
        } netPlugin;
    };
} ncclProfilerEventDescr_v4_t;

typedef union {
    struct {
        size_t transSize;
    } proxyStep;
    struct {
        int appendedProxyOps;
    } proxyCtrl;
    struct {
        void *data;
    } netPlugin;
    struct {
        uint64_t pTimer;
    } kernelCh;
} ncclProfilerEventStateArgs_v4_t;
typedef ncclProfilerEventStateArgs_v4_t ncclProfilerEventStateArgs_v5_t;
typedef ncclProfilerEventStateArgs_v4_t ncclProfilerEventStateArgs_v6_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                         int nranks, int rank, ncclDebugLogger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v6_t *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_v6_t eState,
                                     ncclProfilerEventStateArgs_v6_t *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ncclProfiler_v6_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName, int nNodes,
                         int nranks, int rank, ncclDebugLogger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v5_t *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_v5_t eState,
                                     ncclProfilerEventStateArgs_v5_t *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ncclProfiler_v5_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, int *eActivationMask, const char *commName, uint64_t commHash, int nNodes,
                         int nranks, int rank, ncclDebugLogger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ncclProfilerEventDescr_v4_t *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, ncclProfilerEventState_v4_t eState,
                                     ncclProfilerEventStateArgs_v4_t *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ncclProfiler_v4_t;

#endif
