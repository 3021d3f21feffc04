/*
 * src/proxy.c - the proxy thread and its small protocol over MPI.
 *
 * Every rank keeps one receive posted for requests (TAG_REQ, any source).
 *   VALIDATE  req -> reply {status, size}
 *   GET       req -> reply {status}; then, if ok, the data
 *   PUT       req -> reply {status}; then, if ok, the data -> reply {status}
 * Replies and data carry tags derived from the requester's id, so several
 * requests between the same two ranks can be in flight at once.
 */
#include "proxy.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define OR_PROXY_STOP_TIMEOUT_NS (30ull * 1000000000ull)

enum { TAG_REQ = 1, TAG_REPLY_BASE = 0x100, TAG_DATA_BASE = 0x4000, ID_MASK = 0x1fff };
enum { W_KIND, W_ID, W_DEVICE, W_OFFSET, W_LENGTH, W_ALLOC }; /* wire[] slots */

static struct {
    pthread_t thread;
    bool running;
    _Atomic bool stop_requested;
    pthread_mutex_t lock; /* guards submitted */
    or_proxy_req *submitted;
    or_notifier wake;
    uint32_t next_id;
    or_proxy_req *active;
    /* The request receive, always posted while running. */
    uint64_t incoming[6];
    MPI_Request incoming_req;
    MPI_Status incoming_status;
} px = {.lock = PTHREAD_MUTEX_INITIALIZER};

bool or_proxy_running(void) { return px.running; }

static int reply_tag(uint32_t id) { return TAG_REPLY_BASE + (int)(id & ID_MASK); }
static int data_tag(uint32_t id) { return TAG_DATA_BASE + (int)(id & ID_MASK); }

/* Post the payload of [buf, buf+len) in chunks; send or receive. */
static void post_data(or_proxy_req *r, void *buf, uint64_t len, int peer, int tag, bool send)
{
    for (uint64_t done = 0; done < len && r->nmpi < OR_PROXY_MAX_MPI; done += OR_PROXY_CHUNK) {
        int n = (int)(len - done < OR_PROXY_CHUNK ? len - done : OR_PROXY_CHUNK);
        if (send)
            MPI_Isend((char *)buf + done, n, MPI_BYTE, peer, tag, or_cl.comm, &r->mpi[r->nmpi++]);
        else
            MPI_Irecv((char *)buf + done, n, MPI_BYTE, peer, tag, or_cl.comm, &r->mpi[r->nmpi++]);
    }
}

static void post_reply_recv(or_proxy_req *r)
{
    MPI_Irecv(r->reply, 2, MPI_UINT64_T, r->peer, reply_tag(r->id), or_cl.comm, &r->mpi[r->nmpi++]);
}

static void send_reply(or_proxy_req *r, orError_t status, uint64_t size)
{
    r->reply[0] = (uint64_t)status;
    r->reply[1] = size;
    MPI_Isend(r->reply, 2, MPI_UINT64_T, r->peer, reply_tag(r->id), or_cl.comm,
              &r->mpi[r->nmpi++]);
}

/* ---- this rank's requests ------------------------------------------------ */

static void start_local(or_proxy_req *r)
{
    r->id = px.next_id++;
    r->phase = 0;
    r->nmpi = 0;
    r->status = orSuccess;
    r->wire[W_KIND] = (uint64_t)r->kind;
    r->wire[W_ID] = r->id;
    r->wire[W_DEVICE] = (uint64_t)r->device;
    r->wire[W_OFFSET] = r->offset;
    r->wire[W_LENGTH] = r->length;
    r->wire[W_ALLOC] = r->alloc_id;
    MPI_Isend(r->wire, 6, MPI_UINT64_T, r->peer, TAG_REQ, or_cl.comm, &r->mpi[r->nmpi++]);
    post_reply_recv(r);
}

/* All MPI requests of r completed: next phase, or true when r is finished. */
static bool advance_local(or_proxy_req *r)
{
    r->nmpi = 0;
    orError_t status = (orError_t)r->reply[0];
    switch (r->kind) {
    case OR_PROXY_VALIDATE:
        r->status = status;
        r->size = r->reply[1];
        return true;
    case OR_PROXY_GET:
        if (r->phase++ == 0 && status == orSuccess) {
            post_data(r, r->local, r->length, r->peer, data_tag(r->id), false);
            return false;
        }
        if (r->phase == 1)
            r->status = status;
        return true;
    case OR_PROXY_PUT:
        if (r->phase++ == 0 && status == orSuccess) {
            post_data(r, r->local, r->length, r->peer, data_tag(r->id), true);
            post_reply_recv(r);
            return false;
        }
        r->status = status;
        return true;
    }
    return true;
}

/* ---- other ranks' requests on our memory --------------------------------- */

static void start_serving(const uint64_t *wire, int source)
{
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
    uint64_t size = 0;
    orError_t status = or_mem_resolve(
        (int)wire[W_DEVICE], wire[W_OFFSET], wire[W_LENGTH],
        r->kind == OR_PROXY_VALIDATE ? wire[W_ALLOC] : 0, &r->target, &size);
    if ((r->kind != OR_PROXY_VALIDATE && r->kind != OR_PROXY_GET && r->kind != OR_PROXY_PUT) ||
        wire[W_LENGTH] > OR_PROXY_MAX_BYTES)
        status = orErrorInvalidValue;
    send_reply(r, status, size);
    if (status == orSuccess && r->kind != OR_PROXY_VALIDATE) {
        or_strict_enter(); /* our memory is read or written until the data completes */
        post_data(r, r->target, wire[W_LENGTH], source, data_tag(r->id), r->kind == OR_PROXY_GET);
        r->phase = 1;
    }
    r->next = px.active;
    px.active = r;
}

static void or_strict_leave_if(bool cond)
{
    if (cond)
        or_strict_leave();
}

static bool advance_serving(or_proxy_req *r)
{
    r->nmpi = 0;
    if (r->phase == 1) {
        or_strict_leave();
        if (r->kind == OR_PROXY_PUT) { /* tell the writer its bytes are in place */
            r->phase = 2;
            send_reply(r, orSuccess, 0);
            return false;
        }
    }
    return true;
}

/* ---- the loop ------------------------------------------------------------ */

static int progress(void)
{
    int progressed = 0, flag = 0;
    while (px.incoming_req != MPI_REQUEST_NULL) {
        if (MPI_Test(&px.incoming_req, &flag, &px.incoming_status) != MPI_SUCCESS) {
            /* A peer died: serving stops, this rank's own requests go on
             * (and fail if they need the dead peer). */
            OR_WARN("proxy", "rank %d: a peer failed; no longer serving remote requests",
                    or_cl.rank);
            px.incoming_req = MPI_REQUEST_NULL;
            break;
        }
        if (!flag)
            break;
        start_serving(px.incoming, px.incoming_status.MPI_SOURCE);
        MPI_Irecv(px.incoming, 6, MPI_UINT64_T, MPI_ANY_SOURCE, TAG_REQ, or_cl.comm,
                  &px.incoming_req);
        progressed++;
    }
    for (or_proxy_req **pp = &px.active; *pp;) {
        or_proxy_req *r = *pp;
        int done = 1;
        MPI_Status statuses[OR_PROXY_MAX_MPI];
        bool failed = r->nmpi && MPI_Testall(r->nmpi, r->mpi, &done, statuses) != MPI_SUCCESS;
        if (!done && !failed) {
            pp = &r->next;
            continue;
        }
        progressed++;
        bool finished = true;
        if (failed) {
            r->status = orErrorRemote;
            if (r->serving)
                or_strict_leave_if(r->phase == 1);
        } else {
            finished = r->serving ? advance_serving(r) : advance_local(r);
        }
        if (!finished) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        if (r->serving)
            free(r);
        else
            r->done(r);
    }
    return progressed;
}

static bool take_submitted(void)
{
    pthread_mutex_lock(&px.lock);
    or_proxy_req *list = px.submitted;
    px.submitted = NULL;
    pthread_mutex_unlock(&px.lock);
    for (or_proxy_req *r = list, *next; r; r = next) {
        next = r->next;
        start_local(r);
        r->next = px.active;
        px.active = r;
    }
    return list != NULL;
}

typedef struct {
    uint32_t seen;
} wake_wait;

static bool woken(void *arg)
{
    return atomic_load(&px.wake.seq) != ((wake_wait *)arg)->seen;
}

static void *proxy_main(void *arg)
{
    MPI_Irecv(px.incoming, 6, MPI_UINT64_T, MPI_ANY_SOURCE, TAG_REQ, or_cl.comm, &px.incoming_req);
    MPI_Request stop_barrier = MPI_REQUEST_NULL;
    uint64_t stop_deadline = 0;
    unsigned idle = 0;
    for (;;) {
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
        if (work) {
            idle = 0;
            continue;
        }
        /* Back off. A transfer in flight moves only while someone polls MPI,
         * so then the proxy just yields its core between polls; idle, it
         * spins a little, then sleeps ever longer (waking at once for a
         * local submission). */
        ++idle;
        if (px.active) {
            if (idle < 4096)
                sched_yield();
            else
                or_wait(&px.wake, woken, &(wake_wait){atomic_load(&px.wake.seq)},
                        or_now_ns() + 20000);
            continue;
        }
        if (idle < 64) {
            or_cpu_relax();
            continue;
        }
        uint64_t sleep_us = (uint64_t)1 << ((idle - 64) / 16 < 8 ? (idle - 64) / 16 : 8);
        if (sleep_us > OR_PROXY_MAX_SLEEP_US)
            sleep_us = OR_PROXY_MAX_SLEEP_US;
        /* Requests only come from other virtual nodes: in a one-node job an
         * idle proxy sleeps until this rank submits something or stops. */
        if (or_cl.nnodes == 1 && stop_barrier == MPI_REQUEST_NULL)
            sleep_us = 1000000;
        wake_wait w = {atomic_load(&px.wake.seq)};
        or_wait(&px.wake, woken, &w, or_now_ns() + sleep_us * 1000);
    }
    if (px.incoming_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&px.incoming_req);
        MPI_Wait(&px.incoming_req, MPI_STATUS_IGNORE);
    }
    return NULL;
}

orError_t or_proxy_start(void)
{
    if (!or_cl.mpi || or_cl.nranks < 2 || px.running)
        return orSuccess;
    atomic_store(&px.stop_requested, false);
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
    pthread_mutex_lock(&px.lock);
    req->next = px.submitted;
    px.submitted = req;
    pthread_mutex_unlock(&px.lock);
    or_notifier_signal(&px.wake);
}

/* Callers of or_proxy_call wait on one process-wide notifier: the flag they
 * poll lives on their stack, and the proxy touches it last. */
static or_notifier calls_done;

static void call_done(or_proxy_req *req)
{
    atomic_store((_Atomic int *)req->user, 1);
    or_notifier_signal(&calls_done);
}

static bool call_finished(void *arg) { return atomic_load((_Atomic int *)arg) != 0; }

orError_t or_proxy_call(or_proxy_req *req)
{
    if (!px.running)
        return orErrorNotSupported;
    _Atomic int done = 0;
    req->done = call_done;
    req->user = (void *)&done;
    or_proxy_submit(req);
    or_wait(&calls_done, call_finished, (void *)&done, 0);
    return req->status;
}
