/*
 * src/internal.h - the runtime's private objects: devices, streams, ops,
 * events, and the process-wide runtime state.
 *
 * Locking: a device's `lock` guards its stream queues, ready lists and job
 * list; an event's `lock` guards its record state and waiter list. Order:
 * device lock before event lock, never two device locks at once.
 */
#ifndef OR_INTERNAL_H
#define OR_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "openreg.h"
#include "arena.h"
#include "cluster.h"
#include "config.h"
#include "cpu_device.h"
#include "handle.h"
#include "log.h"
#include "profile.h"
#include "sync.h"
#include "activity.h"
#include "trace.h"
#include "vclock.h"

/* Priorities 0 (least) .. -2 (greatest), as CUDA: lower number runs first. */
#define OR_PRIORITY_LEAST 0
#define OR_PRIORITY_GREATEST (-2)
#define OR_NUM_PRIORITIES (OR_PRIORITY_LEAST - OR_PRIORITY_GREATEST + 1)

#define OR_MAX_SHARED_MEM ((size_t)48 * 1024)
#define OR_MAX_KERNEL_ARGS ((size_t)32 * 1024)
#define OR_MAX_BLOCK_THREADS 1024u

typedef struct or_device or_device;
typedef struct or_stream or_stream;
typedef struct or_event or_event;
typedef struct or_op or_op;

typedef enum {
    OR_OP_KERNEL,
    OR_OP_COPY,
    OR_OP_MEMSET,
    OR_OP_HOST_FUNC,
    OR_OP_EVENT_RECORD,
    OR_OP_EVENT_WAIT,
    OR_OP_REMOTE_COPY /* handed to the proxy, which completes it */
} or_op_kind;

/* What an op costs in the device model: the virtual clock charges from this,
 * the wall clock ignores it. Declared at enqueue, never measured. */
typedef struct or_op_cost {
    uint64_t bytes; /* bytes moved (copies, memsets) */
    double kernel_flops, kernel_bytes; /* what a kernel's launch declared */
    bool declared;  /* the launch declared its kernel's work */
    int32_t src, dst; /* copies and memsets: global devices, OR_VT_HOST for host memory */
} or_op_cost;

struct or_op {
    or_op *next; /* in its stream's queue */
    or_stream *stream;
    or_op_kind kind;
    uint64_t seq; /* position in the stream, from 1 */
    or_op_cost cost;
    uint64_t vt_start, vt_end; /* virtual time, charged at issue */
    uint64_t wall_start;       /* when a worker started it (traces), CLOCK_MONOTONIC */
    uint64_t correlation;      /* the issuing thread's external correlation id */
    uint64_t issue_ns;         /* when it was issued, and by which thread (records) */
    int32_t issue_tid;
    _Atomic int refs; /* the stream's, plus one per worker inside a kernel */
    union {
        struct {
            orKernel_t fn;
            orDim3 grid, block;
            size_t shared_mem;
            uint64_t nblocks;
            _Atomic uint64_t next_block;  /* next block to hand out */
            _Atomic uint64_t blocks_done;
            or_op *next_job; /* in the device's job list */
            void *args;      /* points into payload */
            const char *name; /* interned by the trace, NULL: the function's symbol */
            const char *label; /* the launch's name (in payload, after args), or NULL */
            _Atomic bool faulted; /* a block faulted: the others are skipped */
        } kernel;
        struct {
            void *dst;
            const void *src;
            size_t count;
        } copy;
        struct {
            void *dst;
            int value;
            size_t count;
        } memset;
        struct {
            void (*fn)(void *);
            /* Instead of fn: hands the op to a layer's thread, which
             * completes it; called when the op becomes the stream's head
             * (or_launch_handed_task_held). */
            void (*start)(void *, or_op *);
            void *data;
            /* A layer's task that sets the stream's clock itself when it
             * runs (or_launch_host_func_held): traced by that layer. */
            bool held;
            uint64_t *entry_out;
        } host;
        struct {
            or_event *event;
            uint64_t gen; /* the record this op completes or waits for */
        } event;
    } u;
    _Alignas(16) unsigned char payload[]; /* kernel arguments */
};

/* A stream's busy: an inline task that runs is told by an op issued or a
 * waiter come meanwhile (OR_BUSY_INLINE_WANTED), so that its end takes the
 * device's lock and moves the stream on, or wakes the waiter. */
enum or_busy { OR_IDLE, OR_BUSY, OR_BUSY_INLINE, OR_BUSY_INLINE_WANTED };

struct or_stream {
    or_device *dev;
    uintptr_t handle; /* 0 for the default stream */
    int priority;
    unsigned flags;
    /* Guarded by dev->lock. */
    or_op *head, *tail;
    /* Whether the head op executes (enum or_busy). Changed under dev->lock,
     * but for an inline task's end, which leaves OR_BUSY_INLINE without it
     * (stream.c): read with busy_locked. */
    _Atomic uint32_t busy;
    bool queued;  /* on the device's ready list */
    bool blocked; /* head waits on an event, registered with it */
    _Atomic int pins; /* orDeviceSynchronize callers holding this stream */
    uint64_t last_seq;
    or_stream *next_ready;
    or_stream *prev, *next; /* all streams of the device */
    /* Readable without the lock. */
    _Atomic uint64_t enq_seq;
    _Atomic uint64_t done_seq;
    or_notifier done; /* signalled (under dev->lock) when done_seq reaches wake_seq */
    /* The lowest done_seq a sleeping waiter waits for (UINT64_MAX: none).
     * A host thread in orStreamSynchronize behind a thousand queued calls is
     * woken once, not at every op: each wake-up takes a core from the
     * threads doing the work. */
    _Atomic uint64_t wake_seq;
    /* First failure of an op that ran after its call returned (a remote copy
     * the owner refused); the next synchronization reports and clears it. */
    _Atomic int async_error;
    /* Posted writes: small writes into another node's memory whose op
     * completed once the bytes left in the request message, and whose
     * owner has not acknowledged them yet (changed under dev->lock). Only
     * more such writes may start while any is posted; everything else, and
     * every synchronization, waits for the acknowledgements. */
    _Atomic int posted;
    /* Other copies with another node handed to the proxy and not finished:
     * with posted, what tells a synchronization it waits on the network. */
    _Atomic int remote;
    bool fenced; /* the head waits for posted to drain (dev->lock) */
    uint64_t vt_clock; /* virtual: end of the last op issued (vclock lock) */
    /* Held host functions issued and not yet released: ops issued meanwhile
     * wait, as their start is the held task's end (vclock lock). */
    int vt_holds;
    int trace_tid;     /* track in traces: 0 default stream, then creation order */
};

typedef struct or_event_waiter {
    or_stream *stream;
    uint64_t gen;
} or_event_waiter;

struct or_event {
    uintptr_t handle;
    unsigned flags;
    _Atomic int refs; /* the handle's, plus one per queued op naming it */
    pthread_mutex_t lock;
    /* Records are numbered 1, 2, ... and may complete out of order (they sit
     * on different streams); the set of completed ones is every number up to
     * done_prefix plus the few in done_extra. */
    uint64_t record_gen; /* records issued */
    uint64_t done_prefix;
    uint64_t *done_extra;
    size_t n_extra, cap_extra;
    uint64_t newest_done;    /* highest completed record */
    uint64_t newest_done_ns; /* and when it completed (CLOCK_MONOTONIC) */
    uint64_t newest_done_vt; /* and its virtual time */
    uint64_t vt_record;      /* virtual time of the newest record issued (vclock lock) */
    or_event_waiter *waiters;
    size_t nwaiters, cap_waiters;
    or_notifier done;
};

struct or_device {
    int id;
    const or_device_profile *profile;
    or_cpu_device hw;
    orDeviceProp prop;
    pthread_mutex_t mem_lock; /* guards arena */
    or_arena arena;
    _Atomic size_t strict_extent; /* strict mode toggles [0, strict_extent) */
    or_lock lock; /* its streams, ready lists and jobs */
    or_stream *ready_head[OR_NUM_PRIORITIES], *ready_tail[OR_NUM_PRIORITIES];
    or_op *jobs;       /* kernels with blocks still to hand out */
    or_stream *streams; /* every stream of the device, default included */
    or_stream default_stream;
    or_notifier work;  /* workers sleep here */
    bool stopping;
    bool peer_enabled[256]; /* orDeviceEnablePeerAccess, by peer ordinal */
    int global_id;          /* in the job: traces' process id, paths' ends */
    _Atomic int next_trace_tid;
};

typedef struct or_runtime {
    orError_t init_error;
    or_config cfg;
    int ndevices;
    or_device *devices;
    int local_rank, local_nranks; /* this process among the host's ranks */
    /* Strict mode: device memory readable only while open > 0. */
    pthread_mutex_t strict_lock;
    int strict_open;
    int strict_user_windows;
    /* Pinned host allocations, keyed by address. */
    pthread_mutex_t host_lock;
    or_extent_set host_allocs;
} or_runtime;

extern or_runtime or_rt;

/* runtime.c */
orError_t or_init(void);
or_device *or_current_device(void);
bool or_in_worker(void); /* inside a kernel or host function */
void or_strict_enter(void);
void or_strict_leave(void);
/* After an allocation raised dev's high-water mark. */
void or_strict_grow(or_device *dev, size_t high_water);

/* error.c */
/* Record err as the thread's last error and return it; once a sticky error
 * is set, record and return that instead, whatever err. */
orError_t or_error_record(orError_t err);
/* The first sticky error wins and stays for the process's life. */
void or_error_set_sticky(orError_t err);
orError_t or_error_sticky(void); /* orSuccess while there is none */

/* Every public call starts with this: lazy init, sticky init failure. */
/* Start-up has run (whether it succeeded or not); never starts it. */
bool or_init_finished(void);
#define OR_API_BEGIN()                                                 \
    do {                                                               \
        orError_t init_err_ = or_init();                               \
        if (init_err_ != orSuccess || or_error_sticky() != orSuccess)  \
            return or_error_record(init_err_);                         \
    } while (0)
#define OR_RETURN(err) return or_error_record(err)

/* stream.c */
void or_stream_init(or_stream *s, or_device *dev, int priority, unsigned flags);
orError_t or_stream_resolve(orStream_t handle, or_stream **out);
extern _Atomic uint64_t or_mem_frees; /* device memory freed so far (or_mem_free_count) */
or_op *or_op_new(or_op_kind kind, size_t payload);
void or_op_release(or_op *op);
/* Returns the op's sequence number in s (the op itself may be gone by then). */
uint64_t or_stream_enqueue(or_stream *s, or_op *op);
void or_stream_wait_seq(or_stream *s, uint64_t seq);
/* The stream's pending asynchronous error, cleared. */
orError_t or_stream_take_error(or_stream *s);
void or_stream_free_pending(or_stream *s);
void or_stream_unblock(or_stream *s);
/* An op starts running (its wall start, its activity record's running
 * state): on a worker, or on a layer's thread (a handed task). */
void or_stream_op_begin(or_op *op);
/* An op that completes outside a worker (a remote copy) is done. */
void or_stream_op_done(or_op *op);
/* A task the calling thread runs at once on an idle stream, with no op
 * queued for it (runtime_ext.h, or_inline_task_begin): false if the stream
 * is not idle, or in virtual time or while recording. */
bool or_stream_inline_begin(or_stream *s, uint64_t *seq);
void or_stream_inline_end(or_stream *s, uint64_t seq);
/* The inline task becomes a handed op at the head of s, still running. */
or_op *or_stream_inline_hand(or_stream *s, uint64_t seq);
void or_mark_worker_thread(int device);
void *or_device_worker_main(void *arg);

/* event.c */
void or_event_complete(or_event *ev, uint64_t gen, uint64_t vt);
void or_event_release(or_event *ev);
/* Under s->dev->lock: true if the record is done, else s is registered as a waiter. */
bool or_event_check_or_wait(or_event *ev, uint64_t gen, or_stream *s);

/* An allocation of another rank, opened through an IPC handle. */
typedef struct or_ipc_map {
    unsigned char *addr; /* where this process sees it */
    size_t size;         /* the allocation's requested size */
    int rank, device;    /* owner */
    uint64_t offset, alloc_id;
    bool remote; /* owner on another virtual node: bytes move through MPI */
    int refs;
    int opened_on; /* current device when opened */
} or_ipc_map;

typedef enum {
    OR_MEM_HOST,   /* anything the runtime does not own */
    OR_MEM_DEVICE, /* device memory this process can read and write directly */
    OR_MEM_REMOTE  /* device memory of another node */
} or_mem_class;

typedef struct or_mem_region {
    or_mem_class cls;
    or_device *dev; /* this process's device, NULL for opened IPC memory */
    or_ipc_map map; /* opened IPC memory */
} or_mem_region;

/* memory.c */
/* What [p, p+count) is; errors for freed memory, ranges past an allocation,
 * or another rank's memory that was not opened. */
orError_t or_mem_classify(const void *p, size_t count, or_mem_region *out);
/* Both ends of a copy (NULL ends are orErrorInvalidValue). */
orError_t or_mem_classify_copy(const void *dst, const void *src, size_t count, or_mem_region *d,
                               or_mem_region *s);
/* The live local allocation holding p. */
orError_t or_mem_allocation_of(const void *p, or_device **dev, or_extent *alloc);
/* Serve another rank: [offset, offset+length) of local device `device` must
 * lie in one live allocation (and start it, with that id, if alloc_id != 0). */
orError_t or_mem_resolve(int device, uint64_t offset, uint64_t length, uint64_t alloc_id,
                         void **ptr, uint64_t *size);
void or_memory_fini(void);
/* What addr is, for a fault report: "N bytes past the end of allocation of
 * M bytes at P", "inside freed allocation ...", "not device memory", ... */
void or_mem_describe(const void *addr, char *buf, size_t len);
/* Memcheck: the first allocation (of any device) whose canary bytes were
 * written (before the block, after the leading guard page; or past its end,
 * before the trailing guard page): true, the address and its description
 * (the bytes are restored, so that it is reported once). */
bool or_memcheck_canaries(void **addr, char *buf, size_t len);
/* Memcheck with strict mode: make every live block of dev readable or not. */
void or_memcheck_set_readable(or_device *dev, bool readable);

/* peer.c */
bool or_ipc_lookup(const void *p, or_ipc_map *out);
/* Do a kernel's arguments hold a pointer into remote memory? */
bool or_ipc_args_name_remote(const void *args, size_t size);
/* OPENREG_IPC_PARENT: take the parent's identity (if set); with
 * export_to_children, share this process's device memory with the processes
 * it starts and set OPENREG_IPC_PARENT for them. */
orError_t or_ipc_family_init(bool export_to_children);
/* orFree, under dev->mem_lock: the allocation at off is no longer exported. */
void or_ipc_family_forget(const or_device *dev, size_t off);
void or_ipc_fini(void);

#endif /* OR_INTERNAL_H */
