/*
 * collectives/occl_internal.h - communicators, tasks and the transport.
 *
 * Every collective call becomes a task run in stream order by a host
 * function on the communicator's device, so it starts after the work queued
 * before it and the stream's later work starts after it, as a NCCL kernel.
 * A task is a sequence of steps; each step is a set of point-to-point
 * transfers progressed together (a ring step sends and receives at once)
 * with a deadline, so a dead peer ends in occlTimeout, never a hang.
 *
 * Transfers between ranks of one virtual node move no data through MPI: the
 * sender publishes where its bytes are (device memory is mapped in every
 * process of the node) and the receiver reads them directly, reducing on the
 * fly if asked, then acknowledges. Between nodes, MPI carries the bytes.
 */
#ifndef OCCL_INTERNAL_H
#define OCCL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "occl.h"
#include "reduce.h"
#include "runtime_ext.h"
#include "topo_tree.h"
#include "vproto.h"

#define OCCL_COMM_MAGIC 0x4f43434c434f4d4dULL /* "OCCLCOMM" */
/* Payloads over MPI go in pieces MPI counts can express. */
#define OCCL_MPI_PIECE ((size_t)1 << 30)
/* Communicators spanning processes name sender and receiver in 10 bits each
 * of an MPI tag. */
#define OCCL_MAX_MPI_RANKS 1024
#define OCCL_TAG_SLOTS 255
/* Device scratch buffers a call may use at once (see occl_scratch). */
enum { OCCL_SCRATCH_A, OCCL_SCRATCH_B, OCCL_SCRATCH_SLOTS };
/* Network transfers go in OCCL_NET_SPLIT pieces of at least OCCL_NET_PIECE
 * bytes (more only past OCCL_MPI_PIECE each): a receive that reduces keeps
 * OCCL_NET_DEPTH pieces posted while it reduces the one that arrived. */
#define OCCL_NET_PIECE ((size_t)1 << 20)
#define OCCL_NET_SPLIT 4
#define OCCL_NET_MAX_PIECES 64
#define OCCL_NET_DEPTH 2
/* A network transfer of at most this many bytes that opens its call with
 * the peer goes as one message, the call's header followed by the bytes,
 * where a longer one sends the header first. */
#define OCCL_NET_INLINE ((size_t)4096)
/* The planner's decisions kept per communicator (virtual time), and the
 * most algorithms a decision records times for (>= OCCL_NUM_ALGOS). */
#define OCCL_PLAN_CACHE 32
#define OCCL_PLAN_MAX_ALGOS 8

/* A communicator's configuration (config.c): the user's occlConfig_t
 * checked, every field resolved to its value, commName copied into name
 * (cfg's string pointers are not kept, so the struct copies as a value). */
typedef struct occl_comm_config {
    occlConfig_t cfg;
    char name[128]; /* "" when unnamed */
} occl_comm_config;
/* NULL: the defaults. occlInvalidArgument with the reason for a bad one. */
occlResult_t occl_config_resolve(const occlConfig_t *user, occl_comm_config *out);

/* Logging: OCCL_DEBUG=WARN|INFO|TRACE; warnings always print. INFO lines
 * belong to a subsystem, and OCCL_DEBUG_SUBSYS (NCCL's syntax) selects
 * which print; OCCL_DEBUG_FILE sends every line to a file instead of
 * stderr. A file's lines are of the subsystem it defines as OCCL_LOG_SUBSYS
 * before including this header (INIT if it defines none). */
typedef enum { OCCL_LOG_NONE, OCCL_LOG_WARN, OCCL_LOG_INFO, OCCL_LOG_TRACE } occl_log_level;
enum {
    OCCL_SUBSYS_INIT = 1 << 0,   /* communicators: init, bootstrap, split, destroy */
    OCCL_SUBSYS_COLL = 1 << 1,   /* collective calls */
    OCCL_SUBSYS_P2P = 1 << 2,    /* transfers within a virtual node */
    OCCL_SUBSYS_NET = 1 << 3,    /* transfers between virtual nodes (MPI) */
    OCCL_SUBSYS_GRAPH = 1 << 4,  /* rings and trees from the topology */
    OCCL_SUBSYS_TUNING = 1 << 5, /* the planner's algorithm choices */
    OCCL_SUBSYS_ENV = 1 << 6,    /* settings read from the environment */
    OCCL_SUBSYS_ALL = (1 << 7) - 1
};
extern occl_log_level occl_log_threshold;
extern unsigned occl_log_subsys;
void occl_log(occl_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* OCCL_DEBUG_SUBSYS's list to a mask of OCCL_SUBSYS_*; -1 and the unknown
 * name in bad. OCCL_DEBUG_FILE's pattern expanded (%h, %p, %%); -1 if too long. */
long occl_parse_debug_subsys(const char *list, char *bad, size_t badlen);
int occl_expand_debug_file(const char *pattern, char *out, size_t outlen);
#ifndef OCCL_LOG_SUBSYS
#define OCCL_LOG_SUBSYS OCCL_SUBSYS_INIT
#endif
#define OCCL_WARN(...) occl_log(OCCL_LOG_WARN, __VA_ARGS__)
#define OCCL_INFO(...)                                                                   \
    do {                                                                                 \
        if (occl_log_threshold >= OCCL_LOG_INFO && (occl_log_subsys & (OCCL_LOG_SUBSYS))) \
            occl_log(OCCL_LOG_INFO, __VA_ARGS__);                                        \
    } while (0)

/* A failed call records why, for occlGetLastError. */
occlResult_t occl_fail(occlResult_t res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A call as its peers must see it (collective fingerprints): every transfer
 * carries its call's, and the receiving end compares them before it touches
 * the data, so calls issued in different orders or with different types,
 * ops, roots or counts fail on every rank instead of mixing data. */
typedef struct occl_fp {
    uint64_t comm_id; /* the communicator's id: stale traffic of another one never matches */
    uint64_t seq;     /* the communicator's collective calls so far, this one included; 0: a point-to-point call */
    uint64_t count;
    int32_t root;     /* Broadcast, Reduce, Gather, Scatter: the root; Send, Recv: the peer; else -1 */
    uint8_t coll;     /* occl_coll */
    uint8_t type;     /* occlDataType_t */
    uint8_t op;       /* occlRedOp_t of a reduction (occlNumOps: a PreMulSum); else OCCL_FP_NO_OP */
    uint8_t pad;
} occl_fp;
#define OCCL_FP_NO_OP 0xff
#define OCCL_FP_PAST 8 /* collectives' fingerprints a communicator keeps */

/* What a transfer carries: its call's fingerprint and, for a collective,
 * the one before it on this communicator (a peer still in that earlier call
 * is then named against what this rank ran as it). */
typedef struct occl_fp_pair {
    occl_fp cur, prev;
} occl_fp_pair;

/* What a rank that found a mismatch tells the others: both sides. Over the
 * network the same message also says "rank[0] waits for you in call fp[0]"
 * (kind OCCL_NOTICE_WAITING), so that two ranks that both wait to receive,
 * in different calls, find out. */
enum { OCCL_NOTICE_MISMATCH, OCCL_NOTICE_WAITING };
typedef struct occl_notice {
    uint32_t kind;
    uint32_t sending; /* OCCL_NOTICE_WAITING: rank[0] waits in a send of transfer `seq`, not a receive */
    uint64_t comm_id;
    uint64_t seq; /* the collective call that failed, 0: a point-to-point call (only its peer is told) */
    int32_t rank[2];
    occl_fp fp[2];
} occl_notice;

/* The mailbox of one direction of a pair, in the sender's control block. */
typedef struct occl_slot {
    _Alignas(64) _Atomic uint64_t seq; /* transfers posted to this peer */
    or_mem_ref ref;                    /* where the bytes of transfer `seq` are */
    uint64_t bytes;
    uint32_t p2p; /* transfer `seq` is of a point-to-point call (occlRecvAnySource matches it) */
    occl_fp_pair fp; /* its call (with fingerprints on); in ack[j]: cur is the Recv of wait_seq */
    /* ack[j] only: the transfer from rank j that this rank's latest Recv
     * from it waits for (occl_fp_check_wait). */
    _Atomic uint64_t wait_seq;
} occl_slot;

/* Per rank, in its device's memory (shared within its node). */
typedef struct occl_ctrl {
    uint64_t magic;
    /* Peers ring this after posting to or acknowledging this rank; a rank
     * with nothing to do sleeps on it (a futex shared across processes). */
    _Atomic uint32_t doorbell;
    _Atomic uint32_t sleepers;
    /* A peer of this node that found mismatched calls writes its notice
     * here: 0 empty, 1 being written, 2 posted. */
    _Atomic uint32_t notice_state;
    occl_notice notice;
    /* The collective this rank is in, for peers of its node that wait for
     * it (written under a sequence lock: odd while being written). */
    _Atomic uint32_t current_version;
    occl_fp current;
    /* Peers of this node that have let go of this block (see ctrl_retire). */
    _Atomic uint32_t released;
    /* out[j]: this rank's transfers to rank j; ack[j]: transfers from rank j
     * this rank has consumed. Laid out as out[nranks] then ack[nranks]. */
    occl_slot slots[];
} occl_ctrl;

typedef struct occl_peer {
    int world_rank;
    int device;
    int node;
    uint64_t mem_bps; /* its device's memory bandwidth, bytes/s (from the bootstrap) */
    or_mem_ref ctrl_ref;
    occl_ctrl *ctrl; /* mapped here when on this node */
    uint64_t sent, received; /* transfer counters of this pair, this side */
    /* Network: the collective call whose header last went to / came from
     * this peer (a call's first transfer each way carries one), and the
     * call of the last transfer started to it. */
    uint64_t hdr_sent, hdr_received;
    occl_fp last_sent;
} occl_peer;

struct occlComm {
    uint64_t magic;
    int nranks, rank, device;
    uint64_t id;  /* from the unique id */
    int tag_slot; /* this communicator's MPI tags: slot << 20 | src << 10 | dst */
    int tag_base;
    occl_peer *peers;
    int *ring; /* comm ranks in ring order: grouped by node */
    int ring_pos;
    occl_ctrl *ctrl; /* this rank's control block */
    size_t ctrl_bytes;
    uint32_t ctrl_readers; /* the other ranks of this node, which map it */
    or_job_view job;
    _Atomic int async_error; /* an occlResult_t */
    bool finalized;
    /* occlCommRevoke: no more calls; the thread that waits for the calls
     * it stopped when the communicator is non-blocking (joined at free). */
    _Atomic bool revoked;
    /* Launched on a stream and not yet ended; a call running on its calling
     * thread without a stream op holds `lock` instead (enqueue.c). */
    _Atomic int tasks_live;
    _Atomic bool suspended; /* occlCommSuspend(OCCL_SUSPEND_MEM): scratch freed, calls refused */
    bool revoke_thread_started;
    pthread_t revoke_thread;
    or_lock lock; /* serializes tasks of this communicator */
    /* The communicator's thread and its queue of tasks (enqueue.c). */
    pthread_t runner;
    pthread_mutex_t runner_lock;
    pthread_cond_t runner_cv;
    struct occl_task *runner_head, *runner_tail;
    bool runner_started, runner_stop;
    /* Tasks queued for or running on the runner (changed under runner_lock,
     * read without it). A thread that issued a task runs it itself when the
     * runner has none, holding `lock` (enqueue.c, caller_claim). */
    _Atomic int runner_load;
    /* Signalled when runner_load falls to 0, for a calling thread waiting
     * for the runner to finish the calls handed over to it (enqueue.c,
     * runner_drain); when the last such wait gave up, the calls finished
     * (enqueue.c, progress) and the tasks_live below which calls are
     * queued without waiting while no more are. */
    or_notifier runner_idle;
    _Atomic uint64_t stuck_progress;
    _Atomic int stuck_queue;
    /* Tasks of calls that never run on the calling thread (large calls,
     * groups) launched and not yet ended: a small call does not wait for
     * the runner behind one of them (enqueue.c). */
    _Atomic int large_live;
    _Atomic uint64_t runner_calls; /* tasks the runner ran; occl_comm_runner_calls reads it (tests) */
    /* The low-latency path (ll.c): every peer of the node had finished at
     * least this call when this rank last looked (their `done` only grow). */
    uint64_t ll_peers_done;
    /* Calls left in which a rooted call's reader that has caught up with its
     * poster naps instead of yielding: set when the poster was found done
     * with a later call than the one read (ll.c, note_pace). */
    int ll_ahead;
    /* When this rank last napped, in which call, and how long: the
     * stream's pace since sets the next call's naps' (ll.c, nap_length). */
    uint64_t ll_nap_ns, ll_nap_seq, ll_nap_len;
    _Atomic uint64_t ll_naps; /* how many times; occl_comm_ll_naps reads it (tests) */
    _Atomic uint64_t ll_naps_woken; /* of them, ended by a poster's ring (occl_comm_ll_naps_woken) */
    /* Sleeps of the low-latency path for a post or a free box, and of them
     * those ended by a ring, not by the periodic look (occl_comm_ll_sleeps). */
    _Atomic uint64_t ll_sleeps, ll_sleeps_woken;
    /* Headers this rank sent over the network (transport.c), of them those
     * with their bytes in the same message and those sent synchronously
     * (occl_comm_net_headers). Written by running calls, under comm->lock. */
    _Atomic uint64_t net_headers, net_headers_inline, net_headers_sync;
    char last_error[256];
    int probe_from; /* occlRecvAnySource looks at the peers after this one first */
    /* Fingerprints (fingerprint.c): on unless OCCL_CHECK_CALLS=0; the running
     * collective's; a peer's notice of a mismatch, once received; the notices
     * this rank sent over the network, until MPI is done with them. */
    bool check_calls;
    bool network; /* some peer is on another node */
    /* More ranks of this communicator on this node than cores: a waiting
     * rank yields at once instead of spinning (ll.c, transport.c). */
    bool oversubscribed;
    occl_fp fp;
    /* The last collectives' fingerprints, by sequence number: a peer still
     * in an earlier call is named against what this rank ran as that call. */
    occl_fp past[OCCL_FP_PAST];
    bool noticed;
    occl_notice notice;
    /* The notice sent to network peers, and its sends (nranks); on the
     * heap so that sends still open when the communicator goes can keep it
     * (occl_net_orphan). */
    struct occl_notices_out {
        occl_notice msg;
        MPI_Request req[];
    } *notices_out;
    /* Network peers: the collective each said it waits in for this rank,
     * and this rank's "waiting" messages to them (occl_fp_check_waits). */
    struct occl_peer_wait {
        occl_fp heard;      /* the collective it waits in */
        occl_fp heard_recv; /* a receive of it blocked on its transfer heard_xfer from this rank */
        uint64_t heard_xfer;
        occl_fp heard_send; /* a send of it blocked on its transfer heard_send_xfer to this rank */
        uint64_t heard_send_xfer;
        /* the collective, and the receive's and the send's transfers, last told about */
        uint64_t told, told_xfer, told_send_xfer;
        occl_notice msg;
        MPI_Request req;
    } *waits;

    /* Ops made by occlRedOpCreatePreMulSum: op = occlNumOps + index. */
    struct occl_premul_op {
        bool used;
        occlDataType_t type;
        occlScalarResidence_t residence;
        const void *device_scalar; /* read at each use */
        occl_redop op;             /* the immediate scalar */
    } *premul;
    int npremul;
    uint64_t splits; /* occlCommSplit calls so far: part of the children's ids */
    /* occlCommGrow exchanges so far (the same on every rank: part of the
     * grown communicators' ids), and whether this rank has handed out an
     * id for the next one with occlCommGetUniqueId. */
    uint64_t grows;
    bool grow_id_out;
    occl_comm_config config; /* occlCommInitRankConfig's, or the parent's for a split */
    bool async_handle;       /* made by a non-blocking init: comm_free keeps the struct */
    struct occl_reg *regs;   /* occlCommRegister's ranges (register.c) */
    struct occlWindow *wins; /* occlCommWindowRegister's windows (register.c) */
    uint64_t win_next;       /* windows registered so far: the next one's ordinal */
    struct occl_rma_state *rma; /* one-sided calls' state (rma.c), made by the first */
    /* Bytes this rank copied into OCCL's own memory (scratch, low-latency
     * boxes) on the way to a result: what reading registered buffers in
     * place saves. occl_comm_staged_bytes reads it (tests, OCCL_DEBUG). */
    _Atomic uint64_t staged_bytes;
    /* occlCommShrink's children so far, per remaining set: only the
     * remaining ranks call it, so the split counter may differ between them
     * and an excluded rank; a count per set is the same on all callers. */
    struct occl_shrink_count {
        uint64_t set;
        uint64_t count;
    } shrinks[16];
    /* Virtual nodes, in ring order: node k's ranks are ring[node_first[k]]
     * .. ring[node_first[k+1]-1], and ring[node_first[k]] is its leader. */
    int nnodes, my_node; /* my_node: index of this rank's node */
    int *node_first;     /* nnodes + 1 entries */
    /* The double binary tree of the tree algorithms (topo_tree.h): from the
     * topology's devices, else from the virtual nodes above. */
    occl_trees trees;
    /* Scratch kept across calls (tasks of a communicator run one at a time):
     * device memory peers may read, and host memory that network receives
     * land in before they are reduced. Grown on demand, freed when the
     * communicator is finalized, destroyed or aborted, so a large call does
     * not fault fresh pages in every time. */
    void *scratch[OCCL_SCRATCH_SLOTS];
    size_t scratch_bytes[OCCL_SCRATCH_SLOTS];
    void *staging;
    size_t staging_bytes;
    bool staging_busy;
    /* Virtual time: the memory bandwidth of every rank's device, from the
     * exchange of entry clocks, while a modelled call runs (else NULL); and
     * the planner's decisions from the model (tuning.c), kept per call shape
     * so that the replay runs once per shape, not on every call. */
    const uint64_t *vbps;
    struct occl_plan_entry {
        bool used;
        unsigned char coll, type, algo, proto;
        int root;     /* Reduce's root; -1 for the rest */
        size_t count;
        /* each candidate's completion per protocol, UINT64_MAX: not one */
        uint64_t est_ns[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS];
        /* a candidate not replayed: its floor (above the pick); else 0 */
        uint64_t floor_ns[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS];
    } plan_cache[OCCL_PLAN_CACHE];
    int plan_next; /* the entry the next new shape replaces */
    /* NCCL tuner and profiler plugins this communicator uses, or NULL
     * (plugin.h). */
    struct occl_tuner_comm *tuner;
    struct occl_prof_comm *prof;
};

/* Device scratch of at least `bytes` in slot `slot` of comm (its contents
 * are not kept between calls); NULL (with the reason recorded) if the device
 * has no memory for it. Host staging likewise: occl_staging_take gives the
 * comm's buffer if free, else a fresh one that occl_staging_give frees. */
void *occl_scratch(occlComm_t comm, int slot, size_t bytes);
void *occl_staging_take(occlComm_t comm, size_t bytes);
void occl_staging_give(occlComm_t comm, void *p);
void occl_scratch_release(occlComm_t comm); /* frees all of it */

/* A point-to-point transfer in flight. */
typedef enum { OCCL_XFER_SEND, OCCL_XFER_RECV } occl_xfer_kind;
typedef struct occl_xfer {
    occl_xfer_kind kind;
    int peer;
    void *buf;       /* send: source; recv: destination */
    size_t bytes;
    /* Of a point-to-point call (occlSend, occlRecv), not a collective's step:
     * its mailbox post is marked and its MPI messages go in job.p2p_comm. */
    bool p2p;
    /* A receive may reduce instead of copying: buf = with (op) incoming, where
     * with may be buf itself. */
    bool reduce;
    const void *with;
    occlDataType_t type;
    const occl_redop *op;
    /* An intra-node receive that holds: instead of copying, it leaves the
     * address of the sender's bytes in `mapped` and keeps the sender waiting
     * until occl_xfer_release (so several peers' buffers can be reduced in
     * one pass). */
    bool hold;
    const void *mapped;
    /* Its call's fingerprint (NULL: the running collective's, comm->fp). */
    const occl_fp *fp;
    occl_fp_pair hdr; /* network: the header received or sent */
    bool with_hdr;
    /* Network, a send opening its call with the peer: the message carrying
     * its header (opening), with the bytes when they are up to
     * OCCL_NET_INLINE, and sent eagerly when the call also receives from
     * that peer (eager), whose header is checked on this side. */
    bool eager;
    void *opening;
    /* With hold: the sender goes on as soon as the bytes are mapped, not at
     * release. For algorithms in which the sender cannot rewrite those bytes
     * before it hears from this receiver again (nvls_all_reduce). */
    bool early_ack;
    /* A send of a buffer the receiver writes into (with a held receive):
     * post_only finishes it in occl_xfers_run once posted, and a later run
     * with `resume` set (nothing else changed) waits for the receiver's
     * release, i.e. for its writes. */
    bool post_only, resume;
    /* progress */
    int state;
    uint64_t seq;
    or_mem_ref ref; /* intra-node send: where buf is, for the receiver */
    /* Network: the transfer goes in npieces pieces of `piece` bytes (the
     * last shorter); a receive that reduces lands them in staging, a ring of
     * OCCL_NET_DEPTH pieces, and reduces each as it arrives. */
    size_t piece;
    int npieces, next_post, next_done;
    void *staging;
    MPI_Request req[OCCL_NET_MAX_PIECES + 1]; /* a send's header last */
    int nreq; /* requests still outstanding */
} occl_xfer;

/* Wake a rank that may sleep on its control block's doorbell. */
void occl_ring_bell(occl_ctrl *c);
/* A wait that saw nothing move for `looks` looks in a row backs off: spin,
 * yield, then sleep on this rank's doorbell (read as `bell` before the
 * look), for at most 50 us when network traffic must be polled. A wait
 * with network traffic yields for OCCL_NET_YIELD_US before it sleeps.
 * A look that finds progress sets looks to 0. */
typedef struct occl_idle {
    unsigned looks;
    uint64_t since; /* when the wait began to yield */
} occl_idle;
void occl_idle_wait(occlComm_t comm, occl_idle *w, uint32_t bell, bool network, uint64_t deadline);
/* Whether the wait's next back-off is a sleep. */
bool occl_idle_sleeping(const occl_idle *w, bool network);
enum { OCCL_IDLE_SPIN = 64, OCCL_IDLE_SLEEP = 80 };
#define OCCL_NET_YIELD_US 200
/* Progress a set of transfers until all are done or the deadline passes. */
occlResult_t occl_xfers_run(occlComm_t comm, occl_xfer *x, int n);
/* The same in parts, for a call that the calling thread begins and the
 * communicator's thread may finish: begin posts the set; each wait
 * progresses it until it is done (occlSuccess), fails, or, with give_up_ns
 * not 0, that time passes with the set not done (occlInProgress: wait
 * again, from any thread holding the communicator). Not for a profiled
 * communicator, whose plugin sees occl_xfers_run. */
typedef struct occl_xfer_set {
    occl_xfer *x;
    int n, left;
    int *before; /* receives queued behind another from the same peer */
    bool p2p;
    uint64_t deadline, idle_since;
    occl_idle idle;
} occl_xfer_set;
occlResult_t occl_xfers_begin(occlComm_t comm, occl_xfer_set *set, occl_xfer *x, int n);
occlResult_t occl_xfers_wait(occlComm_t comm, occl_xfer_set *set, uint64_t give_up_ns);
/* Let the sender of a held receive go on (its bytes are no longer read). */
void occl_xfer_release(occlComm_t comm, occl_xfer *x);
/* Take and drop what peers on other nodes sent this rank that no receive
 * took (after a failed call), so that a later communicator of its tags does
 * not meet it. */
void occl_xfer_drain(occlComm_t comm);
/* Sends given up (cancelled, or their communicator going) and mem, the
 * memory they read: mem is freed once MPI has completed all of reqs[0..n),
 * which are MPI_REQUEST_NULL on return. Reap: free what has completed,
 * return how many are left. */
void occl_net_orphan(MPI_Request *reqs, int n, void *mem);
int occl_net_orphans_reap(void);
/* Wait until some peer's next transfer to this rank is a point-to-point send
 * that has been posted, and name that peer (occlRecvAnySource); occlTimeout
 * at the deadline. */
occlResult_t occl_xfer_probe(occlComm_t comm, int *peer);

/* fingerprint.c */
struct occl_call;
/* The fingerprint of call c; a collective's also becomes comm->fp, with
 * the communicator's next sequence number. */
occl_fp occl_fp_of(const struct occl_call *c);
void occl_fp_begin(occlComm_t comm, const struct occl_call *c);
/* occl_fp_match is inline, after occl_coll. */
/* What a transfer of the running call carries. */
occl_fp_pair occl_fp_carried(occlComm_t comm, const occl_fp *fp);
/* Both sides differ: fail with occlInvalidUsage naming both, and tell the
 * other ranks of the call (all of a collective, the peer of a Send).
 * theirs_prev (may be NULL): the peer's collective before theirs. */
occlResult_t occl_fp_mismatch(occlComm_t comm, int peer, const occl_fp *theirs,
                              const occl_fp *theirs_prev, const occl_fp *mine);
/* A notice from a peer that applies to the running call: occlInvalidUsage
 * with it; probe_net also looks for notices over the network. */
occlResult_t occl_notice_check(occlComm_t comm, bool p2p, bool probe_net);
/* The tag of notices to comm rank `rank` on the job's control communicator:
 * one process may hold several ranks of a communicator (its devices). */
static inline int occl_ctl_tag(occlComm_t comm, int rank) { return comm->tag_slot << 10 | rank; }
/* Transfer x has waited `waited_ns` without moving: whether its peer is in
 * a call that can never meet this one (both waiting to receive); a network
 * peer is told which call this rank waits in, once per call. */
struct occl_xfer;
occlResult_t occl_fp_check_wait(occlComm_t comm, const struct occl_xfer *x, uint64_t waited_ns);
/* Whether transfer x would move at its next look: its peer has acted on it
 * since the last one (transport.c). */
bool occl_xfer_moved(occlComm_t comm, const struct occl_xfer *x);
/* Forget notices still in flight (when the communicator is freed). */
void occl_notice_release(occlComm_t comm);

/* One collective or point-to-point call, copied at enqueue. */
typedef enum {
    OCCL_COLL_ALLREDUCE,
    OCCL_COLL_BROADCAST,
    OCCL_COLL_REDUCE,
    OCCL_COLL_ALLGATHER,
    OCCL_COLL_REDUCESCATTER,
    OCCL_COLL_ALLTOALL,
    OCCL_COLL_GATHER,
    OCCL_COLL_SCATTER,
    OCCL_COLL_SEND,
    OCCL_COLL_RECV,
    /* one-sided calls (rma.c): never grouped with sends and receives */
    OCCL_COLL_PUTSIGNAL,
    OCCL_COLL_SIGNAL,
    OCCL_COLL_WAITSIGNAL
} occl_coll;

/* Whether a receive with fingerprint mine matches a send with theirs. */
static inline bool occl_fp_match(const occl_fp *mine, const occl_fp *theirs)
{
    if (mine->comm_id != theirs->comm_id || mine->type != theirs->type || mine->count != theirs->count)
        return false;
    if (!mine->seq || !theirs->seq) /* a Send meets only a Recv */
        return !mine->seq && !theirs->seq && theirs->coll == OCCL_COLL_SEND &&
               mine->coll == OCCL_COLL_RECV;
    return mine->seq == theirs->seq && mine->coll == theirs->coll && mine->op == theirs->op &&
           mine->root == theirs->root;
}

static inline bool occl_coll_is_rma(occl_coll c) { return c >= OCCL_COLL_PUTSIGNAL; }

typedef struct occl_call {
    occl_coll coll;
    occlComm_t comm;
    const void *sendbuff;
    void *recvbuff;
    size_t count;
    occlDataType_t type;
    occl_redop op;
    bool avg;
    const void *device_scalar; /* PreMulSum whose scalar is read when the call runs */
    int root; /* or peer */
    orStream_t stream;
    int stream_device; /* where stream runs: NULL means that device's default stream */
    /* occlRecvAnySource: the caller's variable that gets the sender's rank;
     * root is -1 until the task finds the sender. */
    int *source;
    /* The low-latency path's progress (ll.c), kept in the task so a call
     * begun on the calling thread can end on the communicator's; NULL:
     * the call keeps its own and runs to its end. */
    struct occl_ll_state *ll;
    /* One-sided calls (root is the peer of PutSignal and Signal). */
    struct occl_rma_args {
        uint64_t win;    /* PutSignal: the target window's ordinal on the communicator */
        size_t offset;   /* in it, in bytes */
        int sig, ctx;
        int ndesc;       /* WaitSignal: its descriptors, copied (freed by occl_call_release) */
        occlWaitSignalDesc_t *descs;
    } rma;
    /* The stream as enqueue looked it up, for a call launched right away;
     * none (NULL) in a group's calls: the stream may go before occlGroupEnd. */
    or_stream_ref sref;
} occl_call;

/* rma.c: one-sided calls on symmetric memory windows. A window is named
 * across ranks by its ordinal on the communicator; each rank publishes its
 * live windows and its signal counters in its control block, after the
 * low-latency area. */
#define OCCL_RMA_WINDOWS 64 /* live windows per communicator */
#define OCCL_RMA_SIGNALS 1  /* signal indices per peer (NCCL 2.31: 0 only) */
#define OCCL_RMA_CONTEXTS 1 /* contexts (NCCL 2.31: 0 only) */
size_t occl_rma_area_offset(int nranks);
size_t occl_rma_area_bytes(int nranks);
/* Publish window `index` ([ref, +bytes)) in comm's control block; false if
 * OCCL_RMA_WINDOWS are live already. Withdraw it (at deregistration). */
bool occl_rma_publish(occlComm_t comm, uint64_t index, const or_mem_ref *ref, uint64_t bytes);
void occl_rma_withdraw(occlComm_t comm, uint64_t index);
/* Enqueue-time checks of a one-sided call (its peer, stream and buffer are
 * checked already); copies WaitSignal's descriptors. */
occlResult_t occl_rma_check(occl_call *c);
/* Run a one-sided call (on the communicator's thread, in stream order). */
occlResult_t occl_rma_run(occl_call *c);
/* What a call owns (WaitSignal's descriptors), freed once. */
void occl_call_release(occl_call *c);
/* Pending network puts and unread incoming ones, at the communicator's end. */
void occl_rma_release(occlComm_t comm);
/* register.c: window win of comm, its ordinal and size; false if it is not one. */
bool occl_window_find(occlComm_t comm, occlWindow_t win, uint64_t *index, size_t *bytes);
/* comm's window of ordinal index: where it is and its size; false if none. */
bool occl_window_by_index(occlComm_t comm, uint64_t index, void **user, size_t *bytes);

/* ll.c: the low-latency path for small collectives within one node (each
 * rank posts its input with the call's number into a box of its control
 * block; the ranks that need it read it from there). OCCL_LL_MAX_BYTES
 * (default OCCL_LL_DEFAULT_BYTES, at most OCCL_LL_BOX_BYTES) bounds the
 * input a call may post, and sizes the boxes. */
#define OCCL_LL_BOX_BYTES (16 << 10) /* the largest OCCL_LL_MAX_BYTES */
#define OCCL_LL_DEFAULT_BYTES 4096
#define OCCL_LL_MAX_RANKS OCCL_MAX_MPI_RANKS
/* Calls of at most OCCL_LL_SMALL_BYTES per rank have this many boxes (256
 * bytes each) per rank and communicator: a rank that runs ahead by that
 * many calls sleeps until its readers have freed half of them, and the
 * reader that does wakes it. With more ranks than cores, a sleep and its
 * wake-up take about 10 us of kernel time on these machines: at 128 boxes
 * they were 40% of the CPU of a stream of 8-byte broadcasts on 4 ranks, at
 * 1024 a few percent (docs/occl-perf.md). */
#define OCCL_LL_SMALL_BOXES 1024
#define OCCL_LL_SMALL_BYTES 128
/* How long a call run on the calling thread waits for its peers before the
 * communicator's thread takes it over (OCCL_CALLER_WAIT_US). */
#define OCCL_CALLER_WAIT_DEFAULT_US 200
/* ... with more ranks of the communicator on the node than cores. */
#define OCCL_CALLER_WAIT_OVERSUBSCRIBED_US 2000
/* How long a rooted call's reader that caught up with a poster running
 * ahead naps before it looks again (OCCL_LL_NAP_US). */
#define OCCL_LL_NAP_DEFAULT_US 20
typedef struct occl_ll_area occl_ll_area;
typedef struct occl_ll_state {
    bool begun;          /* seq and fp are set */
    bool posted;         /* this rank's input is in its box */
    occl_fp fp;          /* the call's fingerprint (comm->fp moves on to later calls) */
    uint64_t seq;        /* the call's sequence number on the communicator */
    uint64_t wait_ns;    /* on the calling thread: how long it may wait for peers; 0: no limit */
    uint64_t give_up_ns; /* then when it returns occlInProgress (posted or not), set at its first wait */
    int missing;         /* the first peer whose box was not posted at the last look */
    int from;            /* the one peer whose box this rank reads, or LL_FROM_ALL, LL_FROM_NONE */
    size_t read_bytes;   /* what each peer read posts */
    uint64_t free_need;  /* 0, or the done every peer must reach before this rank posts */
    uint64_t seen[OCCL_LL_MAX_RANKS / 64]; /* peers whose box was found holding the call */
    /* A small all-reduce across nodes (occl_net_small_run): its transfers,
     * their sources and the set in flight, its input and scratch, its op. */
    struct occl_net_small {
        occl_xfer *xf;
        const void **srcs;
        occl_xfer_set set;
        const void *input;
        void *all;
        occl_redop op;
    } net;
} occl_ll_state;
enum { LL_FROM_ALL = -1, LL_FROM_NONE = -2 };
size_t occl_ll_area_offset(int nranks); /* in a control block of nranks */
size_t occl_ll_area_bytes(void);
void occl_ll_init(occl_ctrl *c, int nranks); /* a control block just zeroed */
/* Reads OCCL_LL_MAX_BYTES and OCCL_CALLER_WAIT_US; false with the reason in error. */
bool occl_ll_settings(char *error, size_t size);
/* OCCL_CALLER_WAIT_US in ns, or its default for comm. */
uint64_t occl_caller_wait_ns(occlComm_t comm);
/* A number that grows whenever a peer of the node finishes a call on the
 * low-latency path: a caller that waits tells slow peers from stuck ones by
 * it (enqueue.c). */
uint64_t occl_ll_peers_progress(occlComm_t comm);
/* Whether call c takes the low-latency path: the same answer on every rank
 * of a matching call. */
bool occl_ll_eligible(const occl_call *c);
/* For an eligible call: whether it takes the low-latency path, which is
 * OCCL's choice unless an NCCL tuner plugin decides (a choice of LL takes
 * it; tuning.c). Asks the tuner: on the communicator's thread only. */
bool occl_ll_wanted(const occl_call *c);
/* Whether call c is a small call of a communicator of one rank, which the
 * calling thread may run as it runs a low-latency call (enqueue.c). */
bool occl_ll_solo(const occl_call *c);
/* Run (or, with st->posted, resume) call c on the low-latency path;
 * occlInProgress when its wait for peers outlasted st->wait_ns. */
occlResult_t occl_ll_run(const occl_call *c, occl_ll_state *st);
/* Whether call c is an all-reduce across nodes small enough for the
 * calling thread: one transfer each way with every peer (the direct
 * algorithm, as planned on every rank) and a local reduction
 * (algorithms.c). */
bool occl_net_small_eligible(const occl_call *c);
/* Run (or, with st->begun, resume) such a call; occlInProgress when its
 * wait for peers outlasted st->wait_ns. */
occlResult_t occl_net_small_run(const occl_call *c, occl_ll_state *st);
/* Whether peer j of this node cannot be on its way to collective `mine`
 * (fingerprint.c). */
occlResult_t occl_fp_check_ll(occlComm_t comm, int j, const occl_fp *mine);

/* Run one call now (on the device's worker, in stream order). */
occlResult_t occl_run_call(occl_call *call);
/* Run several calls of one device together (a group's sends and receives). */
occlResult_t occl_run_calls(occl_call *calls, int n);

/* topo_ring.c: with OPENREG_TOPO, c->ring becomes the topology's ring of
 * the comm's devices (c->peers must be filled); else it stays as it is. */
void occl_ring_follow_topology(occlComm_t c);
/* topo_tree.c: c->trees from the topology (OPENREG_TOPO) or from the virtual
 * nodes (c->ring, c->node_first must be set); freed by occl_trees_free. */
occlResult_t occl_trees_build(occlComm_t c);
void occl_trees_free(occlComm_t c);

/* tuning.c: the algorithm a call uses (AllReduce: ring, tree, direct,
 * hierarchical or, on one virtual node, nvls; Reduce: ring or tree; the
 * rest: ring). */
typedef enum {
    OCCL_ALGO_RING,
    OCCL_ALGO_TREE,
    OCCL_ALGO_DIRECT,
    OCCL_ALGO_HIERARCHICAL,
    OCCL_ALGO_NVLS,
    OCCL_NUM_ALGOS
} occl_algo;
occl_algo occl_plan(const occl_call *call);
/* What occl_plan picks in wall time without a tuner plugin (the cost
 * formulas), reading nothing the communicator's thread writes: for the
 * calling thread. */
occl_algo occl_plan_wall(const occl_call *call);
/* The plan's INFO line of a call planned by the cost formulas, as
 * occl_plan logs it (tests read it). */
void occl_plan_log(const occl_call *call, occl_algo algo);
/* The algorithm and the protocol: in virtual time the pair the model
 * predicts fastest among those OCCL_ALGO and OCCL_PROTO allow; in wall time
 * the algorithm of occl_plan and the fastest allowed protocol of NCCL's
 * order of preference for data movement (Simple first), which changes
 * nothing there (vproto.h). */
typedef struct occl_choice {
    occl_algo algo;
    occl_proto proto;
} occl_choice;
occl_choice occl_plan_choice(const occl_call *call);
/* OCCL_PROTO's masks per collective (tuning.c); 0, or -1 with the reason
 * in why for a value that is not valid (comm.c refuses to start on it). */
int occl_proto_settings(char *why, size_t why_size);
/* Whether OCCL_ALGO chooses the algorithms of collective c. */
bool occl_algo_restricted(occl_coll c);
size_t occl_chain_chunk(size_t bytes); /* algorithms.c: Reduce's pipeline chunk */
#define OCCL_BROADCAST_CHUNK ((size_t)4 << 20) /* Broadcast's pipeline chunk */

/* vcost.c: run a call (or a group's consecutive sends and receives) and
 * account for it: in virtual time, exchange entry clocks with the peers and
 * move *clock (this rank's entry) to the call's end; in traces, a slice. */
occlResult_t occl_vrun(occl_call *calls, int n, uint64_t *clock);
/* occlGroupSimulateEnd: charge calls[0..n) of one communicator as
 * occl_vrun would, without running them or talking to the peers: clocks[r]
 * is rank r's virtual clock (ns), moved to its end of the calls. Each
 * collective is planned and replayed as in virtual time; for sends and
 * receives only this rank's side is known (its peers are taken to enter at
 * their clocks and to end with it). */
occlResult_t occl_vsimulate(const occl_call *calls, int n, uint64_t *clocks);
const char *occl_algo_name(occl_algo a);
/* Waits until no call of comm is queued or running, and returns holding
 * comm->lock (register.c). */
void occl_comm_quiesce_locked(occlComm_t comm);
/* Frees the registrations left on comm (register.c). */
void occl_regs_release(occlComm_t comm);
/* [p, p + bytes) lies in one of comm's registrations (occlCommRegister) or
 * windows (occlCommWindowRegister). */
bool occl_buffer_registered(occlComm_t comm, const void *p, size_t bytes);
/* The staged-bytes counter above; a debug query for tests, not in occl.h. */
uint64_t occl_comm_staged_bytes(occlComm_t comm);
/* The naps of the low-latency path's readers (ll.c), and those of them a
 * poster's ring ended; the same kind of query. */
uint64_t occl_comm_ll_naps(occlComm_t comm);
uint64_t occl_comm_ll_naps_woken(occlComm_t comm);
uint64_t occl_comm_ll_sleeps(occlComm_t comm, uint64_t *woken);
/* Tasks the communicator's thread has run, whole or taken over from the
 * calling thread (enqueue.c); the same kind of query. */
uint64_t occl_comm_runner_calls(occlComm_t comm);
/* Headers of calls sent over the network (transport.c), and of them those
 * that carried the call's bytes and those sent synchronously; the same
 * kind of query. */
uint64_t occl_comm_net_headers(occlComm_t comm, uint64_t *with_bytes, uint64_t *synchronous);
/* Add to a counter written only by running calls, which hold comm->lock:
 * no locked add (a small call's cost is counted in such instructions,
 * docs/occl-perf.md); readers load it. */
static inline void occl_count(_Atomic uint64_t *counter, uint64_t n)
{
    uint64_t was = atomic_load_explicit(counter, memory_order_relaxed);
    atomic_store_explicit(counter, was + n, memory_order_relaxed);
}
static inline void occl_staged(occlComm_t comm, size_t bytes) { occl_count(&comm->staged_bytes, bytes); }
/* Why OCCL_ALGO is not valid (an unknown algorithm or collective); NULL if it is. */
const char *occl_algo_setting_error(void);

uint64_t occl_deadline(void); /* now + OCCL_TIMEOUT_MS */
const char *occl_coll_name(occl_coll c);

/* comm.c */
bool occl_comm_valid(occlComm_t comm);
/* The kernels' descriptor for op on comm with type t; false if op is unknown. */
bool occl_redop_lookup(occlComm_t comm, occlRedOp_t op, occlDataType_t t, occl_call *call);
void occl_comm_set_error(occlComm_t comm, occlResult_t res);

/* enqueue.c: the communicator's thread, which runs its tasks. Started when
 * the communicator is made; stopped (after its queued tasks) when it is
 * freed. */
occlResult_t occl_runner_start(occlComm_t comm);
void occl_runner_stop(occlComm_t comm);

#endif
