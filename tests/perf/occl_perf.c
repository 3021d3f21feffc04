/*
 * occl_perf.c - occl-perf: time and bandwidth of OCCL's collectives, in the
 * shape of NCCL's nccl-tests (all_reduce_perf and its siblings).
 *
 *   orrun -n PROCS -d DEVICES -- occl_perf --coll allreduce -b 8 -e 64M -f 2 [--mpi]
 *
 * Every process hosts -g devices (its devices 0..g-1), each one rank of a
 * single communicator, so the communicator has processes x g ranks. One
 * header block names the ranks, their devices and cores; then one row per
 * size, out-of-place then in-place (--place: only one of them, and only the
 * buffers it needs), with nccl-tests' columns:
 *   size    bytes of the larger buffer of one rank (send or receive);
 *   count   the count argument of the call (per-rank block for the
 *           gathering and scattering collectives);
 *   time    microseconds per call: warm-up calls, then -n calls launched
 *           back to back on each device's stream and one
 *           orStreamSynchronize, the elapsed time divided by -n; the
 *           slowest rank's figure (MPI_Allreduce MAX);
 *   algbw   size / time, GB/s (1e9 B/s);
 *   busbw   algbw times nccl-tests' factor: allreduce 2(n-1)/n; allgather,
 *           reducescatter, alltoall, gather, scatter (n-1)/n; broadcast,
 *           reduce, sendrecv 1;
 *   #wrong  with -c 1, elements of the last call's result that differ from
 *           a reference computed on the host, summed over ranks.
 * With --mpi (one device per process) two more columns: busbw of MPICH's
 * matching call on host buffers of the same size, timed the same way in the
 * same run, and OCCL's busbw divided by it (out of place, or in place when
 * only that is run).
 *
 * In place, calls feed on each other's results (an in-place sum adds up the
 * previous sum), so the check re-initializes the buffers and verifies one
 * more call, run after the timed ones.
 */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "occl.h"
#include "openreg.h"
#include "perf_util.h"

/* ---- failures ----------------------------------------------------------- */

static int my_proc; /* MPI rank of this process, 0 without MPI */
static bool have_mpi;
/* OPENREG_TIME=virtual: calls are timed in the runtime's virtual clock
 * (events on each device's stream), not by the host's. */
static bool virtual_time;

/* A failure on one process must end the whole job: the others would wait
 * for it in the next collective forever. */
static void abort_job(void)
{
    fflush(stderr);
    if (have_mpi)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

static void die(const char *file, int line, const char *what, const char *detail)
{
    fflush(stdout);
    fprintf(stderr, "occl-perf: process %d: %s:%d: %s%s\n", my_proc, file, line, what, detail);
    abort_job();
}

#define OR_CHECK(call)                                                                   \
    do {                                                                                 \
        orError_t or_err_ = (call);                                                      \
        if (or_err_ != orSuccess)                                                        \
            die(__FILE__, __LINE__, #call " -> ", orGetErrorName(or_err_));              \
    } while (0)

#define OCCL_CHECK(call)                                                                 \
    do {                                                                                 \
        occlResult_t occl_err_ = (call);                                                 \
        if (occl_err_ != occlSuccess)                                                    \
            die(__FILE__, __LINE__, #call " -> ", occlGetLastError(NULL));               \
    } while (0)

#define MPI_CHECK(call)                                                                  \
    do {                                                                                 \
        if ((call) != MPI_SUCCESS)                                                       \
            die(__FILE__, __LINE__, #call, " failed");                                   \
    } while (0)

/* ---- collectives, types and ops ------------------------------------------ */

typedef enum {
    C_ALLREDUCE,
    C_BROADCAST,
    C_REDUCE,
    C_ALLGATHER,
    C_REDUCESCATTER,
    C_ALLTOALL,
    C_GATHER,
    C_SCATTER,
    C_SENDRECV,
    C_COUNT
} coll_t;

static const struct coll_info {
    const char *name;     /* --coll spelling */
    const char *mpi_name; /* what --mpi times next to it */
    bool reduces, rooted;
} colls[C_COUNT] = {
    [C_ALLREDUCE] = {"allreduce", "MPI_Allreduce", true, false},
    [C_BROADCAST] = {"broadcast", "MPI_Bcast", false, true},
    [C_REDUCE] = {"reduce", "MPI_Reduce", true, true},
    [C_ALLGATHER] = {"allgather", "MPI_Allgather", false, false},
    [C_REDUCESCATTER] = {"reducescatter", "MPI_Reduce_scatter_block", true, false},
    [C_ALLTOALL] = {"alltoall", "MPI_Alltoall", false, false},
    [C_GATHER] = {"gather", "MPI_Gather", false, true},
    [C_SCATTER] = {"scatter", "MPI_Scatter", false, true},
    [C_SENDRECV] = {"sendrecv", "MPI_Sendrecv (ring)", false, false},
};

/* How elements are stored, for the host reference. */
typedef enum { K_SINT, K_UINT, K_HALF, K_BF16, K_FLOAT, K_DOUBLE } kind_t;

static const struct type_info {
    const char *name; /* nccl-tests' spelling */
    occlDataType_t type;
    size_t size;
    kind_t kind;
    double eps; /* one unit in the last place, relative: the check's tolerance */
} types[] = {
    {"int8", occlInt8, 1, K_SINT, 0},       {"uint8", occlUint8, 1, K_UINT, 0},
    {"int32", occlInt32, 4, K_SINT, 0},     {"uint32", occlUint32, 4, K_UINT, 0},
    {"int64", occlInt64, 8, K_SINT, 0},     {"uint64", occlUint64, 8, K_UINT, 0},
    {"half", occlFloat16, 2, K_HALF, 0x1p-10}, {"float", occlFloat32, 4, K_FLOAT, 0x1p-23},
    {"double", occlFloat64, 8, K_DOUBLE, 0x1p-52}, {"bfloat16", occlBfloat16, 2, K_BF16, 0x1p-7},
};
#define NTYPES ((int)(sizeof types / sizeof *types))

/* Other spellings nccl-tests and NCCL use. */
static const struct {
    const char *alias;
    int index;
} type_aliases[] = {{"char", 0},    {"int", 2},     {"float16", 6}, {"fp16", 6},
                    {"float32", 7}, {"fp32", 7},    {"float64", 8}, {"fp64", 8},
                    {"bf16", 9}};

static const struct op_info {
    const char *name;
    occlRedOp_t op;
} ops[] = {{"sum", occlSum}, {"prod", occlProd}, {"max", occlMax}, {"min", occlMin},
           {"avg", occlAvg}};
#define NOPS ((int)(sizeof ops / sizeof *ops))

static MPI_Datatype mpi_type(const struct type_info *t, bool *stand_in)
{
    *stand_in = false;
    switch (t->type) {
    case occlInt8: return MPI_INT8_T;
    case occlUint8: return MPI_UINT8_T;
    case occlInt32: return MPI_INT32_T;
    case occlUint32: return MPI_UINT32_T;
    case occlInt64: return MPI_INT64_T;
    case occlUint64: return MPI_UINT64_T;
    case occlFloat32: return MPI_FLOAT;
    case occlFloat64: return MPI_DOUBLE;
    default:
        /* MPI has no 16-bit float: the same bytes as 16-bit integers. */
        *stand_in = true;
        return MPI_UINT16_T;
    }
}

static MPI_Op mpi_op(occlRedOp_t op, bool *stand_in)
{
    *stand_in = false;
    switch (op) {
    case occlProd: return MPI_PROD;
    case occlMax: return MPI_MAX;
    case occlMin: return MPI_MIN;
    case occlAvg: *stand_in = true; return MPI_SUM; /* MPI has no average: its sum */
    default: return MPI_SUM;
    }
}

/* ---- element encoding ------------------------------------------------------ */

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest even, as OCCL's kernels store their results. */
static uint16_t float_to_half(float f)
{
    uint32_t u = f2u(f), sign = (u >> 16) & 0x8000;
    u &= 0x7fffffff;
    if (u > 0x7f800000)
        return (uint16_t)(sign | 0x7e00);
    if (u >= 0x477ff000) /* 65520 and up round to infinity */
        return (uint16_t)(sign | 0x7c00);
    if (u < 0x38800000) /* below the smallest normal half: multiples of 2^-24 */
        return (uint16_t)(sign | (uint32_t)lrintf(u2f(u) * 0x1p24f));
    u += 0x0fff + ((u >> 13) & 1);
    return (uint16_t)(sign | ((u - 0x38000000) >> 13));
}

static float half_to_float(uint16_t h)
{
    unsigned e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float f = e == 0 ? ldexpf((float)m, -24)
              : e == 31 ? (m ? NAN : INFINITY)
                        : ldexpf((float)(m | 0x400), (int)e - 25);
    return h & 0x8000 ? -f : f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static float bf16_to_float(uint16_t b) { return u2f((uint32_t)b << 16); }

/* Element i of buf: integers take v modulo 2^bits, floating types take x. */
static void put(const struct type_info *t, void *buf, size_t i, uint64_t v, double x)
{
    unsigned char *p = (unsigned char *)buf + i * t->size;
    switch (t->kind) {
    case K_SINT:
    case K_UINT: memcpy(p, &v, t->size); break; /* little-endian: the low bytes */
    case K_HALF: { uint16_t h = float_to_half((float)x); memcpy(p, &h, 2); } break;
    case K_BF16: { uint16_t h = float_to_bf16((float)x); memcpy(p, &h, 2); } break;
    case K_FLOAT: { float f = (float)x; memcpy(p, &f, 4); } break;
    case K_DOUBLE: memcpy(p, &x, 8); break;
    }
}

static double get_real(const struct type_info *t, const void *buf, size_t i)
{
    const unsigned char *p = (const unsigned char *)buf + i * t->size;
    uint16_t h;
    float f;
    double d;
    switch (t->kind) {
    case K_HALF: memcpy(&h, p, 2); return half_to_float(h);
    case K_BF16: memcpy(&h, p, 2); return bf16_to_float(h);
    case K_FLOAT: memcpy(&f, p, 4); return f;
    case K_DOUBLE: memcpy(&d, p, 8); return d;
    default: return 0;
    }
}

/* ---- data and its reference ------------------------------------------------ */

/* Input element k of rank r: small non-negative integers, so every type
 * holds them and sums of a few hundred ranks exactly; for prod only 1s and
 * a few 2s, so products stay powers of two (exact, and integers wrap the
 * same way in any order). rep changes the data from one check to the next. */
static uint64_t input(bool prod, int r, size_t k, unsigned rep)
{
    if (prod)
        return (k + (size_t)r * 3 + rep) % 9 == 0 ? 2 : 1;
    return (k * 13 + (size_t)r * 29 + (size_t)rep * 7) % 11;
}

/* The expected element: the reduction over ranks 0..n-1 of input(j, k)
 * (nred == n), or input(src, k) (nred == 0). Written into want (one
 * element); returns its value as a real for floating types. */
typedef struct reference {
    const struct type_info *t;
    occlRedOp_t op;
    bool prod;
    int n;
    unsigned rep;
} reference;

static double expected(const reference *ref, bool reduce, int src, size_t k, void *want)
{
    const struct type_info *t = ref->t;
    uint64_t acc;
    double x;
    if (!reduce) {
        acc = input(ref->prod, src, k, ref->rep);
        x = (double)acc;
    } else {
        acc = input(ref->prod, 0, k, ref->rep);
        x = (double)acc;
        for (int j = 1; j < ref->n; j++) {
            uint64_t v = input(ref->prod, j, k, ref->rep);
            switch (ref->op) {
            case occlProd: acc *= v; x *= (double)v; break;
            case occlMax: acc = v > acc ? v : acc; break;
            case occlMin: acc = v < acc ? v : acc; break;
            default: acc += v; x += (double)v; break; /* sum, avg */
            }
            if (ref->op == occlMax || ref->op == occlMin)
                x = (double)acc;
        }
        if (ref->op == occlAvg) {
            if (t->kind == K_SINT || t->kind == K_UINT) {
                /* The sum wraps in the type, then divides truncating. */
                unsigned bits = (unsigned)t->size * 8;
                uint64_t mask = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
                uint64_t u = acc & mask;
                if (t->kind == K_SINT) {
                    int64_t s = bits < 64 && (u >> (bits - 1)) ? (int64_t)(u | ~mask) : (int64_t)u;
                    acc = (uint64_t)(s / ref->n);
                } else {
                    acc = u / (uint64_t)ref->n;
                }
            }
            x /= ref->n;
        }
    }
    put(t, want, 0, acc, x);
    return x;
}

/* ---- shapes ------------------------------------------------------------------ */

/* Element counts of one rank's call, as nccl-tests derives them from a size:
 * count = size / element size, split over n ranks where the call gathers or
 * scatters. In place, the send and receive buffers are both in the receive
 * buffer: at rank * send_ip and rank * recv_ip elements. */
typedef struct shape {
    size_t send, recv, param, send_ip, recv_ip;
} shape;

static shape shape_of(coll_t c, size_t count, int n)
{
    size_t per = count / (size_t)n;
    switch (c) {
    case C_ALLGATHER:
    case C_GATHER: return (shape){per, per * n, per, per, 0};
    case C_REDUCESCATTER:
    case C_SCATTER: return (shape){per * n, per, per, 0, per};
    case C_ALLTOALL: return (shape){per * n, per * n, per, 0, 0};
    default: return (shape){count, count, count, 0, 0};
    }
}

static double bus_factor(coll_t c, int n)
{
    switch (c) {
    case C_ALLREDUCE: return 2.0 * (n - 1) / n;
    case C_ALLGATHER:
    case C_REDUCESCATTER:
    case C_ALLTOALL:
    case C_GATHER:
    case C_SCATTER: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

/* ---- the benchmark ------------------------------------------------------------ */

/* --place: out of place needs a send and a receive buffer per rank, in
 * place the receive buffer alone, so a run of one of them fits sizes that
 * both would not. */
enum { PLACE_OUT = 1, PLACE_IN = 2, PLACE_BOTH = PLACE_OUT | PLACE_IN };
static const char *const place_names[] = {[PLACE_OUT] = "out", [PLACE_IN] = "in",
                                          [PLACE_BOTH] = "both"};

typedef struct bench {
    coll_t coll;
    int g, nranks, root; /* devices per process, communicator size */
    int warmup, iters;
    bool check;
    occlComm_t *comms;
    orStream_t *streams;
    void **send, **recv; /* per local device, buf_bytes each; no send buffers in place */
    size_t buf_bytes;
    unsigned char *host; /* staging for data in and out, buf_bytes */
    unsigned rep;        /* data generation of the last initialization */
} bench;

static int rank_of(const bench *b, int d) { return my_proc * b->g + d; }

static void pointers(const bench *b, int d, const struct type_info *t, const shape *s,
                     bool in_place, void **send, void **recv)
{
    size_t r = (size_t)rank_of(b, d);
    unsigned char *rb = b->recv[d];
    *send = in_place ? rb + r * s->send_ip * t->size : b->send[d];
    *recv = in_place ? rb + r * s->recv_ip * t->size : rb;
}

/* One call on every local device (a group when there are several). */
static void launch(const bench *b, const struct type_info *t, occlRedOp_t op, const shape *s,
                   bool in_place)
{
    if (b->g > 1)
        OCCL_CHECK(occlGroupStart());
    for (int d = 0; d < b->g; d++) {
        void *sb, *rb;
        pointers(b, d, t, s, in_place, &sb, &rb);
        occlComm_t comm = b->comms[d];
        orStream_t st = b->streams[d];
        occlDataType_t ty = t->type;
        switch (b->coll) {
        case C_ALLREDUCE: OCCL_CHECK(occlAllReduce(sb, rb, s->param, ty, op, comm, st)); break;
        case C_BROADCAST: OCCL_CHECK(occlBroadcast(sb, rb, s->param, ty, b->root, comm, st)); break;
        case C_REDUCE: OCCL_CHECK(occlReduce(sb, rb, s->param, ty, op, b->root, comm, st)); break;
        case C_ALLGATHER: OCCL_CHECK(occlAllGather(sb, rb, s->param, ty, comm, st)); break;
        case C_REDUCESCATTER:
            OCCL_CHECK(occlReduceScatter(sb, rb, s->param, ty, op, comm, st));
            break;
        case C_ALLTOALL: OCCL_CHECK(occlAlltoAll(sb, rb, s->param, ty, comm, st)); break;
        case C_GATHER: OCCL_CHECK(occlGather(sb, rb, s->param, ty, b->root, comm, st)); break;
        case C_SCATTER: OCCL_CHECK(occlScatter(sb, rb, s->param, ty, b->root, comm, st)); break;
        case C_SENDRECV: {
            int r = rank_of(b, d), n = b->nranks;
            OCCL_CHECK(occlGroupStart());
            OCCL_CHECK(occlSend(sb, s->param, ty, (r + 1) % n, comm, st));
            OCCL_CHECK(occlRecv(rb, s->param, ty, (r + n - 1) % n, comm, st));
            OCCL_CHECK(occlGroupEnd());
            break;
        }
        default: break;
        }
    }
    if (b->g > 1)
        OCCL_CHECK(occlGroupEnd());
}

static void sync_all(const bench *b)
{
    for (int d = 0; d < b->g; d++)
        OR_CHECK(orStreamSynchronize(b->streams[d]));
}

/* Fresh inputs on every local device, and zeroed outputs, so a call that
 * leaves its result unwritten is counted wrong. */
static void init_data(bench *b, const struct type_info *t, occlRedOp_t op, const shape *s,
                      bool in_place)
{
    bool prod = colls[b->coll].reduces && op == occlProd;
    b->rep++;
    for (int d = 0; d < b->g; d++) {
        int r = rank_of(b, d);
        size_t extent = (s->send > s->recv ? s->send : s->recv) * t->size;
        size_t at = in_place ? (size_t)r * s->send_ip : 0;
        if (in_place)
            memset(b->host, 0, extent);
        for (size_t k = 0; k < s->send; k++) {
            uint64_t v = input(prod, r, k, b->rep);
            put(t, b->host, at + k, v, (double)v);
        }
        OR_CHECK(orSetDevice(d));
        if (in_place) {
            OR_CHECK(orMemcpy(b->recv[d], b->host, extent, orMemcpyHostToDevice));
        } else {
            OR_CHECK(orMemcpy(b->send[d], b->host, s->send * t->size, orMemcpyHostToDevice));
            OR_CHECK(orMemset(b->recv[d], 0, s->recv * t->size));
        }
    }
}

/* Wrong elements of the results on the local devices. */
static long long verify(bench *b, const struct type_info *t, occlRedOp_t op, const shape *s,
                        bool in_place)
{
    reference ref = {t, op, colls[b->coll].reduces && op == occlProd, b->nranks, b->rep};
    long long wrong = 0;
    unsigned char want[8];
    for (int d = 0; d < b->g; d++) {
        int r = rank_of(b, d), n = b->nranks;
        bool root = r == b->root;
        if ((b->coll == C_REDUCE || b->coll == C_GATHER) && !root)
            continue; /* no result off the root */
        void *sb, *rb;
        pointers(b, d, t, s, in_place, &sb, &rb);
        OR_CHECK(orMemcpy(b->host, rb, s->recv * t->size, orMemcpyDeviceToHost));
        size_t per = s->param;
        for (size_t i = 0; i < s->recv; i++) {
            bool reduce = colls[b->coll].reduces;
            int src = 0;
            size_t k = i;
            switch (b->coll) {
            case C_REDUCESCATTER: k = (size_t)r * per + i; break;
            case C_BROADCAST: src = b->root; break;
            case C_ALLGATHER:
            case C_GATHER: src = (int)(i / per); k = i % per; break;
            case C_ALLTOALL: src = (int)(i / per); k = (size_t)r * per + i % per; break;
            case C_SCATTER: src = b->root; k = (size_t)r * per + i; break;
            case C_SENDRECV: src = (r + n - 1) % n; break;
            default: break;
            }
            double x = expected(&ref, reduce, src, k, want);
            if (t->kind == K_SINT || t->kind == K_UINT) {
                wrong += memcmp(want, b->host + i * t->size, t->size) != 0;
            } else {
                double got = get_real(t, b->host, i);
                wrong += !(fabs(got - x) <= t->eps * fabs(x));
            }
        }
    }
    return wrong;
}

typedef struct result {
    double time_s, algbw, busbw;
    long long wrong; /* -1: not checked */
    /* OCCL_PERF_RUSAGE=1: per call, summed over processes (every thread):
     * CPU time in us, voluntary and involuntary context switches. Counts
     * that hold on a loaded machine, where the times do not. */
    double cpu_us, vcsw, ivcsw;
} result;

static bool rusage_on;

static void rusage_now(double v[3])
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    v[0] = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    v[1] = (double)ru.ru_nvcsw;
    v[2] = (double)ru.ru_nivcsw;
}

static double max_over_procs(double v)
{
    if (have_mpi)
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return v;
}

static long long sum_over_procs(long long v)
{
    if (have_mpi)
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
    return v;
}

static void barrier(void)
{
    if (have_mpi)
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

static result bench_occl(bench *b, const struct type_info *t, occlRedOp_t op, const shape *s,
                         size_t bytes, bool in_place)
{
    for (int k = 0; k < b->warmup; k++)
        launch(b, t, op, s, in_place);
    sync_all(b);
    if (b->check)
        init_data(b, t, op, s, in_place);
    barrier();
    double ru0[3];
    if (rusage_on)
        rusage_now(ru0);
    double t0 = perf_now_s();
    static orEvent_t *ev0, *ev1;
    if (virtual_time && !ev0) { /* created once, kept for the run */
        ev0 = perf_xmalloc((size_t)b->g * sizeof *ev0);
        ev1 = perf_xmalloc((size_t)b->g * sizeof *ev1);
        for (int d = 0; d < b->g; d++) {
            OR_CHECK(orSetDevice(d));
            OR_CHECK(orEventCreateWithFlags(&ev0[d], orEventEnableTiming));
            OR_CHECK(orEventCreateWithFlags(&ev1[d], orEventEnableTiming));
        }
    }
    for (int d = 0; virtual_time && d < b->g; d++)
        OR_CHECK(orEventRecord(ev0[d], b->streams[d]));
    for (int k = 0; k < b->iters; k++)
        launch(b, t, op, s, in_place);
    for (int d = 0; virtual_time && d < b->g; d++)
        OR_CHECK(orEventRecord(ev1[d], b->streams[d]));
    sync_all(b);
    double elapsed = perf_now_s() - t0;
    double ru[3] = {0, 0, 0};
    if (rusage_on) {
        rusage_now(ru);
        for (int k = 0; k < 3; k++)
            ru[k] = (ru[k] - ru0[k]) / b->iters;
        if (have_mpi)
            MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, ru, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    }
    if (virtual_time) { /* the slowest device's stream, in virtual ns */
        elapsed = 0;
        for (int d = 0; d < b->g; d++) {
            long long ns;
            OR_CHECK(orEventElapsedTimeNs(&ns, ev0[d], ev1[d]));
            elapsed = ns * 1e-9 > elapsed ? ns * 1e-9 : elapsed;
        }
    }
    result res = {max_over_procs(elapsed / b->iters), 0, 0, -1, ru[0], ru[1], ru[2]};
    res.algbw = (double)bytes / res.time_s / 1e9;
    res.busbw = res.algbw * bus_factor(b->coll, b->nranks);
    /* In-place sendrecv overwrites what the next rank is reading: no result
     * to check (nccl-tests does not check it either). */
    if (b->check && !(in_place && b->coll == C_SENDRECV)) {
        if (in_place) {
            init_data(b, t, op, s, in_place);
            barrier();
            launch(b, t, op, s, in_place);
            sync_all(b);
        }
        res.wrong = sum_over_procs(verify(b, t, op, s, in_place));
    }
    return res;
}

/* MPICH's matching call on host buffers of the same size; -1 if the counts do
 * not fit MPI's int. */
static double bench_mpi(const bench *b, const struct type_info *t, occlRedOp_t op,
                        const shape *s, void *hs, void *hr)
{
    if (s->param > INT_MAX || s->send > INT_MAX || s->recv > INT_MAX)
        return -1;
    bool stand_in;
    MPI_Datatype ty = mpi_type(t, &stand_in);
    MPI_Op mop = mpi_op(op, &stand_in);
    int c = (int)s->param, n = b->nranks, r = my_proc, root = b->root;
    MPI_Comm w = MPI_COMM_WORLD;
    double t0 = 0;
    for (int k = -b->warmup; k < b->iters; k++) {
        if (k == 0) {
            MPI_CHECK(MPI_Barrier(w));
            t0 = perf_now_s();
        }
        switch (b->coll) {
        case C_ALLREDUCE: MPI_CHECK(MPI_Allreduce(hs, hr, c, ty, mop, w)); break;
        case C_BROADCAST: MPI_CHECK(MPI_Bcast(hr, c, ty, root, w)); break;
        case C_REDUCE: MPI_CHECK(MPI_Reduce(hs, hr, c, ty, mop, root, w)); break;
        case C_ALLGATHER: MPI_CHECK(MPI_Allgather(hs, c, ty, hr, c, ty, w)); break;
        case C_REDUCESCATTER: MPI_CHECK(MPI_Reduce_scatter_block(hs, hr, c, ty, mop, w)); break;
        case C_ALLTOALL: MPI_CHECK(MPI_Alltoall(hs, c, ty, hr, c, ty, w)); break;
        case C_GATHER: MPI_CHECK(MPI_Gather(hs, c, ty, hr, c, ty, root, w)); break;
        case C_SCATTER: MPI_CHECK(MPI_Scatter(hs, c, ty, hr, c, ty, root, w)); break;
        case C_SENDRECV:
            MPI_CHECK(MPI_Sendrecv(hs, c, ty, (r + 1) % n, 0, hr, c, ty, (r + n - 1) % n, 0, w,
                                   MPI_STATUS_IGNORE));
            break;
        default: break;
        }
    }
    return max_over_procs((perf_now_s() - t0) / b->iters);
}

/* ---- output ----------------------------------------------------------------- */

/* nccl-tests' time column: three significant figures or so. */
static void format_time(char *buf, size_t len, double us)
{
    snprintf(buf, len, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
}

static void print_result(const result *r)
{
    char tm[32], wrong[32];
    format_time(tm, sizeof tm, r->time_s * 1e6);
    if (r->wrong < 0)
        snprintf(wrong, sizeof wrong, "%6s", "N/A");
    else
        snprintf(wrong, sizeof wrong, "%6lld", r->wrong);
    printf("  %7s  %6.2f  %6.2f  %s", tm, r->algbw, r->busbw, wrong);
}

/* The columns of the placements run (PLACE_* bits), in the order run. */
static void print_table_header(bool with_mpi, bool with_ompi, unsigned place)
{
    /* Titles over the groups of four columns (33 characters each). */
    enum { GROUP = 33 };
    char titles[3 * GROUP + 1];
    int groups = 0;
    memset(titles, ' ', sizeof titles);
    if (place & PLACE_OUT)
        memcpy(titles + GROUP * groups++ + 11, "out-of-place", 12);
    if (place & PLACE_IN)
        memcpy(titles + GROUP * groups++ + 10, "in-place", 8);
    int end = GROUP * groups - 5;
    if (with_mpi) {
        memcpy(titles + end + 12, "MPICH", 5);
        end += 27;
    }
    if (with_ompi) {
        memcpy(titles + end + 10, "Open MPI", 8);
        end += 27;
    }
    titles[end] = '\0';
    printf("#\n# %10s  %12s  %8s  %6s  %6s%s\n", "", "", "", "", "", titles);
    printf("# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
    for (unsigned p = PLACE_OUT; p <= PLACE_IN; p <<= 1)
        if (place & p)
            printf("  %7s  %6s  %6s  %6s", virtual_time ? "vtime" : "time", "algbw", "busbw",
                   "#wrong");
    printf("%s%s\n", with_mpi ? "     time   busbw  occl/mpi" : "",
           with_ompi ? "     time   busbw occl/ompi" : "");
    printf("# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    for (unsigned p = PLACE_OUT; p <= PLACE_IN; p <<= 1)
        if (place & p)
            printf("  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
    printf("%s%s\n", with_mpi ? "     (us)  (GB/s)         x" : "",
           with_ompi ? "     (us)  (GB/s)         x" : "");
}

/* One line per rank: process, device, device name and cores. */
static void print_devices(const bench *b)
{
    enum { LINE = 384 };
    char host[64] = "?";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "?");
    host[sizeof host - 1] = '\0';
    orClusterInfo ci;
    OR_CHECK(orGetClusterInfo(&ci));
    char *mine = calloc((size_t)b->g, LINE);
    if (!mine)
        die(__FILE__, __LINE__, "out of host memory", "");
    for (int d = 0; d < b->g; d++) {
        orDeviceProp p;
        OR_CHECK(orGetDeviceProperties(&p, d));
        snprintf(mine + (size_t)d * LINE, LINE,
                 "#  Rank %3d Pid %7d on %10.32s node %2d device %2d (global %3d) [%.64s] cpus %.128s\n",
                 rank_of(b, d), (int)getpid(), host, ci.node, d, ci.firstGlobalDevice + d, p.name,
                 p.cpuList);
    }
    char *all = my_proc == 0 ? calloc((size_t)b->nranks, LINE) : NULL;
    if (my_proc == 0 && !all)
        die(__FILE__, __LINE__, "out of host memory", "");
    if (have_mpi)
        MPI_CHECK(MPI_Gather(mine, b->g * LINE, MPI_CHAR, all, b->g * LINE, MPI_CHAR, 0,
                             MPI_COMM_WORLD));
    else
        memcpy(all, mine, (size_t)b->g * LINE);
    if (my_proc == 0)
        for (int r = 0; r < b->nranks; r++)
            fputs(all + (size_t)r * LINE, stdout);
    free(mine);
    free(all);
}

/* ---- command line ------------------------------------------------------------- */

typedef struct options {
    int coll; /* -1 until --coll */
    size_t minbytes, maxbytes, stepbytes;
    long stepfactor;
    int iters, warmup, check, root, ngpus;
    int type, op; /* index, or -1 for all */
    bool mpi;
    bool ompi; /* --ompi: Open MPI's collective, in its own job, same run */
    unsigned place; /* PLACE_OUT | PLACE_IN: what is run and allocated */
} options;

/* ---- the Open MPI baseline ------------------------------------------------------ */

/* --ompi: process 0 runs Open MPI's own job of as many ranks on the same
 * cores (mpirun.openmpi --oversubscribe, mpi_coll_perf built with
 * mpicc.openmpi) before OCCL's rows, and keeps its time per size; the other
 * processes wait without spinning meanwhile, so the job is alone. */
static double *ompi_us; /* per row, in the order of the sizes; < 0: none */
static int ompi_rows;

static void sleeping_barrier(void)
{
    MPI_Request req;
    MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
    for (int done = 0;;) {
        MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done)
            break;
        usleep(1000);
    }
}

/* The companion: OCCL_PERF_OMPI, else next to this program (or its
 * libtool wrapper's directory). */
static bool companion_path(char *out, size_t len)
{
    const char *env = getenv("OCCL_PERF_OMPI");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return access(out, X_OK) == 0;
    }
    char self[2048];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return false;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return false;
    *slash = '\0';
    static const char *const where[] = {"%s/mpi_coll_perf.openmpi", "%s/../mpi_coll_perf.openmpi"};
    for (int k = 0; k < 2; k++) {
        snprintf(out, len, where[k], self);
        if (access(out, X_OK) == 0)
            return true;
    }
    return false;
}

/* Returns false with the reason in err (process 0). */
static bool run_ompi(const options *o, const char *coll, int nranks, int root, char *err, size_t errlen)
{
    char prog[4096];
    if (!companion_path(prog, sizeof prog)) {
        snprintf(err, errlen, "--ompi: mpi_coll_perf.openmpi not found (build with Open MPI "
                              "installed, or set OCCL_PERF_OMPI)");
        return false;
    }
    const char *run = getenv("OCCL_PERF_OMPI_RUN");
    run = run && *run ? run : "mpirun.openmpi";
    char n[16], lo[32], hi[32], f[32], it[16], wu[16], rt[16];
    snprintf(n, sizeof n, "%d", nranks);
    snprintf(lo, sizeof lo, "%zu", o->minbytes);
    snprintf(hi, sizeof hi, "%zu", o->maxbytes);
    snprintf(f, sizeof f, "%ld", o->stepfactor > 1 ? o->stepfactor : 2);
    snprintf(it, sizeof it, "%d", o->iters);
    snprintf(wu, sizeof wu, "%d", o->warmup);
    snprintf(rt, sizeof rt, "%d", root < 0 ? 0 : root);
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(err, errlen, "--ompi: pipe: %s", strerror(errno));
        return false;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        /* Open MPI's job gets every core, not this rank's binding, and none
         * of MPICH's launcher variables. */
        cpu_set_t all;
        CPU_ZERO(&all);
        for (int c = 0; c < CPU_SETSIZE; c++)
            CPU_SET(c, &all);
        sched_setaffinity(0, sizeof all, &all);
        static const char *const drop[] = {"PMI_RANK", "PMI_SIZE", "PMI_FD", "PMI_PORT", "PMI_ID",
                                           "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "HYDI_CONTROL_FD",
                                           "PMI_HOSTNAME", "HYDRA_LAUNCHER_EXTRA_ARGS"};
        for (size_t k = 0; k < sizeof drop / sizeof *drop; k++)
            unsetenv(drop[k]);
        execlp(run, run, "--allow-run-as-root", "--oversubscribe", "-n", n, prog, coll, lo, hi, f,
               it, wu, rt, (char *)NULL);
        fprintf(stderr, "occl_perf: --ompi: cannot run %s: %s\n", run, strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        snprintf(err, errlen, "--ompi: fork: %s", strerror(errno));
        return false;
    }
    FILE *in = fdopen(fds[0], "r");
    char line[256];
    int cap = 0;
    while (in && fgets(line, sizeof line, in)) {
        double bytes, us;
        if (sscanf(line, "%lf %lf", &bytes, &us) != 2)
            continue;
        if (ompi_rows == cap) {
            cap = cap ? 2 * cap : 32;
            ompi_us = realloc(ompi_us, (size_t)cap * sizeof *ompi_us);
            if (!ompi_us)
                die(__FILE__, __LINE__, "out of host memory", "");
        }
        ompi_us[ompi_rows++] = us;
    }
    if (in)
        fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || ompi_rows == 0) {
        snprintf(err, errlen, "--ompi: %s -n %s %.300s failed (status %d, %d rows)", run, n, prog,
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, ompi_rows);
        return false;
    }
    return true;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: occl_perf --coll NAME [-b minbytes] [-e maxbytes] [-f stepfactor | -i stepbytes]\n"
            "                 [-n iters] [-w warmup_iters] [-c 0|1] [-o op] [-d datatype]\n"
            "                 [-r root] [-g devices] [--place out|in|both] [--mpi] [--ompi] [-h]\n"
            "Runs under mpiexec or orrun; every process hosts -g devices, each a rank.\n"
            "  --coll NAME            allreduce, broadcast, reduce, allgather, reducescatter,\n"
            "                         alltoall, gather, scatter or sendrecv\n"
            "  -b,--minbytes SIZE     smallest size: bytes, or K, M, G suffixes (binary; 64K,\n"
            "                         64KB and 64KiB are the same) (default 32M)\n"
            "  -e,--maxbytes SIZE     largest size (default 32M)\n"
            "  -f,--stepfactor N      multiply the size by N from one row to the next\n"
            "  -i,--stepbytes SIZE    or add SIZE (default 1M, used when -f is not above 1)\n"
            "  -n,--iters N           timed calls per size (default 20)\n"
            "  -w,--warmup_iters N    untimed calls before them (default 5)\n"
            "  -c,--check 0|1         check the results against a host reference (default 1)\n"
            "  -o,--op NAME           sum, prod, max, min, avg or all (default sum)\n"
            "  -d,--datatype NAME     int8, uint8, int32, uint32, int64, uint64, half, float,\n"
            "                         double, bfloat16 or all (default float)\n"
            "  -r,--root N            root of broadcast, reduce, gather, scatter (default 0)\n"
            "  -g,--ngpus N           devices per process, at most OPENREG_DEVICES (default 1)\n"
            "  --place out|in|both    run out of place, in place or both (default both); in\n"
            "                         place allocates only the receive buffer\n"
            "  --mpi                  also time MPICH's matching call on host buffers (-g 1)\n"
            "  --ompi                 also time Open MPI's (mpi_coll_perf.openmpi under\n"
            "                         mpirun.openmpi --oversubscribe, as many ranks, before\n"
            "                         OCCL's rows; float sum, -f sizes)\n"
            "  -h,--help              this help\n");
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* 0: run; 1: help asked; 2: bad command line (why in err). */
static int parse_args(int argc, char **argv, options *o, char *err, size_t errlen)
{
    enum { OPT_COLL = 256, OPT_MPI, OPT_PLACE, OPT_OMPI };
    static const struct option longopts[] = {
        {"coll", required_argument, 0, OPT_COLL},   {"mpi", no_argument, 0, OPT_MPI},
        {"minbytes", required_argument, 0, 'b'},    {"maxbytes", required_argument, 0, 'e'},
        {"stepbytes", required_argument, 0, 'i'},   {"stepfactor", required_argument, 0, 'f'},
        {"iters", required_argument, 0, 'n'},       {"warmup_iters", required_argument, 0, 'w'},
        {"check", required_argument, 0, 'c'},       {"op", required_argument, 0, 'o'},
        {"datatype", required_argument, 0, 'd'},    {"root", required_argument, 0, 'r'},
        {"ngpus", required_argument, 0, 'g'},       {"help", no_argument, 0, 'h'},
        {"place", required_argument, 0, OPT_PLACE}, {"ompi", no_argument, 0, OPT_OMPI},
        {0, 0, 0, 0}};
    *o = (options){.coll = -1, .minbytes = 32 * MiB, .maxbytes = 32 * MiB, .stepbytes = MiB,
                   .stepfactor = 1, .iters = 20, .warmup = 5, .check = 1, .root = 0,
                   .ngpus = 1, .type = 7 /* float */, .op = 0 /* sum */, .mpi = false,
                   .place = PLACE_BOTH};
    opterr = 0; /* messages come from rank 0 only, below */
    int c;
    long v;
    while ((c = getopt_long(argc, argv, ":b:e:i:f:n:w:c:o:d:r:g:h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_COLL: {
            o->coll = -1;
            for (int k = 0; k < C_COUNT; k++)
                if (strcmp(optarg, colls[k].name) == 0)
                    o->coll = k;
            if (o->coll < 0) {
                snprintf(err, errlen, "unknown collective '%s'", optarg);
                return 2;
            }
            break;
        }
        case OPT_MPI: o->mpi = true; break;
        case OPT_OMPI: o->ompi = true; break;
        case OPT_PLACE:
            o->place = 0;
            for (unsigned k = PLACE_OUT; k <= PLACE_BOTH; k++)
                if (strcmp(optarg, place_names[k]) == 0)
                    o->place = k;
            if (o->place == 0) {
                snprintf(err, errlen, "--place '%s': expected out, in or both", optarg);
                return 2;
            }
            break;
        case 'b':
        case 'e':
        case 'i':
            if (perf_parse_size(optarg, c == 'b' ? &o->minbytes : c == 'e' ? &o->maxbytes
                                                                    : &o->stepbytes) != 0) {
                snprintf(err, errlen, "-%c '%s' is not a size (e.g. 8, 64K, 128M)", c, optarg);
                return 2;
            }
            break;
        case 'f':
            if (parse_int(optarg, 0, 1 << 20, &v) != 0) {
                snprintf(err, errlen, "-f '%s' is not a step factor", optarg);
                return 2;
            }
            o->stepfactor = v;
            break;
        case 'n':
        case 'w':
            if (parse_int(optarg, c == 'n' ? 1 : 0, INT_MAX, &v) != 0) {
                snprintf(err, errlen, "-%c '%s': expected an integer %s", c, optarg,
                         c == 'n' ? "from 1" : "from 0");
                return 2;
            }
            *(c == 'n' ? &o->iters : &o->warmup) = (int)v;
            break;
        case 'c':
            if (parse_int(optarg, 0, 1, &v) != 0) {
                snprintf(err, errlen, "-c '%s': expected 0 or 1", optarg);
                return 2;
            }
            o->check = (int)v;
            break;
        case 'r':
        case 'g':
            if (parse_int(optarg, c == 'r' ? 0 : 1, INT_MAX, &v) != 0) {
                snprintf(err, errlen, "-%c '%s': expected an integer from %d", c, optarg,
                         c == 'r' ? 0 : 1);
                return 2;
            }
            *(c == 'r' ? &o->root : &o->ngpus) = (int)v;
            break;
        case 'o': {
            const char *names[NOPS];
            for (int k = 0; k < NOPS; k++)
                names[k] = ops[k].name;
            o->op = strcmp(optarg, "all") == 0 ? -1 : lookup(optarg, names, NOPS);
            if (o->op == -1 && strcmp(optarg, "all") != 0) {
                snprintf(err, errlen, "unknown op '%s'", optarg);
                return 2;
            }
            break;
        }
        case 'd': {
            const char *names[NTYPES];
            for (int k = 0; k < NTYPES; k++)
                names[k] = types[k].name;
            int k = lookup(optarg, names, NTYPES);
            for (size_t a = 0; k < 0 && a < sizeof type_aliases / sizeof *type_aliases; a++)
                if (strcmp(optarg, type_aliases[a].alias) == 0)
                    k = type_aliases[a].index;
            if (k < 0 && strcmp(optarg, "all") != 0) {
                snprintf(err, errlen, "unknown datatype '%s'", optarg);
                return 2;
            }
            o->type = k;
            break;
        }
        case 'h': return 1;
        case ':':
            snprintf(err, errlen, "option '%s' needs a value", argv[optind - 1]);
            return 2;
        default:
            snprintf(err, errlen, "unknown option '%s'", argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
        return 2;
    }
    if (o->coll < 0) {
        snprintf(err, errlen, "--coll is required");
        return 2;
    }
    if (o->minbytes > o->maxbytes) {
        snprintf(err, errlen, "minbytes %zu is above maxbytes %zu", o->minbytes, o->maxbytes);
        return 2;
    }
    if (o->stepfactor > 1 ? o->minbytes == 0 : o->stepbytes == 0) {
        snprintf(err, errlen, "the sizes would never grow: %s",
                 o->stepfactor > 1 ? "-b 0 with -f" : "-i 0");
        return 2;
    }
    return 0;
}

/* ---- main ------------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* rows appear as they are measured */
    options o;
    char err[256] = "";
    int status = parse_args(argc, argv, &o, err, sizeof err);

    /* The runtime's first call starts MPI under a launcher: from then on every
     * message can come from process 0 alone. */
    orClusterInfo ci;
    OR_CHECK(orGetClusterInfo(&ci));
    int init = 0;
    MPI_Initialized(&init);
    have_mpi = init;
    my_proc = ci.rank;
    const char *clock = getenv("OPENREG_TIME");
    virtual_time = clock && strcmp(clock, "virtual") == 0;
    const char *ru_env = getenv("OCCL_PERF_RUSAGE");
    rusage_on = ru_env && strcmp(ru_env, "1") == 0;
    int nprocs = ci.nranks;
    static char prog[64];
    snprintf(prog, sizeof prog, "occl-perf: process %d", my_proc);
    perf_prog = prog;
    perf_fatal = abort_job; /* perf_xmalloc's failures end the job */
    if (status == 0) {
        if (o.ngpus > ci.deviceCount)
            snprintf(err, sizeof err, "-g %d: this process has %d device%s (OPENREG_DEVICES)",
                     o.ngpus, ci.deviceCount, ci.deviceCount == 1 ? "" : "s");
        else if (colls[o.coll].rooted && o.root >= nprocs * o.ngpus)
            snprintf(err, sizeof err, "-r %d: the communicator has %d ranks", o.root,
                     nprocs * o.ngpus);
        else if (o.mpi && o.ngpus != 1)
            snprintf(err, sizeof err, "--mpi compares MPI ranks with OCCL ranks: it needs -g 1");
        else if (o.mpi && virtual_time)
            snprintf(err, sizeof err, "--mpi times MPICH by the host's clock: not with "
                                      "OPENREG_TIME=virtual");
        else if (o.mpi && !have_mpi)
            snprintf(err, sizeof err, "--mpi needs an MPI job: run under orrun or mpiexec");
        else if (o.ompi && virtual_time)
            snprintf(err, sizeof err, "--ompi times Open MPI by the host's clock: not with "
                                      "OPENREG_TIME=virtual");
        else if (o.ompi && (o.type < 0 || types[o.type].kind != K_FLOAT || types[o.type].size != 4 ||
                            o.op < 0 || ops[o.op].op != occlSum))
            snprintf(err, sizeof err, "--ompi times float sum only (-d float -o sum)");
        else if (o.ompi && o.stepfactor < 2 && o.minbytes != o.maxbytes)
            snprintf(err, sizeof err, "--ompi steps sizes by a factor: give -f 2 or more");
        if (err[0])
            status = 2;
    }
    if (status != 0) {
        if (my_proc == 0) {
            if (err[0])
                fprintf(stderr, "occl_perf: %s\n\n", err);
            usage(status == 1 ? stdout : stderr);
        }
        return status == 1 ? 0 : 2;
    }
    if (o.ompi) {
        int ok = 1;
        char oerr[512] = "";
        if (my_proc == 0)
            ok = run_ompi(&o, colls[o.coll].name, nprocs * o.ngpus, colls[o.coll].rooted ? o.root : -1,
                          oerr, sizeof oerr);
        if (have_mpi) {
            sleeping_barrier();
            MPI_CHECK(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
        }
        if (!ok) {
            if (my_proc == 0)
                fprintf(stderr, "occl_perf: %s\n", oerr);
            return 1;
        }
    }

    bench b = {.coll = (coll_t)o.coll, .g = o.ngpus,
               .nranks = nprocs * o.ngpus, .root = colls[o.coll].rooted ? o.root : -1,
               .warmup = o.warmup, .iters = o.iters, .check = o.check != 0};
    /* Every shape of every type fits in maxbytes (counts round down). */
    b.buf_bytes = o.maxbytes > 64 ? o.maxbytes : 64;
    b.comms = calloc((size_t)b.g, sizeof *b.comms);
    b.streams = calloc((size_t)b.g, sizeof *b.streams);
    b.send = calloc((size_t)b.g, sizeof *b.send); /* NULL where not allocated */
    b.recv = calloc((size_t)b.g, sizeof *b.recv);
    if (!b.comms || !b.streams || !b.send || !b.recv)
        die(__FILE__, __LINE__, "out of host memory", "");
    b.host = perf_xmalloc(b.buf_bytes);
    /* Buffers that do not fit the device end the run on every process
     * with the reason and exit status 1, not by an abort: mpiexec may take
     * the job down before it has passed on the message of the process
     * that aborted. */
    orError_t alloc_err = orSuccess;
    const char *alloc_what = "";
    int alloc_dev = 0;
    for (int d = 0; d < b.g && alloc_err == orSuccess; d++) {
        OR_CHECK(orSetDevice(d));
        OR_CHECK(orStreamCreate(&b.streams[d]));
        alloc_dev = d;
        /* In place, the send data is in the receive buffer. */
        if (o.place & PLACE_OUT) {
            alloc_what = "send";
            if ((alloc_err = orMalloc(&b.send[d], b.buf_bytes)) != orSuccess)
                break;
            /* Touched now, so no size pays the page faults of the first use. */
            OR_CHECK(orMemset(b.send[d], 0, b.buf_bytes));
        }
        alloc_what = "receive";
        if ((alloc_err = orMalloc(&b.recv[d], b.buf_bytes)) != orSuccess)
            break;
        OR_CHECK(orMemset(b.recv[d], 0, b.buf_bytes));
    }
    int alloc_failed = alloc_err != orSuccess;
    if (have_mpi)
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &alloc_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (alloc_failed) {
        if (alloc_err != orSuccess)
            fprintf(stderr, "occl-perf: process %d: no room for a %s buffer of %zu bytes on device %d: %s\n",
                    my_proc, alloc_what, b.buf_bytes, alloc_dev, orGetErrorName(alloc_err));
        return 1;
    }

    occlUniqueId id;
    if (my_proc == 0)
        OCCL_CHECK(occlGetUniqueId(&id));
    if (have_mpi)
        MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    OCCL_CHECK(occlGroupStart());
    for (int d = 0; d < b.g; d++) {
        OR_CHECK(orSetDevice(d));
        OCCL_CHECK(occlCommInitRank(&b.comms[d], b.nranks, id, rank_of(&b, d)));
    }
    OCCL_CHECK(occlGroupEnd());

    void *hs = NULL, *hr = NULL;
    if (o.mpi) {
        hs = perf_xmalloc(b.buf_bytes);
        hr = perf_xmalloc(b.buf_bytes);
        memset(hs, 0, b.buf_bytes);
        memset(hr, 0, b.buf_bytes);
    }

    int version = 0;
    OCCL_CHECK(occlGetVersion(&version));
    if (my_proc == 0) {
        printf("# occl-perf %s: %d ranks (%d process%s x %d device%s), OCCL %d.%d.%d\n",
               colls[b.coll].name, b.nranks, nprocs, nprocs == 1 ? "" : "es", b.g,
               b.g == 1 ? "" : "s", version / 10000, version / 100 % 100, version % 100);
        printf("# nProcs %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
               "iters: %d validation: %d mpi: %d\n",
               nprocs, b.g, o.minbytes, o.maxbytes,
               o.stepfactor > 1 ? (size_t)o.stepfactor : o.stepbytes,
               o.stepfactor > 1 ? "factor" : "bytes", b.warmup, b.iters, o.check, o.mpi);
        if (o.place != PLACE_BOTH)
            printf("# %s place only: %d device buffer%s of %zu bytes per rank\n",
                   o.place == PLACE_IN ? "in" : "out of", o.place == PLACE_IN ? 1 : 2,
                   o.place == PLACE_IN ? "" : "s", b.buf_bytes);
        if (o.mpi) {
            printf("# MPI: %s on malloc'd host buffers, MPI_COMM_WORLD, timed as OCCL; "
                   "x = OCCL %s busbw / MPI busbw\n",
                   colls[b.coll].mpi_name, o.place & PLACE_OUT ? "out-of-place" : "in-place");
            if (colls[b.coll].reduces && (o.op < 0 || ops[o.op].op == occlAvg))
                printf("# MPI: avg is timed as MPI_SUM (MPI has no average)\n");
            if (o.type < 0 || types[o.type].kind == K_HALF || types[o.type].kind == K_BF16)
                printf("# MPI: half and bfloat16 are timed as MPI_UINT16_T (MPI has no 16-bit "
                       "float)\n");
        }
        if (o.ompi)
            printf("# Open MPI: its own job of %d ranks (mpi_coll_perf.openmpi, mpirun.openmpi "
                   "--oversubscribe) on malloc'd host buffers, run before OCCL's rows; "
                   "x = Open MPI time / OCCL time\n", b.nranks);
        if (virtual_time)
            printf("# virtual time (OPENREG_TIME=virtual): time, algbw and busbw are the modelled "
                   "machine's (%s profile); the data is still moved and checked\n",
                   getenv("OPENREG_DEVICE_PROFILE") ? getenv("OPENREG_DEVICE_PROFILE") : "default");
        printf("#\n# Using devices\n");
    }
    print_devices(&b);
    if (my_proc == 0)
        print_table_header(o.mpi, o.ompi, o.place);

    double bw_sum = 0, mpi_bw_sum = 0;
    int bw_rows = 0, mpi_rows = 0, row = 0;
    long long wrong_total = 0;
    int t_lo = o.type < 0 ? 0 : o.type, t_hi = o.type < 0 ? NTYPES - 1 : o.type;
    int o_lo = o.op < 0 ? 0 : o.op, o_hi = o.op < 0 ? NOPS - 1 : o.op;
    if (!colls[b.coll].reduces)
        o_hi = o_lo; /* the op does not matter */
    for (int ti = t_lo; ti <= t_hi; ti++)
        for (int oi = o_lo; oi <= o_hi; oi++) {
            const struct type_info *t = &types[ti];
            occlRedOp_t op = ops[oi].op;
            for (size_t size = o.minbytes; size <= o.maxbytes;) {
                shape s = shape_of(b.coll, size / t->size, b.nranks);
                size_t bytes = (s.send > s.recv ? s.send : s.recv) * t->size;
                result r[2];
                for (int ip = 0; ip < 2; ip++) {
                    if (!(o.place & (ip ? PLACE_IN : PLACE_OUT)))
                        continue;
                    r[ip] = bench_occl(&b, t, op, &s, bytes, ip);
                    bw_sum += r[ip].busbw;
                    bw_rows++;
                    if (r[ip].wrong > 0)
                        wrong_total += r[ip].wrong;
                }
                double mpi_bw = 0, mt = 0;
                bool mpi_ok = false;
                if (o.mpi) {
                    mt = bench_mpi(&b, t, op, &s, hs, hr);
                    mpi_ok = mt > 0;
                    if (mpi_ok) {
                        mpi_bw = (double)bytes / mt / 1e9 * bus_factor(b.coll, b.nranks);
                        mpi_bw_sum += mpi_bw;
                        mpi_rows++;
                    }
                }
                if (my_proc == 0) {
                    printf("%12zu  %12zu  %8s  %6s  %6d", bytes, s.param, t->name,
                           colls[b.coll].reduces ? ops[oi].name : "none", b.root);
                    for (int ip = 0; ip < 2; ip++)
                        if (o.place & (ip ? PLACE_IN : PLACE_OUT))
                            print_result(&r[ip]);
                    const result *vs = &r[o.place & PLACE_OUT ? 0 : 1]; /* what x compares */
                    char tm[32];
                    if (o.mpi && !mpi_ok)
                        printf("  %7s  %6s  %8s", "N/A", "N/A", "N/A");
                    else if (o.mpi) { /* x: OCCL's busbw over MPI's = MPI's time over OCCL's */
                        format_time(tm, sizeof tm, mt * 1e6);
                        printf("  %7s  %6.2f  %8.2f", tm, mpi_bw, mt / vs->time_s);
                    }
                    if (o.ompi && row < ompi_rows) {
                        double ot = ompi_us[row] * 1e-6;
                        format_time(tm, sizeof tm, ompi_us[row]);
                        printf("  %7s  %6.2f  %8.2f", tm, (double)bytes / ot / 1e9 * bus_factor(b.coll, b.nranks),
                               ot / vs->time_s);
                    } else if (o.ompi) {
                        printf("  %7s  %6s  %8s", "N/A", "N/A", "N/A");
                    }
                    printf("\n");
                    for (int ip = 0; rusage_on && ip < 2; ip++)
                        if (o.place & (ip ? PLACE_IN : PLACE_OUT))
                            printf("# rusage %s: per call, all processes: cpu %.2f us, "
                                   "voluntary switches %.3f, involuntary %.3f\n",
                                   ip ? "in place" : "out of place", r[ip].cpu_us, r[ip].vcsw, r[ip].ivcsw);
                }
                row++;
                if (o.stepfactor > 1) {
                    if (size > o.maxbytes / (size_t)o.stepfactor)
                        break;
                    size *= (size_t)o.stepfactor;
                } else {
                    if (size > o.maxbytes - o.stepbytes)
                        break;
                    size += o.stepbytes;
                }
            }
        }
    if (my_proc == 0) {
        char load[64];
        perf_load_average(load, sizeof load);
        printf("# Load average at the end: %s\n", load);
        printf("# Out of bounds values : %lld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
        if (o.mpi)
            printf("# Avg MPI bus bandwidth: %g\n", mpi_rows ? mpi_bw_sum / mpi_rows : 0.0);
        printf("# Avg bus bandwidth    : %g\n", bw_rows ? bw_sum / bw_rows : 0.0);
    }

    for (int d = 0; d < b.g; d++) {
        OCCL_CHECK(occlCommDestroy(b.comms[d]));
        OR_CHECK(orSetDevice(d));
        if (b.send[d])
            OR_CHECK(orFree(b.send[d]));
        OR_CHECK(orFree(b.recv[d]));
        OR_CHECK(orStreamDestroy(b.streams[d]));
    }
    free(b.comms);
    free(b.streams);
    free(b.send);
    free(b.recv);
    free(b.host);
    free(hs);
    free(hr);
    return wrong_total ? 1 : 0;
}
