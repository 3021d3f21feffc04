/*
 * demo.c - a first tour of the OpenReg Cluster runtime.
 *
 * Every rank runs a two-device pipeline on its first two devices:
 *
 *   device 0, stream s0:  H2D x, y  ->  saxpy kernel (y = a*x + y)  -> record "saxpy done"
 *   device 1, stream s1:  wait "saxpy done"  ->  D2D copy of y from device 0
 *                         ->  5-point stencil kernel  ->  D2H result
 *   device 0, stream s0:  D2H y (so the saxpy stage is checked on its own too)
 *
 * Both kernels run on a 2-D grid of 16x16 blocks. A kernel is called once per
 * block and walks over its block's threads itself. Timing events on each
 * stream measure every stage; the results are checked against a host
 * reference. Each rank's input depends on its rank, so results differ.
 *
 * Then the ranks pass their result around a ring of all devices of the job:
 * every device opens the next device's buffer through an IPC handle (handles
 * exchanged with MPI_Allgather) and copies its message into it with
 * orMemcpyAsync. A hop is within a rank, between ranks of one virtual node
 * (shared memory) or between nodes (MPI). Each receiver checks the header
 * (who sent it) and a checksum of the whole message against the sender's.
 *
 * Runs alone (one rank: the ring is its own devices) or under orrun, e.g.
 *   ./launch/orrun -n 2 -d 2 --ranks-per-node 1 -- ./examples/demo
 * The runtime starts MPI on the first runtime call when the program runs
 * under mpiexec, and finalizes it at exit, so the program never calls
 * MPI_Init or MPI_Finalize. Every rank's report is gathered and printed by
 * rank 0. Exit status 0 means "result: OK" on every rank.
 */
#include <math.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "openreg.h"

/* Stop the whole job: under mpiexec a rank that just exited would leave the
 * others waiting for it in the next collective. */
static void die(void)
{
    fflush(stdout);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* Every runtime call is checked: on failure print the call, the error's
 * name and text, and stop. */
#define CHECK(call)                                                                    \
    do {                                                                               \
        orError_t check_err_ = (call);                                                 \
        if (check_err_ != orSuccess) {                                                 \
            fflush(stdout); /* keep the report after what was printed before */       \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,  \
                    orGetErrorName(check_err_), orGetErrorString(check_err_));         \
            die();                                                                     \
        }                                                                              \
    } while (0)

#define CHECK_MPI(call)                                                                \
    do {                                                                               \
        if ((call) != MPI_SUCCESS) {                                                   \
            fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #call);          \
            die();                                                                     \
        }                                                                              \
    } while (0)

/* MPI_Barrier spins in MPICH holding MPI's lock, which starves this rank's
 * proxy thread, the one that serves the other ranks' copies into our memory.
 * Wait outside MPI instead: test the barrier, sleep, back off up to 1 ms. */
static void barrier(void)
{
    MPI_Request req;
    CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    for (long ns = 1000;; ns = ns < 1000000 ? 2 * ns : ns) {
        int done = 0;
        CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done)
            return;
        nanosleep(&(struct timespec){0, ns}, NULL);
    }
}

static void *host_alloc(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "demo: out of host memory\n");
        die();
    }
    return p;
}

/* This rank's report: gathered to rank 0 at the end, so the ranks' output
 * never interleaves. */
static FILE *out;

enum { NX = 1024, NY = 1024, BLOCK = 16 };
static const float ALPHA = 2.5f;

struct saxpy_args {
    float a;
    const float *x;
    float *y;
    unsigned nx, ny;
};

struct stencil_args {
    const float *in;
    float *out;
    unsigned nx, ny;
};

/* The element a thread of a 2-D block owns, and whether it is inside the
 * array (the grid is rounded up to whole blocks). */
static int element(const orKernelContext *ctx, unsigned tx, unsigned ty, unsigned nx,
                   unsigned ny, size_t *idx, unsigned *i, unsigned *j)
{
    *i = ctx->blockIdx.x * ctx->blockDim.x + tx;
    *j = ctx->blockIdx.y * ctx->blockDim.y + ty;
    if (*i >= nx || *j >= ny)
        return 0;
    *idx = (size_t)*j * nx + *i;
    return 1;
}

static void saxpy_kernel(const orKernelContext *ctx, void *argp)
{
    const struct saxpy_args *a = argp;
    for (unsigned ty = 0; ty < ctx->blockDim.y; ty++)
        for (unsigned tx = 0; tx < ctx->blockDim.x; tx++) {
            size_t k;
            unsigned i, j;
            if (element(ctx, tx, ty, a->nx, a->ny, &k, &i, &j))
                a->y[k] = a->a * a->x[k] + a->y[k];
        }
}

/* Jacobi step: interior points become the mean of their four neighbours,
 * the boundary is copied. */
static float stencil_at(const float *in, unsigned nx, unsigned ny, unsigned i, unsigned j)
{
    size_t k = (size_t)j * nx + i;
    if (i == 0 || j == 0 || i == nx - 1 || j == ny - 1)
        return in[k];
    return 0.25f * (in[k - 1] + in[k + 1] + in[k - nx] + in[k + nx]);
}

static void stencil_kernel(const orKernelContext *ctx, void *argp)
{
    const struct stencil_args *a = argp;
    for (unsigned ty = 0; ty < ctx->blockDim.y; ty++)
        for (unsigned tx = 0; tx < ctx->blockDim.x; tx++) {
            size_t k;
            unsigned i, j;
            if (element(ctx, tx, ty, a->nx, a->ny, &k, &i, &j))
                a->out[k] = stencil_at(a->in, a->nx, a->ny, i, j);
        }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *plural(long n) { return n == 1 ? "" : "s"; }

static double mib(size_t bytes) { return bytes / (1024.0 * 1024.0); }

static void print_time(const char *label, orEvent_t start, orEvent_t end)
{
    float ms = 0.0f;
    CHECK(orEventElapsedTime(&ms, start, end));
    fprintf(out, "    %-28s %9.3f ms\n", label, ms);
}

/* Largest relative difference, so the check does not depend on magnitudes. */
static double max_rel_error(const float *got, const float *want, size_t n)
{
    double worst = 0.0;
    for (size_t k = 0; k < n; k++) {
        double d = fabs((double)got[k] - want[k]) / fmax(1.0, fabs((double)want[k]));
        if (!(d <= worst)) /* also catches NaN */
            worst = d;
    }
    return worst;
}

static void print_device(int dev)
{
    orDeviceProp p;
    CHECK(orGetDeviceProperties(&p, dev));
    fprintf(out,
            "  device %d: %s, %.2f GiB, %d compute thread%s, cpus %s, NUMA node %d, "
            "%d copy engine%s\n",
            dev, p.name, p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), p.multiProcessorCount,
            plural(p.multiProcessorCount), p.cpuList, p.numaNode, p.asyncEngineCount,
            plural(p.asyncEngineCount));
}

/* ---- stage 1 and 2: the two-device pipeline --------------------------------- */

typedef struct {
    float *dout1;   /* the stencil result, on device 1 */
    float *hout;    /* and its copy in pinned host memory */
} pipeline_result;

/* Returns whether the results match the host reference. */
static bool pipeline(int rank, pipeline_result *res)
{
    const size_t n = (size_t)NX * NY;
    const size_t bytes = n * sizeof(float);

    /* Pinned host buffers: the staging memory async copies are meant for. */
    float *hx, *hy, *hsaxpy, *hout;
    CHECK(orMallocHost((void **)&hx, bytes));
    CHECK(orMallocHost((void **)&hy, bytes));
    CHECK(orMallocHost((void **)&hsaxpy, bytes));
    CHECK(orMallocHost((void **)&hout, bytes));
    for (size_t k = 0; k < n; k++) {
        hx[k] = (float)(k % 1000) * 0.001f;
        hy[k] = (float)((k * 7 + 31 * (size_t)rank) % 113) - 56.0f;
    }

    const orDim3 block = {BLOCK, BLOCK, 1};
    const orDim3 grid = {(NX + BLOCK - 1) / BLOCK, (NY + BLOCK - 1) / BLOCK, 1};
    double wall0 = now_ms();

    /* Stage 1 on device 0. */
    orStream_t s0;
    orEvent_t e0_start, e0_h2d, e0_saxpy, e0_d2h;
    float *dx0, *dy0;
    CHECK(orSetDevice(0));
    CHECK(orStreamCreate(&s0));
    CHECK(orEventCreateWithFlags(&e0_start, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&e0_h2d, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&e0_saxpy, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&e0_d2h, orEventEnableTiming));
    CHECK(orMalloc((void **)&dx0, bytes));
    CHECK(orMalloc((void **)&dy0, bytes));

    CHECK(orEventRecord(e0_start, s0));
    CHECK(orMemcpyAsync(dx0, hx, bytes, orMemcpyHostToDevice, s0));
    CHECK(orMemcpyAsync(dy0, hy, bytes, orMemcpyHostToDevice, s0));
    CHECK(orEventRecord(e0_h2d, s0));
    struct saxpy_args sa = {ALPHA, dx0, dy0, NX, NY};
    CHECK(orLaunchKernel(saxpy_kernel, grid, block, &sa, sizeof sa, 0, s0));
    CHECK(orEventRecord(e0_saxpy, s0));
    /* Reads dy0 only, so it may overlap with device 1's copy of it. */
    CHECK(orMemcpyAsync(hsaxpy, dy0, bytes, orMemcpyDeviceToHost, s0));
    CHECK(orEventRecord(e0_d2h, s0));

    /* Stage 2 on device 1, ordered after device 0's kernel by the event
     * alone: the host never blocks between the two stages. */
    orStream_t s1;
    orEvent_t e1_start, e1_d2d, e1_stencil, e1_d2h;
    float *din1, *dout1;
    CHECK(orSetDevice(1));
    CHECK(orStreamCreate(&s1));
    CHECK(orEventCreateWithFlags(&e1_start, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&e1_d2d, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&e1_stencil, orEventEnableTiming));
    CHECK(orEventCreateWithFlags(&e1_d2h, orEventEnableTiming));
    CHECK(orMalloc((void **)&din1, bytes));
    CHECK(orMalloc((void **)&dout1, bytes));

    CHECK(orStreamWaitEvent(s1, e0_saxpy, 0));
    /* Recorded after the wait: it completes when device 0's result is ready,
     * so the device-1 timings below start there. */
    CHECK(orEventRecord(e1_start, s1));
    CHECK(orMemcpyAsync(din1, dy0, bytes, orMemcpyDeviceToDevice, s1));
    CHECK(orEventRecord(e1_d2d, s1));
    struct stencil_args st = {din1, dout1, NX, NY};
    CHECK(orLaunchKernel(stencil_kernel, grid, block, &st, sizeof st, 0, s1));
    CHECK(orEventRecord(e1_stencil, s1));
    CHECK(orMemcpyAsync(hout, dout1, bytes, orMemcpyDeviceToHost, s1));
    CHECK(orEventRecord(e1_d2h, s1));

    /* The host reference is computed while the devices work. */
    float *ref_saxpy = host_alloc(bytes), *ref_out = host_alloc(bytes);
    for (size_t k = 0; k < n; k++)
        ref_saxpy[k] = ALPHA * hx[k] + hy[k];
    for (unsigned j = 0; j < NY; j++)
        for (unsigned i = 0; i < NX; i++)
            ref_out[(size_t)j * NX + i] = stencil_at(ref_saxpy, NX, NY, i, j);

    CHECK(orStreamSynchronize(s1));
    CHECK(orStreamSynchronize(s0));
    double wall_ms = now_ms() - wall0;

    char h2d_label[64];
    snprintf(h2d_label, sizeof h2d_label, "H2D x, y (%.1f MiB)", mib(2 * bytes));
    fprintf(out, "  device 0, stream s0:\n");
    print_time(h2d_label, e0_start, e0_h2d);
    print_time("saxpy kernel", e0_h2d, e0_saxpy);
    print_time("D2H y", e0_saxpy, e0_d2h);
    fprintf(out, "  device 1, stream s1 (waits on device 0's saxpy event):\n");
    print_time("D2D y from device 0", e1_start, e1_d2d);
    print_time("stencil kernel", e1_d2d, e1_stencil);
    print_time("D2H result", e1_stencil, e1_d2h);
    fprintf(out, "  wall time, first enqueue to both streams done: %.3f ms\n", wall_ms);

    double err_saxpy = max_rel_error(hsaxpy, ref_saxpy, n);
    double err_out = max_rel_error(hout, ref_out, n);
    fprintf(out, "  max relative error: saxpy %.3g, stencil %.3g\n", err_saxpy, err_out);
    bool ok = err_saxpy <= 1e-6 && err_out <= 1e-6;
    if (!ok)
        fprintf(out, "  pipeline FAILED: device results differ from the host reference\n");

    /* The result stays for the ring; everything else goes. */
    CHECK(orFree(din1));
    CHECK(orEventDestroy(e1_start));
    CHECK(orEventDestroy(e1_d2d));
    CHECK(orEventDestroy(e1_stencil));
    CHECK(orEventDestroy(e1_d2h));
    CHECK(orStreamDestroy(s1));
    CHECK(orSetDevice(0));
    CHECK(orFree(dx0));
    CHECK(orFree(dy0));
    CHECK(orEventDestroy(e0_start));
    CHECK(orEventDestroy(e0_h2d));
    CHECK(orEventDestroy(e0_saxpy));
    CHECK(orEventDestroy(e0_d2h));
    CHECK(orStreamDestroy(s0));
    CHECK(orFreeHost(hx));
    CHECK(orFreeHost(hy));
    CHECK(orFreeHost(hsaxpy));
    free(ref_saxpy);
    free(ref_out);
    res->dout1 = dout1;
    res->hout = hout;
    return ok;
}

/* ---- stage 3: the ring of all devices ------------------------------------------ */

/* What a device sends: this header, then its rank's result. */
typedef struct {
    uint32_t magic;
    int32_t global; /* sender's global device id */
    int32_t rank, node;
} msg_header;
#define MSG_MAGIC 0x4f52444dU /* "ORDM" */

/* What every device tells the others, gathered with MPI_Allgather. */
typedef struct {
    orIpcMemHandle_t inbox; /* where the previous device writes */
    uint64_t checksum;      /* of the message this device sends */
    int32_t rank, node;
} ring_entry;

/* FNV-1a, continued from h: the checksum travels separately from the data,
 * so a wrong or damaged message cannot vouch for itself. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}
#define FNV_OFFSET 0xcbf29ce484222325ULL

enum { HOP_SAME_RANK, HOP_SAME_NODE, HOP_OTHER_NODE, HOP_KINDS };
static const char *const hop_name[HOP_KINDS] = {"same rank", "same node", "other node"};

typedef struct {
    int hops[HOP_KINDS]; /* sent by this rank, by kind */
    double job_ms;       /* first enqueue to every rank's copies done (rank 0) */
} ring_stats;

static bool ring(const orClusterInfo *ci, bool mpi, const pipeline_result *res,
                 ring_stats *stats)
{
    const size_t bytes = (size_t)NX * NY * sizeof(float);
    const size_t msg_bytes = sizeof(msg_header) + bytes;
    const int nd = ci->deviceCount, G = ci->globalDeviceCount, first = ci->firstGlobalDevice;

    unsigned char **msg = host_alloc(nd * sizeof *msg), **inbox = host_alloc(nd * sizeof *inbox);
    void **next_inbox = host_alloc(nd * sizeof *next_inbox);
    orStream_t *rs = host_alloc(nd * sizeof *rs);
    orEvent_t *start = host_alloc(nd * sizeof *start), *end = host_alloc(nd * sizeof *end);
    ring_entry *mine = host_alloc(nd * sizeof *mine), *all = host_alloc(G * sizeof *all);
    msg_header *hdr;
    CHECK(orMallocHost((void **)&hdr, nd * sizeof *hdr));

    /* Every device's message: a header naming it, then this rank's result. */
    for (int d = 0; d < nd; d++) {
        CHECK(orSetDevice(d));
        CHECK(orStreamCreate(&rs[d]));
        CHECK(orEventCreateWithFlags(&start[d], orEventEnableTiming));
        CHECK(orEventCreateWithFlags(&end[d], orEventEnableTiming));
        CHECK(orMalloc((void **)&msg[d], msg_bytes));
        CHECK(orMalloc((void **)&inbox[d], msg_bytes));
        hdr[d] = (msg_header){MSG_MAGIC, first + d, ci->rank, ci->node};
        CHECK(orMemsetAsync(inbox[d], 0, msg_bytes, rs[d]));
        CHECK(orMemcpyAsync(msg[d], &hdr[d], sizeof hdr[d], orMemcpyHostToDevice, rs[d]));
        CHECK(orMemcpyAsync(msg[d] + sizeof hdr[d], res->dout1, bytes, orMemcpyDeviceToDevice,
                            rs[d]));
        memset(&mine[d], 0, sizeof mine[d]);
        CHECK(orIpcGetMemHandle(&mine[d].inbox, inbox[d]));
        /* From the host copy of the result: checks the message built on the
         * device as well as the hop. */
        mine[d].checksum = fnv1a(fnv1a(FNV_OFFSET, &hdr[d], sizeof hdr[d]), res->hout, bytes);
        mine[d].rank = ci->rank;
        mine[d].node = ci->node;
    }
    for (int d = 0; d < nd; d++)
        CHECK(orStreamSynchronize(rs[d]));

    if (mpi) {
        int *counts = host_alloc(ci->nranks * sizeof *counts);
        int *displs = host_alloc(ci->nranks * sizeof *displs);
        int my_bytes = nd * (int)sizeof *mine;
        CHECK_MPI(MPI_Allgather(&my_bytes, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD));
        for (int r = 0, at = 0; r < ci->nranks; at += counts[r], r++)
            displs[r] = at;
        CHECK_MPI(MPI_Allgatherv(mine, my_bytes, MPI_BYTE, all, counts, displs, MPI_BYTE,
                                 MPI_COMM_WORLD));
        free(counts);
        free(displs);
    } else {
        memcpy(all, mine, nd * sizeof *mine);
    }

    /* Opening asks the owner whether the buffer is still live: done before
     * the clock starts. */
    for (int d = 0; d < nd; d++) {
        int next = (first + d + 1) % G;
        CHECK(orSetDevice(d));
        CHECK(orIpcOpenMemHandle(&next_inbox[d], all[next].inbox, orIpcMemLazyEnablePeerAccess));
    }

    /* All devices send at once; the barriers bracket the whole job's ring. */
    if (mpi)
        barrier();
    double t0 = now_ms();
    for (int d = 0; d < nd; d++) {
        CHECK(orEventRecord(start[d], rs[d]));
        CHECK(orMemcpyAsync(next_inbox[d], msg[d], msg_bytes, orMemcpyDeviceToDevice, rs[d]));
        CHECK(orEventRecord(end[d], rs[d]));
    }
    for (int d = 0; d < nd; d++)
        CHECK(orStreamSynchronize(rs[d]));
    double rank_ms = now_ms() - t0;
    /* After this every message has landed, on every rank. */
    if (mpi)
        barrier();
    stats->job_ms = now_ms() - t0;

    fprintf(out, "  ring, each device sends %.1f MiB to the next one's buffer "
                 "(IPC handle, orMemcpyAsync):\n",
            mib(msg_bytes));
    memset(stats->hops, 0, sizeof stats->hops);
    for (int d = 0; d < nd; d++) {
        int g = first + d, next = (g + 1) % G;
        int kind = all[next].rank == ci->rank   ? HOP_SAME_RANK
                   : all[next].node == ci->node ? HOP_SAME_NODE
                                                : HOP_OTHER_NODE;
        stats->hops[kind]++;
        float ms = 0.0f;
        CHECK(orEventElapsedTime(&ms, start[d], end[d]));
        /* The next device's ordinal on its own rank: its global id less the
         * first global id of that rank (the entries are in rank order). */
        int first_of_next = next;
        while (first_of_next > 0 && all[first_of_next - 1].rank == all[next].rank)
            first_of_next--;
        char to[64];
        snprintf(to, sizeof to, "rank %d device %d", all[next].rank, next - first_of_next);
        fprintf(out, "    device %d -> %-18s %-10s (global %d -> %d) %9.3f ms\n", d, to,
                hop_name[kind], g, next, ms);
        CHECK(orIpcCloseMemHandle(next_inbox[d]));
    }

    /* What arrived: from the previous device, intact. */
    unsigned char *got = host_alloc(msg_bytes);
    int good = 0;
    for (int d = 0; d < nd; d++) {
        int prev = (first + d + G - 1) % G;
        CHECK(orSetDevice(d));
        CHECK(orMemcpy(got, inbox[d], msg_bytes, orMemcpyDeviceToHost));
        msg_header h;
        memcpy(&h, got, sizeof h);
        if (h.magic != MSG_MAGIC || h.global != prev || h.rank != all[prev].rank)
            fprintf(out, "  ring FAILED: device %d holds no message from global device %d\n",
                    d, prev);
        else if (fnv1a(FNV_OFFSET, got, msg_bytes) != all[prev].checksum)
            fprintf(out, "  ring FAILED: device %d: the message from global device %d is "
                         "damaged\n",
                    d, prev);
        else
            good++;
    }
    int sent = stats->hops[0] + stats->hops[1] + stats->hops[2];
    fprintf(out, "  ring, this rank sent %d hop%s (%d same rank, %d same node, %d other node): "
                 "%.1f MiB in %.3f ms\n",
            sent, plural(sent), stats->hops[HOP_SAME_RANK], stats->hops[HOP_SAME_NODE],
            stats->hops[HOP_OTHER_NODE], mib(msg_bytes * (size_t)nd), rank_ms);
    fprintf(out, "  ring, received %d of %d messages intact\n", good, nd);
    free(got);
    for (int d = 0; d < nd; d++) {
        CHECK(orSetDevice(d));
        CHECK(orFree(msg[d]));
        CHECK(orFree(inbox[d]));
        CHECK(orEventDestroy(start[d]));
        CHECK(orEventDestroy(end[d]));
        CHECK(orStreamDestroy(rs[d]));
    }
    CHECK(orFreeHost(hdr));
    free(msg);
    free(inbox);
    free(next_inbox);
    free(rs);
    free(start);
    free(end);
    free(mine);
    free(all);
    return good == nd;
}

/* ---- main ------------------------------------------------------------------------ */

/* Rank 0 receives every rank's report, in rank order, into one string. */
static char *gather_reports(const char *mine, size_t len, bool mpi, int rank, int nranks)
{
    if (!mpi) {
        char *all = host_alloc(len + 1);
        memcpy(all, mine, len + 1);
        return all;
    }
    int my_len = (int)len;
    int *lens = rank == 0 ? host_alloc(nranks * sizeof *lens) : NULL;
    int *displs = rank == 0 ? host_alloc(nranks * sizeof *displs) : NULL;
    CHECK_MPI(MPI_Gather(&my_len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD));
    size_t total = 0;
    if (rank == 0)
        for (int r = 0; r < nranks; r++) {
            displs[r] = (int)total;
            total += (size_t)lens[r];
        }
    char *all = rank == 0 ? host_alloc(total + 1) : NULL;
    CHECK_MPI(MPI_Gatherv(mine, my_len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0,
                          MPI_COMM_WORLD));
    if (all)
        all[total] = '\0';
    free(lens);
    free(displs);
    return all;
}

int main(void)
{
    const size_t bytes = (size_t)NX * NY * sizeof(float);

    /* The first runtime call: under mpiexec it starts MPI. */
    orClusterInfo ci;
    CHECK(orGetClusterInfo(&ci));
    int mpi = 0;
    MPI_Initialized(&mpi);

    char *text = NULL;
    size_t text_len = 0;
    out = open_memstream(&text, &text_len);
    if (!out) {
        fprintf(stderr, "demo: out of host memory\n");
        die();
    }
    fprintf(out, "rank %d, node %d: %d device%s (global %d-%d)\n", ci.rank, ci.node,
            ci.deviceCount, plural(ci.deviceCount), ci.firstGlobalDevice,
            ci.firstGlobalDevice + ci.deviceCount - 1);
    for (int d = 0; d < ci.deviceCount; d++)
        print_device(d);
    if (ci.deviceCount < 2) {
        fflush(stdout);
        fprintf(stderr,
                "demo: rank %d needs 2 devices, has %d (unset OPENREG_DEVICES or set it >= 2)\n",
                ci.rank, ci.deviceCount);
        die();
    }

    pipeline_result res;
    bool ok = pipeline(ci.rank, &res);
    ring_stats stats;
    ok = ring(&ci, mpi, &res, &stats) && ok;
    CHECK(orSetDevice(1));
    CHECK(orFree(res.dout1));
    CHECK(orFreeHost(res.hout));

    if (fclose(out) != 0) {
        fprintf(stderr, "demo: cannot build the report\n");
        die();
    }
    int my_ok = ok, all_ok = ok, hops[HOP_KINDS];
    if (mpi) {
        CHECK_MPI(MPI_Allreduce(&my_ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Reduce(stats.hops, hops, HOP_KINDS, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    } else {
        memcpy(hops, stats.hops, sizeof hops);
    }
    char *report = gather_reports(text, text_len, mpi, ci.rank, ci.nranks);
    free(text);
    if (ci.rank == 0) {
        const orDim3 block = {BLOCK, BLOCK, 1};
        const orDim3 grid = {(NX + BLOCK - 1) / BLOCK, (NY + BLOCK - 1) / BLOCK, 1};
        printf("OpenReg Cluster demo\n");
        printf("cluster: %d rank%s, %d node%s, %d devices\n", ci.nranks, plural(ci.nranks),
               ci.nnodes, plural(ci.nnodes), ci.globalDeviceCount);
        printf("problem: %d x %d floats (%.1f MiB per array), grid %u x %u blocks of %u x %u\n",
               NX, NY, mib(bytes), grid.x, grid.y, block.x, block.y);
        fputs(report, stdout);
        size_t moved = (size_t)ci.globalDeviceCount * (sizeof(msg_header) + bytes);
        int nhops = hops[HOP_SAME_RANK] + hops[HOP_SAME_NODE] + hops[HOP_OTHER_NODE];
        printf("ring: %d devices, %d hop%s (%d same rank, %d same node, %d other node), "
               "%.1f MiB moved in %.3f ms\n",
               ci.globalDeviceCount, nhops, plural(nhops), hops[HOP_SAME_RANK],
               hops[HOP_SAME_NODE], hops[HOP_OTHER_NODE], mib(moved), stats.job_ms);
        printf(all_ok ? "result: OK\n" : "result: FAILED (see the lines marked FAILED)\n");
        if (fflush(stdout) != 0)
            all_ok = 0;
    }
    free(report);
    return all_ok ? 0 : 1;
}
