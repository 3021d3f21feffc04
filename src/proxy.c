/*
 * src/proxy.c - the proxy thread and its small protocol over MPI.
 *
 * Every rank keeps a few receives posted for requests (TAG_REQ, any source).
 * Every request takes one round trip, except a large write, which takes two:
 *   VALIDATE   req               -> reply {status, size}
 *   GET inline req               -> reply {status, size} and, if ok, the data
 *              in one message (up to OR_PROXY_INLINE_GET bytes)
 *   GET        req               -> reply {status}; then, if ok, the data.
 *              The requester posts the receive of the data with its request
 *              and cancels it if the owner refuses.
 *   PUT inline req+data          -> reply {status}, once the data is in place
 *              (up to OR_PROXY_INLINE_PUT bytes, in the request message itself)
 *   PUT posted req+data, ...     -> one TAG_POSTED_ACK {first id, last id, status}
 *              per run of a rank's posted writes (inline writes whose stream
 *              went on without waiting, stream.c) served in one poll with the
 *              same outcome
 *   PUT eager  req, data         -> reply {status}, once the data is in place
 *   PUT        req -> reply {status}; if ok: data -> reply {status}
 * Replies and data carry tags derived from the requester's request number,
 * so several requests between the same two ranks can be in flight at once.
 *
 * An owner serves the requests of one rank in the order that rank sent them
 * (MPI matches one sender's messages to the receives in the order they were
 * posted, and completed receives are taken in that order): posted writes of
 * one stream land in stream order.
 *
 * Polls are cheap in MPI calls: one MPI_Testsome covers the posted request
 * receives and every transfer in flight. That matters because each MPI call
 * takes MPI's lock, and an application thread waiting in a blocking MPI call
 * (MPICH's MPI_Barrier spins) holds it nearly all the time.
 */
#include "proxy.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define OR_PROXY_STOP_TIMEOUT_NS (30ull * 1000000000ull)
/* An idle proxy of a one-node job only ever answers handle validations of
 * the node's other ranks: it may sleep longer between polls. */
#define OR_PROXY_ONE_NODE_SLEEP_US 2000
#define N_INCOMING 4 /* request receives kept posted */
#define N_ACKS 4     /* receives kept posted for the owners' statuses of posted writes */
#define MAX_PENDING_ACKS 64 /* statuses an owner gathers in one poll before it sends them */

/* Tags stay below 32768, the least MPI_TAG_UB MPI allows. Read data (owner
 * to requester) and written data (requester to owner) have tag ranges of
 * their own: both flow from rank a to rank b, one numbered by b's requests,
 * the other by a's, and the two numberings overlap. */
enum {
    TAG_REQ = 1,
    TAG_POSTED_ACK = 2, /* {first id, last id, status}: the owner's word on posted writes */
    TAG_REPLY_BASE = 0x100,
    TAG_GET_DATA_BASE = 0x4000,
    TAG_PUT_DATA_BASE = 0x6000,
    ID_MASK = 0x1fff
};
enum { W_KIND, W_ID, W_DEVICE, W_OFFSET, W_LENGTH, W_ALLOC, W_MODE }; /* wire[] slots */
_Static_assert(W_MODE + 1 == OR_PROXY_WIRE_WORDS, "wire layout");
/* How a write's bytes travel (W_MODE); a read's are PLAIN or INLINE. */
enum { MODE_PLAIN = 0, MODE_EAGER = 1, MODE_INLINE = 2, MODE_POSTED = 3 };
#define WIRE_BYTES (OR_PROXY_WIRE_WORDS * sizeof(uint64_t))
#define REPLY_BYTES (2 * sizeof(uint64_t)) /* {status, size}: an inline read's header */
#define INCOMING_BYTES (WIRE_BYTES + OR_PROXY_INLINE_PUT) /* a request receive's buffer */
/* A request's MPI slots: a reply, the header, and every chunk of its data. */
_Static_assert(OR_PROXY_MAX_BYTES / OR_PROXY_CHUNK + 2 <= OR_PROXY_MAX_MPI, "request slots");

/* Serving phases; a local request is in phase 1 until its last round trip. */
enum { PHASE_FIRST = 1, PHASE_CONFIRM = 2 };

static struct {
    pthread_t thread;
    bool running;
    _Atomic bool stop_requested;
    _Atomic(or_proxy_req *) submitted; /* lock-free stack, newest first */
    or_notifier wake;
    _Atomic uint32_t next_id; /* the proxy's requests and the callers' own (or_proxy_call_here) */
    or_proxy_req *active;
    /* Requests in px.active whose payload is longer than OR_PROXY_EAGER_PUT:
     * MPI moves such a payload only while it is polled (progress). */
    int bulk;
    /* The request receives, posted while running. */
    unsigned char *incoming[N_INCOMING]; /* INCOMING_BYTES each */
    MPI_Request incoming_req[N_INCOMING];
    uint64_t incoming_posted[N_INCOMING]; /* when each was posted: messages match in that order */
    uint64_t posts;
    /* Receives of the owners' statuses of our posted writes. */
    uint64_t acks_in[N_ACKS][3];
    MPI_Request acks_req[N_ACKS];
    /* Statuses of posted writes served in this poll, not sent yet: one per
     * run of writes of one rank with the same outcome. */
    struct {
        int source;
        uint32_t first, last;
        orError_t status;
    } pending[MAX_PENDING_ACKS];
    int npending;
    bool peer_failed; /* warned once: serving has stopped */
    /* What one MPI_Testsome tests: flat[i] belongs to owner[i] (NULL: the
     * request receive incoming_req[slot[i]]) at owner[i]->mpi[slot[i]]. */
    MPI_Request *flat;
    or_proxy_req **owner;
    int *slot, *indices;
    MPI_Status *statuses;
    int cap;
} px;

bool or_proxy_running(void) { return px.running; }

static int reply_tag(uint32_t id) { return TAG_REPLY_BASE + (int)(id & ID_MASK); }
static int data_tag(const or_proxy_req *r)
{
    return (r->kind == OR_PROXY_GET ? TAG_GET_DATA_BASE : TAG_PUT_DATA_BASE) +
           (int)(r->id & ID_MASK);
}

/* Record an MPI post in r's next slot; a refused post fails r. */
static void posted(or_proxy_req *r, int rc)
{
    if (rc != MPI_SUCCESS) {
        r->mpi[r->nmpi] = MPI_REQUEST_NULL;
        r->failed = true;
    }
    r->nmpi++;
}

/* Post the payload of [buf, buf+len) in chunks; send or receive. */
static void post_data(or_proxy_req *r, void *buf, uint64_t len, int tag, bool send)
{
    for (uint64_t done = 0; done < len && r->nmpi < OR_PROXY_MAX_MPI; done += OR_PROXY_CHUNK) {
        int n = (int)(len - done < OR_PROXY_CHUNK ? len - done : OR_PROXY_CHUNK);
        MPI_Request *slot = &r->mpi[r->nmpi];
        posted(r, send ? MPI_Isend((char *)buf + done, n, MPI_BYTE, r->peer, tag, or_cl.comm, slot)
                       : MPI_Irecv((char *)buf + done, n, MPI_BYTE, r->peer, tag, or_cl.comm, slot));
    }
}

static void post_reply_recv(or_proxy_req *r)
{
    posted(r, MPI_Irecv(r->reply, 2, MPI_UINT64_T, r->peer, reply_tag(r->id), or_cl.comm,
                        &r->mpi[r->nmpi]));
}

static void send_reply(or_proxy_req *r, orError_t status, uint64_t size)
{
    r->reply[0] = (uint64_t)status;
    r->reply[1] = size;
    posted(r, MPI_Isend(r->reply, 2, MPI_UINT64_T, r->peer, reply_tag(r->id), or_cl.comm,
                        &r->mpi[r->nmpi]));
}

static bool in_flight(const or_proxy_req *r)
{
    for (int i = 0; i < r->nmpi; i++)
        if (r->mpi[i] != MPI_REQUEST_NULL)
            return true;
    return false;
}

/* ---- this rank's requests ------------------------------------------------ */

static int put_mode(const or_proxy_req *r)
{
    if (r->kind != OR_PROXY_PUT || r->length > OR_PROXY_EAGER_PUT)
        return MODE_PLAIN;
    return r->length <= OR_PROXY_INLINE_PUT ? MODE_INLINE : MODE_EAGER;
}

static _Atomic uint64_t inline_gets; /* or_remote_inline_reads */

uint64_t or_remote_inline_reads(void) { return atomic_load(&inline_gets); }

/* A small read: the owner answers with one message, its status and the
 * bytes, received into a scratch buffer (take_inline_get copies them out).
 * One message less, and one MPI send less on the owner. False when out of
 * memory or too large: a plain read then. */
static bool start_inline_get(or_proxy_req *r)
{
    if (r->kind != OR_PROXY_GET || r->length > OR_PROXY_INLINE_GET)
        return false;
    r->scratch = malloc(REPLY_BYTES + r->length);
    if (!r->scratch)
        return false;
    atomic_fetch_add_explicit(&inline_gets, 1, memory_order_relaxed);
    r->wire[W_MODE] = MODE_INLINE;
    posted(r, MPI_Irecv(r->scratch, (int)(REPLY_BYTES + r->length), MPI_BYTE, r->peer,
                        reply_tag(r->id), or_cl.comm, &r->mpi[r->nmpi]));
    posted(r, MPI_Isend(r->wire, (int)WIRE_BYTES, MPI_BYTE, r->peer, TAG_REQ, or_cl.comm,
                        &r->mpi[r->nmpi]));
    return true;
}

static void take_inline_get(or_proxy_req *r)
{
    memcpy(r->reply, r->scratch, REPLY_BYTES);
    if ((orError_t)r->reply[0] == orSuccess)
        memcpy(r->local, (unsigned char *)r->scratch + REPLY_BYTES, r->length);
}

static void start_local(or_proxy_req *r)
{
    r->id = atomic_fetch_add_explicit(&px.next_id, 1, memory_order_relaxed);
    r->phase = PHASE_FIRST;
    r->nmpi = 0;
    r->status = orSuccess;
    r->failed = r->cancelled = false;
    if (!r->captured)
        r->scratch = NULL;
    r->wire[W_KIND] = (uint64_t)r->kind;
    r->wire[W_ID] = r->id;
    r->wire[W_DEVICE] = (uint64_t)r->device;
    r->wire[W_OFFSET] = r->offset;
    r->wire[W_LENGTH] = r->length;
    r->wire[W_ALLOC] = r->alloc_id;
    if (start_inline_get(r))
        return;
    int mode = put_mode(r);
    void *msg = r->wire;
    size_t bytes = WIRE_BYTES;
    if (mode == MODE_INLINE) {
        /* One message: the request, then the bytes (captured already, or
         * read now from local memory inside the strict-mode window the
         * stream opened for this copy). */
        if (!r->captured)
            r->scratch = malloc(WIRE_BYTES + r->length);
        if (r->scratch) {
            msg = r->scratch;
            bytes = WIRE_BYTES + r->length;
        } else {
            mode = MODE_EAGER;
        }
    }
    if (mode == MODE_INLINE && r->captured)
        mode = MODE_POSTED; /* the owner answers it with others (TAG_POSTED_ACK) */
    r->acked = false;
    r->wire[W_MODE] = (uint64_t)mode;
    if (msg != r->wire) {
        memcpy(msg, r->wire, WIRE_BYTES);
        if (!r->captured)
            memcpy((unsigned char *)msg + WIRE_BYTES, r->local, r->length);
    }
    /* Receives first, so that the answer never waits in MPI's unexpected
     * queue: the reply, and for a read the data itself. */
    if (mode != MODE_POSTED)
        post_reply_recv(r);
    if (r->kind == OR_PROXY_GET)
        post_data(r, r->local, r->length, data_tag(r), false);
    posted(r, MPI_Isend(msg, (int)bytes, MPI_BYTE, r->peer, TAG_REQ, or_cl.comm, &r->mpi[r->nmpi]));
    if (mode == MODE_EAGER)
        post_data(r, r->local, r->length, data_tag(r), true);
}

/* A refused read: its data will never come, so stop waiting for it. */
static void cancel_refused_get(or_proxy_req *r)
{
    if (r->serving || r->kind != OR_PROXY_GET || r->wire[W_MODE] == MODE_INLINE || r->cancelled ||
        r->mpi[0] != MPI_REQUEST_NULL || (orError_t)r->reply[0] == orSuccess)
        return;
    r->cancelled = true;
    for (int i = 1; i < r->nmpi; i++)
        if (r->mpi[i] != MPI_REQUEST_NULL)
            MPI_Cancel(&r->mpi[i]);
}

/* Every MPI request of r completed: next round trip, or true when r is
 * finished. */
static bool advance_local(or_proxy_req *r)
{
    if (r->kind == OR_PROXY_GET && r->wire[W_MODE] == MODE_INLINE)
        take_inline_get(r);
    orError_t status = (orError_t)r->reply[0];
    r->status = status;
    if (r->kind == OR_PROXY_VALIDATE)
        r->size = r->reply[1];
    if (r->kind == OR_PROXY_PUT && r->wire[W_MODE] == MODE_PLAIN && r->phase == PHASE_FIRST &&
        status == orSuccess) {
        /* The owner said go: the data, then its confirmation. */
        r->phase = PHASE_CONFIRM;
        r->nmpi = 0;
        post_reply_recv(r);
        post_data(r, r->local, r->length, data_tag(r), true);
        return false;
    }
    return true;
}

/* ---- other ranks' requests on our memory --------------------------------- */

static void send_pending_acks(void);

/* Note the outcome of a posted write of source, for one status message per
 * run of its writes with the same outcome. */
static void gather_ack(int source, uint32_t id, orError_t status)
{
    for (int i = px.npending - 1; i >= 0; i--)
        if (px.pending[i].source == source) {
            if (px.pending[i].status == status) {
                px.pending[i].last = id;
                return;
            }
            break; /* a new run: keeps the outcomes in order */
        }
    if (px.npending == MAX_PENDING_ACKS)
        send_pending_acks();
    px.pending[px.npending].source = source;
    px.pending[px.npending].first = px.pending[px.npending].last = id;
    px.pending[px.npending].status = status;
    px.npending++;
}

/* Send the gathered statuses; each send is a serving request until done. */
static void send_pending_acks(void)
{
    for (int i = 0; i < px.npending; i++) {
        or_proxy_req *r = calloc(1, sizeof *r);
        if (!r) {
            OR_WARN("proxy", "out of memory answering rank %d's writes", px.pending[i].source);
            continue;
        }
        r->serving = true;
        r->kind = OR_PROXY_PUT;
        r->peer = px.pending[i].source;
        r->phase = PHASE_CONFIRM;
        r->wire[0] = px.pending[i].first;
        r->wire[1] = px.pending[i].last;
        r->wire[2] = (uint64_t)px.pending[i].status;
        posted(r, MPI_Isend(r->wire, 3, MPI_UINT64_T, r->peer, TAG_POSTED_ACK, or_cl.comm,
                            &r->mpi[r->nmpi]));
        r->next = px.active;
        px.active = r;
    }
    px.npending = 0;
}

/* Answer a small read with one message: {status, 0}, then the bytes if ok. */
static void serve_inline_get(or_proxy_req *r)
{
    uint64_t n = r->status == orSuccess ? r->length : 0;
    unsigned char *msg = malloc(REPLY_BYTES + n);
    if (!msg) { /* the status alone, from the request itself */
        n = 0;
        r->status = orErrorMemoryAllocation;
        msg = (unsigned char *)r->reply;
    } else {
        r->scratch = msg;
    }
    uint64_t head[2] = {(uint64_t)r->status, 0};
    memcpy(msg, head, REPLY_BYTES);
    if (n) {
        or_strict_enter();
        memcpy(msg + REPLY_BYTES, r->target, n);
        or_strict_leave();
    }
    r->phase = PHASE_CONFIRM;
    posted(r, MPI_Isend(msg, (int)(REPLY_BYTES + n), MPI_BYTE, r->peer, reply_tag(r->id),
                        or_cl.comm, &r->mpi[r->nmpi]));
}

/* A request message of `bytes` (header, then inline bytes) from source. */
static void start_serving(const unsigned char *msg, size_t bytes, int source)
{
    uint64_t wire[OR_PROXY_WIRE_WORDS];
    memcpy(wire, msg, WIRE_BYTES);
    or_proxy_req *r = calloc(1, sizeof *r);
    if (!r) {
        /* Cannot even answer; the requester's own deadline is its only hope. */
        OR_WARN("proxy", "out of memory serving rank %d", source);
        return;
    }
    memcpy(r->wire, wire, sizeof r->wire);
    r->serving = true;
    r->kind = (or_proxy_kind)wire[W_KIND];
    r->id = (uint32_t)wire[W_ID];
    r->peer = source;
    r->length = wire[W_LENGTH];
    r->phase = PHASE_FIRST;
    uint64_t mode = r->kind == OR_PROXY_PUT ? wire[W_MODE] : MODE_PLAIN;
    bool eager = mode == MODE_EAGER;
    uint64_t size = 0;
    r->status = or_mem_resolve((int)wire[W_DEVICE], wire[W_OFFSET], r->length,
                               r->kind == OR_PROXY_VALIDATE ? wire[W_ALLOC] : 0, &r->target, &size);
    bool sane = (r->kind == OR_PROXY_VALIDATE || r->kind == OR_PROXY_GET ||
                 r->kind == OR_PROXY_PUT) &&
                (mode == MODE_PLAIN ? r->length <= OR_PROXY_MAX_BYTES
                 : mode == MODE_EAGER ? r->length <= OR_PROXY_EAGER_PUT
                 : (mode == MODE_INLINE || mode == MODE_POSTED) &&
                       r->length <= OR_PROXY_INLINE_PUT && bytes == WIRE_BYTES + r->length) &&
                (mode == MODE_INLINE || mode == MODE_POSTED || bytes == WIRE_BYTES);
    bool inline_get = r->kind == OR_PROXY_GET && wire[W_MODE] == MODE_INLINE;
    if (!sane || (inline_get && r->length > OR_PROXY_INLINE_GET))
        r->status = orErrorInvalidValue;
    if (inline_get) {
        serve_inline_get(r);
        r->next = px.active;
        px.active = r;
        return;
    }
    if (mode == MODE_INLINE || mode == MODE_POSTED) {
        /* The bytes came with the request: into place now, then the reply
         * (a posted write's with the others of this poll). */
        if (r->status == orSuccess) {
            or_strict_enter();
            memcpy(r->target, msg + WIRE_BYTES, r->length);
            or_strict_leave();
        }
        if (mode == MODE_POSTED) { /* refused or not, the writer waits for the status */
            gather_ack(source, r->id, r->status);
            free(r);
            return;
        }
        r->phase = PHASE_CONFIRM;
        send_reply(r, r->status, 0);
        r->next = px.active;
        px.active = r;
        return;
    }
    if (r->kind != OR_PROXY_VALIDATE && r->status == orSuccess) {
        or_strict_enter(); /* our memory is read or written until the data completes */
        r->strict = true;
    }

    if (eager && sane) {
        /* The bytes are on their way already: into place, or, refused,
         * into a scratch buffer; the reply follows once they are in. */
        void *into = r->target;
        if (r->status != orSuccess)
            into = r->scratch = malloc(r->length ? r->length : 1);
        if (!into)
            OR_WARN("proxy", "out of memory draining a refused write of rank %d", source);
        else
            post_data(r, into, r->length, data_tag(r), false);
    } else {
        send_reply(r, r->status, size);
        if (r->status == orSuccess && r->kind != OR_PROXY_VALIDATE)
            post_data(r, r->target, r->length, data_tag(r), r->kind == OR_PROXY_GET);
    }
    r->next = px.active;
    px.active = r;
}

static bool advance_serving(or_proxy_req *r)
{
    if (r->phase != PHASE_FIRST)
        return true;
    if (r->strict)
        or_strict_leave();
    r->strict = false;
    if (r->kind == OR_PROXY_PUT && (r->wire[W_MODE] == MODE_EAGER || r->status == orSuccess)) {
        /* Tell the writer its bytes are in place (or were refused). */
        free(r->scratch);
        r->scratch = NULL;
        r->phase = PHASE_CONFIRM;
        r->nmpi = 0;
        send_reply(r, r->status, 0);
        return false;
    }
    return true;
}

static void finish(or_proxy_req *r)
{
    if (!r->serving) {
        free(r->scratch); /* an inline write's message */
        r->scratch = NULL;
        r->done(r);
        return;
    }
    if (r->strict)
        or_strict_leave();
    free(r->scratch);
    free(r);
}

/* ---- the poll ------------------------------------------------------------ */

static void post_ack_recv(int k)
{
    if (MPI_Irecv(px.acks_in[k], 3, MPI_UINT64_T, MPI_ANY_SOURCE, TAG_POSTED_ACK, or_cl.comm,
                  &px.acks_req[k]) != MPI_SUCCESS)
        px.acks_req[k] = MPI_REQUEST_NULL;
}

/* An owner's status of our posted writes first..last (ids, wrapping). */
static void acked(int k, bool failed, const MPI_Status *st)
{
    px.acks_req[k] = MPI_REQUEST_NULL;
    if (failed)
        return; /* as a failed request receive: the dead peer's writes never finish */
    uint32_t first = (uint32_t)px.acks_in[k][0], last = (uint32_t)px.acks_in[k][1];
    orError_t status = (orError_t)px.acks_in[k][2];
    for (or_proxy_req *r = px.active; r; r = r->next)
        if (!r->serving && r->peer == st->MPI_SOURCE && r->wire[W_MODE] == MODE_POSTED &&
            !r->acked && r->id - first <= last - first) {
            r->reply[0] = (uint64_t)status;
            r->acked = true;
        }
    post_ack_recv(k);
}

static void post_incoming(int k)
{
    px.incoming_posted[k] = ++px.posts;
    if (MPI_Irecv(px.incoming[k], (int)INCOMING_BYTES, MPI_BYTE, MPI_ANY_SOURCE, TAG_REQ,
                  or_cl.comm, &px.incoming_req[k]) != MPI_SUCCESS)
        px.incoming_req[k] = MPI_REQUEST_NULL;
}

static bool grow_flat(int n)
{
    if (n <= px.cap)
        return true;
    int cap = px.cap ? px.cap : 32;
    while (cap < n)
        cap *= 2;
    MPI_Request *flat = realloc(px.flat, cap * sizeof *flat);
    if (flat)
        px.flat = flat;
    or_proxy_req **owner = realloc(px.owner, cap * sizeof *owner);
    if (owner)
        px.owner = owner;
    int *slot = realloc(px.slot, cap * sizeof *slot);
    if (slot)
        px.slot = slot;
    int *indices = realloc(px.indices, cap * sizeof *indices);
    if (indices)
        px.indices = indices;
    MPI_Status *statuses = realloc(px.statuses, cap * sizeof *statuses);
    if (statuses)
        px.statuses = statuses;
    if (!flat || !owner || !slot || !indices || !statuses)
        return false;
    px.cap = cap;
    return true;
}

/* Request receive k completed (failed: with an error); st: its status. */
static void incoming_completed(int k, bool failed, MPI_Status *st)
{
    px.incoming_req[k] = MPI_REQUEST_NULL;
    if (failed) {
        /* A peer died: serving stops, this rank's own requests go on (and
         * fail if they need the dead peer). */
        if (!px.peer_failed)
            OR_WARN("proxy", "rank %d: a peer failed; no longer serving remote requests",
                    or_cl.rank);
        px.peer_failed = true;
        return;
    }
    int bytes = 0;
    MPI_Get_count(st, MPI_BYTE, &bytes);
    if (bytes >= (int)WIRE_BYTES)
        start_serving(px.incoming[k], (size_t)bytes, st->MPI_SOURCE);
    else
        OR_WARN("proxy", "rank %d: dropped a malformed request of rank %d", or_cl.rank,
                st->MPI_SOURCE);
    post_incoming(k);
}

/* The request receives that completed in one poll, taken in the order they
 * were posted (the order their messages were sent, per sender). */
typedef struct {
    int n, slot[N_INCOMING];
    bool failed[N_INCOMING];
    MPI_Status st[N_INCOMING];
} arrivals;

/* flat[i] completed (failed: with an error); st: its status. */
static void completed(int i, bool failed, MPI_Status *st, arrivals *in)
{
    or_proxy_req *r = px.owner[i];
    int k = px.slot[i];
    if (r) {
        r->mpi[k] = MPI_REQUEST_NULL;
        r->failed |= failed;
        return;
    }
    if (k >= N_INCOMING) {
        acked(k - N_INCOMING, failed, st);
        return;
    }
    int j = in->n++;
    while (j > 0 && px.incoming_posted[in->slot[j - 1]] > px.incoming_posted[k]) {
        in->slot[j] = in->slot[j - 1];
        in->failed[j] = in->failed[j - 1];
        in->st[j] = in->st[j - 1];
        j--;
    }
    in->slot[j] = k;
    in->failed[j] = failed;
    in->st[j] = *st;
}

static void serve_arrivals(arrivals *in)
{
    for (int j = 0; j < in->n; j++)
        incoming_completed(in->slot[j], in->failed[j], &in->st[j]);
}

/* One MPI_Testsome over everything outstanding; returns how many completed. */
static int test_all(void)
{
    int n = N_INCOMING + N_ACKS;
    for (or_proxy_req *r = px.active; r; r = r->next)
        n += r->nmpi;
    if (!grow_flat(n))
        return 0; /* out of memory: try again next poll */
    n = 0;
    for (int k = 0; k < N_INCOMING; k++) {
        px.flat[n] = px.incoming_req[k];
        px.owner[n] = NULL;
        px.slot[n++] = k;
    }
    for (int k = 0; k < N_ACKS; k++) {
        px.flat[n] = px.acks_req[k];
        px.owner[n] = NULL;
        px.slot[n++] = N_INCOMING + k;
    }
    for (or_proxy_req *r = px.active; r; r = r->next)
        for (int i = 0; i < r->nmpi; i++)
            if (r->mpi[i] != MPI_REQUEST_NULL) {
                px.flat[n] = r->mpi[i];
                px.owner[n] = r;
                px.slot[n++] = i;
            }
    int count = 0;
    arrivals in = {0};
    int rc = MPI_Testsome(n, px.flat, &count, px.indices, px.statuses);
    if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) {
        if (count == MPI_UNDEFINED)
            return 0;
        for (int j = 0; j < count; j++)
            completed(px.indices[j],
                      rc == MPI_ERR_IN_STATUS && px.statuses[j].MPI_ERROR != MPI_SUCCESS,
                      &px.statuses[j], &in);
        serve_arrivals(&in);
        send_pending_acks();
        return count;
    }
    /* The call as a whole failed: find out request by request. */
    count = 0;
    for (int i = 0; i < n; i++) {
        int flag = 0;
        if (px.flat[i] == MPI_REQUEST_NULL)
            continue;
        bool failed = MPI_Test(&px.flat[i], &flag, &px.statuses[0]) != MPI_SUCCESS;
        if (flag || failed) {
            completed(i, failed, &px.statuses[0], &in);
            count++;
        }
    }
    serve_arrivals(&in);
    send_pending_acks();
    return count;
}

static int progress(void)
{
    int progressed = test_all();
    px.bulk = 0;
    for (or_proxy_req **pp = &px.active; *pp;) {
        or_proxy_req *r = *pp;
        cancel_refused_get(r);
        bool finished = r->failed;
        if (r->failed && !r->serving)
            r->status = orErrorRemote;
        else if (!in_flight(r) && (r->serving || r->wire[W_MODE] != MODE_POSTED || r->acked))
            finished = r->serving ? advance_serving(r) : advance_local(r);
        if (!finished) {
            px.bulk += r->length > OR_PROXY_EAGER_PUT;
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        finish(r);
    }
    return progressed;
}

static bool take_submitted(void)
{
    or_proxy_req *list = atomic_exchange(&px.submitted, NULL), *fifo = NULL;
    while (list) { /* newest first: reverse, to start them in order */
        or_proxy_req *next = list->next;
        list->next = fifo;
        fifo = list;
        list = next;
    }
    bool any = fifo != NULL;
    while (fifo) {
        or_proxy_req *r = fifo;
        fifo = r->next;
        if (!r->started) /* else its caller sent it, and hands over the wait */
            start_local(r);
        r->next = px.active;
        px.active = r;
    }
    return any;
}

/* ---- the loop ------------------------------------------------------------ */

/* Sleep until a local submission bumps px.wake past seen, or ns pass. */
static void sleep_on_wake(uint32_t seen, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    atomic_fetch_add(&px.wake.waiters, 1);
    syscall(SYS_futex, (uint32_t *)&px.wake.seq, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
    atomic_fetch_sub(&px.wake.waiters, 1);
}

/* A poll found nothing. MPI cannot wake us when a message arrives, so the
 * proxy polls: hot after progress (the rest of a burst, or the answer to a
 * request, comes within microseconds), then ever sparser. */
static void back_off(uint64_t idle_ns, uint32_t seen, bool stopping)
{
    /* A large payload in flight moves only as fast as MPI is polled (over
     * TCP each poll takes what the socket holds): no naps while it may be
     * moving, up to OR_PROXY_BULK_HOT_US (a stopped peer's is not). */
    if (idle_ns < (px.bulk ? OR_PROXY_BULK_HOT_US : OR_PROXY_HOT_US) * 1000ull) {
        sched_yield(); /* let whatever we wait for run on this core */
        return;
    }
    uint64_t cap_us = px.active ? OR_PROXY_MAX_WAIT_US : OR_PROXY_MAX_SLEEP_US;
    if (!px.active && !stopping && or_cl.nnodes == 1)
        cap_us = OR_PROXY_ONE_NODE_SLEEP_US;
    uint64_t ns = idle_ns / 8;
    if (ns > cap_us * 1000)
        ns = cap_us * 1000;
    sleep_on_wake(seen, ns);
}

static void *proxy_main(void *arg)
{
    (void)arg;
#ifdef PR_SET_TIMERSLACK
    /* Sleeps of microseconds: without this the kernel may stretch each by
     * its default slack of 50 us. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
#endif
    for (int k = 0; k < N_INCOMING; k++) {
        px.incoming[k] = malloc(INCOMING_BYTES);
        if (px.incoming[k])
            post_incoming(k);
        else
            px.incoming_req[k] = MPI_REQUEST_NULL; /* serve with fewer receives */
    }
    for (int k = 0; k < N_ACKS; k++)
        post_ack_recv(k);
    px.npending = 0;
    MPI_Request stop_barrier = MPI_REQUEST_NULL;
    uint64_t stop_deadline = 0, last_progress = or_now_ns();
    for (;;) {
        uint32_t seen = atomic_load(&px.wake.seq);
        int work = take_submitted();
        work += progress();
        if (stop_barrier == MPI_REQUEST_NULL && atomic_load(&px.stop_requested)) {
            /* Keep serving until every rank stops, but not forever: a dead
             * rank never arrives. */
            MPI_Ibarrier(or_cl.comm, &stop_barrier);
            stop_deadline = or_now_ns() + OR_PROXY_STOP_TIMEOUT_NS;
        }
        if (stop_barrier != MPI_REQUEST_NULL) {
            int all = 0;
            bool failed = MPI_Test(&stop_barrier, &all, MPI_STATUS_IGNORE) != MPI_SUCCESS;
            if ((all && !px.active) || failed || or_now_ns() > stop_deadline) {
                if (!all)
                    OR_WARN("proxy", "rank %d: not every rank stopped in time; leaving anyway",
                            or_cl.rank);
                break;
            }
        }
        uint64_t now = or_now_ns();
        if (work) {
            last_progress = now;
            continue;
        }
        back_off(now - last_progress, seen, stop_barrier != MPI_REQUEST_NULL);
    }
    for (int k = 0; k < N_INCOMING; k++)
        if (px.incoming_req[k] != MPI_REQUEST_NULL) {
            MPI_Cancel(&px.incoming_req[k]);
            MPI_Wait(&px.incoming_req[k], MPI_STATUS_IGNORE);
        }
    for (int k = 0; k < N_ACKS; k++)
        if (px.acks_req[k] != MPI_REQUEST_NULL) {
            MPI_Cancel(&px.acks_req[k]);
            MPI_Wait(&px.acks_req[k], MPI_STATUS_IGNORE);
        }
    for (int k = 0; k < N_INCOMING; k++) {
        free(px.incoming[k]);
        px.incoming[k] = NULL;
    }
    free(px.flat);
    free(px.owner);
    free(px.slot);
    free(px.indices);
    free(px.statuses);
    px.flat = NULL;
    px.owner = NULL;
    px.slot = px.indices = NULL;
    px.statuses = NULL;
    px.cap = 0;
    return NULL;
}

orError_t or_proxy_start(void)
{
    if (!or_cl.mpi || or_cl.nranks < 2 || px.running)
        return orSuccess;
    atomic_store(&px.stop_requested, false);
    px.peer_failed = false;
    if (pthread_create(&px.thread, NULL, proxy_main, NULL))
        return orErrorInitialization;
    px.running = true;
    return orSuccess;
}

void or_proxy_stop(void)
{
    if (!px.running)
        return;
    atomic_store(&px.stop_requested, true);
    or_notifier_signal(&px.wake);
    pthread_join(px.thread, NULL);
    px.running = false;
}

void or_proxy_submit(or_proxy_req *req)
{
    or_proxy_req *head = atomic_load(&px.submitted);
    do
        req->next = head;
    while (!atomic_compare_exchange_weak(&px.submitted, &head, req));
    or_notifier_signal(&px.wake);
}

bool or_proxy_capture_put(or_proxy_req *req)
{
    if (req->kind != OR_PROXY_PUT || req->length > OR_PROXY_INLINE_PUT)
        return false;
    unsigned char *msg = malloc(WIRE_BYTES + req->length);
    if (!msg)
        return false;
    memcpy(msg + WIRE_BYTES, req->local, req->length);
    req->scratch = msg; /* start_local writes the header in front */
    req->captured = true;
    return true;
}

/* ---- a round trip on the calling thread ------------------------------------ */

/* Callers of or_proxy_call wait on one process-wide notifier: the flag they
 * poll lives on their stack, and the proxy touches it last. */
static or_notifier calls_done;

static void call_done(or_proxy_req *req)
{
    atomic_store((_Atomic int *)req->user, 1);
    or_notifier_signal(&calls_done);
}

static bool call_finished(void *arg) { return atomic_load((_Atomic int *)arg) != 0; }

/* Hand req to the proxy (started already, when the caller sent it) and
 * sleep until the proxy has finished it. */
static orError_t call_via_proxy(or_proxy_req *req)
{
    _Atomic int done = 0;
    req->done = call_done;
    req->user = (void *)&done;
    or_proxy_submit(req);
    or_wait_sleeping(&calls_done, call_finished, (void *)&done, 0);
    return req->status;
}

orError_t or_proxy_call(or_proxy_req *req)
{
    if (!px.running)
        return orErrorNotSupported;
    req->started = false;
    return call_via_proxy(req);
}

bool or_proxy_here_ok(const or_proxy_req *req)
{
    if (!px.running)
        return false;
    return req->kind == OR_PROXY_GET ? req->length <= OR_PROXY_INLINE_GET
           : req->kind == OR_PROXY_PUT ? req->length <= OR_PROXY_INLINE_PUT
                                       : false;
}

static _Atomic uint64_t caller_copies, caller_handed; /* or_remote_caller_copies */

uint64_t or_remote_caller_copies(uint64_t *handed)
{
    if (handed)
        *handed = atomic_load(&caller_handed);
    return atomic_load(&caller_copies);
}

orError_t or_proxy_call_here(or_proxy_req *r)
{
    atomic_fetch_add_explicit(&caller_copies, 1, memory_order_relaxed);
    start_local(r);
    r->started = true;
    uint64_t start = or_now_ns();
    int indices[OR_PROXY_MAX_MPI];
    MPI_Status statuses[OR_PROXY_MAX_MPI];
    for (;;) {
        int count = 0;
        int rc = MPI_Testsome(r->nmpi, r->mpi, &count, indices, statuses);
        if (rc == MPI_ERR_IN_STATUS) {
            for (int j = 0; j < count; j++)
                r->failed |= statuses[j].MPI_ERROR != MPI_SUCCESS;
        } else if (rc != MPI_SUCCESS) {
            r->failed = true;
        }
        if (r->failed) {
            /* As on the proxy: what is still posted is left to MPI, which
             * has failed the peer. */
            r->status = orErrorRemote;
            break;
        }
        cancel_refused_get(r);
        if (!in_flight(r)) {
            if (advance_local(r))
                break;
            start = or_now_ns(); /* a second round trip (a write whose bytes could not be inlined) */
            continue;
        }
        if (count > 0 && count != MPI_UNDEFINED)
            continue;
        if (or_now_ns() - start >= (uint64_t)or_rt.cfg.copy_spin_us * 1000u) {
            /* Late: sleep, leaving the core to whoever we wait for. */
            atomic_fetch_add_explicit(&caller_handed, 1, memory_order_relaxed);
            return call_via_proxy(r);
        }
        /* Yield, not pause: the owner's proxy may share this core (ranks
         * outnumber cores), and a spin that keeps it would wait out its
         * whole OPENREG_COPY_SPIN_US for an answer that cannot come. */
        sched_yield();
    }
    free(r->scratch);
    r->scratch = NULL;
    return r->status;
}
