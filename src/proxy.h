/*
 * src/proxy.h - the rank's proxy thread: it serves other ranks' requests on
 * this rank's device memory (validate, get, put) and carries out this rank's
 * requests on theirs. After start-up it is the one thread of this library
 * that calls MPI (OCCL's transport has threads of its own), except that a
 * synchronous copy of one round trip is carried by the thread that issued it
 * (or_proxy_call_here), which would otherwise only wait: two hand-overs
 * between threads less per copy.
 *
 * MPI's blocking calls spin, and ranks outnumber cores, so the proxy only
 * uses non-blocking calls, and tests everything it waits for with one
 * MPI_Testsome per poll: under MPI_THREAD_MULTIPLE every MPI call takes
 * MPI's lock, which an application thread spinning in a blocking call holds
 * most of the time. Between polls it backs off: it yields its core for a
 * short while after the last progress (the next request of a burst comes
 * within microseconds), then sleeps on its submission notifier for a time
 * that grows with the idle time, up to OR_PROXY_MAX_SLEEP_US (up to
 * OR_PROXY_MAX_WAIT_US while a request of its own is in flight). Only ranks
 * of other virtual nodes send requests, so in a one-node job it just sleeps.
 */
#ifndef OR_PROXY_H
#define OR_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "openreg.h"

/* Payloads move in chunks MPI counts can express. */
#define OR_PROXY_CHUNK ((uint64_t)1 << 30)
#define OR_PROXY_MAX_MPI 20 /* request slots: headers plus the payload's chunks */
/* Largest payload of one request; longer copies are split into several. */
#define OR_PROXY_MAX_BYTES (OR_PROXY_CHUNK * 16)
/* A write up to this size travels inside its request message: the owner
 * copies it into place from the request receive, one message less and, more
 * to the point, fewer MPI calls on the owner, whose MPI lock an application
 * thread spinning in MPI may hold. */
#define OR_PROXY_INLINE_PUT ((uint64_t)64 << 10)
/* A write up to this size travels right behind its request, without waiting
 * for the owner's go-ahead: the owner drains it into a scratch buffer if it
 * refuses the copy. Larger writes wait for the go-ahead (one round trip more,
 * small next to the transfer itself). */
#define OR_PROXY_EAGER_PUT ((uint64_t)1 << 20)
/* A read up to this size comes back in one message, the owner's status with
 * the bytes, through a scratch buffer: one message and one owner's send less
 * than the status and then the bytes. */
#define OR_PROXY_INLINE_GET ((uint64_t)64 << 10)

/* Back-off ladder of the proxy between polls that find nothing to do. */
#define OR_PROXY_HOT_US 200      /* after progress: yield the core between polls */
#define OR_PROXY_BULK_HOT_US 50000 /* the same with a payload over OR_PROXY_EAGER_PUT in flight */
#define OR_PROXY_MAX_WAIT_US 50  /* then sleep at most this while waiting on a peer */
#define OR_PROXY_MAX_SLEEP_US 200 /* or this when idle */

typedef enum { OR_PROXY_VALIDATE = 1, OR_PROXY_GET = 2, OR_PROXY_PUT = 3 } or_proxy_kind;

typedef struct or_proxy_req or_proxy_req;
typedef void (*or_proxy_done_fn)(or_proxy_req *req);

#define OR_PROXY_WIRE_WORDS 7

struct or_proxy_req {
    or_proxy_kind kind;
    int peer;          /* owner's world rank */
    int device;        /* owner's device */
    uint64_t offset;   /* in the owner's arena */
    uint64_t length;   /* bytes (VALIDATE: 0) */
    uint64_t alloc_id; /* VALIDATE: the allocation's id */
    void *local;       /* GET: destination; PUT: source */
    /* Results, written before done() is called. */
    orError_t status;
    uint64_t size; /* VALIDATE: requested size of the allocation */
    or_proxy_done_fn done;
    void *user;
    bool captured; /* PUT: its bytes are in its request message already */
    bool acked;    /* proxy-private: a posted write's status came */
    bool caller_waits; /* a synchronous copy: its issuer waits for it at once */
    bool started;      /* sent by its caller (or_proxy_call_here), then handed over */
    /* Proxy-private. */
    or_proxy_req *next;
    uint32_t id;
    int phase;
    bool serving;   /* another rank's request on our memory */
    bool failed;    /* an MPI request of it failed */
    bool cancelled; /* GET refused: the data receives were cancelled */
    bool strict;    /* serving: holds a strict-mode window on our memory */
    void *target;   /* serving: our memory the request names */
    void *scratch;  /* serving: drain of an eager write we refused, or an
                     * inline read's reply; local: an inline write's request
                     * message, or where an inline read's reply arrives */
    uint64_t wire[OR_PROXY_WIRE_WORDS]; /* the request as sent or received */
    uint64_t reply[2];
    MPI_Request mpi[OR_PROXY_MAX_MPI];
    int nmpi; /* slots in use; a completed one is MPI_REQUEST_NULL */
};

/* Start the proxy (only when the job has more than one rank). */
orError_t or_proxy_start(void);
/* Everyone stops together: serve until every rank has asked to stop, then
 * finish what is in flight and join the thread. Idempotent. */
void or_proxy_stop(void);
bool or_proxy_running(void);
/* Queue req; done(req) runs later on the proxy thread. */
void or_proxy_submit(or_proxy_req *req);
/* A write small enough to travel inside its request message: build that
 * message now, on the calling thread, with the bytes of `local` as they are
 * (the caller reads them inside a strict-mode window). From then on `local`
 * may change or go. False (req untouched) for a larger write, or when out of
 * memory. */
bool or_proxy_capture_put(or_proxy_req *req);
/* Submit and wait for it (not from a worker thread). */
orError_t or_proxy_call(or_proxy_req *req);
/* A read or write small enough to be one round trip (up to
 * OR_PROXY_INLINE_GET / OR_PROXY_INLINE_PUT bytes), with the proxy running:
 * it may be carried out on the calling thread. */
bool or_proxy_here_ok(const or_proxy_req *req);
/* Carry out req on the calling thread: send the request and test for the
 * answer, yielding the core in between, for OPENREG_COPY_SPIN_US (default 30 us,
 * about two round trips over TCP between hosts: the answer is due, and MPI's
 * own blocking calls spin); an answer later than that the proxy waits for,
 * while the caller sleeps until it is woken. Returns req's status; req->done
 * and req->user are this module's. For a thread that would only wait for the
 * copy: two hand-overs between threads less (docs/cluster.md). Ordered after this rank's earlier requests
 * to the same owner only if the proxy has sent them, so the caller makes sure
 * none of its stream is outstanding. */
orError_t or_proxy_call_here(or_proxy_req *req);

#endif
