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
    /* For their point-to-point calls: a context of its own, so that a
     * receive from any source matches sends, never a collective's traffic. */
    MPI_Comm p2p_comm;
    /* For notices between them (a call found mismatched across ranks). */
    MPI_Comm ctl_comm;
    int rank, nranks;  /* world */
    int node;          /* virtual node of this rank */
    const int *rank_node; /* virtual node of every world rank */
    uint64_t job_id;
    /* OPENREG_TOPO (else NULL): the topology, and the topology device of
     * every global device (or_global_device). */
    const struct or_topo *topo;
    const int *topo_device;
} or_job_view;
orError_t or_job(or_job_view *view);
/* This process's world rank and the job's identity (or_job_view's), without
 * waiting for the other ranks where that can be: before start-up, world
 * rank 0 of an MPI the application initialized knows both alone (it draws
 * the identity start-up gives every rank). Elsewhere the runtime starts,
 * with the other ranks, as any first call. */
orError_t or_job_identity(int *rank, uint64_t *job_id);
/* A setting of the layer above (an environment variable) that every rank
 * must share: start-up compares it across ranks with the runtime's own and
 * stops every rank if it differs; unset counts as the value unset_as (its
 * default). Call before the first runtime call (a constructor). */
void or_config_must_agree(const char *name, const char *unset_as);

/* Make the next synchronization of stream (NULL: the current device's
 * default stream) report err, as a remote copy's failure is reported. */
void or_stream_fail(orStream_t stream, orError_t err);

/* The stream a handle names (NULL: the current device's default stream)
 * and the device it runs on, for a call that may begin an inline task on
 * it at once (or_inline_task_begin_ref); valid while the stream is.
 * orSuccess or orErrorInvalidResourceHandle. */
typedef struct {
    void *stream;
    int device;
} or_stream_ref;
orError_t or_stream_ref_of(orStream_t stream, or_stream_ref *ref);

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

/* A task whose virtual time only its own run can tell (a collective, which
 * must see its peers' clocks): fn(data) runs in stream order as a host
 * function, *entry_ns gets the stream's clock where it starts (written
 * before fn can run; 0 in wall mode), and the stream's clock is held: ops
 * issued on the stream afterwards wait in their call until the task calls
 * or_stream_release_vclock, and then start at the end it gives. Not traced
 * as a host function: the task records its own slices. */
orError_t or_launch_host_func_held(orStream_t stream, void (*fn)(void *), void *data,
                                   uint64_t *entry_ns);
/* The held task's end: the stream's clock moves to at least end_ns, and the
 * ops waiting to be issued go on. Call it exactly once per held task (also
 * when it fails); nothing in wall mode. */
void or_stream_release_vclock(orStream_t stream, uint64_t end_ns);
/* A held task that runs on a thread of the layer's own, not on a device
 * worker: a collective waits for its peers as long as they take, and on a
 * worker it would keep the device's other streams (and other communicators'
 * tasks) from running, so ranks that reached two communicators' tasks in
 * different orders would wait for each other until the timeout. When the
 * task reaches the head of its stream, start(data, task) runs on the thread
 * that moved the stream on, under the device's lock, and only hands the task
 * over (it must not call the runtime); the stream stays busy until the layer
 * calls or_handed_task_done(task) from its thread. Virtual time as for
 * or_launch_host_func_held. */
typedef struct or_op *or_handed_task;
orError_t or_launch_handed_task_held(orStream_t stream,
                                     void (*start)(void *data, or_handed_task task), void *data,
                                     uint64_t *entry_ns);
/* On the layer's thread: the task starts running there (what it records,
 * slices and activity, is the op's, with its correlation id). */
void or_handed_task_begin(or_handed_task task);
void or_handed_task_done(or_handed_task task);
/* A task the calling thread runs right away while its stream is idle, with
 * no op queued (no allocation; one pass under the device's lock at its
 * begin, and at its end only when an op, an event record or a waiter came
 * meanwhile): or_inline_task_begin is false when the stream has work queued or
 * running, or in virtual time or while recording. Until
 * or_inline_task_end the stream is busy: ops issued meanwhile wait behind
 * the task, synchronizes wait for it. or_inline_task_hand turns it into a
 * handed task at the head of its stream, still running, for another thread
 * to finish with or_handed_task_done (NULL: out of memory, the task is
 * still inline). */
typedef struct {
    void *stream;
    uint64_t seq;
} or_inline_task;
/* How many device allocations this process has freed: what or_mem_export
 * said of a buffer of this process holds while the count has not moved. */
uint64_t or_mem_free_count(void);
/* How many streams this process has destroyed: an or_stream_ref of a
 * handle holds while the count has not moved. */
uint64_t or_stream_destroy_count(void);
/* How many writes into another node's memory this process has posted (their
 * op completed before the owner's acknowledgement, src/stream.c), and in
 * *unacked (unless NULL) how many of them the owners have not acknowledged
 * yet; a debug query for tests. */
uint64_t or_remote_posted_writes(uint64_t *unacked);
/* How many reads from another node's memory this process has had answered
 * in one message, the status with the bytes (src/proxy.c); the same kind of
 * query. */
uint64_t or_remote_inline_reads(void);
/* How many copies with another node's memory the thread that issued them
 * sent itself (synchronous ones of one round trip on an idle stream,
 * src/stream.c), and in *handed (unless NULL) how many of those it left to
 * the proxy to finish, their answer later than OPENREG_COPY_SPIN_US; the
 * same kind of query. */
uint64_t or_remote_caller_copies(uint64_t *handed);
bool or_inline_task_begin(orStream_t stream, or_inline_task *task);
/* Virtual time or recording is on, and or_inline_task_begin says false:
 * for a caller that holds a stream already (no initialization; read at
 * every small call). */
bool or_inline_tasks_off(void);
bool or_inline_task_begin_ref(const or_stream_ref *ref, or_inline_task *task);
void or_inline_task_end(or_inline_task *task);
or_handed_task or_inline_task_hand(or_inline_task *task);
/* Bind the calling thread to the cores of this process's device `device` as
 * OPENREG_BIND says (under none, nothing); 0, or -1 if it cannot. */
int or_bind_thread_to_device(int device);
/* Global id of device `device` of world rank world_rank (paths' ends). */
int or_global_device(int world_rank, int device);
/* Memory bandwidth of this process's device, bytes/s, as virtual time
 * charges it. */
orError_t or_device_memory_bps(int device, uint64_t *bytes_per_s);

/* Slices are wanted: OPENREG_TRACE is set, or activity records are on. */
bool or_trace_enabled(void);
/* Now, in the clock of wall-mode slices (CLOCK_MONOTONIC ns). */
uint64_t or_trace_now(void);
/* A slice on stream's track, for the trace and the activity records:
 * [start_ns, end_ns) in the virtual clock in virtual mode, else in
 * or_trace_now's; args the text of a JSON object or NULL. */
void or_trace_stream_slice(orStream_t stream, const char *name, const char *category,
                           uint64_t start_ns, uint64_t end_ns, const char *args_json);

#endif
