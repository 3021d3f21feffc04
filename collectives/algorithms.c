/*
 * collectives/algorithms.c - every collective as a sequence of transfer
 * steps over the communicator's ring (ranks ordered by node, so the ring
 * leaves each node once) or directly between pairs.
 *
 * Chunks: a buffer of count elements split over n ring positions gives
 * position q the elements [count*q/n, count*(q+1)/n).
 */
#include <stdlib.h>
#include <string.h>

#include "occl_internal.h"

#define BROADCAST_CHUNK OCCL_BROADCAST_CHUNK /* pipeline granularity */

const char *occl_coll_name(occl_coll c)
{
    static const char *const names[] = {"AllReduce", "Broadcast",    "Reduce",   "AllGather",
                                        "ReduceScatter", "AlltoAll", "Gather",   "Scatter",
                                        "Send",      "Recv",          "PutSignal", "Signal",
                                        "WaitSignal"};
    return (unsigned)c < sizeof names / sizeof *names ? names[c] : "?";
}

typedef struct ctx {
    occlComm_t comm;
    int n, p, next, prev; /* ring size, position, neighbours (comm ranks) */
    size_t es;            /* element size */
} ctx;

static ctx make_ctx(const occl_call *c)
{
    occlComm_t comm = c->comm;
    int n = comm->nranks, p = comm->ring_pos;
    return (ctx){comm, n, p, comm->ring[(p + 1) % n], comm->ring[(p + n - 1) % n],
                 occl_type_size(c->type)};
}

static size_t lo(size_t count, int q, int n) { return (size_t)((unsigned __int128)count * q / n); }

static occl_xfer send_x(int peer, const void *buf, size_t bytes)
{
    return (occl_xfer){.kind = OCCL_XFER_SEND, .peer = peer, .buf = (void *)buf, .bytes = bytes};
}

static occl_xfer recv_x(int peer, void *buf, size_t bytes)
{
    return (occl_xfer){.kind = OCCL_XFER_RECV, .peer = peer, .buf = buf, .bytes = bytes};
}

static occl_xfer recv_reduce_x(int peer, void *buf, const void *with, size_t bytes,
                               occlDataType_t t, const occl_redop *op)
{
    return (occl_xfer){.kind = OCCL_XFER_RECV, .peer = peer, .buf = buf, .bytes = bytes,
                       .reduce = true, .with = with, .type = t, .op = op};
}

/* The op as the kernels run it: PreMulSum scales the input once up front
 * (into *scaled) and sums from there on. */
typedef struct reduction {
    occl_redop op;  /* what each step applies */
    occl_redop pre; /* PreMulSum's scaling, kind OCCL_RED_PREMULSUM, or kind -1 */
} reduction;

static reduction reduction_of(const occl_call *c)
{
    reduction r = {c->op, {.kind = -1}};
    if (c->device_scalar) /* read now, at execution, as NCCL reads it in the kernel */
        r.op = occl_redop_premulsum(c->device_scalar, c->type);
    if (r.op.kind == OCCL_RED_PREMULSUM) {
        r.pre = r.op;
        r.op = occl_redop_make(OCCL_RED_SUM);
    }
    return r;
}

/* Ring reduce-scatter of `count` elements in place on acc (which holds this
 * rank's input), chunk q per ring position; position p ends holding chunk
 * (p+1)%n reduced over all ranks. */
static occlResult_t ring_reduce_scatter(const ctx *x, void *acc, const void *input, size_t count,
                                        occlDataType_t t, const occl_redop *op)
{
    unsigned char *a = acc;
    const unsigned char *in = input;
    for (int s = 0; s < x->n - 1; s++) {
        int sc = (x->p - s + x->n) % x->n, rc = (x->p - s - 1 + 2 * x->n) % x->n;
        size_t slo = lo(count, sc, x->n), shi = lo(count, sc + 1, x->n);
        size_t rlo = lo(count, rc, x->n), rhi = lo(count, rc + 1, x->n);
        occl_xfer xf[2] = {
            send_x(x->next, (s == 0 ? in : a) + slo * x->es, (shi - slo) * x->es),
            recv_reduce_x(x->prev, a + rlo * x->es, in + rlo * x->es, (rhi - rlo) * x->es, t, op)};
        occlResult_t res = occl_xfers_run(x->comm, xf, 2);
        if (res != occlSuccess)
            return res;
    }
    return occlSuccess;
}

/* Ring all-gather of chunks in place: position p starts with chunk (p+1)%n. */
static occlResult_t ring_all_gather_chunks(const ctx *x, void *buf, size_t count)
{
    unsigned char *b = buf;
    for (int s = 0; s < x->n - 1; s++) {
        int sc = (x->p + 1 - s + x->n) % x->n, rc = (x->p - s + x->n) % x->n;
        size_t slo = lo(count, sc, x->n), shi = lo(count, sc + 1, x->n);
        size_t rlo = lo(count, rc, x->n), rhi = lo(count, rc + 1, x->n);
        occl_xfer xf[2] = {send_x(x->next, b + slo * x->es, (shi - slo) * x->es),
                           recv_x(x->prev, b + rlo * x->es, (rhi - rlo) * x->es)};
        occlResult_t res = occl_xfers_run(x->comm, xf, 2);
        if (res != occlSuccess)
            return res;
    }
    return occlSuccess;
}

/* NCCL's double binary tree (topo_tree.h): half of the buffer is reduced
 * up tree 0 and its result broadcast down it, the other half on tree 1, at
 * once, each pipelined in chunks. Within a node a tree is a chain, across
 * nodes a binary tree of the chain heads; a node that forwards across the
 * network in one tree is a leaf in the other, so both directions of every
 * node's network link work. Every step is one set of transfers whose other
 * ends are at the same step of their peers (occl_tree_allreduce_ops).
 * buf holds this rank's input and gets the result. */
static occlResult_t tree_all_reduce(const ctx *x, void *buf, size_t count, occlDataType_t t,
                                    const occl_redop *op)
{
    size_t lo[2], len[2], ce[2], nchunks[2];
    for (int k = 0; k < 2; k++)
        occl_tree_half(count, x->es, k, &lo[k], &len[k], &ce[k], &nchunks[k]);
    occl_tree_op *ops = NULL;
    int m = occl_tree_allreduce_ops(&x->comm->trees, x->comm->rank, nchunks, &ops);
    if (m < 0)
        return occl_fail(occlSystemError, "out of memory");
    occl_xfer *xf = m ? calloc((size_t)m, sizeof *xf) : NULL;
    if (m && !xf) {
        free(ops);
        return occl_fail(occlSystemError, "out of memory");
    }
    unsigned char *b = buf;
    occlResult_t res = occlSuccess;
    for (int i = 0; i < m && res == occlSuccess;) {
        int nx = 0, step = ops[i].step;
        for (; i < m && ops[i].step == step; i++) {
            const occl_tree_op *o = &ops[i];
            size_t first = lo[o->tree] + o->chunk * ce[o->tree];
            size_t end = lo[o->tree] + len[o->tree], last = first + ce[o->tree] < end ? first + ce[o->tree] : end;
            unsigned char *p = b + first * x->es;
            size_t bytes = (last - first) * x->es;
            switch (o->kind) {
            case OCCL_TREE_RECV_UP: xf[nx++] = recv_reduce_x(o->peer, p, p, bytes, t, op); break;
            case OCCL_TREE_RECV_DOWN: xf[nx++] = recv_x(o->peer, p, bytes); break;
            default: xf[nx++] = send_x(o->peer, p, bytes); break;
            }
        }
        res = occl_xfers_run(x->comm, xf, nx);
    }
    free(xf);
    free(ops);
    return res;
}

/* The direct all-reduce's transfers, in the order every rank lists them:
 * to and from each peer in rank order, so a call run by the calling thread
 * (net_small_begin) meets one run by a peer's communicator's thread. Fills
 * srcs with where each rank's input is read: `input` for this rank and, in
 * place, for every peer until its receive maps it; otherwise its slot of
 * `all`. Returns the count of transfers. */
static int direct_xfers(const ctx *x, occl_xfer *xf, const void **srcs, const void *input,
                        unsigned char *all, size_t bytes, bool in_place)
{
    int m = 0, me = x->comm->rank;
    for (int j = 0; j < x->n; j++) {
        srcs[j] = j == me || in_place ? input : all + (size_t)j * bytes;
        if (j == me)
            continue;
        xf[m] = send_x(j, input, bytes);
        xf[m++].post_only = in_place;
        xf[m] = recv_x(j, in_place ? NULL : all + (size_t)j * bytes, bytes);
        xf[m++].hold = in_place;
    }
    return m;
}

/* Everyone's input to everyone at once, then an n-way reduction in rank
 * order (so every rank computes the same bits). One step, for small sizes.
 * Peers' inputs are copied into scratch, or, with in_place (one virtual
 * node, the call's buffers registered, output apart from input), read where
 * they are: each receive holds the peer's input mapped, and each send stays
 * open (post_only) until the peers have reduced from it (resume), so no
 * rank rewrites its input while another still reads it. */
static occlResult_t direct_all_reduce(const ctx *x, void *recv, const void *input, size_t count,
                                      occlDataType_t t, const occl_redop *op, bool in_place)
{
    size_t bytes = count * x->es;
    unsigned char *all = in_place ? NULL : occl_scratch(x->comm, OCCL_SCRATCH_A, bytes * (size_t)x->n);
    occl_xfer *xf = calloc((size_t)(2 * x->n), sizeof *xf);
    const void **srcs = calloc((size_t)x->n, sizeof *srcs);
    occlResult_t res = occlSuccess;
    if (!in_place && !all)
        res = occlUnhandledDeviceError; /* occl_scratch said why */
    else if (!xf || !srcs)
        res = occl_fail(occlSystemError, "out of memory");
    int me = x->comm->rank;
    if (res == occlSuccess)
        res = occl_xfers_run(x->comm, xf, direct_xfers(x, xf, srcs, input, all, bytes, in_place));
    if (res == occlSuccess && in_place)
        for (int j = 0, k = 0; j < x->n; j++)
            if (j != me)
                srcs[j] = xf[2 * k++ + 1].mapped;
    if (res == occlSuccess)
        occl_reduce_n(recv, srcs, x->n, count, t, op);
    if (res == occlSuccess && in_place) {
        int w = 0;
        for (int k = 0; k < x->n - 1; k++)
            occl_xfer_release(x->comm, &xf[2 * k + 1]);
        for (int k = 0; k < x->n - 1; k++) {
            xf[w] = xf[2 * k];
            xf[w++].resume = true;
        }
        res = occl_xfers_run(x->comm, xf, w); /* the peers are done with this input */
    } else if (res == occlSuccess) {
        occl_staged(x->comm, bytes * (size_t)(x->n - 1));
    }
    free(xf);
    free(srcs);
    return res;
}

/* direct_all_reduce across nodes for a call small enough for the calling
 * thread (enqueue.c), in two parts so that the communicator's thread can
 * take over the wait: the same transfers in the same order (direct_xfers),
 * so a peer that runs the call on its communicator's thread meets them. */
bool occl_net_small_eligible(const occl_call *c)
{
    occlComm_t comm = c->comm;
    /* Neither in virtual time nor with a tuner plugin, where the plan is
     * the communicator's thread's to make: here it is the cost formulas'. */
    return comm->network && !comm->prof && !comm->tuner && c->coll == OCCL_COLL_ALLREDUCE && c->count &&
           c->count * occl_type_size(c->type) <= OCCL_NET_INLINE && !or_inline_tasks_off() &&
           occl_plan_wall(c) == OCCL_ALGO_DIRECT;
}

static void net_small_free(struct occl_net_small *ns)
{
    free(ns->xf);
    ns->xf = NULL;
}

static occlResult_t net_small_begin(const occl_call *c, occl_ll_state *st)
{
    ctx x = make_ctx(c);
    size_t bytes = c->count * x.es;
    struct occl_net_small *ns = &st->net;
    reduction r = reduction_of(c);
    ns->op = r.op;
    ns->input = c->sendbuff;
    if (r.pre.kind == OCCL_RED_PREMULSUM) {
        occl_premul(c->recvbuff, c->sendbuff, c->count, c->type, &r.pre);
        ns->input = c->recvbuff;
    }
    ns->all = occl_scratch(x.comm, OCCL_SCRATCH_A, bytes * (size_t)x.n);
    if (!ns->all)
        return occlUnhandledDeviceError; /* occl_scratch said why */
    /* One block: the transfers, then the sources. */
    size_t nxf = 2 * (size_t)(x.n - 1);
    ns->xf = calloc(1, nxf * sizeof *ns->xf + (size_t)x.n * sizeof *ns->srcs);
    if (!ns->xf)
        return occl_fail(occlSystemError, "out of memory");
    ns->srcs = (const void **)(ns->xf + nxf);
    int m = direct_xfers(&x, ns->xf, ns->srcs, ns->input, ns->all, bytes, false);
    /* The plan's line, as occl_plan logs it for every call, then the path. */
    occl_plan_log(c, OCCL_ALGO_DIRECT);
    OCCL_INFO("rank %d: AllReduce of %zu x %s on %d ranks across nodes: direct, begun on the %s thread",
              x.comm->rank, c->count, occl_type_name(c->type), x.n, st->wait_ns ? "calling" : "communicator's");
    occlResult_t res = occl_xfers_begin(x.comm, &ns->set, ns->xf, m);
    if (res != occlSuccess)
        net_small_free(ns);
    return res;
}

occlResult_t occl_net_small_run(const occl_call *c, occl_ll_state *st)
{
    occlComm_t comm = c->comm;
    struct occl_net_small *ns = &st->net;
    if (!st->begun) {
        st->begun = true;
        st->give_up_ns = st->wait_ns ? or_now_ns() + st->wait_ns : 0;
        occlResult_t res = net_small_begin(c, st);
        if (res != occlSuccess)
            return res;
    }
    occlResult_t res = occl_xfers_wait(comm, &ns->set, st->wait_ns ? st->give_up_ns : 0);
    if (res == occlInProgress)
        return res;
    if (res == occlSuccess) {
        occl_reduce_n(c->recvbuff, ns->srcs, comm->nranks, c->count, c->type, &ns->op);
        occl_staged(comm, c->count * occl_type_size(c->type) * (size_t)(comm->nranks - 1));
        if (c->avg)
            occl_finish_avg(c->recvbuff, c->count, c->type, comm->nranks);
    }
    net_small_free(ns);
    return res;
}

/* Hierarchical: the ranks of each virtual node reduce into their leader
 * (the node's first rank on the ring), which reads all their buffers in
 * place through the mapped device memory and sums them in one pass; the
 * leaders run a ring all-reduce over MPI (one rank per node, so every step
 * crosses the network once per node instead of once per rank); each leader
 * then hands the result to its node's ranks, which copy it straight from the
 * leader's buffer. recv holds this rank's (scaled) input or gets it from
 * `input`, and ends with the result on every rank. */
static occlResult_t hier_all_reduce(const ctx *x, void *recv, const void *input, size_t count,
                                    occlDataType_t t, const occl_redop *op)
{
    occlComm_t comm = x->comm;
    size_t bytes = count * x->es;
    int first = comm->node_first[comm->my_node], m = comm->node_first[comm->my_node + 1] - first;
    int leader = comm->ring[first];
    bool lead = comm->rank == leader;
    occlResult_t res = occlSuccess;
    if (!lead) {
        occl_xfer up = send_x(leader, input, bytes);
        res = occl_xfers_run(comm, &up, 1);
        if (res == occlSuccess) {
            occl_xfer down = recv_x(leader, recv, bytes);
            res = occl_xfers_run(comm, &down, 1);
        }
        return res;
    }
    /* Leader: every local input at once, reduced in ring order. */
    occl_xfer *xf = calloc((size_t)m, sizeof *xf);
    const void **srcs = calloc((size_t)m, sizeof *srcs);
    if (!xf || !srcs) {
        free(xf);
        free(srcs);
        return occl_fail(occlSystemError, "out of memory");
    }
    for (int i = 1; i < m; i++) {
        xf[i - 1] = recv_x(comm->ring[first + i], NULL, bytes);
        xf[i - 1].hold = true;
    }
    if (m > 1)
        res = occl_xfers_run(comm, xf, m - 1);
    if (res == occlSuccess) {
        srcs[0] = input;
        for (int i = 1; i < m; i++)
            srcs[i] = xf[i - 1].mapped;
        if (m > 1 || recv != input)
            occl_reduce_n(recv, srcs, m, count, t, op);
        for (int i = 1; i < m; i++)
            occl_xfer_release(comm, &xf[i - 1]);
    }
    /* Leaders: a ring all-reduce among themselves. */
    if (res == occlSuccess && comm->nnodes > 1) {
        int L = comm->nnodes, k = comm->my_node;
        ctx lx = {comm, L, k, comm->ring[comm->node_first[(k + 1) % L]],
                  comm->ring[comm->node_first[(k + L - 1) % L]], x->es};
        res = ring_reduce_scatter(&lx, recv, recv, count, t, op);
        if (res == occlSuccess)
            res = ring_all_gather_chunks(&lx, recv, count);
    }
    /* Down to the node's ranks, all at once. */
    if (res == occlSuccess && m > 1) {
        for (int i = 1; i < m; i++)
            xf[i - 1] = send_x(comm->ring[first + i], recv, bytes);
        res = occl_xfers_run(comm, xf, m - 1);
    }
    free(xf);
    free(srcs);
    return res;
}

/* NVLS, as NCCL's NVLink SHARP all-reduce on one node (loads that reduce,
 * stores that multicast), with the node's shared memory as the switch: every
 * rank reduces its own slice (by comm rank) in one pass over that slice of
 * all the node's inputs, read in place, and writes the result straight into
 * every rank's output. One step, and each input byte read once and each
 * output byte written once: the least memory traffic there is, which is what
 * bounds large all-reduces when ranks share cores. One virtual node only
 * (occl_plan). `input` may be recv.
 *
 * Per peer j, in this order: this rank offers j its input's slice j, then
 * its output's slice j to write into; and maps j's offers, input then output
 * slice. An input offer is acknowledged when mapped (early_ack), so no rank
 * waits on another's reduction to map; the output offers are only posted
 * (post_only), then waited for (resume) once this rank has written its own
 * slice everywhere: their acknowledgement is the writer's release. In place,
 * slice j of this rank's buffer is read and written only by rank j, block by
 * block (occl_reduce_n_to reads a block before writing it). */
static occlResult_t nvls_all_reduce(const ctx *x, void *recv, const void *input, size_t count,
                                    occlDataType_t t, const occl_redop *op)
{
    occlComm_t comm = x->comm;
    int n = x->n, me = comm->rank;
    unsigned char *out = recv;
    const unsigned char *in = input;
    size_t mlo = lo(count, me, n), mbytes = (lo(count, me + 1, n) - mlo) * x->es;
    occl_xfer *xf = calloc((size_t)(4 * n), sizeof *xf);
    const void **srcs = calloc((size_t)n, sizeof *srcs);
    void **dsts = calloc((size_t)n, sizeof *dsts);
    occlResult_t res = occlSuccess;
    if (!xf || !srcs || !dsts)
        res = occl_fail(occlSystemError, "out of memory");
    int m = 0;
    for (int j = 0; j < n && res == occlSuccess; j++) {
        if (j == me)
            continue;
        size_t jlo = lo(count, j, n), jbytes = (lo(count, j + 1, n) - jlo) * x->es;
        xf[m++] = send_x(j, in + jlo * x->es, jbytes);
        xf[m] = send_x(j, out + jlo * x->es, jbytes);
        xf[m++].post_only = true;
        xf[m] = recv_x(j, NULL, mbytes);
        xf[m].hold = xf[m].early_ack = true;
        m++;
        xf[m] = recv_x(j, NULL, mbytes);
        xf[m++].hold = true;
    }
    if (res == occlSuccess)
        res = occl_xfers_run(comm, xf, m);
    if (res == occlSuccess) {
        /* Sources in rank order, as the other algorithms' n-way reductions;
         * destinations this rank's output slice, then its slice of each
         * peer's output (mapped to be written). */
        dsts[0] = out + mlo * x->es;
        for (int j = 0, k = 0; j < n; j++) {
            if (j == me) {
                srcs[j] = in + mlo * x->es;
                continue;
            }
            srcs[j] = xf[4 * k + 2].mapped;
            dsts[1 + k] = (void *)xf[4 * k + 3].mapped;
            k++;
        }
        occl_reduce_n_to(dsts, n, srcs, n, mbytes / x->es, t, op);
        for (int k = 0; k < n - 1; k++) {
            occl_xfer_release(comm, &xf[4 * k + 2]);
            occl_xfer_release(comm, &xf[4 * k + 3]);
        }
        /* The peers have written their slices of this rank's output. */
        int w = 0;
        for (int k = 0; k < n - 1; k++) {
            xf[w] = xf[4 * k + 1];
            xf[w++].resume = true;
        }
        res = occl_xfers_run(comm, xf, w);
    }
    free(xf);
    free(srcs);
    free(dsts);
    return res;
}

static occlResult_t all_reduce(const occl_call *c, void *recv)
{
    ctx x = make_ctx(c);
    size_t bytes = c->count * x.es;
    reduction r = reduction_of(c);
    const void *input = c->sendbuff;
    occl_algo algo = x.n > 1 ? occl_plan(c) : OCCL_ALGO_RING;
    if (r.pre.kind == OCCL_RED_PREMULSUM) {
        occl_premul(recv, c->sendbuff, c->count, c->type, &r.pre);
        input = recv;
    } else if ((x.n == 1 || algo == OCCL_ALGO_TREE) && recv != c->sendbuff) {
        memcpy(recv, c->sendbuff, bytes);
        input = recv;
    }
    occlResult_t res = occlSuccess;
    if (x.n > 1 && algo == OCCL_ALGO_TREE) {
        res = tree_all_reduce(&x, recv, c->count, c->type, &r.op);
    } else if (x.n > 1 && algo == OCCL_ALGO_HIERARCHICAL) {
        res = hier_all_reduce(&x, recv, input, c->count, c->type, &r.op);
    } else if (x.n > 1 && algo == OCCL_ALGO_DIRECT) {
        /* Registered buffers are read in place; an input that is also the
         * output is copied, as peers read it while this rank writes. */
        const unsigned char *ib = input, *ob = recv;
        bool in_place = !x.comm->network && (ib + bytes <= ob || ob + bytes <= ib) &&
                        occl_buffer_registered(x.comm, input, bytes) &&
                        occl_buffer_registered(x.comm, recv, bytes);
        res = direct_all_reduce(&x, recv, input, c->count, c->type, &r.op, in_place);
    } else if (x.n > 1 && algo == OCCL_ALGO_NVLS) {
        res = nvls_all_reduce(&x, recv, input, c->count, c->type, &r.op);
    } else if (x.n > 1) {
        /* Reduce-scatter then all-gather: 2(n-1) steps of count/n elements. */
        res = ring_reduce_scatter(&x, recv, input, c->count, c->type, &r.op);
        if (res == occlSuccess)
            res = ring_all_gather_chunks(&x, recv, c->count);
    }
    if (res == occlSuccess && c->avg)
        occl_finish_avg(recv, c->count, c->type, x.n);
    return res;
}

static occlResult_t broadcast(const occl_call *c)
{
    ctx x = make_ctx(c);
    size_t bytes = c->count * x.es;
    int root_pos = 0;
    while (x.comm->ring[root_pos] != c->root)
        root_pos++;
    int rel = (x.p - root_pos + x.n) % x.n; /* 0 at the root, n-1 at the end of the chain */
    bool root = rel == 0, last = rel == x.n - 1;
    const unsigned char *src = root ? c->sendbuff : c->recvbuff;
    if (root && c->recvbuff != c->sendbuff)
        memcpy(c->recvbuff, c->sendbuff, bytes);
    if (x.n == 1)
        return occlSuccess;
    /* A pipeline along the ring: chunk k arrives while chunk k-1 moves on. */
    size_t nchunks = (bytes + BROADCAST_CHUNK - 1) / BROADCAST_CHUNK;
    for (size_t k = 0; k <= nchunks; k++) {
        occl_xfer xf[2];
        int m = 0;
        if (!root && k < nchunks) {
            size_t off = k * BROADCAST_CHUNK, len = bytes - off < BROADCAST_CHUNK ? bytes - off : BROADCAST_CHUNK;
            xf[m++] = recv_x(x.prev, (unsigned char *)c->recvbuff + off, len);
        }
        size_t sk = root ? k : k - 1;
        if (!last && (root ? k < nchunks : k >= 1)) {
            size_t off = sk * BROADCAST_CHUNK, len = bytes - off < BROADCAST_CHUNK ? bytes - off : BROADCAST_CHUNK;
            xf[m++] = send_x(x.next, src + off, len);
        }
        if (m) {
            occlResult_t res = occl_xfers_run(x.comm, xf, m);
            if (res != occlSuccess)
                return res;
        }
    }
    return occlSuccess;
}

/* Chunks of Reduce's chain: a quarter of the buffer, 1 to 16 MiB. Few
 * chunks, as every chunk is a hand-over between ranks that, with more ranks
 * than cores, waits for the scheduler; enough of them to keep the chain's
 * links busy together. */
size_t occl_chain_chunk(size_t bytes)
{
    size_t chunk = (bytes / 4 + 63) & ~(size_t)63;
    size_t lo = (size_t)1 << 20, hi = (size_t)16 << 20;
    return chunk < lo ? lo : chunk > hi ? hi : chunk;
}

static int pos_of(occlComm_t comm, int rank)
{
    int q = 0;
    while (comm->ring[q] != rank)
        q++;
    return q;
}

/* Reduce as a pipelined chain along the ring that ends at the root: the
 * rank after the root starts, each next rank adds its input to what arrives
 * and passes it on, chunk by chunk (occl_chain_chunk), so every link carries
 * each byte once and the chunks move down the chain together. acc holds the partial result
 * (the root's recvbuff); input is this rank's (scaled) input. */
static occlResult_t chain_reduce(const ctx *x, int root_pos, void *acc, const void *input,
                                 size_t bytes, occlDataType_t t, const occl_redop *op)
{
    int rel = (x->p - root_pos - 1 + 2 * x->n) % x->n; /* 0 starts, n-1 is the root */
    bool first = rel == 0, root = rel == x->n - 1;
    unsigned char *a = acc;
    const unsigned char *in = input;
    size_t chunk = occl_chain_chunk(bytes), nchunks = (bytes + chunk - 1) / chunk;
    /* Step k: receive chunk k (adding the input) and send chunk k-1 on; the
     * first rank sends chunk k straight from its input. */
    for (size_t k = 0; k <= nchunks; k++) {
        occl_xfer xf[2];
        int m = 0;
        if (!first && k < nchunks) {
            size_t off = k * chunk, len = bytes - off < chunk ? bytes - off : chunk;
            xf[m++] = recv_reduce_x(x->prev, a + off, in + off, len, t, op);
        }
        if (!root && (first ? k < nchunks : k >= 1)) {
            size_t sk = first ? k : k - 1;
            size_t off = sk * chunk, len = bytes - off < chunk ? bytes - off : chunk;
            xf[m++] = send_x(x->next, (first ? in : a) + off, len);
        }
        if (m) {
            occlResult_t res = occl_xfers_run(x->comm, xf, m);
            if (res != occlSuccess)
                return res;
        }
    }
    return occlSuccess;
}

/* Reduce on the communicator's double binary tree re-rooted at the root
 * (R: occl_trees_reroot): half of the buffer up each tree, both at once, in
 * chunks. A rank adds its children's partials of a chunk into acc (the
 * first one with its input), then sends acc's chunk up; a leaf sends its
 * input. The root's acc is its receive buffer. */
static occlResult_t tree_reduce(const ctx *x, const occl_trees *R, void *acc, const void *input,
                                size_t count, occlDataType_t t, const occl_redop *op)
{
    size_t lo[2], len[2], ce[2], nchunks[2];
    for (int k = 0; k < 2; k++)
        occl_tree_half(count, x->es, k, &lo[k], &len[k], &ce[k], &nchunks[k]);
    int me = x->comm->rank;
    for (int k = 0; k < 2; k++)
        if (R->v[(size_t)k * x->n + me].parent < 0 && nchunks[k] && !R->v[(size_t)k * x->n + me].nchildren)
            return occl_fail(occlInternalError, "tree root without children");
    occl_tree_op *ops = NULL;
    int m = occl_tree_reduce_ops(R, me, nchunks, &ops);
    occl_xfer *xf = m > 0 ? calloc((size_t)m, sizeof *xf) : NULL;
    bool *have = calloc(nchunks[0] + nchunks[1] + 1, sizeof *have); /* acc holds a partial */
    occlResult_t res = occlSuccess;
    if (m < 0 || (m && !xf) || !have)
        res = occl_fail(occlSystemError, "out of memory");
    unsigned char *a = acc;
    const unsigned char *in = input;
    for (int i = 0; i < m && res == occlSuccess;) {
        int nx = 0, step = ops[i].step;
        for (; i < m && ops[i].step == step; i++) {
            const occl_tree_op *o = &ops[i];
            size_t first = lo[o->tree] + o->chunk * ce[o->tree];
            size_t end = lo[o->tree] + len[o->tree], last = first + ce[o->tree] < end ? first + ce[o->tree] : end;
            size_t off = first * x->es, bytes = (last - first) * x->es;
            bool *h = &have[o->tree ? nchunks[0] + o->chunk : o->chunk];
            if (o->kind == OCCL_TREE_RECV_UP) {
                xf[nx++] = recv_reduce_x(o->peer, a + off, (*h ? a : in) + off, bytes, t, op);
                *h = true;
            } else {
                xf[nx++] = send_x(o->peer, (*h ? a : in) + off, bytes);
            }
        }
        res = occl_xfers_run(x->comm, xf, nx);
    }
    free(have);
    free(xf);
    free(ops);
    return res;
}

static occlResult_t reduce(const occl_call *c)
{
    ctx x = make_ctx(c);
    size_t bytes = c->count * x.es;
    reduction r = reduction_of(c);
    bool root = x.comm->rank == c->root;
    if (x.n == 1) {
        if (r.pre.kind == OCCL_RED_PREMULSUM)
            occl_premul(c->recvbuff, c->sendbuff, c->count, c->type, &r.pre);
        else if (c->recvbuff != c->sendbuff)
            memcpy(c->recvbuff, c->sendbuff, bytes);
        return occlSuccess;
    }
    occl_algo algo = occl_plan(c);
    int root_pos = pos_of(x.comm, c->root);
    occl_trees R = {0};
    if (algo == OCCL_ALGO_TREE && occl_trees_reroot(&x.comm->trees, c->root, &R) != 0)
        return occl_fail(occlSystemError, "out of memory re-rooting the trees at rank %d", c->root);
    /* Only the root's result is kept: the partials of ranks that add
     * something up (all but the chain's first rank and the trees' leaves)
     * go in scratch, and so does a scaled input. */
    bool pre = r.pre.kind == OCCL_RED_PREMULSUM;
    bool adds = algo == OCCL_ALGO_TREE
                    ? R.v[x.comm->rank].nchildren || R.v[(size_t)x.n + x.comm->rank].nchildren
                    : (x.p - root_pos - 1 + 2 * x.n) % x.n != 0;
    void *acc = root ? c->recvbuff : adds || pre ? occl_scratch(x.comm, OCCL_SCRATCH_A, bytes) : NULL;
    occlResult_t res = occlSuccess;
    if (!acc && (root || adds || pre))
        res = occlUnhandledDeviceError;
    const void *input = c->sendbuff;
    if (res == occlSuccess && pre) {
        occl_premul(acc, c->sendbuff, c->count, c->type, &r.pre);
        input = acc;
    }
    if (res == occlSuccess)
        res = algo == OCCL_ALGO_TREE ? tree_reduce(&x, &R, acc, input, c->count, c->type, &r.op)
                                     : chain_reduce(&x, root_pos, acc, input, bytes, c->type, &r.op);
    if (res == occlSuccess && root && c->avg)
        occl_finish_avg(c->recvbuff, c->count, c->type, x.n);
    occl_trees_release(&R);
    return res;
}

static occlResult_t all_gather(const occl_call *c)
{
    ctx x = make_ctx(c);
    size_t block = c->count * x.es;
    unsigned char *recv = c->recvbuff;
    if (recv + (size_t)x.comm->rank * block != c->sendbuff)
        memcpy(recv + (size_t)x.comm->rank * block, c->sendbuff, block);
    for (int s = 0; s < x.n - 1; s++) {
        int sb = x.comm->ring[(x.p - s + x.n) % x.n], rb = x.comm->ring[(x.p - s - 1 + x.n) % x.n];
        occl_xfer xf[2] = {send_x(x.next, recv + (size_t)sb * block, block),
                           recv_x(x.prev, recv + (size_t)rb * block, block)};
        occlResult_t res = occl_xfers_run(x.comm, xf, 2);
        if (res != occlSuccess)
            return res;
    }
    return occlSuccess;
}

static occlResult_t reduce_scatter(const occl_call *c)
{
    ctx x = make_ctx(c);
    size_t block = c->count * x.es, total = block * (size_t)x.n;
    reduction r = reduction_of(c);
    const unsigned char *input = c->sendbuff;
    unsigned char *scaled = NULL, *acc = NULL;
    occlResult_t res = occlSuccess;
    if (r.pre.kind == OCCL_RED_PREMULSUM) {
        if (!(scaled = occl_scratch(x.comm, OCCL_SCRATCH_B, total)))
            return occlUnhandledDeviceError;
        occl_premul(scaled, c->sendbuff, c->count * (size_t)x.n, c->type, &r.pre);
        input = scaled;
    }
    if (x.n == 1) {
        memmove(c->recvbuff, input, block);
    } else if (!(acc = occl_scratch(x.comm, OCCL_SCRATCH_A, total))) {
        res = occlUnhandledDeviceError;
    } else {
        /* Ring over blocks: at step s send the partial of the block at ring
         * position p-s-1, receive that of p-s-2; the last one received is our own. */
        for (int s = 0; s < x.n - 1 && res == occlSuccess; s++) {
            int sb = x.comm->ring[(x.p - s - 1 + 2 * x.n) % x.n];
            int rb = x.comm->ring[(x.p - s - 2 + 3 * x.n) % x.n];
            const unsigned char *from = s == 0 ? input + (size_t)sb * block : acc + (size_t)sb * block;
            unsigned char *into = s == x.n - 2 ? (unsigned char *)c->recvbuff : acc + (size_t)rb * block;
            occl_xfer xf[2] = {send_x(x.next, from, block),
                               recv_reduce_x(x.prev, into, input + (size_t)rb * block, block, c->type, &r.op)};
            res = occl_xfers_run(x.comm, xf, 2);
        }
    }
    if (res == occlSuccess && c->avg)
        occl_finish_avg(c->recvbuff, c->count, c->type, x.n);
    return res;
}

static occlResult_t all_to_all(const occl_call *c)
{
    ctx x = make_ctx(c);
    size_t block = c->count * x.es, total = block * (size_t)x.n;
    int me = x.comm->rank;
    const unsigned char *send = c->sendbuff;
    unsigned char *recv = c->recvbuff, *copy = NULL;
    if (c->sendbuff == c->recvbuff && x.n > 1) { /* in place: peers read what we overwrite */
        if (!(copy = occl_scratch(x.comm, OCCL_SCRATCH_A, total)))
            return occlUnhandledDeviceError;
        memcpy(copy, send, total);
        occl_staged(x.comm, total);
        send = copy;
    }
    memmove(recv + (size_t)me * block, send + (size_t)me * block, block);
    occl_xfer *xf = calloc((size_t)(2 * x.n), sizeof *xf);
    occlResult_t res = xf ? occlSuccess : occl_fail(occlSystemError, "out of memory");
    int m = 0;
    for (int j = 0; j < x.n && xf; j++)
        if (j != me) {
            xf[m++] = send_x(j, send + (size_t)j * block, block);
            xf[m++] = recv_x(j, recv + (size_t)j * block, block);
        }
    if (res == occlSuccess && m)
        res = occl_xfers_run(x.comm, xf, m);
    free(xf);
    return res;
}

static occlResult_t gather_scatter(const occl_call *c, bool gather)
{
    ctx x = make_ctx(c);
    size_t block = c->count * x.es;
    int me = x.comm->rank;
    if (me != c->root) {
        occl_xfer one = gather ? send_x(c->root, c->sendbuff, block) : recv_x(c->root, c->recvbuff, block);
        return occl_xfers_run(x.comm, &one, 1);
    }
    unsigned char *all = gather ? c->recvbuff : (unsigned char *)c->sendbuff;
    if (gather)
        memmove(all + (size_t)me * block, c->sendbuff, block);
    else
        memmove(c->recvbuff, all + (size_t)me * block, block);
    occl_xfer *xf = calloc((size_t)x.n, sizeof *xf);
    if (!xf)
        return occl_fail(occlSystemError, "out of memory");
    int m = 0;
    for (int j = 0; j < x.n; j++)
        if (j != me)
            xf[m++] = gather ? recv_x(j, all + (size_t)j * block, block) : send_x(j, all + (size_t)j * block, block);
    occlResult_t res = m ? occl_xfers_run(x.comm, xf, m) : occlSuccess;
    free(xf);
    return res;
}

occlResult_t occl_run_call(occl_call *c)
{
    if (c->count == 0)
        return occlSuccess; /* every rank sees the same count: nothing to exchange */
    /* A call begun on the calling thread (c->ll) was found eligible, or a
     * one-rank call, when it was launched (enqueue.c): not asked again. */
    if (c->ll && c->comm->network)
        return occl_net_small_run(c, c->ll);
    if (c->ll ? c->comm->nranks > 1 : occl_ll_eligible(c) && occl_ll_wanted(c)) {
        occl_ll_state own = {0};
        return occl_ll_run(c, c->ll ? c->ll : &own);
    }
    if (c->coll != OCCL_COLL_ALLREDUCE && c->coll != OCCL_COLL_REDUCE && c->coll < OCCL_COLL_SEND &&
        c->comm->nranks > 1)
        occl_plan(c); /* one algorithm each: logged all the same */
    switch (c->coll) {
    case OCCL_COLL_ALLREDUCE: return all_reduce(c, c->recvbuff);
    case OCCL_COLL_BROADCAST: return broadcast(c);
    case OCCL_COLL_REDUCE: return reduce(c);
    case OCCL_COLL_ALLGATHER: return all_gather(c);
    case OCCL_COLL_REDUCESCATTER: return reduce_scatter(c);
    case OCCL_COLL_ALLTOALL: return all_to_all(c);
    case OCCL_COLL_GATHER: return gather_scatter(c, true);
    case OCCL_COLL_SCATTER: return gather_scatter(c, false);
    case OCCL_COLL_SEND:
    case OCCL_COLL_RECV: return occl_run_calls(c, 1);
    case OCCL_COLL_PUTSIGNAL:
    case OCCL_COLL_SIGNAL:
    case OCCL_COLL_WAITSIGNAL: return occl_rma_run(c);
    }
    return occl_fail(occlInternalError, "unknown collective");
}

occlResult_t occl_run_calls(occl_call *calls, int n)
{
    occl_xfer *xf = calloc((size_t)n, sizeof *xf);
    occl_fp *fp = calloc((size_t)n, sizeof *fp);
    if (!xf || !fp) {
        free(xf);
        free(fp);
        return occl_fail(occlSystemError, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        size_t bytes = calls[i].count * occl_type_size(calls[i].type);
        xf[i] = calls[i].coll == OCCL_COLL_SEND ? send_x(calls[i].root, calls[i].sendbuff, bytes)
                                                : recv_x(calls[i].root, calls[i].recvbuff, bytes);
        xf[i].p2p = true;
        fp[i] = occl_fp_of(&calls[i]);
        xf[i].fp = &fp[i];
    }
    occlResult_t res = occl_xfers_run(calls[0].comm, xf, n);
    free(xf);
    free(fp);
    return res;
}
