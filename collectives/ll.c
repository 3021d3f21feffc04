/*
 * collectives/ll.c - the low-latency path: small collectives of a
 * communicator whose ranks all share one node.
 *
 * As NCCL's LL protocol sends data with its flag in the same store, a rank
 * here copies its whole input into a box of its control block with the
 * call's sequence number written last, and goes on: no acknowledgement, no
 * handshake per pair. Every rank that needs that input (all of them for an
 * AllReduce, the root for a Reduce or Gather, ...) reads the boxes it needs
 * once they carry the call's number, and finishes the call on its own, in
 * one step: an n-way reduction in rank order, so every rank computes the
 * same bits.
 *
 * Each rank has OCCL_LL_BOXES boxes (OCCL_LL_SMALL_BOXES for calls of at
 * most OCCL_LL_SMALL_BYTES), used by its calls in turn. Before it refills
 * the box of call s-8 (s-1024), a rank checks that every peer has read it:
 * each rank publishes the last call it has finished reading for (`done`).
 * In an AllReduce that holds already (a peer that posted call s-1 had
 * finished s-2); a Broadcast's root runs up to 8 (1024) calls ahead of the
 * slowest reader before it waits.
 *
 * The box carries the call's fingerprint, so a mismatched call fails as on
 * the other paths; a peer found in another path's call under the same
 * sequence number, or in a Send or Recv where this rank runs a collective,
 * is named the same way (fingerprint.c).
 *
 * Waiting adapts to the cores: with a core per rank of the node, a short
 * spin catches a peer that is about to post; with more ranks than cores
 * the spin would only keep the peer off the core, so the wait yields at
 * once, or naps when it follows a poster that runs ahead (note_pace), or
 * sleeps at once when it is a full window's. Either way it sleeps on the
 * doorbell after a while, so a long wait costs the ranks that compute
 * nothing (tests/mpi/occl_fairness.c).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define OCCL_LOG_SUBSYS OCCL_SUBSYS_TUNING
#include "occl_internal.h"

/* One rank's input to one call: a header, then OCCL_LL_MAX_BYTES of data,
 * right after it: a reader of a small call's box touches two cache lines. */
typedef struct occl_ll_box {
    _Alignas(64) _Atomic uint64_t seq; /* the call whose input data holds; written last */
    uint64_t bytes;
    /* Its fingerprint and the one of the collective before it: a call in
     * which no rank reads another's box (a Broadcast's root against a
     * Reduce's leaf) is found mismatched at the next call that reads. */
    occl_fp_pair fp;
    _Alignas(16) unsigned char data[];
} occl_ll_box;

/* A rank's boxes are used by its calls in turn: a root that only posts
 * (Broadcast, Scatter) or leaves that only post (Reduce, Gather) run up to
 * as many calls ahead of the slowest reader as there are boxes. Calls of at
 * most OCCL_LL_SMALL_BYTES per rank (a loss, a norm, a flag) have
 * OCCL_LL_SMALL_BOXES boxes of their own (occl_internal.h). */
#define OCCL_LL_BOXES 8

struct occl_ll_area {
    _Alignas(64) _Atomic uint64_t done; /* the last call this rank has read its peers' boxes for */
    /* Whom this rank sleeps for: the rank whose box it needs next, WAIT_FREE
     * (any peer's done moving), or WAIT_NONE. A poster wakes only the
     * readers that sleep for it: the others would look and sleep again.
     * Every peer reads it at every call and it seldom changes: a line of
     * its own, not done's, which its owner writes at every call. */
    _Alignas(64) _Atomic int32_t sleeps_for;
    /* With sleeps_for WAIT_FREE: the `done` every peer must reach for this
     * rank's box to be free; a peer wakes it only when its own done
     * crosses it (the last one to cross finds it still asleep). */
    _Atomic uint64_t free_at;
    /* A reader that naps (not for a post: for its poster's pace) says so
     * here, on a line of its own: a poster about to sleep for its window
     * wakes it first. On sleeps_for, which every peer reads at every call,
     * each nap would cost each of them a cache miss. */
    _Alignas(64) _Atomic int32_t napping;
    /* In rank 0's area only: the ranks that sleep with sleeps_for said, a
     * bit each. A rank that posts or finishes reads this, which seldom
     * changes, and looks only at the sleepers' sleeps_for: with many ranks
     * per core, a look at every peer's line at every call cost a cache
     * miss apiece once the rank had been switched out. */
    _Alignas(64) _Atomic uint64_t asleep[OCCL_LL_MAX_RANKS / 64];
};

/* sleeps_for, besides a rank: nothing, or its box to be freed. */
enum { WAIT_NONE = -1, WAIT_FREE = -2 };

static size_t ll_max_bytes = OCCL_LL_DEFAULT_BYTES;  /* OCCL_LL_MAX_BYTES */

/* Inline: every look at a peer's box or counters finds the area by it. */
static inline size_t area_offset(int nranks)
{
    size_t off = sizeof(occl_ctrl) + 2 * (size_t)nranks * sizeof(occl_slot);
    return (off + 63) & ~(size_t)63;
}

size_t occl_ll_area_offset(int nranks) { return area_offset(nranks); }

/* The same on every rank of a node: OCCL_LL_MAX_BYTES must agree. */
static size_t box_stride(void) { return (sizeof(occl_ll_box) + ll_max_bytes + 63) & ~(size_t)63; }

#define SMALL_STRIDE ((sizeof(occl_ll_box) + OCCL_LL_SMALL_BYTES + 63) & ~(size_t)63)

size_t occl_ll_area_bytes(void)
{
    return sizeof(occl_ll_area) + OCCL_LL_SMALL_BOXES * SMALL_STRIDE + OCCL_LL_BOXES * box_stride();
}

static occl_ll_area *area_of(occl_ctrl *c, int nranks)
{
    return (occl_ll_area *)((unsigned char *)c + area_offset(nranks));
}

/* The box of call seq for a post of `bytes`, in c's area. */
static occl_ll_box *box_of(occl_ctrl *c, int nranks, uint64_t seq, size_t bytes)
{
    unsigned char *small = (unsigned char *)area_of(c, nranks) + sizeof(occl_ll_area);
    if (bytes <= OCCL_LL_SMALL_BYTES)
        return (occl_ll_box *)(small + (seq % OCCL_LL_SMALL_BOXES) * SMALL_STRIDE);
    return (occl_ll_box *)(small + OCCL_LL_SMALL_BOXES * SMALL_STRIDE +
                           (seq % OCCL_LL_BOXES) * box_stride());
}

void occl_ll_init(occl_ctrl *c, int nranks) { atomic_store(&area_of(c, nranks)->sleeps_for, WAIT_NONE); }

/* ---- settings ------------------------------------------------------------------ */

static uint64_t caller_wait_ns = OCCL_CALLER_WAIT_DEFAULT_US * 1000u; /* OCCL_CALLER_WAIT_US */
static bool caller_wait_set;                                           /* ... when it is set */
static uint64_t nap_ns = OCCL_LL_NAP_DEFAULT_US * 1000u;               /* OCCL_LL_NAP_US */

/* Setting `name`, when set, into *v: a number from 0 to max, or false with
 * the reason in error (`what`: the unit and what 0 means). */
static bool uint_setting(const char *name, unsigned long long max, const char *what, unsigned long long *v,
                         char *error, size_t size)
{
    const char *env = getenv(name);
    if (!env)
        return true;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(env, &end, 10);
    if (*env < '0' || *env > '9' || errno || *end || x > max) {
        snprintf(error, size, "%s='%.40s' is not valid: expected %s to %llu", name, env, what, max);
        return false;
    }
    *v = x;
    return true;
}

bool occl_ll_settings(char *error, size_t size)
{
    unsigned long long bytes = ll_max_bytes, wait_us = caller_wait_ns / 1000u, nap_us = nap_ns / 1000u;
    if (!uint_setting("OCCL_LL_MAX_BYTES", OCCL_LL_BOX_BYTES, "bytes from 0 (the low-latency path off)", &bytes,
                      error, size) ||
        !uint_setting("OCCL_CALLER_WAIT_US", 1000000,
                      "microseconds from 0 (never run a call on the calling thread)", &wait_us, error, size) ||
        !uint_setting("OCCL_LL_NAP_US", 1000, "microseconds from 0 (readers that catch up yield)", &nap_us,
                      error, size))
        return false;
    ll_max_bytes = (size_t)bytes;
    caller_wait_ns = wait_us * 1000u;
    caller_wait_set = getenv("OCCL_CALLER_WAIT_US") != NULL;
    nap_ns = nap_us * 1000u;
    return true;
}

uint64_t occl_caller_wait_ns(occlComm_t comm)
{
    /* With more ranks than cores a peer that is not late, only off the
     * cores, comes back after a scheduler slice (0.75 to 3 ms), not within
     * the default wait: one that gives up then hands a call to the
     * communicator's thread for nothing (docs/occl-perf.md). */
    return !caller_wait_set && comm->oversubscribed ? OCCL_CALLER_WAIT_OVERSUBSCRIBED_US * 1000u : caller_wait_ns;
}

/* ---- roles ---------------------------------------------------------------------- */

/* The bytes rank `rank` posts for call c (0: it posts nothing). */
static size_t posted_bytes(const occl_call *c, int rank)
{
    size_t b = c->count * occl_type_size(c->type), n = (size_t)c->comm->nranks;
    switch (c->coll) {
    case OCCL_COLL_ALLREDUCE:
    case OCCL_COLL_REDUCE:
    case OCCL_COLL_ALLGATHER:
    case OCCL_COLL_GATHER: return b;
    case OCCL_COLL_REDUCESCATTER:
    case OCCL_COLL_ALLTOALL: return n > SIZE_MAX / b ? SIZE_MAX : n * b;
    case OCCL_COLL_BROADCAST: return rank == c->root ? b : 0;
    case OCCL_COLL_SCATTER: return rank == c->root ? (n > SIZE_MAX / b ? SIZE_MAX : n * b) : 0;
    default: return SIZE_MAX;
    }
}

/* Whether rank `me` reads rank j's box in call c. */
static bool reads(const occl_call *c, int me, int j)
{
    if (j == me)
        return false;
    switch (c->coll) {
    case OCCL_COLL_REDUCE:
    case OCCL_COLL_GATHER: return me == c->root;
    case OCCL_COLL_BROADCAST:
    case OCCL_COLL_SCATTER: return j == c->root;
    default: return true;
    }
}

/* Whose boxes rank `me` reads in call c (one peer, LL_FROM_ALL the others
 * or LL_FROM_NONE), into st, with the bytes each of them posts: the same
 * for every rank that posts in a call that every rank posts to. */
static void read_set(const occl_call *c, int me, occl_ll_state *st)
{
    int n = c->comm->nranks;
    switch (c->coll) {
    case OCCL_COLL_REDUCE:
    case OCCL_COLL_GATHER: st->from = me == c->root ? LL_FROM_ALL : LL_FROM_NONE; break;
    case OCCL_COLL_BROADCAST:
    case OCCL_COLL_SCATTER: st->from = me == c->root ? LL_FROM_NONE : c->root; break;
    default: st->from = LL_FROM_ALL; break;
    }
    st->read_bytes = posted_bytes(c, st->from >= 0 ? st->from : (me + 1) % n);
}

/* In a rooted call that rank `me` reads, the peer whose posts it follows:
 * a Broadcast's or Scatter's root for a leaf, a leaf (the root's
 * predecessor: any one shows the pace) for a Reduce's or Gather's root;
 * -1 when me reads nothing or everyone posts. */
static int rooted_poster(const occl_call *c, int me)
{
    int n = c->comm->nranks;
    switch (c->coll) {
    case OCCL_COLL_BROADCAST:
    case OCCL_COLL_SCATTER: return me == c->root ? -1 : c->root;
    case OCCL_COLL_REDUCE:
    case OCCL_COLL_GATHER: return me == c->root ? (c->root + n - 1) % n : -1;
    default: return -1;
    }
}

bool occl_ll_eligible(const occl_call *c)
{
    occlComm_t comm = c->comm;
    if (c->coll >= OCCL_COLL_SEND || comm->network || comm->nranks < 2 || !c->count ||
        occl_algo_restricted(c->coll))
        return false;
    /* The largest post of any rank: the same decision on every rank. */
    size_t most = c->coll == OCCL_COLL_BROADCAST || c->coll == OCCL_COLL_SCATTER
                      ? posted_bytes(c, c->root)
                      : posted_bytes(c, comm->rank);
    return most <= ll_max_bytes;
}

bool occl_ll_solo(const occl_call *c)
{
    /* Nothing to wait for: a copy (and a scaling), as cheap as a small call. */
    return c->comm->nranks == 1 && c->coll < OCCL_COLL_SEND && c->count &&
           posted_bytes(c, c->root >= 0 ? c->root : 0) <= ll_max_bytes;
}

/* ---- waiting ---------------------------------------------------------------------- */

/* The node's ranks asleep for a post or a free box (rank 0's area). */
static inline _Atomic uint64_t *asleep_mask(occlComm_t comm)
{
    return area_of(comm->peers[0].ctrl, comm->nranks)->asleep;
}

/* Wake peer j if it sleeps for `whom` (a rank, or WAIT_FREE). The sleeper
 * stores sleeps_for before its last look, the poster stores before it reads
 * sleeps_for (both sequentially consistent): one of them sees the other. */
static void wake_if(occlComm_t comm, int j, int32_t whom)
{
    occl_ctrl *c = comm->peers[j].ctrl;
    if (atomic_load(&area_of(c, comm->nranks)->sleeps_for) == whom)
        occl_ring_bell(c);
}

/* Wake peer j if it naps. */
static void wake_if_napping(occlComm_t comm, int j)
{
    occl_ctrl *c = comm->peers[j].ctrl;
    if (atomic_load(&area_of(c, comm->nranks)->napping))
        occl_ring_bell(c);
}

/* This rank's done moved from `was` to `now`: wake peer j if it sleeps for
 * its box to be free and this move crossed the done it waits for. A peer
 * already past it woke nobody: the sleeper's last look saw it. */
static void wake_if_freed(occlComm_t comm, int j, uint64_t was, uint64_t now)
{
    occl_ctrl *c = comm->peers[j].ctrl;
    occl_ll_area *a = area_of(c, comm->nranks);
    if (atomic_load(&a->sleeps_for) != WAIT_FREE)
        return;
    uint64_t at = atomic_load(&a->free_at);
    if (was < at && at <= now)
        occl_ring_bell(c);
}

/* Wake the sleepers that wait for this rank: for its post in call c
 * (WAKE_POSTED), or for its done moving from `was` to `now` (WAKE_FREED).
 * Read after the post or the done (both sequentially consistent); a
 * sleeper sets its bit before it says for whom and looks once more: a bit
 * this does not see, that look sees the post. */
enum wake_for { WAKE_POSTED, WAKE_FREED };

static void wake_asleep(occlComm_t comm, const occl_call *c, enum wake_for why, uint64_t was, uint64_t now)
{
    _Atomic uint64_t *mask = asleep_mask(comm);
    for (int w = 0; w < (comm->nranks + 63) / 64; w++) {
        uint64_t m = atomic_load(&mask[w]);
        while (m) {
            int j = w * 64 + __builtin_ctzll(m);
            m &= m - 1;
            if (j == comm->rank)
                continue;
            if (why == WAKE_FREED)
                wake_if_freed(comm, j, was, now);
            else if (reads(c, j, comm->rank))
                wake_if(comm, j, comm->rank);
        }
    }
}

/* The sum of the peers' done counters, plus one: never 0, which is "none"
 * where it is kept (enqueue.c). Read by a caller that waits. */
uint64_t occl_ll_peers_progress(occlComm_t comm)
{
    uint64_t sum = 1;
    for (int j = 0; j < comm->nranks; j++)
        if (j != comm->rank && comm->peers[j].ctrl) /* of this node */
            sum += atomic_load_explicit(&area_of(comm->peers[j].ctrl, comm->nranks)->done, memory_order_relaxed);
    return sum;
}

typedef bool (*ready_fn)(occlComm_t comm, const occl_call *c, occl_ll_state *st, occlResult_t *err);

/* How long a waiter spins (with a core of its own) and then yields before it
 * sleeps. With more ranks than cores it does not spin, which would keep the
 * awaited rank off the core, and yields for longer: a rank that sleeps is
 * woken by its poster, but on these virtual machines an idle core takes
 * tens of microseconds to come back (measured: 8-byte all-reduce on 8
 * ranks, 2 cores, 66-108 us with 300 us of yields against 126 us with 30,
 * docs/occl-perf.md); a yield hands the core to any rank that can run. */
enum { SPIN_NS = 20000, YIELD_NS = 100000, OVERSUBSCRIBED_YIELD_NS = 300000, CHECK_NS = 1000000 };

/* A reader's nap lasts about as long as its poster takes to post
 * NAP_BATCH calls at the pace the stream has had since the reader's last
 * nap (at least OCCL_LL_NAP_US, at most NAP_MAX_NS): with many readers per
 * core, a nap of a fixed length either ends before the poster, sharing the
 * cores with them, has posted anything, and the readers go through a
 * round of switches per post, or it idles a few readers' cores. An eighth
 * of the small calls' window: each nap and its wake-up cost about 10 us of
 * kernel time, and 32 calls left a 16-rank broadcast spending a third of
 * its CPU on them (docs/occl-perf.md). A pace over a gap longer than
 * PACE_GAP_NS is the stream's pause, not its pace. */
enum { NAP_BATCH = OCCL_LL_SMALL_BOXES / 8 };
#define NAP_MAX_NS 1000000u
#define PACE_GAP_NS 10000000u

static uint64_t nap_length(occlComm_t comm, uint64_t seq, uint64_t now)
{
    if (seq == comm->ll_nap_seq) /* again in one call: the length found at its first nap */
        return comm->ll_nap_len;
    uint64_t nap = nap_ns, since = now - comm->ll_nap_ns;
    if (comm->ll_nap_seq && seq > comm->ll_nap_seq && comm->ll_nap_ns < now && since < PACE_GAP_NS) {
        uint64_t batch = since / (seq - comm->ll_nap_seq) * NAP_BATCH;
        if (batch > nap)
            nap = batch < NAP_MAX_NS ? batch : NAP_MAX_NS;
    }
    comm->ll_nap_ns = now;
    comm->ll_nap_seq = seq;
    comm->ll_nap_len = nap;
    return nap;
}

/* ns, or less if the caller gives up sooner. */
static uint64_t capped(const occl_ll_state *st, uint64_t now, uint64_t ns)
{
    if (st->give_up_ns && st->give_up_ns - now < ns)
        ns = st->give_up_ns > now ? st->give_up_ns - now : 0;
    return ns;
}

/* Sleep on this rank's doorbell while it still reads `bell`, at most ns. */
static bool bell_wait(occl_ctrl *me, uint32_t bell, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    /* Woken, or rung before it slept: not timed out (nor interrupted). */
    return syscall(SYS_futex, (uint32_t *)&me->doorbell, FUTEX_WAIT, bell, &ts, NULL, 0) == 0 || errno == EAGAIN;
}

/* Until ready() says so, fails, or the deadline, an abort or the caller's
 * give-up comes. Before it sleeps a rank says for whom (sleeps_for): for
 * the first peer whose box it still needs (ready() leaves it in
 * st->missing), or for its peers to finish reading (box_free). */
static occlResult_t wait_until(occlComm_t comm, const occl_call *c, occl_ll_state *st, ready_fn ready,
                               bool check_peers)
{
    occlResult_t err = occlSuccess;
    if (ready(comm, c, st, &err) || err != occlSuccess)
        return err;
    occl_ctrl *me = comm->ctrl;
    occl_ll_area *area = area_of(me, comm->nranks);
    uint64_t start = or_now_ns(), deadline = 0, next_check = start + CHECK_NS;
    if (st->wait_ns && !st->give_up_ns) /* a call that does not wait reads no clock */
        st->give_up_ns = start + st->wait_ns;
    /* A poster whose window is full waits for its readers to free half of
     * it, many calls: with more ranks than cores it sleeps at once, and the
     * reader whose done crosses that point wakes it, once per half window. */
    uint64_t yield_ns = !comm->oversubscribed ? YIELD_NS : check_peers ? OVERSUBSCRIBED_YIELD_NS : 0;
    /* A rooted call's reader whose poster runs ahead in a stream of calls:
     * a yield would hand the core to another reader that yields in turn,
     * a round of switches per post; a short nap that no post ends lets the
     * poster post a batch meanwhile (docs/occl-perf.md). Once: a nap that
     * finds nothing new means the stream has stopped. */
    bool may_nap = check_peers && comm->oversubscribed && comm->ll_ahead > 0 && nap_ns &&
                   rooted_poster(c, comm->rank) >= 0;
    /* A Broadcast's or Scatter's leaf that has caught up with a root that
     * sleeps until its readers free half its window: the slowest readers
     * have that to read, and a yield would take their core; this one naps
     * as long as the root sleeps, until the root has posted the next half
     * window and sleeps again, waking the nappers. Not the root of a
     * Reduce: a leaf it reads may sleep for it. (A reader with one poster,
     * st->from, is such a leaf: read_set.) */
    occl_ll_area *root_area = check_peers && comm->oversubscribed && nap_ns && st->from >= 0
                                  ? area_of(comm->peers[st->from].ctrl, comm->nranks)
                                  : NULL;
    uint64_t blocked_nap = 0;
    for (unsigned looks = 1;; looks++) {
        uint32_t bell = atomic_load(&me->doorbell);
        if (ready(comm, c, st, &err) || err != occlSuccess)
            return err;
        bool spinning = !comm->oversubscribed && (looks & 7) != 0;
        uint64_t now = spinning ? start : or_now_ns();
        if (st->give_up_ns && now >= st->give_up_ns)
            return occlInProgress;
        if (atomic_load(&comm->async_error) != occlSuccess)
            return occl_fail(occlInvalidUsage, "the communicator was aborted");
        if (spinning || (!comm->oversubscribed && now - start < SPIN_NS)) {
            or_cpu_relax();
            continue;
        }
        if (!deadline)
            deadline = occl_deadline();
        if (now >= next_check) {
            next_check = now + CHECK_NS;
            if (now >= deadline)
                return occl_fail(occlTimeout, "rank %d: no progress with its peers within "
                                              "OCCL_TIMEOUT_MS", comm->rank);
            if (comm->check_calls) {
                err = occl_notice_check(comm, false, false);
                /* Any peer, read or not: one in a Send to this rank, or in
                 * this call on another path, never posts what is awaited. */
                for (int j = 0; check_peers && j < comm->nranks && err == occlSuccess; j++)
                    if (j != comm->rank && !(st->seen[j / 64] >> (j % 64) & 1))
                        err = occl_fp_check_ll(comm, j, &st->fp);
                if (err != occlSuccess)
                    return err;
            }
        }
        bool blocked = root_area && atomic_load(&root_area->sleeps_for) == WAIT_FREE;
        if (may_nap || blocked) {
            uint64_t nap = nap_length(comm, st->seq, now);
            if (may_nap)
                comm->ll_ahead = 0;
            else /* the root blocked for long: naps twice as long each time, up to CHECK_NS */
                nap = blocked_nap = blocked_nap ? (2 * blocked_nap < CHECK_NS ? 2 * blocked_nap : CHECK_NS) : nap;
            may_nap = false;
            /* Said, so that a poster that sleeps for its window to be
             * freed next wakes this nap first (below). */
            atomic_store(&area->napping, 1);
            atomic_fetch_add(&me->sleepers, 1);
            atomic_fetch_add_explicit(&comm->ll_naps, 1, memory_order_relaxed);
            if (bell_wait(me, bell, capped(st, now, nap)))
                atomic_fetch_add_explicit(&comm->ll_naps_woken, 1, memory_order_relaxed);
            atomic_fetch_sub(&me->sleepers, 1);
            atomic_store_explicit(&area->napping, 0, memory_order_relaxed);
            continue;
        }
        if (now - start < yield_ns) {
            sched_yield();
            continue;
        }
        /* Sleep: marked asleep and said for whom first, then one more look (see
         * wake_asleep). */
        int32_t whom = check_peers ? st->missing : WAIT_FREE;
        _Atomic uint64_t *my_word = &asleep_mask(comm)[comm->rank / 64];
        uint64_t my_bit = 1ull << (comm->rank % 64);
        atomic_fetch_or(my_word, my_bit);
        if (!check_peers)
            atomic_store(&area->free_at, st->free_need);
        atomic_store(&area->sleeps_for, whom);
        /* A poster whose window is full wakes its readers that nap: its
         * next posts wait for them. */
        for (int j = 0; !check_peers && j < comm->nranks; j++)
            if (reads(c, j, comm->rank))
                wake_if_napping(comm, j);
        atomic_fetch_add(&me->sleepers, 1);
        /* If the first missing box came meanwhile, the next one's poster does
         * not know about this sleep yet: say so first. */
        if (!ready(comm, c, st, &err) && err == occlSuccess && (!check_peers || st->missing == whom)) {
            atomic_fetch_add_explicit(&comm->ll_sleeps, 1, memory_order_relaxed);
            if (bell_wait(me, bell, capped(st, now, next_check > now ? next_check - now : 0)))
                atomic_fetch_add_explicit(&comm->ll_sleeps_woken, 1, memory_order_relaxed);
        }
        atomic_fetch_sub(&me->sleepers, 1);
        atomic_store_explicit(&area->sleeps_for, WAIT_NONE, memory_order_relaxed);
        atomic_fetch_and(my_word, ~my_bit);
        if (err != occlSuccess)
            return err;
    }
}

/* Every peer has read the call that last used this rank's box for this one.
 * A rank that finds its window full (a Broadcast's root, a Reduce's leaf
 * ahead of the slowest reader) waits until half of it is free, not one
 * box: then it posts half a window in a row and its readers find that much
 * waiting, instead of the two moving in lockstep, one wake-up per call
 * (docs/occl-perf.md). */
static bool box_free(occlComm_t comm, const occl_call *c, occl_ll_state *st, occlResult_t *err)
{
    (void)err;
    size_t bytes = posted_bytes(c, comm->rank);
    uint64_t need = st->free_need;
    if (!need) {
        occl_ll_box *box = box_of(comm->ctrl, comm->nranks, st->seq, bytes);
        need = atomic_load_explicit(&box->seq, memory_order_relaxed);
    }
    /* Known free without reading the peers' counters, each written by its
     * owner at every call (a cache miss apiece): what they were last time
     * covers most of a window's calls. The acquire of that look still holds. */
    if (need <= comm->ll_peers_done)
        return true;
    uint64_t least = UINT64_MAX;
    for (int j = 0; j < comm->nranks; j++) {
        if (j == comm->rank)
            continue;
        uint64_t done = atomic_load_explicit(&area_of(comm->peers[j].ctrl, comm->nranks)->done,
                                             memory_order_acquire);
        least = done < least ? done : least;
        if (done < need) {
            if (!st->free_need) {
                /* Never beyond this rank's own last call on this path: a
                 * peer's done moves only at calls of this path, and the
                 * next one after that may be this call, which needs this
                 * rank's post (the calls between may all be of others). */
                uint64_t half = (bytes <= OCCL_LL_SMALL_BYTES ? OCCL_LL_SMALL_BOXES : OCCL_LL_BOXES) / 2;
                uint64_t own = atomic_load(&area_of(comm->ctrl, comm->nranks)->done);
                st->free_need = need + half < own ? need + half : own;
                if (st->free_need < need)
                    st->free_need = need;
            }
            return false;
        }
    }
    comm->ll_peers_done = least;
    return true;
}

/* Whether peer j's box holds the call (checked against the call's
 * fingerprint once, then remembered in st->seen); false with *err set if
 * it holds a mismatched one. */
static bool box_posted(occlComm_t comm, occl_ll_state *st, int j, occlResult_t *err)
{
    if (st->seen[j / 64] >> (j % 64) & 1)
        return true;
    size_t bytes = st->read_bytes;
    occl_ll_box *b = box_of(comm->peers[j].ctrl, comm->nranks, st->seq, bytes);
    if (atomic_load_explicit(&b->seq, memory_order_acquire) != st->seq) {
        /* A peer that posts another size (a mismatched count) may have
         * used the boxes of the other class: its fingerprint says so. */
        occl_ll_box *other = box_of(comm->peers[j].ctrl, comm->nranks, st->seq,
                                    bytes <= OCCL_LL_SMALL_BYTES ? SIZE_MAX : 0);
        if (!comm->check_calls || other == b || atomic_load_explicit(&other->seq, memory_order_acquire) != st->seq)
            return false;
        b = other;
    }
    if (comm->check_calls) {
        occl_fp_pair theirs = b->fp;
        const occl_fp *before = &comm->past[theirs.prev.seq % OCCL_FP_PAST];
        if (!occl_fp_match(&st->fp, &theirs.cur)) {
            *err = occl_fp_mismatch(comm, j, &theirs.cur, &theirs.prev, &st->fp);
            return false;
        }
        if (theirs.prev.seq && before->seq == theirs.prev.seq && !occl_fp_match(before, &theirs.prev)) {
            *err = occl_fp_mismatch(comm, j, &theirs.prev, NULL, before);
            return false;
        }
        if (b->bytes != bytes) { /* the same call, read as another size: cannot be */
            *err = occl_fail(occlInternalError, "low-latency path: rank %d posted %llu bytes "
                             "for call %llu, %zu expected", j, (unsigned long long)b->bytes,
                             (unsigned long long)st->seq, bytes);
            return false;
        }
    }
    st->seen[j / 64] |= 1ull << (j % 64);
    return true;
}

/* Every box this rank reads holds the call. */
static bool boxes_posted(occlComm_t comm, const occl_call *c, occl_ll_state *st, occlResult_t *err)
{
    (void)c;
    if (st->from >= 0) { /* a rooted call's one poster */
        if (box_posted(comm, st, st->from, err))
            return true;
        st->missing = st->from;
        return false;
    }
    /* The peers before the first one missing at the last look were all seen. */
    bool all = true;
    for (int j = st->missing; st->from == LL_FROM_ALL && j < comm->nranks; j++) {
        if (j == comm->rank || box_posted(comm, st, j, err))
            continue;
        if (*err != occlSuccess)
            return false;
        if (all)
            st->missing = j;
        all = false;
    }
    return all;
}

/* ---- the call -------------------------------------------------------------------- */

/* How many calls a reader may nap in after it found its poster done with a
 * later call, a stream of calls the poster makes without waiting. */
enum { AHEAD_CALLS = 16, PACE_LOOK_EVERY = 4, PREFETCH_CALLS = 8 };

/* After a rooted call's read: whether its poster runs ahead, done with a
 * later call already. Done, not posted: a root's next call may be one it
 * posts to and then waits in for this reader (a Reduce after its
 * Broadcast); it cannot be done with that one before this reader posts, so
 * a chain of calls that need each other never naps. */
static void note_pace(occlComm_t comm, uint64_t seq, int poster)
{
    if (!comm->oversubscribed)
        return;
    /* The poster writes its done at every call: a reader that looked at
     * every call would pull the line from it each time, a cache miss on
     * both sides. */
    if (seq % PACE_LOOK_EVERY) {
        if (comm->ll_ahead > 0)
            comm->ll_ahead--;
        return;
    }
    occl_ll_area *a = area_of(comm->peers[poster].ctrl, comm->nranks);
    if (atomic_load_explicit(&a->done, memory_order_relaxed) > seq)
        comm->ll_ahead = AHEAD_CALLS;
    else if (comm->ll_ahead > 0)
        comm->ll_ahead--;
}

uint64_t occl_comm_ll_naps(occlComm_t comm)
{
    return occl_comm_valid(comm) ? atomic_load(&comm->ll_naps) : 0;
}

uint64_t occl_comm_ll_naps_woken(occlComm_t comm)
{
    return occl_comm_valid(comm) ? atomic_load(&comm->ll_naps_woken) : 0;
}

uint64_t occl_comm_ll_sleeps(occlComm_t comm, uint64_t *woken)
{
    bool valid = occl_comm_valid(comm);
    if (woken)
        *woken = valid ? atomic_load(&comm->ll_sleeps_woken) : 0;
    return valid ? atomic_load(&comm->ll_sleeps) : 0;
}

static const unsigned char *input_of(occlComm_t comm, const occl_call *c, int j, const occl_ll_state *st)
{
    return j == comm->rank ? c->sendbuff : box_of(comm->peers[j].ctrl, comm->nranks, st->seq, st->read_bytes)->data;
}

static occlResult_t finish(occlComm_t comm, const occl_call *c, const occl_ll_state *st)
{
    int n = comm->nranks, me = comm->rank;
    size_t es = occl_type_size(c->type), b = c->count * es;
    unsigned char *recv = c->recvbuff;
    bool reduces = c->coll == OCCL_COLL_ALLREDUCE || c->coll == OCCL_COLL_REDUCESCATTER ||
                   (c->coll == OCCL_COLL_REDUCE && me == c->root);
    if (reduces) {
        const void *srcs[OCCL_LL_MAX_RANKS];
        size_t off = c->coll == OCCL_COLL_REDUCESCATTER ? (size_t)me * b : 0;
        for (int j = 0; j < n; j++)
            srcs[j] = input_of(comm, c, j, st) + off;
        occl_redop op = c->op;
        if (c->device_scalar) /* read now, as NCCL reads it in the kernel */
            op = occl_redop_premulsum(c->device_scalar, c->type);
        occl_reduce_n(recv, srcs, n, c->count, c->type, &op);
        if (c->avg)
            occl_finish_avg(recv, c->count, c->type, n);
        return occlSuccess;
    }
    switch (c->coll) {
    case OCCL_COLL_ALLGATHER:
    case OCCL_COLL_GATHER:
        if (c->coll == OCCL_COLL_GATHER && me != c->root)
            break;
        for (int j = 0; j < n; j++)
            if (recv + (size_t)j * b != input_of(comm, c, j, st))
                memmove(recv + (size_t)j * b, input_of(comm, c, j, st), b);
        break;
    case OCCL_COLL_ALLTOALL:
        /* Own chunk last: in place, the others come from the boxes. */
        for (int j = 0; j < n; j++)
            if (j != me)
                memcpy(recv + (size_t)j * b, input_of(comm, c, j, st) + (size_t)me * b, b);
        if (recv + (size_t)me * b != (const unsigned char *)c->sendbuff + (size_t)me * b)
            memmove(recv + (size_t)me * b, (const unsigned char *)c->sendbuff + (size_t)me * b, b);
        break;
    case OCCL_COLL_BROADCAST: {
        const unsigned char *src = input_of(comm, c, c->root, st);
        if (recv != src)
            memmove(recv, src, b);
        break;
    }
    case OCCL_COLL_SCATTER: {
        const unsigned char *src = input_of(comm, c, c->root, st) + (size_t)me * b;
        if (recv != src)
            memmove(recv, src, b);
        break;
    }
    default: break;
    }
    return occlSuccess;
}

occlResult_t occl_ll_run(const occl_call *c, occl_ll_state *st)
{
    occlComm_t comm = c->comm;
    occl_ll_area *mine = area_of(comm->ctrl, comm->nranks);
    occlResult_t res = occlSuccess;
    if (!st->begun) {
        if (comm->nranks > OCCL_LL_MAX_RANKS)
            return occl_fail(occlInternalError, "low-latency path: more than %d ranks", OCCL_LL_MAX_RANKS);
        st->fp = comm->fp;
        st->seq = comm->fp.seq;
        st->free_need = 0;
        memset(st->seen, 0, (size_t)(comm->nranks + 63) / 64 * sizeof st->seen[0]); /* the words in use */
        read_set(c, comm->rank, st);
        st->missing = 0;
        st->begun = true;
        OCCL_INFO("rank %d: %s of %zu x %s on %d ranks: low-latency path, on the %s thread", comm->rank,
                  occl_coll_name(c->coll), c->count, occl_type_name(c->type), comm->nranks,
                  st->wait_ns ? "calling" : "communicator's");
        if (comm->noticed && (res = occl_notice_check(comm, false, false)) != occlSuccess)
            return res;
    }
    if (!st->posted) {
        size_t bytes = posted_bytes(c, comm->rank);
        if (bytes) {
            res = wait_until(comm, c, st, box_free, false);
            if (res != occlSuccess)
                return res; /* occlInProgress: nothing posted yet, tried again later */
            occl_ll_box *box = box_of(comm->ctrl, comm->nranks, st->seq, bytes);
            memcpy(box->data, c->sendbuff, bytes);
            occl_staged(comm, bytes);
            box->fp = occl_fp_carried(comm, &st->fp);
            box->bytes = bytes;
            atomic_store(&box->seq, st->seq); /* sequentially consistent: see wake_asleep */
            if (bytes <= OCCL_LL_SMALL_BYTES) {
                unsigned char *ahead = (unsigned char *)box_of(comm->ctrl, comm->nranks, st->seq + PREFETCH_CALLS, bytes);
                or_prefetch_write(ahead);
                or_prefetch_write(ahead + 64);
            }
            wake_asleep(comm, c, WAKE_POSTED, 0, 0);
        }
        st->posted = true;
    }
    res = wait_until(comm, c, st, boxes_posted, true);
    if (res != occlSuccess)
        return res;
    int poster = rooted_poster(c, comm->rank);
    if (poster >= 0)
        note_pace(comm, st->seq, poster);
    res = finish(comm, c, st);
    uint64_t was = atomic_exchange(&mine->done, st->seq); /* sequentially consistent: see wait_until */
    wake_asleep(comm, c, WAKE_FREED, was, st->seq);
    return res;
}
