/*
 * src/vclock.h - the virtual clock (OPENREG_TIME=virtual).
 *
 * Every stream carries a clock in integer nanoseconds. Ops are charged when
 * they are issued (enqueued), in the order the program issues them, so the
 * times depend only on the program and the model, never on how the host
 * schedules the work: an op starts at the max of its stream's clock, the
 * issuing thread's host clock and the clocks of the events it waits on, and
 * ends its cost later. docs/virtual-time.md gives the model and its figures.
 *
 * Locking: one process-wide mutex (a leaf: taken under a device lock, never
 * the other way) guards the stream clocks, the events' record times and the
 * link timelines.
 */
#ifndef OR_VCLOCK_H
#define OR_VCLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { OR_TIME_WALL = 0, OR_TIME_VIRTUAL = 1 } or_time_mode;

/* The host end of a copy: host memory of this rank. */
#define OR_VT_HOST (-1)

/* Default links while no topology is declared (docs/virtual-time.md). */
#define OR_VT_KERNEL_LAUNCH_NS 3000ull /* device-side launch latency of a kernel */
#define OR_VT_LOCAL_LATENCY_NS 2000ull /* copy or memset within one device */
#define OR_VT_HOST_LINK_BPS 25000000000ull /* host <-> device, each direction (PCIe 4.0 x16) */
#define OR_VT_HOST_LINK_NS 5000ull
#define OR_VT_HOST_MEM_BPS 20000000000ull /* host to host memcpy */
#define OR_VT_HOST_MEM_NS 1000ull
#define OR_VT_PEER_BPS 25000000000ull /* device to device, same virtual node (PCIe P2P) */
#define OR_VT_PEER_NS 5000ull
#define OR_VT_NET_BPS 12500000000ull /* across virtual nodes (100 Gb/s) */
#define OR_VT_NET_NS 10000ull
/* An undeclared kernel: each thread of the grid is taken to do this much. */
#define OR_VT_GUESS_FLOPS_PER_THREAD 2.0
#define OR_VT_GUESS_BYTES_PER_THREAD 8.0

/* Link timelines keep at most this many busy intervals; beyond, the two
 * oldest are merged (the gap between them counts as busy). */
#define OR_VT_MAX_INTERVALS 512

/* A path between two ends of a copy. Without a topology it is one link
 * (`link`); with OPENREG_TOPO it is the topology path's directed links
 * (`hops`, read backwards and flipped when `reversed`: a host-to-device copy
 * uses the device's host path the other way), and a transfer occupies every
 * one of them for bytes / bottleneck bandwidth. */
typedef struct or_vpath {
    uint64_t latency_ns;
    uint64_t bytes_per_s;
    uint64_t link;    /* transfers naming the same link share its bandwidth */
    const char *type; /* LOC, PHB (host link), SYS (host memory), PIX (peer), NET;
                       * with a topology its path type (NVL, PIX, PHB, SYS, NET...) */
    int nhops;        /* 0: the one link `link`; else the topology's directed links */
    const int *hops;
    bool reversed;
} or_vpath;

/* The path's directed links, each a key naming one resource: transfers
 * whose paths name the same key share that link's bandwidth. */
int or_vpath_nlinks(const or_vpath *p);
uint64_t or_vpath_link(const or_vpath *p, int i);

/* Link timelines: for each link, the intervals during which transfers
 * occupy it. Zero-initialised is empty. The runtime keeps one set for the
 * copies of its process (under its lock); a collective's replay keeps its
 * own (collectives/vcost.c). The owner serialises the calls. */
typedef struct or_vtimeline or_vtimeline;
typedef struct or_vlinks {
    or_vtimeline *slots; /* open addressing on the link's key */
    size_t n, cap;
} or_vlinks;
/* The earliest *slot >= t with [*slot, *slot + d) free on every link of p,
 * which it then occupies; false (nothing reserved) when memory ran out. */
bool or_vlinks_reserve(or_vlinks *l, const or_vpath *p, uint64_t t, uint64_t d, uint64_t *slot);
void or_vlinks_free(or_vlinks *l);

extern bool or_vt_on; /* OPENREG_TIME=virtual; set once at start-up */

void or_vclock_start(bool on);
void or_vclock_fini(void);

/* The path between two ends, each a global device id or OR_VT_HOST. The one
 * place that knows links: with OPENREG_TOPO, the topology's path between the
 * two devices' topology devices (docs/virtual-time.md#declared-topology). */
or_vpath or_vclock_path(int src, int dst);
/* latency + ceil(bytes / bandwidth) of that path, in ns, ignoring contention. */
uint64_t or_vclock_path_cost(int src, int dst, uint64_t bytes);
/* ceil(bytes * 1e9 / bytes_per_s), exactly. */
uint64_t or_vclock_bytes_ns(uint64_t bytes, uint64_t bytes_per_s);

/* Global device id of this process's device d. */
int or_vclock_global_device(int d);

struct or_stream;
struct or_op;
/* Charge op, about to be queued on s (under s->dev->lock): sets op->vt_start
 * and op->vt_end and moves the stream's clock. */
void or_vclock_charge(struct or_stream *s, struct or_op *op);
/* The stream's clock: the end of the last op issued on it. */
uint64_t or_vclock_stream(struct or_stream *s);
struct or_event;
/* Virtual time of the newest record issued on ev. */
uint64_t or_vclock_event(struct or_event *ev);
/* Charge cost_ns on s from max(start_ns, its clock, the host clock). */
uint64_t or_vclock_advance(struct or_stream *s, uint64_t start_ns, uint64_t cost_ns);
/* Held tasks (or_launch_host_func_held): op, just charged on s, holds the
 * stream's clock until released; ops issued on s meanwhile wait (except on
 * a worker thread) so that they start at the task's end. */
void or_vclock_hold(struct or_stream *s, struct or_op *op);
void or_vclock_wait_release(struct or_stream *s);
void or_vclock_release(struct or_stream *s, uint64_t end_ns);
/* The calling thread waited for work that ends at t. */
void or_vclock_host_sync(uint64_t t);
uint64_t or_vclock_host(void);
/* A worker runs a host function: its thread's host clock is the op's. */
uint64_t or_vclock_host_enter(uint64_t t);
void or_vclock_host_leave(uint64_t saved);

#endif
