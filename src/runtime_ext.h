/*
 * src/runtime_ext.h - what the runtime offers the layers built on it (the
 * collectives): naming device memory across the processes of a node, the
 * MPI communicator reserved for collectives, and failing a stream
 * asynchronously. Not installed: users see openreg.h only.
 */
#ifndef OR_RUNTIME_EXT_H
#define OR_RUNTIME_EXT_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "openreg.h"
#include "sync.h"

/* Device memory named the same way in every process of a virtual node. */
typedef struct or_mem_ref {
    int32_t rank;   /* world rank of the owner */
    int32_t device; /* the owner's device ordinal */
    uint64_t offset; /* in that device's memory */
} or_mem_ref;

/* The name of [p, p+bytes), which must lie in one live allocation of this
 * process's devices; orErrorInvalidValue for host memory. */
orError_t or_mem_export(const void *p, size_t bytes, or_mem_ref *ref);
/* Where this process sees ref's memory: NULL unless its owner is on this
 * virtual node (or is this process). */
void *or_mem_import(const or_mem_ref *ref);

/* The job as the collectives see it; valid after the first runtime call. */
typedef struct or_job_view {
    bool mpi;          /* more than one process may take part */
    MPI_Comm comm;     /* for the collectives alone (MPI_COMM_NULL without MPI) */
    int rank, nranks;  /* world */
    int node;          /* virtual node of this rank */
    const int *rank_node; /* virtual node of every world rank */
    uint64_t job_id;
} or_job_view;
orError_t or_job(or_job_view *view);

/* Make the next synchronization of stream (NULL: the current device's
 * default stream) report err, as a remote copy's failure is reported. */
void or_stream_fail(orStream_t stream, orError_t err);

/* The device stream runs on (NULL: the current device); orSuccess or
 * orErrorInvalidResourceHandle. */
orError_t or_stream_device(orStream_t stream, int *device);

/* Inside a kernel or host function (on a device worker thread). */
bool or_on_worker_thread(void);

/* ---- virtual time and traces (docs/virtual-time.md, docs/tracing.md) ---- */

/* OPENREG_TIME=virtual. */
bool or_vclock_virtual(void);
/* The virtual clock of stream (NULL: the current device's default stream):
 * when the last op issued on it ends, in ns; 0 in wall mode. */
uint64_t or_stream_vclock(orStream_t stream);
/* Charge cost_ns on stream, starting at the max of start_ns, the stream's
 * clock and the calling thread's host clock; the stream's clock moves to the
 * end, returned in *end_ns (0 in wall mode, where nothing is charged). Call
 * it when issuing the work it costs, as ops are charged at issue. */
orError_t or_stream_advance_vclock(orStream_t stream, uint64_t start_ns, uint64_t cost_ns,
                                   uint64_t *end_ns);
/* latency + ceil(bytes / bandwidth) of the path between two global devices
 * (OR_VCLOCK_HOST: this rank's host memory), in ns, ignoring contention. */
#define OR_VCLOCK_HOST (-1)
uint64_t or_vclock_path_cost(int src_global_dev, int dst_global_dev, uint64_t bytes);

/* OPENREG_TRACE is set. */
bool or_trace_enabled(void);
/* Now, in the clock of wall-mode traces (ns). */
uint64_t or_trace_now(void);
/* A slice on stream's track: [start_ns, end_ns) in the trace's clock (the
 * virtual clock in virtual mode), args the text of a JSON object or NULL. */
void or_trace_stream_slice(orStream_t stream, const char *name, const char *category,
                           uint64_t start_ns, uint64_t end_ns, const char *args_json);

#endif
