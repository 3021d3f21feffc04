/*
 * openreg.h - the OpenReg Cluster runtime API.
 *
 * A CUDA-runtime-shaped API over CPU-simulated devices. Names, values and
 * semantics follow PyTorch's OpenReg runtime (itself a mirror of the CUDA
 * runtime), so code written for either ports by renaming. docs/api.md is the
 * reference: behaviour of every function and every error it returns.
 */
#ifndef OPENREG_H
#define OPENREG_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define OPENREG_EXPORT __attribute__((visibility("default")))
#else
#define OPENREG_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. The first three values are OpenReg's; the list is generated
 * from one X-macro so that names, strings and values never drift apart.
 * Values are stable: new codes are only ever appended. */
#define OR_ERROR_LIST(X)                                                                        \
    X(orSuccess, 0, "no error")                                                                 \
    X(orErrorUnknown, 1, "unknown error")                                                       \
    X(orErrorNotReady, 2, "device work not yet complete")                                       \
    X(orErrorInvalidValue, 3, "invalid argument")                                               \
    X(orErrorInvalidDevice, 4, "invalid device ordinal")                                        \
    X(orErrorMemoryAllocation, 5, "out of device or host memory")                               \
    X(orErrorInvalidResourceHandle, 6, "invalid, destroyed or foreign handle (stream, event or IPC memory handle)") \
    X(orErrorInvalidDevicePointer, 7, "not a live device allocation (freed, foreign or never allocated)") \
    X(orErrorInvalidMemcpyDirection, 8, "unknown memcpy kind")                                  \
    X(orErrorNotSupported, 9, "operation not supported")                                        \
    X(orErrorPeerAccessNotEnabled, 10, "peer access has not been enabled")                      \
    X(orErrorPeerAccessAlreadyEnabled, 11, "peer access is already enabled")                    \
    X(orErrorInitialization, 12, "runtime initialization failed (see the message printed at start-up)") \
    X(orErrorTimeout, 13, "operation timed out")                                                \
    X(orErrorRemote, 14, "a remote peer failed")                                                \
    X(orErrorNotPermitted, 15, "operation not permitted from a kernel or host function")        \
    X(orErrorHostMemoryNotRegistered, 16, "pointer is not a live pinned host allocation")        \
    X(orErrorIllegalAddress, 17, "illegal memory access by a kernel or copy (sticky: later calls return it too)")

typedef enum orError_t {
#define OR_ERROR_ENUM(name, value, text) name = value,
    OR_ERROR_LIST(OR_ERROR_ENUM)
#undef OR_ERROR_ENUM
} orError_t;

typedef enum orMemcpyKind {
    orMemcpyHostToHost = 0,
    orMemcpyHostToDevice = 1,
    orMemcpyDeviceToHost = 2,
    orMemcpyDeviceToDevice = 3,
    orMemcpyDefault = 4 /* inferred from the pointers */
} orMemcpyKind;

typedef enum orMemoryType {
    orMemoryTypeUnmanaged = 0, /* memory the runtime does not know */
    orMemoryTypeHost = 1,      /* pinned host memory from orMallocHost */
    orMemoryTypeDevice = 2,    /* a live device allocation */
    orMemoryTypeRemote = 3     /* device memory of another node (IPC) */
} orMemoryType;

typedef struct orPointerAttributes {
    orMemoryType type;
    int device;    /* owning device, -1 when not device memory */
    void *pointer; /* the pointer itself for device and host memory, NULL otherwise */
} orPointerAttributes;

typedef enum orEventFlags {
    orEventDisableTiming = 0x0, /* OpenReg's default: orEventCreate makes one of these */
    orEventEnableTiming = 0x1
} orEventFlags;

typedef enum orStreamFlags {
    orStreamDefault = 0x0,
    orStreamNonBlocking = 0x1 /* accepted for CUDA compatibility; no stream syncs implicitly */
} orStreamFlags;

typedef struct orDeviceProp {
    char name[256];           /* "openreg <profile>", e.g. "openreg a100" */
    size_t totalGlobalMem;    /* arena capacity in bytes */
    int multiProcessorCount;  /* compute threads that run kernel blocks */
    int numaNode;             /* NUMA node of the device's cores and memory (-1: unknown) */
    char cpuList[256];        /* cores of the device, hwloc list syntax, e.g. "0-3" */
    size_t sharedMemPerBlock; /* largest sharedMem a launch may ask for */
    int maxThreadsPerBlock;   /* largest blockDim.x * y * z */
    int maxThreadsDim[3];
    int maxGridSize[3];
    int asyncEngineCount; /* copy engines */
    /* What the device profile declares; the virtual clock charges from these. */
    double computeRateGflops;  /* FP32 */
    double memoryBandwidthGBs;
} orDeviceProp;

/* This process's place in the cluster (all ranks of the MPI job). */
typedef struct orClusterInfo {
    int rank, nranks;      /* MPI rank and job size; 0 and 1 without a launcher */
    int node, nnodes;      /* virtual node of this rank, and how many there are */
    int deviceCount;       /* devices of this rank (OPENREG_DEVICES) */
    int globalDeviceCount; /* devices of all ranks */
    int firstGlobalDevice; /* global id of this rank's device 0 */
    int nodeRank, nodeRanks; /* this rank among its virtual node's ranks */
} orClusterInfo;

/* An allocation's name that any rank of the job can open (send it with MPI). */
typedef struct orIpcMemHandle_t {
    char reserved[64];
} orIpcMemHandle_t;
#define orIpcMemLazyEnablePeerAccess 0x1

struct orStream;
struct orEvent;
typedef struct orStream *orStream_t; /* NULL is the current device's default stream */
typedef struct orEvent *orEvent_t;

typedef struct {
    unsigned int x, y, z;
} orDim3;

/* What a kernel sees for the block it runs. A block is the unit of
 * parallelism: the kernel is called once per block and iterates over the
 * block's threads itself (blockDim tells how many). */
typedef struct {
    orDim3 blockIdx, blockDim, gridDim;
    int device;
    void *sharedMem; /* sharedMem bytes private to this block, NULL if 0 */
} orKernelContext;

typedef void (*orKernel_t)(const orKernelContext *ctx, void *args);

/* Errors */
OPENREG_EXPORT const char *orGetErrorName(orError_t error);
OPENREG_EXPORT const char *orGetErrorString(orError_t error);
OPENREG_EXPORT orError_t orGetLastError(void);
OPENREG_EXPORT orError_t orPeekAtLastError(void);

/* Devices */
OPENREG_EXPORT orError_t orGetDeviceCount(int *count);
OPENREG_EXPORT orError_t orSetDevice(int device); /* current device is per thread */
OPENREG_EXPORT orError_t orGetDevice(int *device);
OPENREG_EXPORT orError_t orGetDeviceProperties(orDeviceProp *prop, int device);
OPENREG_EXPORT orError_t orDeviceSynchronize(void);
OPENREG_EXPORT orError_t orDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority);
OPENREG_EXPORT orError_t orGetClusterInfo(orClusterInfo *info);
OPENREG_EXPORT orError_t orDeviceCanAccessPeer(int *canAccess, int device, int peerDevice);
OPENREG_EXPORT orError_t orDeviceEnablePeerAccess(int peerDevice, unsigned int flags);
OPENREG_EXPORT orError_t orDeviceDisablePeerAccess(int peerDevice);

/* Memory */
OPENREG_EXPORT orError_t orMalloc(void **devPtr, size_t size);
OPENREG_EXPORT orError_t orFree(void *devPtr);
OPENREG_EXPORT orError_t orMallocHost(void **ptr, size_t size);
OPENREG_EXPORT orError_t orFreeHost(void *ptr);
OPENREG_EXPORT orError_t orMemcpy(void *dst, const void *src, size_t count, orMemcpyKind kind);
OPENREG_EXPORT orError_t orMemcpyAsync(void *dst, const void *src, size_t count,
                                       orMemcpyKind kind, orStream_t stream);
OPENREG_EXPORT orError_t orMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice,
                                      size_t count);
OPENREG_EXPORT orError_t orMemcpyPeerAsync(void *dst, int dstDevice, const void *src,
                                           int srcDevice, size_t count, orStream_t stream);
OPENREG_EXPORT orError_t orMemset(void *devPtr, int value, size_t count);
OPENREG_EXPORT orError_t orMemsetAsync(void *devPtr, int value, size_t count, orStream_t stream);
OPENREG_EXPORT orError_t orMemGetInfo(size_t *free, size_t *total);
OPENREG_EXPORT orError_t orPointerGetAttributes(orPointerAttributes *attr, const void *ptr);
/* Strict mode (OPENREG_STRICT=1) keeps device memory unreadable by host code;
 * these open and close a window in which the host may touch it (nestable). */
OPENREG_EXPORT orError_t orMemoryUnprotect(void *devPtr);
OPENREG_EXPORT orError_t orMemoryProtect(void *devPtr);

/* IPC: name an allocation for other ranks; open and close another rank's. */
OPENREG_EXPORT orError_t orIpcGetMemHandle(orIpcMemHandle_t *handle, void *devPtr);
OPENREG_EXPORT orError_t orIpcOpenMemHandle(void **devPtr, orIpcMemHandle_t handle,
                                            unsigned int flags);
OPENREG_EXPORT orError_t orIpcCloseMemHandle(void *devPtr);

/* Streams */
OPENREG_EXPORT orError_t orStreamCreate(orStream_t *stream);
OPENREG_EXPORT orError_t orStreamCreateWithPriority(orStream_t *stream, unsigned int flags,
                                                    int priority);
OPENREG_EXPORT orError_t orStreamGetPriority(orStream_t stream, int *priority);
OPENREG_EXPORT orError_t orStreamDestroy(orStream_t stream);
OPENREG_EXPORT orError_t orStreamSynchronize(orStream_t stream);
OPENREG_EXPORT orError_t orStreamQuery(orStream_t stream);
OPENREG_EXPORT orError_t orStreamWaitEvent(orStream_t stream, orEvent_t event, unsigned int flags);

/* Events */
OPENREG_EXPORT orError_t orEventCreate(orEvent_t *event);
OPENREG_EXPORT orError_t orEventCreateWithFlags(orEvent_t *event, unsigned int flags);
OPENREG_EXPORT orError_t orEventRecord(orEvent_t event, orStream_t stream);
OPENREG_EXPORT orError_t orEventQuery(orEvent_t event);
OPENREG_EXPORT orError_t orEventSynchronize(orEvent_t event);
OPENREG_EXPORT orError_t orEventElapsedTime(float *ms, orEvent_t start, orEvent_t end);
/* The same in integer nanoseconds (exact; negative when end precedes start). */
OPENREG_EXPORT orError_t orEventElapsedTimeNs(long long *ns, orEvent_t start, orEvent_t end);
OPENREG_EXPORT orError_t orEventDestroy(orEvent_t event);

/* Kernels and host functions. Arguments are copied at launch. */
OPENREG_EXPORT orError_t orLaunchKernel(orKernel_t kernel, orDim3 grid, orDim3 block,
                                        const void *args, size_t argsSize, size_t sharedMem,
                                        orStream_t stream);
/* The work a kernel does, for the virtual clock (OPENREG_TIME=virtual): it is
 * charged launch latency + max(flops / compute rate, bytes / memory bandwidth)
 * of its device's profile. Both finite and >= 0. */
typedef struct orLaunchCost {
    double flops; /* floating-point operations of the whole grid */
    double bytes; /* bytes the whole grid reads and writes in device memory */
} orLaunchCost;

/* orLaunchKernel's arguments, plus what only an extended launch says. */
typedef struct orLaunchConfig {
    orDim3 gridDim, blockDim;
    size_t sharedMem;
    orStream_t stream;
    const orLaunchCost *cost; /* NULL: estimated from the grid (docs/virtual-time.md) */
    const char *name;         /* the kernel's name in traces; NULL: its symbol */
} orLaunchConfig;

OPENREG_EXPORT orError_t orLaunchKernelEx(const orLaunchConfig *config, orKernel_t kernel,
                                          const void *args, size_t argsSize);
OPENREG_EXPORT orError_t orLaunchHostFunc(orStream_t stream, void (*fn)(void *userData),
                                          void *userData);

/* Random numbers: counter-based Philox4x32-10, the same output whatever the
 * device's thread count or the launch shape. Element i of a call is word
 * (offset + i) % 4 of Philox4x32-10 at counter {low32(b), high32(b), 0, 0},
 * b = (offset + i) / 4, key {low32(seed), high32(seed)}; so a call at offset
 * n continues exactly where a call of n elements at offset 0 stopped.
 * Uniform maps word x to ((x >> 8) + 1) * 2^-24, in (0, 1]. Normal element
 * j = offset + i is Box-Muller on the uniforms of words 2*(j/2) and
 * 2*(j/2) + 1: the cosine branch for even j, the sine branch for odd j. */
OPENREG_EXPORT orError_t orRandGenerateUniform(float *devPtr, size_t n, unsigned long long seed,
                                               unsigned long long offset, orStream_t stream);
OPENREG_EXPORT orError_t orRandGenerateNormal(float *devPtr, size_t n, float mean, float stddev,
                                              unsigned long long seed, unsigned long long offset,
                                              orStream_t stream);

/* Activity records, for profilers (CUPTI's activity API in small): while
 * recording is on, every kernel, copy, memset, host function and collective
 * of this process's devices is kept when it finishes, with the external
 * correlation id its issuing thread had pushed when it was issued. */
typedef enum orActivityKind {
    orActivityKindKernel = 1,
    orActivityKindMemcpy = 2,
    orActivityKindMemset = 3,
    orActivityKindHostFunc = 4,
    orActivityKindCollective = 5 /* a collective (occl), or another layer's work on a stream */
} orActivityKind;

typedef struct orActivity {
    orActivityKind kind;
    int device;        /* this process's device ordinal */
    int stream;        /* 0: the default stream, then 1, 2, ... in creation order */
    int virtualTime;   /* start and end are the virtual clock's (OPENREG_TIME=virtual) */
    unsigned long long start, end; /* ns: CLOCK_MONOTONIC, or the virtual clock */
    unsigned long long correlationId; /* innermost id pushed on the issuing thread; 0: none */
    const char *name;     /* as traces name it: the kernel, "memcpy HtoD", "occl AllReduce" */
    const char *category; /* "kernel", "copy", "memset", "host", "collective" */
    unsigned long long bytes; /* copies, memsets, declared kernels */
    double flops;             /* declared kernels */
    int srcDevice, dstDevice; /* copies: global device ids, -1 for host memory */
    const char *args;         /* collectives: their arguments as a JSON object; else NULL */
    unsigned long long issueTime; /* when its call issued it: CLOCK_MONOTONIC ns */
    int issueThread;              /* the thread that issued it (its Linux thread id) */
} orActivity;

typedef void (*orActivityCallback)(const orActivity *activity, void *userData);

/* Start keeping records (again: no effect). At most OPENREG_TRACE_BUFFER
 * records are kept between flushes; later ones are counted as dropped. */
OPENREG_EXPORT orError_t orActivityEnable(void);
/* Stop keeping records; those kept stay until flushed. */
OPENREG_EXPORT orError_t orActivityDisable(void);
/* Hand every kept record to callback (in the order they finished) and forget
 * them; *dropped (may be NULL) gets how many were dropped since the last
 * flush. The strings live as long as the process. */
OPENREG_EXPORT orError_t orActivityFlush(orActivityCallback callback, void *userData,
                                         unsigned long long *dropped);
/* The calling thread's external correlation ids, a stack (64 deep: deeper
 * pushes are counted and popped without being recorded). */
OPENREG_EXPORT orError_t orActivityPushExternalCorrelationId(unsigned long long id);
OPENREG_EXPORT orError_t orActivityPopExternalCorrelationId(unsigned long long *lastId);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* OPENREG_H */
