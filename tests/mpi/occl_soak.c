/*
 * occl_soak.c - a long mixed run: peer copies between any two devices of the
 * job and all eight OCCL collectives (AllReduce, Broadcast, Reduce,
 * AllGather, ReduceScatter, AlltoAll, Gather, Scatter) with random counts,
 * types, reduction ops (PreMulSum made and destroyed per call), roots,
 * placements, streams, communicators (the job and three partitions of it) and
 * groups of up to three calls. Every result is checked against a reference
 * computed on the host, as are guard elements after every output.
 *
 * The run is seeded: every process draws the same sequence of operations
 * from --seed, and every input element is a hash of (operation, rank,
 * element), so a failure repeats with the same seed and job shape. Inputs
 * keep every reduction exact in every type whatever the order of its steps
 * (integers wrap, computed modulo 2^width here too; floating values are
 * small integers), so results are compared bit for bit.
 *
 * Each process samples its resident set and its open file descriptors every
 * --sample operations. After the warm-up (--warmup percent of the run) every
 * sample must stay within --tolerance percent of the first one after it: a
 * leak of memory, streams, IPC mappings, communicator state or descriptors
 * per operation fails the run.
 *
 *   occl_soak [--ops N] [--seed S] [--warmup PCT] [--sample N] [--tolerance PCT] [--progress]
 *             [--verbose]
 *
 * --progress: every process prints each of its samples as it takes it, with
 * the seconds since the random run began (a long run shows how far it got);
 * --verbose: that, and every operation before it runs.
 *
 * Rank 0 prints the figures: operations of each kind, time, and per process
 * the resident set and descriptors at the baseline, the least and the most
 * after it. Exit status 0 when every check passed; a failed call or a wrong
 * element ends the job.
 */
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "occltest.h"

#define MAX_DEVS 8    /* devices per process */
#define NCOMMS 4      /* the job, and three partitions of it */
#define NSTREAMS 3    /* streams of each device, besides its default one */
#define SLOTS 3       /* calls in one group at most: buffers per device */
#define CAP (1 << 15) /* elements (of up to 8 bytes) per buffer */
#define GUARD 16      /* elements after each output that no call may write */
#define PEER_CAP (1 << 19) /* bytes of each device's peer copy buffers */

enum kind {
    K_ALLREDUCE, K_BROADCAST, K_REDUCE, K_ALLGATHER, K_REDUCESCATTER,
    K_ALLTOALL, K_GATHER, K_SCATTER, K_PEER, K_NKINDS
};
static const char *const kind_names[K_NKINDS] = {
    "AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
    "AlltoAll", "Gather", "Scatter", "peer copy"};

enum op { O_SUM, O_PROD, O_MAX, O_MIN, O_AVG, O_PMS, O_NOPS };

static const int type_width[occlNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

static bool is_fp8(int t) { return t == occlFloat8e4m3 || t == occlFloat8e5m2; }
static bool is_float(int t)
{
    return t == occlFloat16 || t == occlFloat32 || t == occlFloat64 || t == occlBfloat16 || is_fp8(t);
}
static bool is_signed(int t) { return t == occlInt8 || t == occlInt32 || t == occlInt64; }
static bool reduces(int k) { return k == K_ALLREDUCE || k == K_REDUCE || k == K_REDUCESCATTER; }
static bool has_root(int k)
{
    return k == K_BROADCAST || k == K_REDUCE || k == K_GATHER || k == K_SCATTER;
}

/* ---- the job ------------------------------------------------------------- */

typedef struct commview {
    int n;                 /* ranks */
    int rank[MAX_DEVS];    /* this process's devices' ranks in it */
    occlComm_t comm[MAX_DEVS];
} commview;

static orClusterInfo ci;
static int nd, G; /* devices here, devices of the job */
static commview comms[NCOMMS];
static orStream_t streams[MAX_DEVS][NSTREAMS];
static unsigned char *bufa[MAX_DEVS][SLOTS], *bufb[MAX_DEVS][SLOTS];
static unsigned char *peer_src[MAX_DEVS], *peer_dst[MAX_DEVS];
static orIpcMemHandle_t *peer_handles; /* [2 * G]: src, dst of every device */
static unsigned char *host, *want;     /* staging and the reference */
static bool verbose, progress;

/* Comm k groups global device g with the devices of the same color, ranked
 * by g: 0 the job; 1 even and odd devices; 2 the first and the second half
 * (one host each when the job spans two hosts evenly); 3 g mod 4. */
static int color_of(int k, int g)
{
    switch (k) {
    case 1: return g % 2;
    case 2: return g / ((G + 1) / 2);
    case 3: return g % 4;
    default: return 0;
    }
}

/* The global device of rank r of g's comm k. */
static int member(int k, int g, int r)
{
    int c = color_of(k, g);
    for (int h = 0; h < G; h++)
        if (color_of(k, h) == c && r-- == 0)
            return h;
    return -1;
}

static int comm_size(int k, int g)
{
    int n = 0;
    for (int h = 0; h < G; h++)
        n += color_of(k, h) == color_of(k, g);
    return n;
}

/* ---- random numbers and values ------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t rng_state;
static uint64_t rnd(void) { return mix(rng_state++); }
static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }

static uint64_t hash3(uint64_t salt, int r, size_t j)
{
    return mix(salt ^ mix(((uint64_t)(unsigned)r << 40) ^ (uint64_t)j));
}

static uint64_t mask_of(int t)
{
    int w = type_width[t];
    return w == 8 ? ~(uint64_t)0 : (((uint64_t)1 << (8 * w)) - 1);
}

static int64_t sext(uint64_t v, int t)
{
    int sh = 64 - 8 * type_width[t];
    return (int64_t)(v << sh) >> sh;
}

/* Bits of a small integer x in floating type t (exactly representable). */
static uint64_t float_bits(int t, double x)
{
    if (x == 0)
        return 0;
    uint64_t s = x < 0;
    double a = fabs(x);
    int e;
    double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    switch (t) {
    case occlFloat16: return s << 15 | (uint64_t)(e - 1 + 15) << 10 | (uint64_t)((m * 2 - 1) * 1024);
    case occlBfloat16: return s << 15 | (uint64_t)(e - 1 + 127) << 7 | (uint64_t)((m * 2 - 1) * 128);
    case occlFloat8e4m3: return s << 7 | (uint64_t)(e - 1 + 7) << 3 | (uint64_t)((m * 2 - 1) * 8);
    case occlFloat8e5m2: return s << 7 | (uint64_t)(e - 1 + 15) << 2 | (uint64_t)((m * 2 - 1) * 4);
    case occlFloat32: {
        float f = (float)x;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        return u;
    }
    default: {
        uint64_t u;
        memcpy(&u, &x, sizeof u);
        return u;
    }
    }
}

/* Integers exact in t: 2^significand bits. */
static int64_t float_exact(int t)
{
    switch (t) {
    case occlFloat16: return 1 << 11;
    case occlBfloat16: return 1 << 8;
    case occlFloat8e4m3: return 1 << 4;
    case occlFloat8e5m2: return 1 << 3;
    case occlFloat32: return 1 << 24;
    default: return (int64_t)1 << 53;
    }
}

static void store(int t, void *p, uint64_t bits) { memcpy(p, &bits, (size_t)type_width[t]); }
static uint64_t load(int t, const void *p)
{
    uint64_t v = 0;
    memcpy(&v, p, (size_t)type_width[t]);
    return v;
}

typedef struct call {
    int kind, comm, type, op, root, stream, slot;
    bool inplace;
    size_t count; /* NCCL's count: per rank for AllGather, ReduceScatter, AlltoAll, Gather, Scatter */
    uint64_t salt;
    int64_t scalar; /* PreMulSum's */
    occlRedOp_t ops[MAX_DEVS];
} call;

/* Input of rank r at element j. For a reduction of n ranks, a value whose
 * combination is exact: integers any bits (they wrap), floating values
 * small integers (sums of n within the significand; Avg's a multiple of n,
 * so the mean is an integer; products of +-1). */
static uint64_t input(const call *c, int n, int r, size_t j)
{
    uint64_t h = hash3(c->salt, r, j);
    int t = c->type;
    if (!reduces(c->kind))
        return h & mask_of(t);
    if (!is_float(t))
        return c->op == O_PROD ? (h | 1) & mask_of(t) : h & mask_of(t);
    int64_t lim = float_exact(t), v;
    switch (c->op) {
    case O_PROD: v = h & 1 ? 1 : -1; break;
    case O_MAX: case O_MIN: v = (int64_t)(h % (uint64_t)(2 * lim + 1)) - lim; break;
    case O_AVG: {
        int64_t k = lim / ((int64_t)n * n);
        v = ((int64_t)(h % (uint64_t)(2 * k + 1)) - k) * n;
        break;
    }
    default: { /* Sum; PreMulSum's scalar is 2 for floating types */
        int64_t k = lim / n / (c->op == O_PMS ? 2 : 1);
        v = (int64_t)(h % (uint64_t)(2 * k + 1)) - k;
        break;
    }
    }
    return float_bits(t, (double)v);
}

/* The small integer a floating input holds (the inverse of float_bits on
 * the values input() makes). */
static int64_t float_int(const call *c, int n, int r, size_t j)
{
    uint64_t h = hash3(c->salt, r, j);
    int64_t lim = float_exact(c->type);
    switch (c->op) {
    case O_PROD: return h & 1 ? 1 : -1;
    case O_MAX: case O_MIN: return (int64_t)(h % (uint64_t)(2 * lim + 1)) - lim;
    case O_AVG: {
        int64_t k = lim / ((int64_t)n * n);
        return ((int64_t)(h % (uint64_t)(2 * k + 1)) - k) * n;
    }
    default: {
        int64_t k = lim / n / (c->op == O_PMS ? 2 : 1);
        return (int64_t)(h % (uint64_t)(2 * k + 1)) - k;
    }
    }
}

/* The reduction over ranks 0..n-1 of element j of their inputs. */
static uint64_t reduced(const call *c, int n, size_t j)
{
    int t = c->type;
    if (is_float(t)) {
        int64_t acc = float_int(c, n, 0, j);
        for (int r = 1; r < n; r++) {
            int64_t v = float_int(c, n, r, j);
            switch (c->op) {
            case O_PROD: acc *= v; break;
            case O_MAX: acc = v > acc ? v : acc; break;
            case O_MIN: acc = v < acc ? v : acc; break;
            default: acc += v; break;
            }
        }
        if (c->op == O_AVG)
            acc /= n;
        if (c->op == O_PMS)
            acc *= 2;
        return float_bits(t, (double)acc);
    }
    uint64_t m = mask_of(t), acc = 0;
    for (int r = 0; r < n; r++) {
        uint64_t v = input(c, n, r, j);
        if (c->op == O_PMS)
            v = v * (uint64_t)c->scalar & m;
        if (r == 0) {
            acc = v;
            continue;
        }
        switch (c->op) {
        case O_PROD: acc = acc * v & m; break;
        case O_MAX:
            if (is_signed(t) ? sext(v, t) > sext(acc, t) : v > acc)
                acc = v;
            break;
        case O_MIN:
            if (is_signed(t) ? sext(v, t) < sext(acc, t) : v < acc)
                acc = v;
            break;
        default: acc = (acc + v) & m; break;
        }
    }
    if (c->op == O_AVG) /* the wrapped sum, divided in the type, truncating */
        acc = is_signed(t) ? (uint64_t)(sext(acc, t) / n) & m : acc / (uint64_t)n;
    return acc;
}

/* ---- drawing a call -------------------------------------------------------- */

static size_t draw_count(size_t most)
{
    switch (below(4)) {
    case 0: return below(17 < most + 1 ? 17 : most + 1);
    case 1: case 2: return below((1024 < most ? 1024 : most) + 1);
    default: return below(most + 1);
    }
}

static void draw(call *c, long seq, int slot)
{
    memset(c, 0, sizeof *c);
    c->kind = (int)below(K_PEER); /* collectives; peer copies are drawn by the caller */
    c->comm = (int)below(NCOMMS);
    c->type = (int)below(occlNumTypes);
    c->slot = slot;
    c->stream = (int)below(NSTREAMS + 1); /* NSTREAMS: the default stream */
    c->salt = mix((uint64_t)seq ^ rng_state);
    int n = comm_size(c->comm, 0); /* every comm of a kind has the same size here */
    c->root = (int)below((uint64_t)n);
    if (reduces(c->kind)) {
        c->op = (int)below(O_NOPS);
        /* FP8 sums of n ranks' values are not exact in 3 or 4 significant bits. */
        if (is_fp8(c->type) && c->op != O_MAX && c->op != O_MIN)
            c->op = below(2) ? O_MAX : O_MIN;
        c->scalar = is_float(c->type) ? 2 : 3;
    }
    bool blocks = c->kind == K_ALLGATHER || c->kind == K_REDUCESCATTER || c->kind == K_ALLTOALL ||
                  c->kind == K_GATHER || c->kind == K_SCATTER;
    c->count = draw_count(blocks ? CAP / (size_t)n - GUARD : CAP - GUARD);
    c->inplace = c->kind != K_ALLTOALL && below(3) == 0;
}

/* ---- launching and checking ----------------------------------------------- */

static size_t send_elems(const call *c, int n)
{
    switch (c->kind) {
    case K_REDUCESCATTER: case K_ALLTOALL: case K_SCATTER: return c->count * (size_t)n;
    default: return c->count;
    }
}

static size_t recv_elems(const call *c, int n)
{
    switch (c->kind) {
    case K_ALLGATHER: case K_ALLTOALL: case K_GATHER: return c->count * (size_t)n;
    default: return c->count;
    }
}

/* Where the input goes and where the output is, in bytes from the slot's
 * buffers, for local device d (comm rank r of n). In place as NCCL defines
 * it; Gather and Scatter are in place on the root only. */
static void placement(const call *c, int r, unsigned char **send, unsigned char **recv, int d)
{
    size_t w = (size_t)type_width[c->type];
    unsigned char *a = bufa[d][c->slot], *b = bufb[d][c->slot];
    *send = a;
    *recv = b;
    if (!c->inplace)
        return;
    switch (c->kind) {
    case K_ALLGATHER: *send = b + (size_t)r * c->count * w; break;
    case K_REDUCESCATTER: *send = b; *recv = b + (size_t)r * c->count * w; break;
    case K_GATHER: if (r == c->root) *send = b + (size_t)r * c->count * w; break;
    case K_SCATTER: if (r == c->root) { *send = b; *recv = b + (size_t)r * c->count * w; } break;
    default: *send = b; break; /* AllReduce, Broadcast, Reduce */
    }
}

static orStream_t stream_of(const call *c, int d)
{
    return c->stream == NSTREAMS ? NULL : streams[d][c->stream];
}

static occlRedOp_t builtin(int op)
{
    static const occlRedOp_t ops[] = {occlSum, occlProd, occlMax, occlMin, occlAvg};
    return ops[op];
}

/* Fill the slot's buffers of every local device for c: the receive buffer
 * with a filler pattern (what is not written must keep it), then the input. */
static void prepare(call *c)
{
    size_t w = (size_t)type_width[c->type];
    for (int d = 0; d < nd; d++) {
        int n = comms[c->comm].n, r = comms[c->comm].rank[d];
        unsigned char *send, *recv;
        placement(c, r, &send, &recv, d);
        CHECK_OR(orSetDevice(d));
        size_t rb = (recv_elems(c, n) + GUARD) * w;
        size_t bb = (size_t)(recv - bufb[d][c->slot]) + rb;
        if (c->kind == K_REDUCESCATTER || c->kind == K_SCATTER)
            bb = bb > send_elems(c, n) * w ? bb : send_elems(c, n) * w;
        memset(host, 0xa5, bb);
        bool input_here = !(has_root(c->kind) && c->kind != K_REDUCE && c->kind != K_GATHER &&
                            r != c->root);
        size_t se = send_elems(c, n);
        if (input_here && send >= bufb[d][c->slot] && send < bufb[d][c->slot] + CAP * 8) {
            unsigned char *at = host + (send - bufb[d][c->slot]);
            for (size_t j = 0; j < se; j++)
                store(c->type, at + j * w, input(c, n, r, j));
        }
        CHECK_OR(orMemcpy(bufb[d][c->slot], host, bb, orMemcpyHostToDevice));
        if (input_here && send == bufa[d][c->slot] && se) {
            for (size_t j = 0; j < se; j++)
                store(c->type, host + j * w, input(c, n, r, j));
            CHECK_OR(orMemcpy(send, host, se * w, orMemcpyHostToDevice));
        }
        if (reduces(c->kind) && c->op == O_PMS) {
            unsigned char scalar[8];
            store(c->type, scalar,
                  is_float(c->type) ? float_bits(c->type, 2.0) : (uint64_t)c->scalar & mask_of(c->type));
            CHECK_OCCL(occlRedOpCreatePreMulSum(&c->ops[d], scalar, (occlDataType_t)c->type,
                                                occlScalarHostImmediate, comms[c->comm].comm[d]));
        } else if (reduces(c->kind)) {
            c->ops[d] = builtin(c->op);
        }
    }
}

static void launch(const call *c, int d)
{
    int r = comms[c->comm].rank[d];
    occlComm_t comm = comms[c->comm].comm[d];
    unsigned char *send, *recv;
    placement(c, r, &send, &recv, d);
    occlDataType_t t = (occlDataType_t)c->type;
    orStream_t s = stream_of(c, d);
    size_t n = c->count;
    switch (c->kind) {
    case K_ALLREDUCE: CHECK_OCCL(occlAllReduce(send, recv, n, t, c->ops[d], comm, s)); break;
    case K_BROADCAST: CHECK_OCCL(occlBroadcast(send, recv, n, t, c->root, comm, s)); break;
    case K_REDUCE: CHECK_OCCL(occlReduce(send, recv, n, t, c->ops[d], c->root, comm, s)); break;
    case K_ALLGATHER: CHECK_OCCL(occlAllGather(send, recv, n, t, comm, s)); break;
    case K_REDUCESCATTER: CHECK_OCCL(occlReduceScatter(send, recv, n, t, c->ops[d], comm, s)); break;
    case K_ALLTOALL: CHECK_OCCL(occlAlltoAll(send, recv, n, t, comm, s)); break;
    case K_GATHER: CHECK_OCCL(occlGather(send, recv, n, t, c->root, comm, s)); break;
    case K_SCATTER: CHECK_OCCL(occlScatter(send, recv, n, t, c->root, comm, s)); break;
    }
}

/* Expected bits of output element i on comm rank r of n. */
static uint64_t expected(const call *c, int n, int r, size_t i)
{
    size_t cnt = c->count;
    switch (c->kind) {
    case K_ALLREDUCE: case K_REDUCE: return reduced(c, n, i);
    case K_REDUCESCATTER: return reduced(c, n, (size_t)r * cnt + i);
    case K_BROADCAST: return input(c, n, c->root, i);
    case K_ALLGATHER: case K_GATHER: return input(c, n, (int)(i / cnt), i % cnt);
    case K_ALLTOALL: return input(c, n, (int)(i / cnt), (size_t)r * cnt + i % cnt);
    default: return input(c, n, c->root, (size_t)r * cnt + i); /* Scatter */
    }
}

static void check(const call *c, long seq)
{
    size_t w = (size_t)type_width[c->type];
    for (int d = 0; d < nd; d++) {
        int n = comms[c->comm].n, r = comms[c->comm].rank[d];
        CHECK_OR(orSetDevice(d));
        orError_t err = orStreamSynchronize(stream_of(c, d));
        if (err != orSuccess) {
            char detail[256];
            snprintf(detail, sizeof detail,
                     "%s in operation %ld: %s type %d op %d count %zu comm %d root %d%s stream %d",
                     orGetErrorName(err), seq, kind_names[c->kind], c->type, c->op, c->count, c->comm,
                     c->root, c->inplace ? " in place" : "", c->stream);
            mpitest_fail(__FILE__, __LINE__, "orStreamSynchronize -> ", detail);
        }
        if (reduces(c->kind) && c->op == O_PMS)
            CHECK_OCCL(occlRedOpDestroy(c->ops[d], comms[c->comm].comm[d]));
        if ((c->kind == K_REDUCE || c->kind == K_GATHER) && r != c->root)
            continue; /* the receive buffer is not significant */
        unsigned char *send, *recv;
        placement(c, r, &send, &recv, d);
        size_t re = recv_elems(c, n);
        size_t guard = (size_t)(recv - bufb[d][c->slot]) / w + re + GUARD <= CAP ? GUARD : 0;
        /* In-place ReduceScatter and Scatter leave the rest of the buffer
         * holding the input; only the output and what follows the whole
         * buffer are checked. */
        if (c->inplace && (c->kind == K_REDUCESCATTER || c->kind == K_SCATTER))
            guard = 0;
        CHECK_OR(orMemcpy(host, recv, (re + guard) * w, orMemcpyDeviceToHost));
        for (size_t i = 0; i < re; i++) {
            uint64_t e = expected(c, n, r, i);
            for (size_t b = 0; b < w; b++)
                want[i * w + b] = (unsigned char)(e >> (8 * b));
        }
        memset(want + re * w, 0xa5, guard * w);
        if (memcmp(host, want, (re + guard) * w) != 0) {
            size_t i = 0;
            while (memcmp(host + i * w, want + i * w, w) == 0)
                i++;
            char detail[256];
            snprintf(detail, sizeof detail,
                     "operation %ld: %s type %d op %d count %zu comm %d (rank %d of %d) root %d%s "
                     "stream %d: element %zu is %#llx, expected %#llx%s",
                     seq, kind_names[c->kind], c->type, c->op, c->count, c->comm, r, n, c->root,
                     c->inplace ? " in place" : "", c->stream, i,
                     (unsigned long long)load(c->type, host + i * w),
                     (unsigned long long)load(c->type, want + i * w), i >= re ? " (a guard)" : "");
            mpitest_fail(__FILE__, __LINE__, "wrong result: ", detail);
        }
    }
}

/* ---- peer copies ----------------------------------------------------------- */

static uint8_t peer_byte(uint64_t salt, int g, size_t i)
{
    return (uint8_t)(hash3(salt, g, i / 8) >> (8 * (i % 8)));
}

/* Every device g writes bytes into device g+k's buffer (or reads device
 * g-k's into its own), through an IPC mapping opened for this copy only,
 * or with orMemcpyPeerAsync when the peer is a device of this process. */
static void peer_round(long seq, int k, bool write, size_t bytes, size_t off, int stream)
{
    uint64_t salt = mix((uint64_t)seq ^ rng_state);
    for (int d = 0; d < nd; d++) {
        int g = ci.firstGlobalDevice + d;
        for (size_t i = 0; i < bytes; i++)
            host[i] = peer_byte(salt, g, i);
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orMemcpy(peer_src[d] + off, host, bytes, orMemcpyHostToDevice));
    }
    mpitest_barrier(); /* every source is filled */
    for (int d = 0; d < nd; d++) {
        int g = ci.firstGlobalDevice + d, other = write ? (g + k) % G : (g + G - k) % G;
        orStream_t s = stream == NSTREAMS ? NULL : streams[d][stream];
        CHECK_OR(orSetDevice(d));
        int local = other - ci.firstGlobalDevice;
        if (local >= 0 && local < nd) {
            if (write)
                CHECK_OR(orMemcpyPeerAsync(peer_dst[local] + off, local, peer_src[d] + off, d, bytes, s));
            else
                CHECK_OR(orMemcpyPeerAsync(peer_dst[d] + off, d, peer_src[local] + off, local, bytes, s));
            CHECK_OR(orStreamSynchronize(s));
            continue;
        }
        void *p;
        CHECK_OR(orIpcOpenMemHandle(&p, peer_handles[2 * other + (write ? 1 : 0)], 0));
        if (write)
            CHECK_OR(orMemcpyAsync((unsigned char *)p + off, peer_src[d] + off, bytes,
                                   orMemcpyDeviceToDevice, s));
        else
            CHECK_OR(orMemcpyAsync(peer_dst[d] + off, (unsigned char *)p + off, bytes,
                                   orMemcpyDeviceToDevice, s));
        CHECK_OR(orStreamSynchronize(s));
        CHECK_OR(orIpcCloseMemHandle(p));
    }
    mpitest_barrier(); /* every copy is done */
    for (int d = 0; d < nd; d++) {
        int g = ci.firstGlobalDevice + d, from = (g + G - k) % G;
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orMemcpy(host, peer_dst[d] + off, bytes, orMemcpyDeviceToHost));
        for (size_t i = 0; i < bytes; i++)
            if (host[i] != peer_byte(salt, from, i)) {
                char detail[200];
                snprintf(detail, sizeof detail,
                         "operation %ld: %s of %zu bytes at %zu from device %d to %d: byte %zu differs",
                         seq, write ? "write" : "read", bytes, off, from, g, i);
                mpitest_fail(__FILE__, __LINE__, "wrong peer copy: ", detail);
            }
    }
    mpitest_barrier(); /* nobody refills a source or a destination still being read */
}

/* ---- priming ------------------------------------------------------------------ */

/* Before the random run, every path at its largest: each collective on each
 * communicator at the largest count, a group on all slots, and peer copies
 * of whole buffers to every distance both ways. What the run may come to
 * hold for good (pages of the node's device memory that this process maps,
 * staging, MPI's and UCX's buffers) is then held before the warm-up, and
 * the random run only shows what it would leak. Checked like the rest. */
static void prime(void)
{
    long seq = -1;
    for (int k = 0; k < NCOMMS; k++)
        for (int kind = 0; kind < K_PEER; kind++)
            for (int v = 0; v < 2; v++) { /* out of place and Sum; in place and PreMulSum */
            call cs[SLOTS];
            int n = comms[k].n;
            bool blocks = kind == K_ALLGATHER || kind == K_REDUCESCATTER || kind == K_ALLTOALL ||
                          kind == K_GATHER || kind == K_SCATTER;
            for (int b = 0; b < SLOTS; b++) {
                call *c = &cs[b];
                memset(c, 0, sizeof *c);
                c->kind = kind;
                c->comm = k;
                c->type = occlFloat64;
                c->op = reduces(kind) && v ? O_PMS : O_SUM;
                c->scalar = 2;
                c->inplace = v && kind != K_ALLTOALL;
                c->slot = b;
                c->stream = (k + kind) % (NSTREAMS + 1);
                c->root = (kind + b) % n;
                c->salt = mix((uint64_t)seq--);
                c->count = blocks ? CAP / (size_t)n - GUARD : CAP - GUARD;
                prepare(c);
            }
            CHECK_OCCL(occlGroupStart());
            for (int b = 0; b < SLOTS; b++)
                for (int d = 0; d < nd; d++) {
                    CHECK_OR(orSetDevice(d));
                    launch(&cs[b], d);
                }
            CHECK_OCCL(occlGroupEnd());
            for (int b = 0; b < SLOTS; b++)
                check(&cs[b], seq);
        }
    for (int k = 1; k < G; k++)
        for (int w = 0; w < 2; w++)
            peer_round(seq--, k, w, PEER_CAP / 2, (size_t)(k % 2) * (PEER_CAP / 2), k % (NSTREAMS + 1));
    for (int k = 1; k < G; k++)
        for (int w = 0; w < 2; w++)
            peer_round(seq--, k, w, PEER_CAP / 2, (size_t)(1 - k % 2) * (PEER_CAP / 2), k % (NSTREAMS + 1));
}

/* ---- resources ------------------------------------------------------------- */

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, res = 0;
    CHECK(f && fscanf(f, "%ld %ld", &size, &res) == 2);
    fclose(f);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A field of /proc/self/status, in KiB (RssAnon, RssShmem, ...). */
static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL);
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            v = atol(line + n + 1);
    fclose(f);
    return v;
}

static long open_fds(void)
{
    DIR *dir = opendir("/proc/self/fd");
    CHECK(dir != NULL);
    long n = 0;
    for (struct dirent *e; (e = readdir(dir));)
        n += e->d_name[0] != '.';
    closedir(dir);
    return n - 1; /* the directory's own */
}

/* What is sampled: the first three must stay flat, the last two are shown.
 * Pages of shared memory (the node's device arenas, MPI's SysV segments)
 * count in a process's RSS when it first touches them, which goes on long
 * after the warm-up as random offsets of other devices' buffers are read;
 * what is allocated there is the device memory figure, checked exactly. */
#define NFIG 5
#define NFLAT 3
static const char *const fig_names[NFIG] = {
    "private RSS KiB", "fds", "device memory KiB", "RSS KiB", "shared memory RSS KiB"};

static void figures(long *f)
{
    f[0] = status_kib("RssAnon") + status_kib("RssFile");
    f[1] = open_fds();
    size_t used = 0;
    for (int d = 0; d < nd; d++) {
        size_t dfree = 0, dtotal = 0;
        CHECK_OR(orSetDevice(d));
        CHECK_OR(orMemGetInfo(&dfree, &dtotal));
        used += dtotal - dfree;
    }
    f[2] = (long)(used / 1024);
    f[3] = rss_kib();
    f[4] = status_kib("RssShmem");
}

/* AddressSanitizer holds freed blocks in its quarantine (up to 256 MiB) and
 * its shadow grows with them: a sanitizer build's private RSS grows with
 * the operations whatever the program does, so only descriptors and device
 * memory are held flat there (and LeakSanitizer checks the heap at exit). */
#if defined(__SANITIZE_ADDRESS__)
#define FIRST_FLAT 1
#else
#define FIRST_FLAT 0
#endif

static void flat_or_fail(const long *base, const long *now, long tolerance, long done)
{
    for (int f = FIRST_FLAT; f < NFLAT; f++)
        if (labs(now[f] - base[f]) * 100 > tolerance * base[f]) {
            char detail[200];
            snprintf(detail, sizeof detail, "%s %ld after %ld operations, %ld after the warm-up",
                     fig_names[f], now[f], done, base[f]);
            mpitest_fail(__FILE__, __LINE__, "resources grow: ", detail);
        }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long arg_long(const char *s, const char *name, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "occl_soak: %s '%s': expected a number from %ld to %ld\n", name, s, lo, hi);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    long ops = 1000, seed = 1, warmup = 10, sample = 0, tolerance = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = strchr(a, '=');
        v = v ? v + 1 : "";
        if (strncmp(a, "--ops=", 6) == 0)
            ops = arg_long(v, "--ops", 1, 100000000);
        else if (strncmp(a, "--seed=", 7) == 0)
            seed = arg_long(v, "--seed", 0, 0x7fffffff);
        else if (strncmp(a, "--warmup=", 9) == 0)
            warmup = arg_long(v, "--warmup", 0, 90);
        else if (strncmp(a, "--sample=", 9) == 0)
            sample = arg_long(v, "--sample", 1, 100000000);
        else if (strncmp(a, "--tolerance=", 12) == 0)
            tolerance = arg_long(v, "--tolerance", 0, 100);
        else if (strcmp(a, "--verbose") == 0)
            verbose = progress = true;
        else if (strcmp(a, "--progress") == 0)
            progress = true;
        else {
            fprintf(stderr, "usage: occl_soak [--ops=N] [--seed=S] [--warmup=PCT] [--sample=N] "
                            "[--tolerance=PCT] [--progress] [--verbose]\n");
            return 2;
        }
    }
    if (!sample)
        sample = ops / 50 > 0 ? ops / 50 : 1;

    CHECK_OR(orGetClusterInfo(&ci));
    nd = ci.deviceCount;
    G = ci.globalDeviceCount;
    CHECK(nd >= 1 && nd <= MAX_DEVS);
    /* Every process has the same number of devices: comm sizes are then
     * the same for every color, which draw() relies on. */
    CHECK(G == nd * ci.nranks && G % 4 == 0);

    /* The job's communicator on every device. */
    occlUniqueId id;
    if (ci.rank == 0)
        CHECK_OCCL(occlGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < nd; d++) {
        CHECK_OR(orSetDevice(d));
        CHECK_OCCL(occlCommInitRank(&comms[0].comm[d], G, id, ci.firstGlobalDevice + d));
    }
    CHECK_OCCL(occlGroupEnd());
    /* The other communicators: each id made by the process of the
     * communicator's rank 0 (the id names its bootstrap root, which must be
     * a member), every device's communicators made in one group. */
    occlUniqueId ids[NCOMMS][4], mine_ids[NCOMMS][4];
    memset(mine_ids, 0, sizeof mine_ids);
    for (int k = 1; k < NCOMMS; k++)
        for (int d = 0; d < nd; d++) {
            int g = ci.firstGlobalDevice + d;
            if (member(k, g, 0) == g)
                CHECK_OCCL(occlGetUniqueId(&mine_ids[k][color_of(k, g)]));
        }
    MPI_Allreduce(mine_ids, ids, (int)sizeof ids, MPI_UNSIGNED_CHAR, MPI_BOR, MPI_COMM_WORLD);
    CHECK_OCCL(occlGroupStart());
    for (int k = 1; k < NCOMMS; k++)
        for (int d = 0; d < nd; d++) {
            int g = ci.firstGlobalDevice + d, r = 0;
            while (member(k, g, r) != g)
                r++;
            CHECK_OR(orSetDevice(d));
            CHECK_OCCL(occlCommInitRank(&comms[k].comm[d], comm_size(k, g), ids[k][color_of(k, g)], r));
        }
    CHECK_OCCL(occlGroupEnd());
    for (int k = 0; k < NCOMMS; k++)
        for (int d = 0; d < nd; d++) {
            int g = ci.firstGlobalDevice + d, n, r;
            CHECK_OCCL(occlCommCount(comms[k].comm[d], &n));
            CHECK_OCCL(occlCommUserRank(comms[k].comm[d], &r));
            CHECK(n == comm_size(k, g) && member(k, g, r) == g);
            comms[k].n = n;
            comms[k].rank[d] = r;
        }

    host = malloc(CAP * 8 + PEER_CAP);
    want = malloc(CAP * 8);
    orIpcMemHandle_t *mine = calloc((size_t)nd * 2, sizeof *mine);
    peer_handles = calloc((size_t)G * 2, sizeof *peer_handles);
    CHECK(host && want && mine && peer_handles);
    memset(host, 0, CAP * 8 + PEER_CAP); /* resident from the start, not as sizes grow */
    memset(want, 0, CAP * 8);
    for (int d = 0; d < nd; d++) {
        CHECK_OR(orSetDevice(d));
        for (int s = 0; s < NSTREAMS; s++)
            CHECK_OR(orStreamCreate(&streams[d][s]));
        for (int s = 0; s < SLOTS; s++) {
            CHECK_OR(orMalloc((void **)&bufa[d][s], CAP * 8));
            CHECK_OR(orMalloc((void **)&bufb[d][s], CAP * 8));
            CHECK_OR(orMemset(bufa[d][s], 0, CAP * 8));
            CHECK_OR(orMemset(bufb[d][s], 0, CAP * 8));
        }
        CHECK_OR(orMalloc((void **)&peer_src[d], PEER_CAP));
        CHECK_OR(orMalloc((void **)&peer_dst[d], PEER_CAP));
        CHECK_OR(orMemset(peer_src[d], 0, PEER_CAP));
        CHECK_OR(orMemset(peer_dst[d], 0, PEER_CAP));
        CHECK_OR(orIpcGetMemHandle(&mine[2 * d], peer_src[d]));
        CHECK_OR(orIpcGetMemHandle(&mine[2 * d + 1], peer_dst[d]));
    }
    MPI_Allgather(mine, nd * 2 * (int)sizeof *mine, MPI_BYTE, peer_handles,
                  nd * 2 * (int)sizeof *mine, MPI_BYTE, MPI_COMM_WORLD);
    if (ci.rank == 0)
        printf("occl_soak: %ld operations, seed %ld, %d ranks = %d processes x %d devices, %d nodes\n",
               ops, seed, G, ci.nranks, nd, ci.nnodes);
    fflush(stdout);

    rng_state = mix((uint64_t)seed);
    double t_prime = now_s();
    prime();
    t_prime = now_s() - t_prime;
    long done = 0, counts[K_NKINDS] = {0}, groups = 0;
    long warm = ops * warmup / 100, samples = 0, next_sample = warm;
    long base[NFIG], lo[NFIG], hi[NFIG], now[NFIG];
    double t0 = now_s(), t_warm = t0;
    while (done < ops) {
        if (done >= next_sample) {
            figures(now);
            if (samples == 0) {
                memcpy(base, now, sizeof base);
                memcpy(lo, now, sizeof lo);
                memcpy(hi, now, sizeof hi);
                t_warm = now_s();
            }
            samples++;
            for (int f = 0; f < NFIG; f++) {
                lo[f] = now[f] < lo[f] ? now[f] : lo[f];
                hi[f] = now[f] > hi[f] ? now[f] : hi[f];
            }
            if (progress) {
                printf("occl_soak: rank %d after %ld operations (%.1f s): private RSS %ld KiB, %ld fds, "
                       "device memory %ld KiB, RSS %ld KiB of which shared memory %ld KiB\n",
                       ci.rank, done, now_s() - t0, now[0], now[1], now[2], now[3], now[4]);
                fflush(stdout);
            }
            flat_or_fail(base, now, tolerance, done);
            next_sample += sample;
        }
        if (below(9) == 0) { /* as likely as each collective */
            int k = 1 + (int)below((uint64_t)(G - 1));
            bool write = below(2);
            size_t bytes = draw_count(PEER_CAP / 2), off = below(PEER_CAP / 2);
            peer_round(done, k, write, bytes, off, (int)below(NSTREAMS + 1));
            counts[K_PEER]++;
            done++;
            continue;
        }
        /* One to SLOTS collectives, in one group when more than one. */
        int batch = below(4) == 0 ? 2 + (int)below(SLOTS - 1) : 1;
        if (batch > ops - done)
            batch = (int)(ops - done);
        call cs[SLOTS];
        for (int b = 0; b < batch; b++) {
            draw(&cs[b], done + b, b);
            for (int e = 0; e < b; e++) /* a communicator's calls in a group share a stream */
                if (cs[e].comm == cs[b].comm)
                    cs[b].stream = cs[e].stream;
            prepare(&cs[b]);
            if (verbose)
                printf("occl_soak: rank %d: %ld: %s type %d op %d count %zu comm %d root %d%s stream %d, %d of a group of %d\n",
                       ci.rank, done + b, kind_names[cs[b].kind], cs[b].type, cs[b].op, cs[b].count, cs[b].comm,
                       cs[b].root, cs[b].inplace ? " in place" : "", cs[b].stream, b + 1, batch);
        }
        CHECK_OCCL(occlGroupStart());
        for (int b = 0; b < batch; b++)
            for (int d = 0; d < nd; d++) {
                CHECK_OR(orSetDevice(d));
                launch(&cs[b], d);
            }
        CHECK_OCCL(occlGroupEnd());
        for (int b = 0; b < batch; b++) {
            check(&cs[b], done + b);
            counts[cs[b].kind]++;
        }
        groups += batch > 1;
        done += batch;
    }
    double t1 = now_s();

    /* The last sample, then the figures of every process. */
    figures(now);
    flat_or_fail(base, now, tolerance, done);
    long mine_fig[4 * NFIG];
    for (int f = 0; f < NFIG; f++) {
        mine_fig[4 * f] = base[f];
        mine_fig[4 * f + 1] = lo[f] < now[f] ? lo[f] : now[f];
        mine_fig[4 * f + 2] = hi[f] > now[f] ? hi[f] : now[f];
        mine_fig[4 * f + 3] = now[f];
    }
    long *all = ci.rank == 0 ? malloc(sizeof mine_fig * (size_t)ci.nranks) : NULL;
    MPI_Gather(mine_fig, 4 * NFIG, MPI_LONG, all, 4 * NFIG, MPI_LONG, 0, MPI_COMM_WORLD);
    if (ci.rank == 0) {
        printf("occl_soak:");
        for (int k = 0; k < K_NKINDS; k++)
            printf(" %s %ld%s", kind_names[k], counts[k], k + 1 < K_NKINDS ? "," : "\n");
        printf("occl_soak: %ld groups of several calls; %.1f s (%.2f ms per operation) after %.1f s "
               "of priming; %ld samples from operation %ld on (%.1f s)\n",
               groups, t1 - t0, (t1 - t0) * 1e3 / (double)ops, t_prime, samples, warm, t1 - t_warm);
        for (int p = 0; p < ci.nranks; p++) {
            printf("occl_soak: process %d (after the warm-up, least..most, at the end):", p);
            for (int f = 0; f < NFIG; f++) {
                long *v = all + 4 * NFIG * p + 4 * f;
                long dev = labs(v[2] - v[0]) > labs(v[1] - v[0]) ? v[2] - v[0] : v[1] - v[0];
                printf(" %s %ld, %ld..%ld, %ld (%+.1f%%)%s", fig_names[f], v[0], v[1], v[2], v[3],
                       v[0] ? 100.0 * (double)dev / (double)v[0] : 0.0, f + 1 < NFIG ? ";" : "\n");
            }
        }
        printf("occl_soak: %ld operations checked, 0 mismatches, resources flat within %ld%%%s\n", ops,
               tolerance, FIRST_FLAT ? " (private RSS not held: an AddressSanitizer build)" : "");
        fflush(stdout);
    }
    free(all);

    for (int d = 0; d < nd; d++) {
        CHECK_OR(orSetDevice(d));
        for (int s = 0; s < NSTREAMS; s++)
            CHECK_OR(orStreamDestroy(streams[d][s]));
        for (int s = 0; s < SLOTS; s++) {
            CHECK_OR(orFree(bufa[d][s]));
            CHECK_OR(orFree(bufb[d][s]));
        }
        CHECK_OR(orFree(peer_src[d]));
        CHECK_OR(orFree(peer_dst[d]));
    }
    for (int k = NCOMMS - 1; k >= 0; k--)
        for (int d = 0; d < nd; d++)
            CHECK_OCCL(occlCommDestroy(comms[k].comm[d]));
    free(host);
    free(want);
    free(mine);
    free(peer_handles);
    return 0;
}
