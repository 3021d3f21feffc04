/*
 * occl_correct.c - every OCCL collective (AllReduce, Broadcast, Reduce,
 * AllGather, ReduceScatter, AlltoAll, Gather, Scatter, and Send/Recv both ways
 * around a ring in one group), data type, reduction op (Sum, Prod, Max, Min,
 * Avg, PreMulSum with a host-immediate and with a device-resident scalar)
 * and placement (in place as NCCL defines it, out of place), checked element
 * by element against a reference computed on the host.
 *
 * Each device of each process is one rank of a communicator spanning the
 * whole job. The input of comm rank r at element j is a deterministic
 * function of (case, r, j), so every process computes every rank's input and
 * hence the exact expected output. Inputs are chosen so that every reduction
 * is exact in every type whatever the order of its steps: integers wrap
 * (computed here modulo 2^width as well), floating values are small multiples
 * of a power of two (sums stay within the significand), products multiply
 * factors of {2, -0.5, -1, 1.5} (1 for 1.5 in FP8). Avg is the one rounding step: the exact sum
 * divided by the rank count, correctly rounded to the type. Collectives that
 * only move data move arbitrary bit patterns (NaNs included), compared
 * bitwise.
 *
 * Besides the outputs, every buffer a call may not write is checked
 * unchanged: the input of an out-of-place call, the rest of an in-place
 * buffer, guard elements after each buffer, and receive buffers that are not
 * significant (Reduce and Gather on non-roots). A PreMulSum scalar is changed
 * right after the op is made: a host-immediate one must not follow, a
 * device-resident one must (it is read when the call runs).
 *
 * Counts: 0, 1, 7 and 1M+3. By default the 1M+3 count runs for float32,
 * bfloat16 and int64 only (with Sum and Avg when the collective reduces), and
 * collectives whose buffers hold one block per rank (AllGather,
 * ReduceScatter, AlltoAll, Gather, Scatter, and Send/Recv's two blocks) use
 * blocks of (1M+3)/blocks (made odd) elements so every buffer stays near 1M.
 * Roots rotate over the ranks from case to case; every third case runs on the
 * devices' default streams (NULL), the others on streams of their own. After
 * the sweep, batches run several calls at once on every communicator: in one
 * group, or in consecutive groups queued without synchronizing.
 *
 *   occl_correct [--full] [--init-all] [--coll=NAME,...] [--filter=TEXT] [--verbose]
 *
 *   --full       1M+3 for every type and op, and as the count per rank of every
 *                collective
 *   --init-all   one process: make the communicators with occlCommInitAll
 *                (implied when the program is started without an MPI launcher)
 *   --coll       run only these collectives (names as printed, e.g.
 *                "AllReduce,Reduce"), in the sweep and in the batches
 *   --filter     run only the cases whose name contains TEXT,
 *                e.g. "AllReduce float16", "inplace count=7" or "batch"
 *   --verbose    print every case and the time it took
 *
 * Under an MPI launcher, rank 0 makes the unique id and broadcasts it; each
 * process creates the communicators of all its devices in one group. Comm
 * ranks interleave the job's devices (even global devices first), so with
 * several virtual nodes ring order (by node) differs from comm rank order.
 * With --init-all, comm rank i is on device ndev-1-i. Any mismatch is printed
 * with its case, rank and element, and makes the exit status 1; a failed call
 * ends the job at once.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "occltest.h"

#define LARGE_COUNT ((size_t)(1 << 20) + 3)
#define GUARD 67 /* elements after every buffer that no call may write */
#define MAX_DEVS 64
#define MAX_REPORTS 4 /* mismatching elements printed per case and rank */

/* ---- cases ------------------------------------------------------------------ */

enum coll {
    C_ALLREDUCE, C_BROADCAST, C_REDUCE, C_ALLGATHER, C_REDUCESCATTER,
    C_ALLTOALL, C_GATHER, C_SCATTER, C_SENDRECV, C_NCOLLS
};
static const char *const coll_names[C_NCOLLS] = {
    "AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
    "AlltoAll", "Gather", "Scatter", "SendRecv"};

enum op { O_SUM, O_PROD, O_MAX, O_MIN, O_AVG, O_PMS_HOST, O_PMS_DEVICE, O_NOPS };
static const char *const op_names[O_NOPS] = {
    "sum", "prod", "max", "min", "avg", "premulsum(host)", "premulsum(device)"};

static const char *const type_names[occlNumTypes] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16",
    "float8e4m3", "float8e5m2"};
static const int type_width[occlNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

static bool is_fp8(int t) { return t == occlFloat8e4m3 || t == occlFloat8e5m2; }

static bool is_float(int t)
{
    return t == occlFloat16 || t == occlFloat32 || t == occlFloat64 || t == occlBfloat16 || is_fp8(t);
}

static bool is_signed(int t) { return t == occlInt8 || t == occlInt32 || t == occlInt64; }

static bool reduces(int coll)
{
    return coll == C_ALLREDUCE || coll == C_REDUCE || coll == C_REDUCESCATTER;
}

static bool has_root(int coll)
{
    return coll == C_BROADCAST || coll == C_REDUCE || coll == C_GATHER || coll == C_SCATTER;
}

#define MAX_SLOTS 12     /* buffer sets per device: 0 for the sweep, the rest for batches */
#define BATCH_COUNT 1000 /* the largest count of a batched call */

typedef struct kase {
    int coll, type, op; /* op only for reducing collectives */
    bool inplace;
    size_t count;
    int root;
    bool default_stream; /* NULL stream: the current device's default stream */
    uint64_t salt;       /* makes every case's data different */
    int slot;            /* which buffers of each device */
    occlRedOp_t ops[MAX_DEVS]; /* the op on each local communicator */
    char name[160];
} kase;

/* ---- the job -------------------------------------------------------------------- */

typedef struct dev {
    int device; /* local device ordinal */
    int rank;   /* comm rank */
    occlComm_t comm;
    orStream_t stream;
    /* Device buffers per slot: a = send (out of place), b = receive or in place. */
    unsigned char *a[MAX_SLOTS], *b[MAX_SLOTS];
    void *scalar[MAX_SLOTS]; /* PreMulSum's device-resident scalar */
} dev;

static int nranks;      /* communicator size */
static int ndev;        /* devices (comm ranks) of this process */
static dev devs[MAX_DEVS];
static bool use_mpi;
static int world_rank, world_size, nnodes = 1;
static size_t buf_elems;     /* capacity of a and b, in elements of 8 bytes */
static unsigned char *host;  /* staging: one buffer at a time */
static bool opt_full, opt_verbose;
static const char *opt_filter;
static bool coll_on[C_NCOLLS];
static long long n_cases, n_checked, n_mismatch;

static void die(const char *what, const char *detail) { mpitest_fail(__FILE__, __LINE__, what, detail); }

/* ---- values --------------------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

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

/* Correctly rounded to p significant bits with minimum exponent emin. */
static double round_prec(double x, int p, int emin)
{
    if (x == 0 || !isfinite(x))
        return x;
    int e;
    frexp(x, &e);
    int E = e - 1 < emin ? emin : e - 1;
    double q = ldexp(1.0, E - (p - 1));
    return nearbyint(x / q) * q;
}

/* Rounded to the type (round to nearest even), as a double. */
static double round_to(int t, double x)
{
    switch (t) {
    case occlFloat16: return round_prec(x, 11, -14);
    case occlBfloat16: return round_prec(x, 8, -126);
    case occlFloat8e4m3: return round_prec(x, 4, -6);
    case occlFloat8e5m2: return round_prec(x, 3, -14);
    case occlFloat32: return (double)(float)x;
    default: return x;
    }
}

/* Bits of an exactly representable binary16 value. */
static uint16_t half_bits(double x)
{
    uint16_t s = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (isnan(a))
        return s | 0x7e00;
    if (a >= 65536.0)
        return s | 0x7c00;
    if (a < 0x1p-14)
        return s | (uint16_t)(a * 0x1p24);
    int e;
    double m = frexp(a, &e);
    return s | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((m * 2 - 1) * 1024);
}

static double half_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

static uint16_t bf16_bits(double x) /* x exactly representable */
{
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

static double bf16_value(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Bits of an exactly representable OCP FP8 value with mbits mantissa bits
 * and exponent bias `bias` (E4M3: 3, 7; E5M2: 2, 15). */
static uint8_t fp8_bits(double x, int mbits, int bias)
{
    uint8_t s = signbit(x) ? 0x80 : 0;
    double a = fabs(x);
    if (isnan(a))
        return s | (mbits == 3 ? 0x7f : 0x7e);
    if (a < ldexp(1.0, 1 - bias))
        return s | (uint8_t)ldexp(a, bias - 1 + mbits);
    int e;
    double m = frexp(a, &e);
    return s | (uint8_t)((e - 1 + bias) << mbits) | (uint8_t)((m * 2 - 1) * (1 << mbits));
}

static double fp8_value(uint8_t b, int mbits, int bias)
{
    int e = (b & 0x7f) >> mbits, m = b & ((1 << mbits) - 1), emax = (1 << (7 - mbits)) - 1;
    double v;
    if (mbits == 3 && (b & 0x7f) == 0x7f)
        v = NAN;
    else if (mbits == 2 && e == emax)
        v = m ? NAN : INFINITY;
    else
        v = e == 0 ? ldexp(m, 1 - bias - mbits) : ldexp((1 << mbits) + m, e - bias - mbits);
    return b & 0x80 ? -v : v;
}

/* The stored bits of floating value x (exactly representable) in type t. */
static uint64_t float_bits(int t, double x)
{
    switch (t) {
    case occlFloat16: return half_bits(x);
    case occlBfloat16: return bf16_bits(x);
    case occlFloat8e4m3: return fp8_bits(x, 3, 7);
    case occlFloat8e5m2: return fp8_bits(x, 2, 15);
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

static double float_value(int t, uint64_t bits)
{
    switch (t) {
    case occlFloat16: return half_value((uint16_t)bits);
    case occlBfloat16: return bf16_value((uint16_t)bits);
    case occlFloat8e4m3: return fp8_value((uint8_t)bits, 3, 7);
    case occlFloat8e5m2: return fp8_value((uint8_t)bits, 2, 15);
    case occlFloat32: {
        uint32_t u = (uint32_t)bits;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    default: {
        double d;
        memcpy(&d, &bits, sizeof d);
        return d;
    }
    }
}

static void store(int t, void *p, uint64_t bits)
{
    switch (type_width[t]) {
    case 1: { uint8_t v = (uint8_t)bits; memcpy(p, &v, 1); break; }
    case 2: { uint16_t v = (uint16_t)bits; memcpy(p, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)bits; memcpy(p, &v, 4); break; }
    default: memcpy(p, &bits, 8); break;
    }
}

static uint64_t load(int t, const void *p)
{
    switch (type_width[t]) {
    case 1: { uint8_t v; memcpy(&v, p, 1); return v; }
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
    }
}

/* Significand bits and the power of two of the grid floating inputs use. */
static int float_prec(int t)
{
    return t == occlFloat16 ? 11 : t == occlBfloat16 ? 8 : t == occlFloat32 ? 24
         : t == occlFloat8e4m3 ? 4 : t == occlFloat8e5m2 ? 3 : 53;
}

static int float_shift(int t)
{
    return t == occlFloat16 ? 2 : t == occlBfloat16 ? 0 : t == occlFloat32 ? 2 : is_fp8(t) ? 2 : 4;
}

/* Uniform integer in [-k, k] (k up to INT64_MAX: computed unsigned, where
 * 2k + 1 and the subtraction wrap instead of overflowing). */
static int64_t centered(uint64_t h, uint64_t k)
{
    uint64_t u = h % (2 * k + 1) - k;
    return u <= INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1;
}

/* Input of rank r at element j, for a reducing collective: a floating value. */
static double input_float(const kase *c, int r, size_t j)
{
    uint64_t h = hash3(c->salt, r, j);
    int t = c->type;
    switch (c->op) {
    case O_PROD: {
        /* Around the ring the factors cycle, so a product of any run of
         * ranks is 2^a * 1.5^b with |a| <= 1 and b <= nranks/4 + 1
         * (FP8's 3 or 4 significant bits hold 1.5^2 at most: 1 there). */
        static const double f[4] = {2.0, -0.5, -1.0, 1.5};
        int k = (r + mix(c->salt ^ j)) % 4;
        return k == 3 && is_fp8(t) ? 1.0 : f[k];
    }
    case O_MAX:
    case O_MIN:
        return ldexp((double)centered(h, (uint64_t)1 << float_prec(t)), -float_shift(t));
    default: {
        /* Sum of any ranks' k: at most 2^prec in magnitude, so exact
         * (PreMulSum's scalars are powers of two). */
        uint64_t k = ((uint64_t)1 << float_prec(t)) / (uint64_t)nranks;
        return ldexp((double)centered(h, k), -float_shift(t));
    }
    }
}

/* Input of rank r at element j, for a reducing collective: integer bits. */
static uint64_t input_int(const kase *c, int r, size_t j)
{
    uint64_t h = hash3(c->salt, r, j);
    int t = c->type;
    if (c->op == O_PROD)
        return (h | 1) & mask_of(t); /* odd: products wrap but never vanish */
    if (c->op != O_AVG)
        return h & mask_of(t); /* any value: wrapping is exact */
    /* Avg: small enough that the sum does not wrap. */
    if (is_signed(t)) {
        uint64_t k = (mask_of(t) >> 1) / (uint64_t)nranks;
        return (uint64_t)centered(h, k) & mask_of(t);
    }
    uint64_t k = mask_of(t) / (uint64_t)nranks;
    return k == ~(uint64_t)0 ? h : h % (k + 1);
}

/* Stored bits of input element j of rank r. */
static uint64_t input_bits(const kase *c, int r, size_t j)
{
    if (!reduces(c->coll))
        return hash3(c->salt, r, j) & mask_of(c->type); /* any bits, NaN patterns too */
    if (is_float(c->type))
        return float_bits(c->type, input_float(c, r, j));
    return input_int(c, r, j);
}

/* PreMulSum's scalar, and what the scalar's memory holds when the op is made
 * (host-immediate: after creation it is overwritten; device: overwritten
 * with the real one before the call, which must read it then). */
static uint64_t scalar_bits(const kase *c, bool real)
{
    if (is_float(c->type))
        return float_bits(c->type, !real ? 3.0 : c->op == O_PMS_HOST ? -0.5 : 0.25);
    return (uint64_t)(!real ? 7 : c->op == O_PMS_HOST ? -3 : 5) & mask_of(c->type);
}

/* The reduction over all ranks of input element j. */
static uint64_t reduce_bits(const kase *c, size_t j)
{
    int t = c->type, n = nranks;
    if (is_float(t)) {
        double s = c->op >= O_PMS_HOST ? float_value(t, scalar_bits(c, true)) : 1.0;
        double acc = input_float(c, 0, j);
        if (c->op >= O_PMS_HOST)
            acc *= s;
        for (int r = 1; r < n; r++) {
            double x = input_float(c, r, j);
            switch (c->op) {
            case O_PROD: acc *= x; break;
            case O_MAX: acc = x > acc ? x : acc; break;
            case O_MIN: acc = x < acc ? x : acc; break;
            case O_PMS_HOST:
            case O_PMS_DEVICE: acc += x * s; break;
            default: acc += x; break;
            }
        }
        if (c->op == O_AVG)
            acc = round_to(t, acc / n);
        return float_bits(t, acc);
    }
    uint64_t m = mask_of(t);
    if (c->op == O_AVG) {
        if (is_signed(t)) {
            int64_t sum = 0;
            for (int r = 0; r < n; r++)
                sum += sext(input_int(c, r, j), t);
            return (uint64_t)(sum / n) & m; /* truncates toward zero */
        }
        uint64_t sum = 0;
        for (int r = 0; r < n; r++)
            sum += input_int(c, r, j);
        return sum / (uint64_t)n;
    }
    uint64_t s = c->op >= O_PMS_HOST ? scalar_bits(c, true) : 1;
    uint64_t acc = input_int(c, 0, j) * s;
    for (int r = 1; r < n; r++) {
        uint64_t x = input_int(c, r, j);
        switch (c->op) {
        case O_PROD: acc *= x; break;
        case O_MAX:
            if (is_signed(t) ? sext(x, t) > sext(acc, t) : (x & m) > (acc & m))
                acc = x;
            break;
        case O_MIN:
            if (is_signed(t) ? sext(x, t) < sext(acc, t) : (x & m) < (acc & m))
                acc = x;
            break;
        default: acc += x * s; break;
        }
    }
    return acc & m;
}

static unsigned char sentinel(size_t byte) { return (unsigned char)(0xa5 ^ (byte * 0x9d) ^ (byte >> 8)); }

/* ---- layouts ---------------------------------------------------------------------- */

static int prev_rank(int r) { return (r + nranks - 1) % nranks; }
static int next_rank(int r) { return (r + 1) % nranks; }

/* Elements of every rank's input and output. */
static size_t send_elems(const kase *c)
{
    switch (c->coll) {
    case C_REDUCESCATTER: case C_ALLTOALL: case C_SCATTER: return c->count * (size_t)nranks;
    case C_SENDRECV: return 2 * c->count;
    default: return c->count;
    }
}

static size_t recv_elems(const kase *c)
{
    switch (c->coll) {
    case C_ALLGATHER: case C_ALLTOALL: case C_GATHER: return c->count * (size_t)nranks;
    case C_SENDRECV: return 2 * c->count;
    default: return c->count;
    }
}

/* In place: where input and output start within b (NCCL's conventions). */
static size_t in_offset(const kase *c, int r)
{
    return c->inplace && (c->coll == C_ALLGATHER || c->coll == C_GATHER) ? (size_t)r * c->count : 0;
}

static size_t out_offset(const kase *c, int r)
{
    return c->inplace && (c->coll == C_REDUCESCATTER || c->coll == C_SCATTER) ? (size_t)r * c->count : 0;
}

/* Elements of b and a that the case uses and checks, guards included. */
static size_t span_b(const kase *c)
{
    size_t in = send_elems(c), out = recv_elems(c);
    size_t span = !c->inplace ? out : in > out ? in : out;
    if (c->inplace && (c->coll == C_ALLGATHER || c->coll == C_GATHER))
        span = c->count * (size_t)nranks;
    return span + GUARD;
}

static size_t span_a(const kase *c) { return c->inplace ? 0 : send_elems(c) + GUARD; }

/* Whether rank r's output is significant. */
static bool has_output(const kase *c, int r)
{
    return !((c->coll == C_REDUCE || c->coll == C_GATHER) && r != c->root);
}

typedef enum { E_SENTINEL, E_INPUT, E_REDUCE } ekind;
typedef struct {
    ekind kind;
    int r;    /* E_INPUT: whose input */
    size_t j; /* E_INPUT, E_REDUCE: which input element */
} expect;

/* What element p of b holds after the call, on comm rank R. */
static expect expect_b(const kase *c, int R, size_t p)
{
    size_t out = out_offset(c, R), n_out = recv_elems(c), cnt = c->count;
    if (has_output(c, R) && p >= out && p - out < n_out) {
        size_t q = p - out;
        switch (c->coll) {
        case C_ALLREDUCE: case C_REDUCE: return (expect){E_REDUCE, 0, q};
        case C_REDUCESCATTER: return (expect){E_REDUCE, 0, (size_t)R * cnt + q};
        case C_BROADCAST: return (expect){E_INPUT, c->root, q};
        case C_ALLGATHER: case C_GATHER: return (expect){E_INPUT, (int)(q / cnt), q % cnt};
        case C_ALLTOALL: return (expect){E_INPUT, (int)(q / cnt), (size_t)R * cnt + q % cnt};
        case C_SCATTER: return (expect){E_INPUT, c->root, (size_t)R * cnt + q};
        case C_SENDRECV: return (expect){E_INPUT, q < cnt ? prev_rank(R) : next_rank(R), q};
        }
    }
    size_t in = in_offset(c, R);
    if (c->inplace && p >= in && p - in < send_elems(c))
        return (expect){E_INPUT, R, p - in};
    return (expect){E_SENTINEL, 0, 0};
}

static expect expect_a(const kase *c, int R, size_t p)
{
    return p < send_elems(c) ? (expect){E_INPUT, R, p} : (expect){E_SENTINEL, 0, 0};
}

/* ---- one case ---------------------------------------------------------------------- */

/* Before the call: a holds the input then guards; b holds sentinels, with
 * the input at its in-place offset when in place. */
static void fill(const kase *c, const dev *d, bool is_b)
{
    size_t span = is_b ? span_b(c) : span_a(c), es = (size_t)type_width[c->type];
    size_t in = is_b ? in_offset(c, d->rank) : 0;
    bool has_input = !is_b || c->inplace;
    for (size_t p = 0; p < span; p++) {
        if (has_input && p >= in && p - in < send_elems(c))
            store(c->type, host + p * es, input_bits(c, d->rank, p - in));
        else
            for (size_t k = 0; k < es; k++)
                host[p * es + k] = sentinel(p * es + k);
    }
    CHECK_OR(orMemcpy(is_b ? d->b[c->slot] : d->a[c->slot], host, span * es, orMemcpyHostToDevice));
}

static void describe(int t, uint64_t bits, char *out, size_t size)
{
    if (is_float(t))
        snprintf(out, size, "0x%0*llx (%.17g)", 2 * type_width[t], (unsigned long long)bits,
                 float_value(t, bits));
    else if (is_signed(t))
        snprintf(out, size, "0x%0*llx (%lld)", 2 * type_width[t], (unsigned long long)bits,
                 (long long)sext(bits, t));
    else
        snprintf(out, size, "0x%0*llx (%llu)", 2 * type_width[t], (unsigned long long)bits,
                 (unsigned long long)bits);
}

/* Compare buffer a or b of one rank with its expected content. */
static long long verify(const kase *c, const dev *d, bool is_b, int *reported)
{
    size_t span = is_b ? span_b(c) : span_a(c), es = (size_t)type_width[c->type];
    if (!span)
        return 0;
    CHECK_OR(orMemcpy(host, is_b ? d->b[c->slot] : d->a[c->slot], span * es, orMemcpyDeviceToHost));
    long long bad = 0;
    for (size_t p = 0; p < span; p++) {
        expect e = is_b ? expect_b(c, d->rank, p) : expect_a(c, d->rank, p);
        const unsigned char *got = host + p * es;
        bool ok;
        uint64_t want = 0;
        if (e.kind == E_SENTINEL) {
            ok = true;
            for (size_t k = 0; k < es; k++)
                ok = ok && got[k] == sentinel(p * es + k);
        } else {
            want = e.kind == E_INPUT ? input_bits(c, e.r, e.j) : reduce_bits(c, e.j);
            ok = load(c->type, got) == want;
        }
        n_checked++;
        if (ok)
            continue;
        bad++;
        if ((*reported)++ >= MAX_REPORTS)
            continue;
        char w[96], g[96];
        uint64_t gb = load(c->type, got);
        describe(c->type, gb, g, sizeof g);
        if (e.kind == E_SENTINEL)
            snprintf(w, sizeof w, "untouched");
        else
            describe(c->type, want, w, sizeof w);
        char what[64];
        if (e.kind == E_REDUCE)
            snprintf(what, sizeof what, "reduction of input element %zu", e.j);
        else if (e.kind == E_INPUT)
            snprintf(what, sizeof what, "input element %zu of rank %d", e.j, e.r);
        else
            snprintf(what, sizeof what, "not to be written");
        printf("MISMATCH %s | %d ranks (%d processes, %d nodes) | comm rank %d (world rank %d, "
               "device %d) | %s element %zu (%s): expected %s, got %s\n",
               c->name, nranks, world_size, nnodes, d->rank, world_rank, d->device,
               is_b ? (c->inplace ? "buffer" : "recvbuff") : "sendbuff", p, what, w, g);
    }
    return bad;
}

static void make_ops(kase *c)
{
    for (int i = 0; i < ndev; i++) {
        dev *d = &devs[i];
        occlRedOp_t *op = &c->ops[i];
        *op = c->op == O_SUM ? occlSum : c->op == O_PROD ? occlProd : c->op == O_MAX ? occlMax
            : c->op == O_MIN ? occlMin : occlAvg;
        if (c->op < O_PMS_HOST)
            continue;
        unsigned char scalar[8] = {0};
        void *dev_scalar = d->scalar[c->slot];
        if (c->op == O_PMS_HOST) {
            store(c->type, scalar, scalar_bits(c, true));
            CHECK_OCCL(occlRedOpCreatePreMulSum(op, scalar, (occlDataType_t)c->type,
                                                occlScalarHostImmediate, d->comm));
            store(c->type, scalar, scalar_bits(c, false)); /* read at creation: no effect */
        } else {
            store(c->type, scalar, scalar_bits(c, false));
            CHECK_OR(orMemcpy(dev_scalar, scalar, 8, orMemcpyHostToDevice));
            CHECK_OCCL(occlRedOpCreatePreMulSum(op, dev_scalar, (occlDataType_t)c->type,
                                                occlScalarDevice, d->comm));
            store(c->type, scalar, scalar_bits(c, true)); /* read when the call runs */
            CHECK_OR(orMemcpy(dev_scalar, scalar, 8, orMemcpyHostToDevice));
        }
    }
}

/* Enqueue the case's call on local communicator i (inside a group). */
static void launch_one(const kase *c, int i)
{
    occlDataType_t t = (occlDataType_t)c->type;
    size_t es = (size_t)type_width[c->type], cnt = c->count;
    dev *d = &devs[i];
    orStream_t s = d->stream;
    if (c->default_stream) {
        CHECK_OR(orSetDevice(d->device));
        s = NULL;
    }
    int R = d->rank;
    occlRedOp_t op = c->ops[i];
    unsigned char *send = c->inplace ? d->b[c->slot] + in_offset(c, R) * es : d->a[c->slot];
    unsigned char *recv = d->b[c->slot] + out_offset(c, R) * es;
    switch (c->coll) {
    case C_ALLREDUCE: CHECK_OCCL(occlAllReduce(send, recv, cnt, t, op, d->comm, s)); break;
    case C_BROADCAST: CHECK_OCCL(occlBroadcast(send, recv, cnt, t, c->root, d->comm, s)); break;
    case C_REDUCE: CHECK_OCCL(occlReduce(send, recv, cnt, t, op, c->root, d->comm, s)); break;
    case C_ALLGATHER: CHECK_OCCL(occlAllGather(send, recv, cnt, t, d->comm, s)); break;
    case C_REDUCESCATTER: CHECK_OCCL(occlReduceScatter(send, recv, cnt, t, op, d->comm, s)); break;
    case C_ALLTOALL: CHECK_OCCL(occlAlltoAll(send, recv, cnt, t, d->comm, s)); break;
    case C_GATHER: CHECK_OCCL(occlGather(send, recv, cnt, t, c->root, d->comm, s)); break;
    case C_SCATTER: CHECK_OCCL(occlScatter(send, recv, cnt, t, c->root, d->comm, s)); break;
    case C_SENDRECV:
        /* Both directions of the ring; with two ranks both go to the same
         * peer and match in call order. Receives first on odd ranks. */
        if (R % 2) {
            CHECK_OCCL(occlRecv(recv, cnt, t, prev_rank(R), d->comm, s));
            CHECK_OCCL(occlRecv(recv + cnt * es, cnt, t, next_rank(R), d->comm, s));
        }
        CHECK_OCCL(occlSend(send, cnt, t, next_rank(R), d->comm, s));
        CHECK_OCCL(occlSend(send + cnt * es, cnt, t, prev_rank(R), d->comm, s));
        if (R % 2 == 0) {
            CHECK_OCCL(occlRecv(recv, cnt, t, prev_rank(R), d->comm, s));
            CHECK_OCCL(occlRecv(recv + cnt * es, cnt, t, next_rank(R), d->comm, s));
        }
        break;
    }
}

/* Wait for every local stream the cases used; any failure ends the job. */
static void finish(const kase *cs, int n)
{
    for (int i = 0; i < ndev; i++) {
        dev *d = &devs[i];
        orError_t err;
        if (cs[0].default_stream) {
            CHECK_OR(orSetDevice(d->device));
            err = orStreamSynchronize(NULL);
        } else {
            err = orStreamSynchronize(d->stream);
        }
        occlResult_t async = occlInternalError;
        CHECK_OCCL(occlCommGetAsyncError(d->comm, &async));
        if (err != orSuccess || async != occlSuccess) {
            char detail[512];
            snprintf(detail, sizeof detail, "%s%s: synchronize -> %s, async error %s (%s)",
                     cs[0].name, n > 1 ? " (and the rest of its batch)" : "", orGetErrorName(err),
                     occlGetErrorString(async), occlGetLastError(d->comm));
            die("collective failed: ", detail);
        }
    }
    for (int k = 0; k < n; k++)
        if (cs[k].op >= O_PMS_HOST && reduces(cs[k].coll))
            for (int i = 0; i < ndev; i++)
                CHECK_OCCL(occlRedOpDestroy(cs[k].ops[i], devs[i].comm));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Data, root and stream of a case (stream: 0 its own, 1 the default one,
 * -1 either, varying from case to case), and its name. */
static void prepare(kase *c, const char *prefix, int stream)
{
    static uint64_t serial;
    c->salt = mix(++serial * 0x1000193ULL);
    c->root = has_root(c->coll) ? (int)(serial % (uint64_t)nranks) : -1;
    c->default_stream = stream < 0 ? serial % 3 == 2 : stream;
    char root[24] = "";
    if (c->root >= 0)
        snprintf(root, sizeof root, " root=%d", c->root);
    snprintf(c->name, sizeof c->name, "%s%s %s%s%s %s count=%zu%s%s", prefix, coll_names[c->coll],
             type_names[c->type], reduces(c->coll) ? " " : "", reduces(c->coll) ? op_names[c->op] : "",
             c->inplace ? "inplace" : "outofplace", c->count, root,
             c->default_stream ? " stream=default" : "");
}

/* Run cases together: all in one group, or one group each, queued one
 * after the other with no synchronization in between. Then check them all. */
static void run_cases(kase *cs, int n, bool one_group)
{
    n_cases += n;
    double t0 = now_s();
    for (int k = 0; k < n; k++) {
        for (int i = 0; i < ndev; i++) {
            fill(&cs[k], &devs[i], true);
            if (!cs[k].inplace)
                fill(&cs[k], &devs[i], false);
        }
        if (reduces(cs[k].coll))
            make_ops(&cs[k]);
    }
    double t1 = now_s();
    if (one_group)
        CHECK_OCCL(occlGroupStart());
    for (int k = 0; k < n; k++) {
        if (!one_group)
            CHECK_OCCL(occlGroupStart());
        for (int i = 0; i < ndev; i++)
            launch_one(&cs[k], i);
        if (!one_group)
            CHECK_OCCL(occlGroupEnd());
    }
    if (one_group)
        CHECK_OCCL(occlGroupEnd());
    finish(cs, n);
    double t2 = now_s();
    for (int k = 0; k < n; k++) {
        const kase *c = &cs[k];
        long long bad = 0;
        for (int i = 0; i < ndev; i++) {
            int reported = 0;
            bad += verify(c, &devs[i], true, &reported);
            if (!c->inplace)
                bad += verify(c, &devs[i], false, &reported);
            if (reported > MAX_REPORTS)
                printf("MISMATCH %s | comm rank %d: %d more elements differ\n", c->name,
                       devs[i].rank, reported - MAX_REPORTS);
        }
        n_mismatch += bad;
        if (opt_verbose && world_rank == 0)
            printf("case %s%s\n", c->name, bad ? ": MISMATCH" : "");
    }
    if (opt_verbose && world_rank == 0)
        printf("  fill %.3f s, run %.3f s, check %.3f s\n", t1 - t0, t2 - t1, now_s() - t2);
    fflush(stdout);
}

static void run_case(kase *c)
{
    c->slot = 0;
    prepare(c, "", -1);
    if (opt_filter && !strstr(c->name, opt_filter))
        return;
    run_cases(c, 1, true);
}

/* Batches: several calls of different collectives, types, ops, placements,
 * counts and roots at once on every communicator, in one group (as NCCL
 * aggregates them) or in consecutive groups queued without waiting. */
static void batches(void)
{
    static const size_t counts[] = {1, 7, 100, BATCH_COUNT};
    for (int b = 0; b < 40; b++) {
        kase cs[MAX_SLOTS - 1];
        int n = 2 + b % (MAX_SLOTS - 2);
        bool one_group = b % 2 == 0;
        char prefix[48];
        snprintf(prefix, sizeof prefix, "batch %d (%s) ", b, one_group ? "one group" : "queued groups");
        int m = 0;
        for (int k = 0; k < n; k++) {
            uint64_t h = mix((uint64_t)b << 32 | (uint64_t)k);
            int coll = (int)((b + 4 * k) % C_NCOLLS);
            if (coll == C_SENDRECV && nranks < 2)
                coll = C_ALLREDUCE;
            if (!coll_on[coll])
                continue; /* --coll */
            cs[m] = (kase){.coll = coll, .type = (int)(h % occlNumTypes),
                           .op = (int)((h >> 8) % O_NOPS),
                           .inplace = coll != C_SENDRECV && (h >> 16) % 2,
                           .count = counts[(h >> 24) % 4], .slot = 1 + m};
            prepare(&cs[m], prefix, b % 3 == 2); /* one stream per communicator in a group */
            m++;
        }
        n = m;
        bool wanted = n > 0 && !opt_filter;
        for (int k = 0; k < n && !wanted && opt_filter; k++)
            wanted = strstr(cs[k].name, opt_filter) != NULL;
        if (wanted)
            run_cases(cs, n, one_group);
    }
}

static bool large_by_default(int coll, int type, int op)
{
    if (type != occlFloat32 && type != occlBfloat16 && type != occlInt64)
        return false;
    return !reduces(coll) || op == O_SUM || op == O_AVG;
}

static void sweep(void)
{
    static const size_t counts[] = {0, 1, 7, LARGE_COUNT};
    for (int coll = 0; coll < C_NCOLLS; coll++) {
        if ((coll == C_SENDRECV && nranks < 2) || !coll_on[coll])
            continue; /* no peer, or not asked for */
        for (int type = 0; type < occlNumTypes; type++)
            for (int op = 0; op < (reduces(coll) ? O_NOPS : 1); op++)
                for (int inplace = 0; inplace < (coll == C_SENDRECV ? 1 : 2); inplace++)
                    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
                        size_t count = counts[k];
                        if (count == LARGE_COUNT && !opt_full) {
                            if (!large_by_default(coll, type, op))
                                continue;
                            /* Buffers of nranks blocks: about LARGE_COUNT elements in all. */
                            size_t blocks = recv_elems(&(kase){.coll = coll, .count = 1});
                            if (send_elems(&(kase){.coll = coll, .count = 1}) > blocks)
                                blocks = send_elems(&(kase){.coll = coll, .count = 1});
                            count = (LARGE_COUNT / blocks) | 1;
                        }
                        kase c = {.coll = coll, .type = type, .op = op, .inplace = inplace,
                                  .count = count};
                        run_case(&c);
                    }
    }
}

/* ---- set-up ---------------------------------------------------------------------- */

/* --coll=A,B: exact collective names; false if one is unknown. */
static bool parse_colls(const char *list)
{
    while (*list) {
        size_t n = strcspn(list, ",");
        int c = 0;
        while (c < C_NCOLLS && !(strlen(coll_names[c]) == n && strncmp(list, coll_names[c], n) == 0))
            c++;
        if (c == C_NCOLLS) {
            fprintf(stderr, "unknown collective '%.*s'\n", (int)n, list);
            return false;
        }
        coll_on[c] = true;
        list += n + (list[n] == ',');
    }
    return true;
}

/* Comm rank of global device g of G: even devices first, then odd ones. */
static int interleave(int g, int G) { return g % 2 == 0 ? g / 2 : (G + 1) / 2 + g / 2; }

int main(int argc, char **argv)
{
    bool init_all = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--full") == 0)
            opt_full = true;
        else if (strcmp(argv[i], "--init-all") == 0)
            init_all = true;
        else if (strcmp(argv[i], "--verbose") == 0)
            opt_verbose = true;
        else if (strncmp(argv[i], "--filter=", 9) == 0)
            opt_filter = argv[i] + 9;
        else if (strncmp(argv[i], "--coll=", 7) == 0 && parse_colls(argv[i] + 7))
            ;
        else {
            fprintf(stderr, "usage: %s [--full] [--init-all] [--coll=NAME,...] [--filter=TEXT] "
                            "[--verbose]\n", argv[0]);
            return 2;
        }
    }
    bool any = false;
    for (int c = 0; c < C_NCOLLS; c++)
        any |= coll_on[c];
    for (int c = 0; c < C_NCOLLS && !any; c++)
        coll_on[c] = true;
    setvbuf(stdout, NULL, _IOLBF, 0);
    double t0 = now_s();

    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci)); /* starts the runtime, and MPI under a launcher */
    int mpi_up = 0;
    MPI_Initialized(&mpi_up);
    use_mpi = mpi_up;
    world_rank = ci.rank;
    world_size = ci.nranks;
    nnodes = ci.nnodes;
    ndev = ci.deviceCount;
    CHECK(ndev >= 1 && ndev <= MAX_DEVS);
    if (!use_mpi)
        init_all = true;
    if (init_all && world_size != 1)
        die("--init-all needs a single process", "");

    int devlist[MAX_DEVS];
    if (init_all) {
        /* Comm rank i on device ndev-1-i: ranks and devices in opposite order. */
        nranks = ndev;
        for (int i = 0; i < ndev; i++) {
            devlist[i] = ndev - 1 - i;
            devs[i].device = devlist[i];
            devs[i].rank = i;
        }
        occlComm_t comms[MAX_DEVS];
        CHECK_OCCL(occlCommInitAll(comms, ndev, devlist));
        for (int i = 0; i < ndev; i++)
            devs[i].comm = comms[i];
    } else {
        nranks = ci.globalDeviceCount;
        occlUniqueId id;
        if (world_rank == 0)
            CHECK_OCCL(occlGetUniqueId(&id));
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
        CHECK_OCCL(occlGroupStart());
        for (int i = 0; i < ndev; i++) {
            devs[i].device = i;
            devs[i].rank = interleave(ci.firstGlobalDevice + i, nranks);
            CHECK_OR(orSetDevice(i));
            CHECK_OCCL(occlCommInitRank(&devs[i].comm, nranks, id, devs[i].rank));
        }
        CHECK_OCCL(occlGroupEnd());
    }
    for (int i = 0; i < ndev; i++) {
        dev *d = &devs[i];
        int n = -1, r = -1, device = -1;
        CHECK_OCCL(occlCommCount(d->comm, &n));
        CHECK_OCCL(occlCommUserRank(d->comm, &r));
        CHECK_OCCL(occlCommDevice(d->comm, &device));
        CHECK(n == nranks && r == d->rank && device == d->device);
    }

    /* Buffers big enough for the largest case: nranks blocks of LARGE_COUNT
     * elements of 8 bytes, plus the guard. */
    buf_elems = (size_t)nranks * LARGE_COUNT + GUARD;
    size_t small_elems = (size_t)(nranks > 2 ? nranks : 2) * BATCH_COUNT + GUARD;
    host = malloc(buf_elems * 8);
    CHECK(host != NULL);
    for (int i = 0; i < ndev; i++) {
        dev *d = &devs[i];
        CHECK_OR(orSetDevice(d->device));
        CHECK_OR(orStreamCreate(&d->stream));
        for (int k = 0; k < MAX_SLOTS; k++) {
            size_t elems = k ? small_elems : buf_elems;
            CHECK_OR(orMalloc((void **)&d->a[k], elems * 8));
            CHECK_OR(orMalloc((void **)&d->b[k], elems * 8));
            CHECK_OR(orMalloc(&d->scalar[k], 8));
        }
    }
    if (world_rank == 0)
        printf("occl_correct: %d ranks = %d process%s x %d device%s, %d node%s, %s%s\n", nranks,
               world_size, world_size > 1 ? "es" : "", ndev, ndev > 1 ? "s" : "", nnodes,
               nnodes > 1 ? "s" : "", init_all ? "occlCommInitAll" : "occlCommInitRank",
               opt_full ? ", full sweep" : "");

    sweep();
    batches();

    for (int i = 0; i < ndev; i++) {
        dev *d = &devs[i];
        CHECK_OCCL(occlCommFinalize(d->comm));
        CHECK_OCCL(occlCommDestroy(d->comm));
        CHECK_OR(orSetDevice(d->device));
        CHECK_OR(orStreamDestroy(d->stream));
        for (int k = 0; k < MAX_SLOTS; k++) {
            CHECK_OR(orFree(d->a[k]));
            CHECK_OR(orFree(d->b[k]));
            CHECK_OR(orFree(d->scalar[k]));
        }
    }
    free(host);

    long long totals[3] = {n_cases, n_checked, n_mismatch};
    if (use_mpi)
        MPI_Allreduce(MPI_IN_PLACE, totals, 3, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("occl_correct: %lld cases (over all processes: %lld), %lld elements checked, "
               "%lld mismatches, %.1f s\n", n_cases, totals[0], totals[1], totals[2], now_s() - t0);
    return totals[2] ? 1 : 0;
}
