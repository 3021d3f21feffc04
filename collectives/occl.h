/*
 * occl.h - OCCL, the OpenReg Cluster collective communication library.
 *
 * NCCL's API with the occl prefix and orStream_t for the stream: the same
 * functions, argument order, values and semantics, so NCCL code ports by
 * renaming. Collectives are enqueued on a stream of the communicator's
 * device and return at once; completion is observed through the stream
 * (orStreamSynchronize, events), as NCCL's is through CUDA streams.
 */
#ifndef OCCL_H
#define OCCL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include <openreg.h>

#define OCCL_MAJOR 2
#define OCCL_MINOR 31
#define OCCL_PATCH 0
#define OCCL_SUFFIX ""
/* NCCL's version arithmetic (before 2.9 the minor counted hundreds). */
#define OCCL_VERSION(X, Y, Z)                                                                     \
    (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define OCCL_VERSION_CODE OCCL_VERSION(OCCL_MAJOR, OCCL_MINOR, OCCL_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct occlComm *occlComm_t;
#define OCCL_COMM_NULL NULL

#define OCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[OCCL_UNIQUE_ID_BYTES];
} occlUniqueId;

/* Results, with NCCL's values; occlTimeout is OCCL's own. */
typedef enum {
    occlSuccess = 0,
    occlUnhandledDeviceError = 1, /* a runtime (openreg) call failed */
    occlSystemError = 2,
    occlInternalError = 3,
    occlInvalidArgument = 4,
    occlInvalidUsage = 5,
    occlRemoteError = 6,
    occlInProgress = 7,
    occlTimeout = 8,
    occlNumResults = 9
} occlResult_t;

typedef enum {
    occlInt8 = 0,
    occlChar = 0,
    occlUint8 = 1,
    occlInt32 = 2,
    occlInt = 2,
    occlUint32 = 3,
    occlInt64 = 4,
    occlUint64 = 5,
    occlFloat16 = 6,
    occlHalf = 6,
    occlFloat32 = 7,
    occlFloat = 7,
    occlFloat64 = 8,
    occlDouble = 8,
    occlBfloat16 = 9,
    occlFloat8e4m3 = 10, /* OCP FP8 E4M3: no Inf, NaN S.1111.111, max 448 */
    occlFloat8e5m2 = 11, /* OCP FP8 E5M2: IEEE-like, max 57344 */
    occlNumTypes = 12
} occlDataType_t;

typedef enum {
    occlSum = 0,
    occlProd = 1,
    occlMax = 2,
    occlMin = 3,
    occlAvg = 4,
    occlNumOps = 5, /* ops made by occlRedOpCreatePreMulSum come after */
    occlMaxRedOp = 0x7fffffff
} occlRedOp_t;

typedef enum {
    occlScalarDevice = 0,        /* the scalar is in device memory, read at each use */
    occlScalarHostImmediate = 1  /* the scalar is read once, at creation */
} occlScalarResidence_t;

/* Communicator configuration: NCCL 2.31's ncclConfig_t, field for field
 * (same layout, so the header fields size, magic, version come first).
 * Assign OCCL_CONFIG_INITIALIZER, then set the fields wanted; a field left
 * at OCCL_CONFIG_UNDEF_INT / OCCL_CONFIG_UNDEF_PTR takes its default. What
 * each field does in OCCL is in docs/occl.md ("NCCL 2.31 API"). */
#define OCCL_CONFIG_UNDEF_INT INT_MIN
#define OCCL_CONFIG_UNDEF_PTR NULL
#define OCCL_API_MAGIC 0xcafebeef
#define OCCL_CTA_POLICY_DEFAULT 0x00
#define OCCL_CTA_POLICY_EFFICIENCY 0x01
#define OCCL_CTA_POLICY_ZERO 0x02

typedef struct occlConfig_v23000 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char *netName;
    int splitShare;
    int trafficClass;
    const char *commName;
    int collnetEnable;
    int CTAPolicy;
    int shrinkShare;
    int nvlsCTAs;
    int nChannelsPerNetPeer;
    int nvlinkCentricSched;
    int graphUsageMode;
    int numRmaCtx;
    int maxP2pPeers;
    int graphStreamOrdering;
} occlConfig_t;

/* The NCCL version whose ncclConfig_t occlConfig_t matches. A config whose
 * version is older has the fields NCCL added later reset to their defaults,
 * as NCCL treats a config of an older header. */
#define OCCL_CONFIG_VERSION 23100
#define OCCL_CONFIG_INITIALIZER                                                                   \
    {                                                                                             \
        sizeof(occlConfig_t), OCCL_API_MAGIC, OCCL_CONFIG_VERSION, OCCL_CONFIG_UNDEF_INT,         \
            OCCL_CONFIG_UNDEF_INT, OCCL_CONFIG_UNDEF_INT, OCCL_CONFIG_UNDEF_INT,                  \
            OCCL_CONFIG_UNDEF_PTR, OCCL_CONFIG_UNDEF_INT, OCCL_CONFIG_UNDEF_INT,                  \
            OCCL_CONFIG_UNDEF_PTR, OCCL_CONFIG_UNDEF_INT, OCCL_CONFIG_UNDEF_INT,                  \
            OCCL_CONFIG_UNDEF_INT, OCCL_CONFIG_UNDEF_INT, OCCL_CONFIG_UNDEF_INT,                  \
            OCCL_CONFIG_UNDEF_INT, OCCL_CONFIG_UNDEF_INT, OCCL_CONFIG_UNDEF_INT,                  \
            OCCL_CONFIG_UNDEF_INT, OCCL_CONFIG_UNDEF_INT                                          \
    }

/* Versions and errors */
occlResult_t occlGetVersion(int *version);
const char *occlGetErrorString(occlResult_t result);
/* The reason of the last failure of this thread's calls (or comm's), as text. */
const char *occlGetLastError(occlComm_t comm);

/* Communicators */
occlResult_t occlGetUniqueId(occlUniqueId *uniqueId);
occlResult_t occlCommInitRank(occlComm_t *comm, int nranks, occlUniqueId commId, int rank);
/* occlCommInitRank with a configuration (NULL: the defaults). */
occlResult_t occlCommInitRankConfig(occlComm_t *comm, int nranks, occlUniqueId commId, int rank,
                                    occlConfig_t *config);
/* occlCommInitRankConfig from nId ids (NCCL's scalable init): the ids are
 * checked, the first one bootstraps. */
occlResult_t occlCommInitRankScalable(occlComm_t *newcomm, int nranks, int myrank, int nId,
                                      occlUniqueId *commIds, occlConfig_t *config);
occlResult_t occlCommInitAll(occlComm_t *comms, int ndev, const int *devlist);
/* config NULL: the child has the parent's configuration (as NCCL). */
occlResult_t occlCommSplit(occlComm_t comm, int color, int key, occlComm_t *newcomm,
                           occlConfig_t *config);
/* A communicator of the ranks of comm not in excludeRanksList, called by
 * those ranks only, in rank order; config NULL inherits comm's.
 * OCCL_SHRINK_ABORT first stops comm's calls (comm is then failed). */
#define OCCL_SHRINK_DEFAULT 0x00
#define OCCL_SHRINK_ABORT 0x01
occlResult_t occlCommShrink(occlComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            occlComm_t *newcomm, occlConfig_t *config, int shrinkFlags);
/* Growing comm by new ranks. One existing rank (any) makes the id with
 * occlCommGetUniqueId (one outstanding per communicator; the next grow
 * consumes it) and hands it to the new ranks. Every existing rank calls
 * occlCommGrow(comm, nRanks, id or NULL, -1, ...) and keeps its rank (the
 * id's maker passes it, the others may pass NULL); each new rank calls
 * occlCommGrow(NULL, nRanks, id, rank, ...) with a rank in
 * [comm's size, nRanks). config NULL: the parent's for existing ranks, the
 * defaults for new ones. comm stays usable. */
occlResult_t occlCommGetUniqueId(occlComm_t comm, occlUniqueId *uniqueId);
occlResult_t occlCommGrow(occlComm_t comm, int nRanks, const occlUniqueId *uniqueId, int rank,
                          occlComm_t *newcomm, occlConfig_t *config);
/* Stops the communicator's running and queued calls (their streams report
 * an error) and refuses new ones; comm's state (occlCommGetAsyncError) is
 * occlInProgress until they have stopped, then occlSuccess: destroy or
 * shrink it then. A blocking communicator returns when they have; a
 * non-blocking one returns occlInProgress. Not finalize after it. */
#define OCCL_REVOKE_DEFAULT 0x00
occlResult_t occlCommRevoke(occlComm_t comm, int revokeFlags);
occlResult_t occlCommFinalize(occlComm_t comm);
occlResult_t occlCommDestroy(occlComm_t comm);
occlResult_t occlCommAbort(occlComm_t comm);
occlResult_t occlCommGetAsyncError(occlComm_t comm, occlResult_t *asyncError);
occlResult_t occlCommCount(const occlComm_t comm, int *count);
occlResult_t occlCommDevice(const occlComm_t comm, int *device);
occlResult_t occlCommUserRank(const occlComm_t comm, int *rank);
#define OCCL_SPLIT_NOCOLOR (-1)

/* Memory and registration. occlMemAlloc/occlMemFree are orMalloc/orFree on
 * the current device. A registration is recorded and checked (device memory
 * of the communicator's device); OCCL moves data the same way with or
 * without one. Registering a range again returns the same handle, counted;
 * a NULL handle deregisters nothing. */
occlResult_t occlMemAlloc(void **ptr, size_t size);
occlResult_t occlMemFree(void *ptr);
occlResult_t occlCommRegister(const occlComm_t comm, void *buff, size_t size, void **handle);
occlResult_t occlCommDeregister(const occlComm_t comm, void *handle);

/* Symmetric memory windows (NCCL 2.27+): recorded and checked as
 * registrations are; the one-sided calls below write into them
 * (docs/occl.md). At most 64 windows of a communicator at
 * once (the peers find them in its control block). */
typedef struct occlWindow *occlWindow_t;
#define OCCL_WIN_DEFAULT 0x00
#define OCCL_WIN_COLL_SYMMETRIC 0x01
#define OCCL_WIN_STRICT_ORDERING 0x02
#define OCCL_WIN_REQUIRED_ALIGNMENT 4096
occlResult_t occlCommWindowRegister(occlComm_t comm, void *buff, size_t size, occlWindow_t *win,
                                    int winFlags);
occlResult_t occlCommWindowDeregister(occlComm_t comm, occlWindow_t win);
occlResult_t occlWinGetUserPtr(occlComm_t comm, occlWindow_t win, void **outUserPtr);

/* One-sided calls on symmetric memory windows (NCCL 2.31's ncclPutSignal,
 * ncclSignal, ncclWaitSignal), stream-ordered like the collectives.
 * PutSignal copies count elements of localbuff (device memory of this
 * rank) into peer's window peerWin at byte offset peerWinOffset, then adds
 * one to peer's signal sigIdx from this rank; Signal only adds the one.
 * peerWin is this rank's handle of a window that every rank registered as
 * its n-th window on comm (registration order is the same on every rank, as
 * NCCL's collective registration makes it). WaitSignal holds the stream
 * until, for each descriptor, signalDescs[i].peer has signalled sigIdx
 * opCnt times more than earlier waits consumed, and consumes them; the
 * window's data put before each signal is then visible. As NCCL 2.31:
 * sigIdx, ctx and flags must be 0 (ctx also below the config's numRmaCtx,
 * 0 disabling one-sided calls). */
typedef struct {
    int opCnt;  /* signals to wait for */
    int peer;   /* from this rank */
    int sigIdx; /* on this signal index */
    int ctx;    /* and context */
} occlWaitSignalDesc_t;
occlResult_t occlPutSignal(const void *localbuff, size_t count, occlDataType_t datatype, int peer,
                           occlWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, occlComm_t comm, orStream_t stream);
occlResult_t occlSignal(int peer, int sigIdx, int ctx, unsigned int flags, occlComm_t comm,
                        orStream_t stream);
occlResult_t occlWaitSignal(int nDesc, occlWaitSignalDesc_t *signalDescs, occlComm_t comm,
                            orStream_t stream);

/* Suspend: the communicator's calls end, its scratch (the device memory
 * its calls grow on demand) is freed, and new calls are refused until
 * occlCommResume. flags 0 suspends nothing (as NCCL). */
#define OCCL_SUSPEND_MEM 0x01
occlResult_t occlCommSuspend(occlComm_t comm, int flags);
occlResult_t occlCommResume(occlComm_t comm);

/* Device memory a communicator holds (its control block and scratch). */
typedef enum {
    occlStatGpuMemSuspend = 0,   /* that a suspend frees: the scratch */
    occlStatGpuMemSuspended = 1, /* 1 while suspended */
    occlStatGpuMemPersist = 2,   /* that stays: the control block */
    occlStatGpuMemTotal = 3
} occlCommMemStat_t;
occlResult_t occlCommMemStats(occlComm_t comm, occlCommMemStat_t stat, uint64_t *value);

/* Reduction operators */
occlResult_t occlRedOpCreatePreMulSum(occlRedOp_t *op, void *scalar, occlDataType_t datatype,
                                      occlScalarResidence_t residence, occlComm_t comm);
occlResult_t occlRedOpDestroy(occlRedOp_t op, occlComm_t comm);

/* Collectives */
occlResult_t occlReduce(const void *sendbuff, void *recvbuff, size_t count,
                        occlDataType_t datatype, occlRedOp_t op, int root, occlComm_t comm,
                        orStream_t stream);
/* occlBroadcast in place (NCCL's legacy ncclBcast). */
occlResult_t occlBcast(void *buff, size_t count, occlDataType_t datatype, int root, occlComm_t comm,
                       orStream_t stream);
occlResult_t occlBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           occlDataType_t datatype, int root, occlComm_t comm, orStream_t stream);
occlResult_t occlAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           occlDataType_t datatype, occlRedOp_t op, occlComm_t comm,
                           orStream_t stream);
occlResult_t occlReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               occlDataType_t datatype, occlRedOp_t op, occlComm_t comm,
                               orStream_t stream);
occlResult_t occlAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           occlDataType_t datatype, occlComm_t comm, orStream_t stream);
occlResult_t occlAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          occlDataType_t datatype, occlComm_t comm, orStream_t stream);
occlResult_t occlGather(const void *sendbuff, void *recvbuff, size_t count,
                        occlDataType_t datatype, int root, occlComm_t comm, orStream_t stream);
occlResult_t occlScatter(const void *sendbuff, void *recvbuff, size_t count,
                         occlDataType_t datatype, int root, occlComm_t comm, orStream_t stream);

/* Point to point */
occlResult_t occlSend(const void *sendbuff, size_t count, occlDataType_t datatype, int peer,
                      occlComm_t comm, orStream_t stream);
occlResult_t occlRecv(void *recvbuff, size_t count, occlDataType_t datatype, int peer,
                      occlComm_t comm, orStream_t stream);
/* Not in NCCL: a receive from whichever rank's next point-to-point send to
 * this rank comes first (MPI_ANY_SOURCE), of exactly count elements. *peer
 * is -1 at the call and that rank once the receive has found its sender, in
 * stream order: read it after synchronizing the stream. Not in a group. */
occlResult_t occlRecvAnySource(void *recvbuff, size_t count, occlDataType_t datatype, int *peer,
                               occlComm_t comm, orStream_t stream);

/* Groups: calls between Start and End are launched together at End, so one
 * thread can drive several devices and matching sends and receives. */
occlResult_t occlGroupStart(void);
occlResult_t occlGroupEnd(void);

/* occlGroupSimulateEnd: what the group would take, as NCCL's
 * ncclSimInfo_t (same layout). Assign OCCL_SIM_INFO_INITIALIZER first. */
#define OCCL_UNDEF_FLOAT (-1.0f)
#define OCCL_SIM_INFO_MAGIC 0x74685283
typedef struct occlSimInfo_v22200 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    float estimatedTime; /* microseconds */
} occlSimInfo_t;
#define OCCL_SIM_INFO_INITIALIZER                                                                 \
    { sizeof(occlSimInfo_t), OCCL_SIM_INFO_MAGIC, OCCL_VERSION_CODE, OCCL_UNDEF_FLOAT }
/* Ends the group like occlGroupEnd but runs none of its calls: simInfo's
 * estimatedTime becomes the virtual time (OPENREG_TIME=virtual's model, on
 * the declared topology, whatever OPENREG_TIME says) from the group's start
 * to the end of its last call on its last rank, in us. Talks to no peer. */
occlResult_t occlGroupSimulateEnd(occlSimInfo_t *simInfo);

/* NCCL 2.31's parameter API over OCCL's environment settings (OCCL_*,
 * docs/occl.md "Environment"): a key's value is the environment's text when
 * set, else its default. Typed reads need the key's type (OCCL_TIMEOUT_MS:
 * int64; OCCL_CHECK_CALLS: int32; OCCL_LL_MAX_BYTES, OCCL_CALLER_WAIT_US:
 * uint64; the rest strings); an unknown key, another type or a value that
 * is not of the type is occlInvalidArgument. Returned strings stay valid
 * until the same function's next call on the thread. */
typedef struct occlParamHandle *occlParamHandle_t;
occlResult_t occlParamBind(occlParamHandle_t *out, const char *key);
occlResult_t occlParamGetI8(occlParamHandle_t h, int8_t *out);
occlResult_t occlParamGetI16(occlParamHandle_t h, int16_t *out);
occlResult_t occlParamGetI32(occlParamHandle_t h, int32_t *out);
occlResult_t occlParamGetI64(occlParamHandle_t h, int64_t *out);
occlResult_t occlParamGetU8(occlParamHandle_t h, uint8_t *out);
occlResult_t occlParamGetU16(occlParamHandle_t h, uint16_t *out);
occlResult_t occlParamGetU32(occlParamHandle_t h, uint32_t *out);
occlResult_t occlParamGetU64(occlParamHandle_t h, uint64_t *out);
occlResult_t occlParamGetStr(occlParamHandle_t h, const char **out);
/* The value's bytes (an integer's, or the string with its NUL) into out;
 * *len is their size, also when maxLen is too small (occlInvalidArgument). */
occlResult_t occlParamGet(occlParamHandle_t h, void *out, int maxLen, int *len);
occlResult_t occlParamGetParameter(const char *key, const char **value, int *valueLen);
occlResult_t occlParamGetAllParameterKeys(const char ***table, int *tableLen);
/* Every key, its type, value and default, on stdout. */
void occlParamDumpAll(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OCCL_H */
