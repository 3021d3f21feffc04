/*
 * peer_perf.c - latency and bandwidth of device-to-device copies within a
 * rank, between ranks of one virtual node, and between virtual nodes, next to
 * memcpy and MPI measured in the same run.
 *
 * Runs under mpiexec with exactly 2 ranks. Rank 0 does all the copying; for
 * its copies rank 1 only waits in a barrier (its proxy thread serves the
 * copies into another node): MPI_Barrier by default, or with -w poll a
 * non-blocking barrier tested every millisecond, so that rank 1's main
 * thread is not inside MPI while its proxy works.
 *
 * Latency table: one small copy (-l, 4 KiB by default) at a time, each timed
 * alone, median and 99th percentile in microseconds: an MPI ping-pong of the
 * same bytes between the two main threads (half its round trip: one way);
 * what an MPI program does to know the bytes are in place at the other rank,
 * a round trip: the bytes and a 0-byte acknowledgement back (write), a
 * 0-byte request and the bytes back (read); the same with MPI RMA, rank 0's
 * MPI_Put or MPI_Get and MPI_Win_flush (passive target) while rank 1 waits as
 * for the runtime's copies; then rank 0 writing into and reading from rank
 * 1's device memory with orMemcpy. A synchronous orMemcpy returns with the
 * bytes in place, so its equal is the round trip, not the one way.
 * x1 = median over MPI's one way; xrt = median over MPI's round trip of the
 * same direction. MPI's RMA over a transport without remote memory access in
 * hardware (UCX's tcp) needs the target to enter MPI: with -w poll it
 * measures rank 1's polling (every millisecond), not the network.
 *
 * Burst table: 32 small messages or copies back to back, waited for once,
 * per message: MPI_Send each and one MPI_Recv of rank 1's acknowledgement,
 * against orMemcpyAsync each into rank 1's memory on one stream and one
 * orStreamSynchronize (which returns when every write is in place). Across
 * nodes such writes are posted: each is one message, the stream does not
 * wait for the owner's answers one by one (docs/cluster.md).
 *
 * Bandwidth table, columns per size:
 *   memcpy      memcpy between two malloc'd buffers of rank 0;
 *   MPI         MPI_Send on rank 0 / MPI_Recv on rank 1 of the same bytes,
 *               between ordinary malloc'd buffers, over MPI_COMM_WORLD;
 *   same rank   orMemcpyPeer, rank 0's device 0 -> rank 0's device 1;
 *   same node / other node
 *               orMemcpy, rank 0's device 0 -> rank 1's device 0, opened on
 *               rank 0 from an IPC handle. Which of the two a run measures is
 *               decided by the runtime at start-up: both ranks on one virtual
 *               node (the default on one host) share device memory, so the
 *               copy is one memmove; with OPENREG_RANKS_PER_NODE=1 each rank is
 *               its own node and the proxies move the bytes over MPI.
 *   read        orMemcpy the other way, rank 1's device 0 -> rank 0's device 0.
 * Every runtime copy is synchronous (the bytes are in place when it returns),
 * and so is the MPI column: a repetition ends when rank 1 acknowledges the
 * last message. Ratios: runtime GB/s over memcpy's and over MPI's.
 *
 * Bandwidth is the best of several repetitions, each timing enough copies to
 * move 32 MiB and last at least 10 ms (but no more than 0.5 s), after an
 * untimed warm-up round that also calibrates the copies per repetition.
 * GB/s = 1e9 B/s; values below 0.1 get a third decimal.
 *
 * Usage: mpiexec -n 2 peer_perf [-s max_size] [-r repetitions] [-l size]
 *                              [-i iterations] [-w barrier|poll] [-h]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "openreg.h"
#include "perf_util.h"

/* As runtime_perf: long enough repetitions that one preemption on a busy
 * 2-core machine does not decide the result. */
#define BYTES_PER_REP (32 * MiB)
#define MIN_REP_SECONDS 0.01
/* Cross-node copies of a few KiB can take a millisecond each on a busy
 * machine: a repetition stops growing here, so the run stays in minutes. */
#define MAX_REP_SECONDS 0.5
#define MAX_COPIES_PER_REP (1 << 20)

#define TAG_DATA 1
#define TAG_ACK 2
#define TAG_INFO 3
#define TAG_PING 4

/* The targets this benchmark reports on. Same node: copies at 64 MiB. */
#define TARGET_SIZE (64 * MiB)
#define TARGET_VS_MEMCPY 0.8
#define TARGET_VS_MPI 2.0
/* Other node: a small copy within 5 MPI one-way latencies, and 64 MiB at
 * least as fast as MPI itself. */
#define TARGET_LATENCY_VS_MPI 5.0
#define TARGET_REMOTE_VS_MPI 1.0

static int my_rank;

/* How rank 1 waits while rank 0 copies. MPICH's MPI_Barrier spins inside MPI
 * and, with MPI_THREAD_MULTIPLE, holds the lock the proxy thread needs for
 * its own MPI calls; polling a non-blocking barrier with sleeps in between
 * leaves MPI to the proxy. */
static int wait_poll;

/* Abort the whole job on failure, so that the other rank does not wait
 * forever in a barrier for a rank that has gone. */
static void die(void)
{
    fflush(stdout);
    fflush(stderr);
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define CHECK(call)                                                                    \
    do {                                                                               \
        orError_t check_err_ = (call);                                                 \
        if (check_err_ != orSuccess) {                                                 \
            fflush(stdout);                                                            \
            fprintf(stderr, "peer_perf: rank %d: %s:%d: %s failed: %s (%s)\n", my_rank, \
                    __FILE__, __LINE__, #call, orGetErrorName(check_err_),             \
                    orGetErrorString(check_err_));                                     \
            die();                                                                     \
        }                                                                              \
    } while (0)

#define CHECK_MPI(call)                                                                \
    do {                                                                               \
        int check_rc_ = (call);                                                        \
        if (check_rc_ != MPI_SUCCESS) {                                                \
            char check_msg_[MPI_MAX_ERROR_STRING];                                     \
            int check_len_ = 0;                                                        \
            MPI_Error_string(check_rc_, check_msg_, &check_len_);                      \
            fflush(stdout);                                                            \
            fprintf(stderr, "peer_perf: rank %d: %s:%d: %s failed: %s\n", my_rank,     \
                    __FILE__, __LINE__, #call, check_msg_);                            \
            die();                                                                     \
        }                                                                              \
    } while (0)


/* The barrier between phases, on both ranks (a blocking and a non-blocking
 * barrier do not match, so both ranks use the same kind). */
static void phase_barrier(void)
{
    if (!wait_poll) {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        return;
    }
    MPI_Request req;
    CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    for (;;) {
        int done = 0;
        CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done)
            return;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

/* ---- what is measured ------------------------------------------------- */

enum method { M_MEMCPY, M_MPI, M_PEER, M_IPC };

struct copy_op {
    enum method method;
    void *dst;
    const void *src;
    size_t size;
    int dst_device, src_device; /* M_PEER */
};

/* Rank 0's side of up to `copies` copies (a perf_body); returns how many
 * it made. A deadline (0: none) ends the round early, except for M_MPI,
 * where rank 1 receives exactly `copies` and acknowledges the last, so that
 * the time covers the bytes arriving. */
static long run_copies(void *ctx, long copies, double deadline)
{
    const struct copy_op *op = ctx;
    long c = 0;
    switch (op->method) {
    case M_MEMCPY:
        for (; c < copies; c++)
            perf_memcpy(op->dst, op->src, op->size);
        break;
    case M_PEER:
        for (; c < copies && !(deadline && c && perf_now_s() > deadline); c++)
            CHECK(orMemcpyPeer(op->dst, op->dst_device, op->src, op->src_device, op->size));
        break;
    case M_IPC:
        for (; c < copies && !(deadline && c && perf_now_s() > deadline); c++)
            CHECK(orMemcpy(op->dst, op->src, op->size, orMemcpyDeviceToDevice));
        break;
    case M_MPI:
        for (; c < copies; c++)
            CHECK_MPI(MPI_Send(op->src, (int)op->size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        break;
    }
    return c;
}

/* Rank 1's side of the MPI column: the receives of one round, then the ack. */
static void receive_copies(void *buf, size_t size, long copies)
{
    for (long c = 0; c < copies; c++)
        CHECK_MPI(MPI_Recv(buf, (int)size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD));
}

static long initial_copies(size_t size)
{
    long copies = (long)(BYTES_PER_REP / size);
    return copies < 1 ? 1 : copies;
}

/* Rank 0: best GB/s over reps repetitions. The first, untimed round warms
 * caches, page tables, workers and proxies, and calibrates the copies per
 * repetition (at least 32 MiB and MIN_REP_SECONDS, at most MAX_REP_SECONDS),
 * which rank 1 learns by broadcast for the MPI column. */
static double bandwidth(const struct copy_op *op, int reps)
{
    const perf_plan plan = {initial_copies(op->size), MIN_REP_SECONDS, MAX_REP_SECONDS,
                            MAX_COPIES_PER_REP};
    long copies = perf_calibrate(run_copies, (void *)op, &plan);
    if (op->method == M_MPI)
        CHECK_MPI(MPI_Bcast(&copies, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    return (double)op->size * copies / perf_best_time(run_copies, (void *)op, copies, reps) / 1e9;
}

/* Rank 1's mirror of bandwidth() for the MPI column. */
static void mpi_receiver(void *buf, size_t size, int reps)
{
    long copies = initial_copies(size);
    receive_copies(buf, size, copies);
    CHECK_MPI(MPI_Bcast(&copies, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    for (int r = 0; r < reps; r++)
        receive_copies(buf, size, copies);
}

/* ---- latency ------------------------------------------------------------ */

enum lat_kind {
    L_MPI,
    L_MPI_RT_WRITE,
    L_MPI_RT_READ,
    L_RMA_PUT,
    L_RMA_GET,
    L_WRITE,
    L_READ,
    L_MPI_BURST,
    L_WRITE_BURST
};

/* Rank 1's latency buffer exposed for the RMA rows; rank 0 holds a shared
 * lock on it while it measures them. */
static MPI_Win rma_win = MPI_WIN_NULL;

/* A burst: small messages or copies back to back, waited for once at the
 * end (MPI: one acknowledgement from rank 1; the runtime: one stream
 * synchronization, which returns when every write is in place). */
#define BURST 32
static orStream_t burst_stream;

/* Rank 0: warmup untimed then iters timed operations, one at a time;
 * samples get microseconds each. L_MPI is a ping-pong with rank 1 (see
 * latency_echo), halved: one way. */
static void latency_samples(enum lat_kind kind, void *local, void *remote, char *hbuf,
                            size_t size, int warmup, int iters, double *samples)
{
    for (int k = -warmup; k < iters; k++) {
        double t0 = perf_now_s();
        switch (kind) {
        case L_MPI:
            CHECK_MPI(MPI_Send(hbuf, (int)size, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(hbuf, (int)size, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
            break;
        case L_MPI_RT_WRITE: /* the bytes, then rank 1's word that they are in */
            CHECK_MPI(MPI_Send(hbuf, (int)size, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            break;
        case L_MPI_RT_READ: /* a request, then the bytes */
            CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(hbuf, (int)size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
            break;
        case L_RMA_PUT:
            CHECK_MPI(MPI_Put(hbuf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, rma_win));
            CHECK_MPI(MPI_Win_flush(1, rma_win));
            break;
        case L_RMA_GET:
            CHECK_MPI(MPI_Get(hbuf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, rma_win));
            CHECK_MPI(MPI_Win_flush(1, rma_win));
            break;
        case L_WRITE:
            CHECK(orMemcpy(remote, local, size, orMemcpyDeviceToDevice));
            break;
        case L_READ:
            CHECK(orMemcpy(local, remote, size, orMemcpyDeviceToDevice));
            break;
        case L_MPI_BURST:
            for (int b = 0; b < BURST; b++)
                CHECK_MPI(MPI_Send(hbuf, (int)size, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(hbuf, 1, MPI_BYTE, 1, TAG_PING, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
            break;
        case L_WRITE_BURST:
            for (int b = 0; b < BURST; b++)
                CHECK(orMemcpyAsync(remote, local, size, orMemcpyDeviceToDevice, burst_stream));
            CHECK(orStreamSynchronize(burst_stream));
            break;
        }
        double us = (perf_now_s() - t0) * 1e6;
        if (k >= 0)
            samples[k] = kind == L_MPI ? us / 2
                         : kind == L_MPI_BURST || kind == L_WRITE_BURST ? us / BURST
                                                                         : us;
    }
}

/* Rank 1's side of the ping-pong: n echoes. */
static void latency_echo(char *hbuf, size_t size, int n)
{
    for (int k = 0; k < n; k++) {
        CHECK_MPI(MPI_Recv(hbuf, (int)size, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Send(hbuf, (int)size, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD));
    }
}

/* Rank 1's side of MPI's round trip of a write: n receives, each acknowledged. */
static void latency_ack_sink(char *hbuf, size_t size, int n)
{
    for (int k = 0; k < n; k++) {
        CHECK_MPI(MPI_Recv(hbuf, (int)size, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD));
    }
}

/* Rank 1's side of MPI's round trip of a read: n requests, each answered
 * with the bytes. */
static void latency_read_source(char *hbuf, size_t size, int n)
{
    for (int k = 0; k < n; k++) {
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Send(hbuf, (int)size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD));
    }
}

/* Rank 1's side of the MPI bursts: n bursts, each acknowledged once. */
static void latency_burst_sink(char *hbuf, size_t size, int n)
{
    for (int k = 0; k < n; k++) {
        for (int b = 0; b < BURST; b++)
            CHECK_MPI(MPI_Recv(hbuf, (int)size, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Send(hbuf, 1, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD));
    }
}

struct latency {
    double median_us, p99_us;
};

static struct latency latency_of(double *samples, int n)
{
    struct latency l;
    perf_percentiles(samples, (size_t)n, &l.median_us, &l.p99_us);
    return l;
}

/* ---- options and formatting ------------------------------------------- */


static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: mpiexec -n 2 %s [-s max_size] [-r repetitions] [-l size] [-i iterations]\n"
            "                        [-w barrier|poll] [-h]\n"
            "  -s S   largest copy size, K/M/G suffixes allowed (default 64M, at most 1G;\n"
            "         sizes go from 4K up in powers of 4)\n"
            "  -r N   repetitions per point, the best is reported (default 5)\n"
            "  -l S   size of the latency table's copies (default 4K, at most -s)\n"
            "  -i N   timed copies of each latency row (default 1000; warm-up N/10)\n"
            "  -w W   how rank 1 waits while rank 0 copies: barrier (MPI_Barrier, the\n"
            "         default) or poll (MPI_Ibarrier tested every millisecond, sleeping\n"
            "         outside MPI in between)\n"
            "  -h     this help\n"
            "Rank 0 copies into rank 1's device memory. Where the ranks are decides the\n"
            "cross-rank column:\n"
            "  mpiexec -n 2 %s                            same virtual node\n"
            "  OPENREG_RANKS_PER_NODE=1 mpiexec -n 2 %s   other virtual node\n"
            "Each rank needs OPENREG_DEVICES >= 1; rank 0 needs 2 for the same-rank column.\n",
            prog, prog, prog);
}

/* What rank 1 tells rank 0 for the header. */
struct rank_info {
    int node, devices;
    char cpus[256]; /* of its device 0 */
};

/* The command to show in messages: libtool runs the real binary from .libs/
 * (sometimes as lt-NAME), but users start the wrapper one directory up. */
static const char *command_name(const char *argv0, char *buf, size_t len)
{
    const char *libs = strstr(argv0, ".libs/");
    if (!libs)
        return argv0;
    const char *base = libs + strlen(".libs/");
    if (strncmp(base, "lt-", 3) == 0)
        base += 3;
    snprintf(buf, len, "%.*s%s", (int)(libs - argv0), argv0, base);
    return buf;
}

/* Small values keep a third decimal: slow paths run at a few MB/s. */
static void print_value(int width, double v)
{
    printf(" %*.*f", width, v < 0.1 ? 3 : 2, v);
}

static void print_ratio(double bw, double ref)
{
    print_value(7, ref > 0 ? bw / ref : 0.0);
}

int main(int argc, char **argv)
{
    int reps = 5, iters = 1000;
    size_t max_size = 64 * MiB, lat_size = 4 * KiB;
    int opt;
    char name_buf[4096];
    const char *prog = command_name(argv[0], name_buf, sizeof name_buf);
    perf_prog = "peer_perf";
    perf_fatal = die;
    /* Options first: every rank parses the same command line, so they all
     * stop here together, before any rank waits for another. */
    while ((opt = getopt(argc, argv, "s:r:l:i:w:h")) != -1) {
        switch (opt) {
        case 'w':
            if (strcmp(optarg, "barrier") == 0) {
                wait_poll = 0;
            } else if (strcmp(optarg, "poll") == 0) {
                wait_poll = 1;
            } else {
                fprintf(stderr, "peer_perf: -w needs barrier or poll\n");
                return 2;
            }
            break;
        case 's':
            /* MPI counts are ints: 1 GiB is the largest power of 4 they hold. */
            if (perf_parse_size(optarg, &max_size) != 0 || max_size < 4 * KiB || max_size > 1024 * MiB) {
                fprintf(stderr, "peer_perf: -s needs a size from 4K to 1G (e.g. 16M)\n");
                return 2;
            }
            break;
        case 'r':
            reps = atoi(optarg);
            if (reps < 1) {
                fprintf(stderr, "peer_perf: -r needs a positive number\n");
                return 2;
            }
            break;
        case 'l':
            if (perf_parse_size(optarg, &lat_size) != 0 || lat_size < 1 || lat_size > 1024 * MiB) {
                fprintf(stderr, "peer_perf: -l needs a size from 1 to 1G (e.g. 8 or 4K)\n");
                return 2;
            }
            break;
        case 'i':
            iters = atoi(optarg);
            if (iters < 1) {
                fprintf(stderr, "peer_perf: -i needs a positive number\n");
                return 2;
            }
            break;
        case 'h':
            usage(stdout, prog);
            return 0;
        default:
            usage(stderr, prog);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr, prog);
        return 2;
    }
    if (lat_size > max_size) {
        fprintf(stderr, "peer_perf: -l must not exceed -s (buffers are -s bytes)\n");
        return 2;
    }

    /* The runtime's first call starts MPI when a launcher started us. */
    orClusterInfo ci;
    CHECK(orGetClusterInfo(&ci));
    my_rank = ci.rank;
    if (ci.nranks != 2) {
        if (ci.rank == 0)
            fprintf(stderr,
                    "peer_perf: needs exactly 2 MPI ranks, this job has %d: rank 0 copies into "
                    "rank 1's device memory.\nRun it as\n"
                    "  mpiexec -n 2 %s                            (both ranks on one virtual "
                    "node)\n"
                    "  OPENREG_RANKS_PER_NODE=1 mpiexec -n 2 %s   (each rank its own node)\n",
                    ci.nranks, prog, prog);
        return 2;
    }
    const int peer_ok = ci.deviceCount >= 2; /* same-rank column, on rank 0 */

    /* Buffers are allocated once at the largest size and touched first, so
     * no size pays for page faults the others skip. */
    char *hsrc = NULL, *hdst = NULL;
    void *d0 = NULL, *d1 = NULL, *remote = NULL, *mine = NULL;
    hsrc = perf_xmalloc(max_size);
    hdst = perf_xmalloc(max_size);
    memset(hsrc, 3, max_size);
    memset(hdst, 4, max_size);
    CHECK(orSetDevice(0));
    orIpcMemHandle_t handle;
    if (ci.rank == 1) {
        CHECK(orMalloc(&mine, max_size));
        CHECK(orMemset(mine, 7, max_size));
        CHECK(orIpcGetMemHandle(&handle, mine));
        CHECK_MPI(MPI_Send(&handle, (int)sizeof handle, MPI_BYTE, 0, TAG_INFO, MPI_COMM_WORLD));
        struct rank_info info = {ci.node, ci.deviceCount, ""};
        orDeviceProp prop;
        CHECK(orGetDeviceProperties(&prop, 0));
        snprintf(info.cpus, sizeof info.cpus, "%s", prop.cpuList);
        CHECK_MPI(MPI_Send(&info, (int)sizeof info, MPI_BYTE, 0, TAG_INFO, MPI_COMM_WORLD));
    }

    struct rank_info r1 = {0};
    orDeviceProp p0, p1;
    int cross_node = 0;
    if (ci.rank == 0) {
        CHECK_MPI(MPI_Recv(&handle, (int)sizeof handle, MPI_BYTE, 1, TAG_INFO, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Recv(&r1, (int)sizeof r1, MPI_BYTE, 1, TAG_INFO, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
        CHECK(orMalloc(&d0, max_size));
        CHECK(orMemset(d0, 5, max_size));
        CHECK(orGetDeviceProperties(&p0, 0));
        if (peer_ok) {
            CHECK(orSetDevice(1));
            CHECK(orMalloc(&d1, max_size));
            CHECK(orMemset(d1, 6, max_size));
            CHECK(orGetDeviceProperties(&p1, 1));
            CHECK(orSetDevice(0));
        }
        /* Opened on device 0, whose default stream carries the copies. */
        CHECK(orIpcOpenMemHandle(&remote, handle, 0));
        orPointerAttributes attr;
        CHECK(orPointerGetAttributes(&attr, remote));
        cross_node = attr.type == orMemoryTypeRemote;
        if (cross_node != (r1.node != ci.node)) {
            fprintf(stderr, "peer_perf: rank 1 is on node %d, rank 0 on node %d, but the opened "
                            "handle says %s\n",
                    r1.node, ci.node, cross_node ? "remote" : "same node");
            die();
        }
    }
    phase_barrier();

    const char *cross = cross_node ? "other node" : "same node";
    if (ci.rank == 0) {
        const char *rpn = getenv("OPENREG_RANKS_PER_NODE");
        printf("OpenReg peer-copy benchmark: 2 ranks on %d virtual node%s (OPENREG_RANKS_PER_NODE"
               "%s%s); host has %ld online cpus\n",
               ci.nnodes, ci.nnodes == 1 ? "" : "s", rpn ? "=" : " unset", rpn ? rpn : "",
               sysconf(_SC_NPROCESSORS_ONLN));
        printf("  rank 0: node %d, %d device%s; device 0: %s, cpus %s", ci.node, ci.deviceCount,
               ci.deviceCount == 1 ? "" : "s", p0.name, p0.cpuList);
        if (peer_ok)
            printf("; device 1: cpus %s", p1.cpuList);
        printf("\n  rank 1: node %d, %d device%s; device 0: cpus %s\n", r1.node, r1.devices,
               r1.devices == 1 ? "" : "s", r1.cpus);
        printf("  rank 1 waits during rank 0's copies in %s\n",
               wait_poll ? "MPI_Ibarrier + MPI_Test every 1 ms, sleeping outside MPI (-w poll)"
                         : "MPI_Barrier (-w barrier)");
        printf("columns measured in this run:\n");
        printf("  %-11s memcpy between two malloc'd buffers of rank 0\n", "memcpy");
        printf("  %-11s MPI_Send rank 0 -> MPI_Recv rank 1, malloc'd buffers, MPI_COMM_WORLD\n",
               "MPI");
        if (peer_ok)
            printf("  %-11s orMemcpyPeer, rank 0 device 0 -> rank 0 device 1 (a device worker's "
                   "memmove)\n",
                   "same rank");
        printf("  %-11s orMemcpy, rank 0 device 0 -> rank 1 device 0 opened by IPC handle (%s)\n",
               cross,
               cross_node ? "the proxy threads move the bytes with MPI_Isend/MPI_Irecv"
                          : "one memmove through the node's shared mapping");
        printf("  %-11s orMemcpy the other way, rank 1 device 0 -> rank 0 device 0\n", "read");
        printf("not measured in this run:\n");
        if (!peer_ok)
            printf("  %-11s needs 2 devices on rank 0 (OPENREG_DEVICES >= 2)\n", "same rank");
        if (cross_node)
            printf("  %-11s needs both ranks on one virtual node: mpiexec -n 2 %s\n", "same node",
                   prog);
        else
            printf("  %-11s needs each rank on its own virtual node: "
                   "OPENREG_RANKS_PER_NODE=1 mpiexec -n 2 %s\n",
                   "other node", prog);
        fflush(stdout);
    }

    /* Latency: MPI's ping-pong and round trips, then rank 0's RMA, writes
     * and reads while rank 1 waits. */
    int warmup = iters / 10 > 10 ? iters / 10 : 10;
    struct latency lat_mpi = {0, 0}, lat_rt_write = {0, 0}, lat_rt_read = {0, 0};
    struct latency lat_put = {0, 0}, lat_get = {0, 0}, lat_write = {0, 0}, lat_read = {0, 0};
    struct latency lat_mpi_burst = {0, 0}, lat_write_burst = {0, 0};
    /* Bursts: fewer rounds, each of BURST messages. */
    int burst_iters = iters / 10 > 10 ? iters / 10 : 10, burst_warmup = 3;
    if (burst_iters > iters)
        burst_iters = iters;
    CHECK_MPI(MPI_Win_create(ci.rank == 1 ? hdst : NULL, ci.rank == 1 ? (MPI_Aint)lat_size : 0, 1,
                             MPI_INFO_NULL, MPI_COMM_WORLD, &rma_win));
    phase_barrier();
    if (ci.rank == 0) {
        double *samples = perf_xmalloc((size_t)iters * sizeof *samples);
        latency_samples(L_MPI, NULL, NULL, hsrc, lat_size, warmup, iters, samples);
        lat_mpi = latency_of(samples, iters);
        latency_samples(L_MPI_RT_WRITE, NULL, NULL, hsrc, lat_size, warmup, iters, samples);
        lat_rt_write = latency_of(samples, iters);
        latency_samples(L_MPI_RT_READ, NULL, NULL, hsrc, lat_size, warmup, iters, samples);
        lat_rt_read = latency_of(samples, iters);
        latency_samples(L_MPI_BURST, NULL, NULL, hsrc, lat_size, burst_warmup, burst_iters,
                        samples);
        lat_mpi_burst = latency_of(samples, burst_iters);
        phase_barrier();
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, rma_win));
        latency_samples(L_RMA_PUT, NULL, NULL, hsrc, lat_size, warmup, iters, samples);
        lat_put = latency_of(samples, iters);
        latency_samples(L_RMA_GET, NULL, NULL, hsrc, lat_size, warmup, iters, samples);
        lat_get = latency_of(samples, iters);
        CHECK_MPI(MPI_Win_unlock(1, rma_win));
        latency_samples(L_WRITE, d0, remote, NULL, lat_size, warmup, iters, samples);
        lat_write = latency_of(samples, iters);
        latency_samples(L_READ, d0, remote, NULL, lat_size, warmup, iters, samples);
        lat_read = latency_of(samples, iters);
        CHECK(orStreamCreate(&burst_stream));
        latency_samples(L_WRITE_BURST, d0, remote, NULL, lat_size, burst_warmup, burst_iters,
                        samples);
        lat_write_burst = latency_of(samples, burst_iters);
        CHECK(orStreamDestroy(burst_stream));
        phase_barrier();
        free(samples);
        char sz[32];
        perf_format_size(sz, sizeof sz, lat_size);
        printf("\nlatency, microseconds per copy of %s, one at a time by rank 0 (median and p99\n"
               "of %d after %d untimed; x1 = median over MPI's one way, xrt = over MPI's round\n"
               "trip of the same direction: what a synchronous copy compares with)\n",
               sz, iters, warmup);
        printf("  %-58s %9s %9s %7s %7s\n", "operation", "median", "p99", "x1", "xrt");
        const struct {
            const char *name;
            struct latency l;
            const struct latency *rt; /* NULL: no round trip to compare with */
        } rows[7] = {
            {"MPI one way: half a MPI_Send/MPI_Recv ping-pong", lat_mpi, NULL},
            {"MPI round trip, write: MPI_Send, 0-byte ack back", lat_rt_write, &lat_rt_write},
            {"MPI round trip, read: 0-byte request, MPI_Recv", lat_rt_read, &lat_rt_read},
            {"MPI RMA write: MPI_Put + MPI_Win_flush, rank 1 waits", lat_put, &lat_rt_write},
            {"MPI RMA read: MPI_Get + MPI_Win_flush, rank 1 waits", lat_get, &lat_rt_read},
            {cross_node ? "write, other node: orMemcpy rank 0 dev 0 -> rank 1 dev 0"
                        : "write, same node: orMemcpy rank 0 dev 0 -> rank 1 dev 0",
             lat_write, &lat_rt_write},
            {cross_node ? "read, other node: orMemcpy rank 1 dev 0 -> rank 0 dev 0"
                        : "read, same node: orMemcpy rank 1 dev 0 -> rank 0 dev 0",
             lat_read, &lat_rt_read},
        };
        for (int k = 0; k < 7; k++) {
            printf("  %-58s %9.2f %9.2f %7.2f", rows[k].name, rows[k].l.median_us,
                   rows[k].l.p99_us,
                   lat_mpi.median_us > 0 ? rows[k].l.median_us / lat_mpi.median_us : 0.0);
            if (rows[k].rt && rows[k].rt->median_us > 0)
                printf(" %7.2f\n", rows[k].l.median_us / rows[k].rt->median_us);
            else
                printf(" %7s\n", "-");
        }
        printf("\nbursts of %d, microseconds per message or copy (median and p99 of %d bursts\n"
               "after %d untimed; x = median over MPI's burst)\n",
               BURST, burst_iters, burst_warmup);
        printf("  %-58s %9s %9s %7s\n", "operation", "median", "p99", "x");
        const struct {
            const char *name;
            struct latency l;
        } brows[2] = {
            {"MPI burst: MPI_Send each, one MPI_Recv of an ack", lat_mpi_burst},
            {cross_node ? "posted burst, other node: orMemcpyAsync each, one sync"
                        : "burst, same node: orMemcpyAsync each, one sync",
             lat_write_burst},
        };
        for (int k = 0; k < 2; k++)
            printf("  %-58s %9.2f %9.2f %7.2f\n", brows[k].name, brows[k].l.median_us,
                   brows[k].l.p99_us,
                   lat_mpi_burst.median_us > 0 ? brows[k].l.median_us / lat_mpi_burst.median_us
                                               : 0.0);
        printf("\ncopy bandwidth, GB/s, one synchronous copy at a time by rank 0 (best of %d;\n"
               "/memcpy and /MPI = that column's GB/s over memcpy's and over MPI's)\n",
               reps);
        printf("  %8s %8s %8s |", "size", "memcpy", "MPI");
        if (peer_ok)
            printf(" %10s %7s %7s |", "same rank", "/memcpy", "/MPI");
        printf(" %10s %7s %7s | %8s %7s\n", cross, "/memcpy", "/MPI", "read", "/MPI");
        fflush(stdout);
    } else {
        latency_echo(hdst, lat_size, warmup + iters);
        latency_ack_sink(hdst, lat_size, warmup + iters);
        latency_read_source(hdst, lat_size, warmup + iters);
        latency_burst_sink(hdst, lat_size, burst_warmup + burst_iters);
        phase_barrier();
        phase_barrier();
    }
    CHECK_MPI(MPI_Win_free(&rma_win));

    double target_memcpy = 0, target_mpi = 0, target_bw = 0, target_read_mpi = 0;
    int target_seen = 0;
    for (size_t size = 4 * KiB; size <= max_size; size *= 4) {
        double ref = 0, mpi = 0, peer = 0, ipc = 0, ipc_read = 0;
        /* Phases are separated by barriers, so that no phase overlaps
         * another's traffic; for rank 0's own copies rank 1 just waits. */
        if (ci.rank == 0) {
            const struct copy_op ops[5] = {
                {M_MEMCPY, hdst, hsrc, size, 0, 0},
                {M_MPI, NULL, hsrc, size, 0, 0},
                {M_PEER, d1, d0, size, 1, 0},
                {M_IPC, remote, d0, size, 0, 0},
                {M_IPC, d0, remote, size, 0, 0},
            };
            ref = bandwidth(&ops[0], reps);
            phase_barrier();
            mpi = bandwidth(&ops[1], reps);
            phase_barrier();
            if (peer_ok)
                peer = bandwidth(&ops[2], reps);
            phase_barrier();
            ipc = bandwidth(&ops[3], reps);
            ipc_read = bandwidth(&ops[4], reps);
            phase_barrier();
        } else {
            phase_barrier();
            mpi_receiver(hdst, size, reps);
            phase_barrier();
            phase_barrier();
            phase_barrier();
        }
        if (ci.rank == 0) {
            char sz[32];
            perf_format_size(sz, sizeof sz, size);
            printf("  %8s", sz);
            print_value(8, ref);
            print_value(8, mpi);
            printf(" |");
            if (peer_ok) {
                print_value(10, peer);
                print_ratio(peer, ref);
                print_ratio(peer, mpi);
                printf(" |");
            }
            print_value(10, ipc);
            print_ratio(ipc, ref);
            print_ratio(ipc, mpi);
            printf(" |");
            print_value(8, ipc_read);
            print_ratio(ipc_read, mpi);
            printf("\n");
            fflush(stdout);
            if (size == TARGET_SIZE) {
                target_seen = 1;
                target_bw = ipc;
                target_memcpy = ref > 0 ? ipc / ref : 0;
                target_mpi = mpi > 0 ? ipc / mpi : 0;
                target_read_mpi = mpi > 0 ? ipc_read / mpi : 0;
            }
        }
        if (size > max_size / 4)
            break; /* the next power of 4 would exceed -s */
    }

    /* Check the bytes of the largest copies once: rank 0 sends a pattern
     * through each path, rank 1 (or rank 0, for its own devices) compares. */
    int bad = 0;
    for (size_t i = 0; i < max_size; i++)
        hsrc[i] = (char)(i * 31 + 7 + i / 4093);
    if (ci.rank == 0) {
        CHECK(orMemcpy(d0, hsrc, max_size, orMemcpyHostToDevice));
        CHECK(orMemcpy(remote, d0, max_size, orMemcpyDeviceToDevice));
        memset(hdst, 0, max_size); /* and back: the read path */
        CHECK(orMemcpy(hdst, remote, max_size, orMemcpyDeviceToHost));
        bad |= memcmp(hdst, hsrc, max_size) != 0;
        if (peer_ok) {
            CHECK(orMemcpyPeer(d1, 1, d0, 0, max_size));
            CHECK(orMemcpy(hdst, d1, max_size, orMemcpyDeviceToHost));
            bad |= memcmp(hdst, hsrc, max_size) != 0;
        }
        CHECK_MPI(MPI_Send(hsrc, (int)max_size, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD));
    } else {
        CHECK_MPI(MPI_Recv(hdst, (int)max_size, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
        bad |= memcmp(hdst, hsrc, max_size) != 0;
        CHECK(orMemcpy(hdst, mine, max_size, orMemcpyDeviceToHost));
        bad |= memcmp(hdst, hsrc, max_size) != 0;
    }
    int any_bad = 0;
    CHECK_MPI(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));

    if (ci.rank == 0) {
        printf("  data check of the largest copies: %s\n", any_bad ? "FAILED" : "OK");
        printf("\ntarget: same-node cross-rank copy of 64 MiB >= %.1fx memcpy and >= %.1fx MPI\n",
               TARGET_VS_MEMCPY, TARGET_VS_MPI);
        if (cross_node) {
            printf("  not measured in this run (the ranks are on different nodes)\n");
            double w = lat_write.median_us / lat_mpi.median_us;
            double r = lat_read.median_us / lat_mpi.median_us;
            printf("target: other-node copy of 4 KiB within %.0fx MPI's one-way latency, "
                   "64 MiB >= %.1fx MPI\n",
                   TARGET_LATENCY_VS_MPI, TARGET_REMOTE_VS_MPI);
            if (lat_size != 4 * KiB)
                printf("  latency not measured in this run (-l is not 4K)\n");
            else {
                printf("  4 KiB: write %.2fx (%s), read %.2fx (%s)\n", w,
                       w <= TARGET_LATENCY_VS_MPI ? "met" : "missed", r,
                       r <= TARGET_LATENCY_VS_MPI ? "met" : "missed");
                printf("  4 KiB against MPI's round trip of the same direction (1: as fast): "
                       "write %.2fx, read %.2fx\n",
                       lat_write.median_us / lat_rt_write.median_us,
                       lat_read.median_us / lat_rt_read.median_us);
            }
            if (!target_seen)
                printf("  64 MiB not measured in this run (-s is below 64M)\n");
            else
                printf("  64 MiB: write %.2fx MPI (%s), read %.2fx MPI (%s)\n", target_mpi,
                       target_mpi >= TARGET_REMOTE_VS_MPI ? "met" : "missed", target_read_mpi,
                       target_read_mpi >= TARGET_REMOTE_VS_MPI ? "met" : "missed");
        } else if (!target_seen)
            printf("  not measured in this run (-s is below 64M)\n");
        else
            printf("  %.2f GB/s: %.2fx memcpy (%s), %.2fx MPI (%s)\n", target_bw, target_memcpy,
                   target_memcpy >= TARGET_VS_MEMCPY ? "met" : "missed", target_mpi,
                   target_mpi >= TARGET_VS_MPI ? "met" : "missed");
        CHECK(orIpcCloseMemHandle(remote));
        CHECK(orFree(d0));
        if (peer_ok)
            CHECK(orFree(d1));
    }
    /* Rank 1's memory stays until rank 0 has closed its mapping. */
    phase_barrier();
    if (ci.rank == 1)
        CHECK(orFree(mine));
    free(hsrc);
    free(hdst);
    return any_bad;
}
