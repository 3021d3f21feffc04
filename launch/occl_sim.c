/*
 * launch/occl_sim.c - occl-sim: OCCL's collectives in virtual time on a
 * topology and placement of any size, without moving data or starting
 * processes (docs/occl-sim.md).
 *
 * It describes the job as a communicator would see it - the ring the
 * topology gives (occl_topo_ring), the virtual nodes along it, the trees
 * (occl_topo_trees), the topology's paths between the ranks' devices, the
 * profile's memory bandwidth - and then calls the library's own planner
 * (occl_plan_system) and replay (occl_vmodel_ends, vcost.c):
 * the functions a real run charges each collective with. Each rank's stream
 * clock moves as in a real run: a call enters at max(its stream's clock, its
 * process's host clock), and ends where the replay says. Sweeps follow
 * occl_perf's timing (-w untimed calls, a synchronization of each process's
 * streams, -n timed calls between two events), so a row is what occl_perf
 * -c 0 prints under OPENREG_TIME=virtual on the same job.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>

#include "occl_internal.h"
#include "profile.h"
#include "topo.h"
#include "topo_ring.h"
#include "vmodel.h"

#define PROG "occl-sim"

/* ---- names ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    occl_coll coll;
    bool reduces, rooted;
} colls[] = {
    {"allreduce", OCCL_COLL_ALLREDUCE, true, false},   {"broadcast", OCCL_COLL_BROADCAST, false, true},
    {"reduce", OCCL_COLL_REDUCE, true, true},          {"allgather", OCCL_COLL_ALLGATHER, false, false},
    {"reducescatter", OCCL_COLL_REDUCESCATTER, true, false},
    {"alltoall", OCCL_COLL_ALLTOALL, false, false},    {"gather", OCCL_COLL_GATHER, false, true},
    {"scatter", OCCL_COLL_SCATTER, false, true},
};
#define NCOLLS ((int)(sizeof colls / sizeof *colls))

/* occl_perf's type names and spellings. */
static const struct {
    const char *name;
    occlDataType_t type;
} types[] = {
    {"int8", occlInt8},      {"uint8", occlUint8},     {"int32", occlInt32},     {"uint32", occlUint32},
    {"int64", occlInt64},    {"uint64", occlUint64},   {"half", occlFloat16},    {"float", occlFloat32},
    {"double", occlFloat64}, {"bfloat16", occlBfloat16}, {"char", occlInt8},     {"int", occlInt32},
    {"float16", occlFloat16}, {"fp16", occlFloat16},   {"float32", occlFloat32}, {"fp32", occlFloat32},
    {"float64", occlFloat64}, {"fp64", occlFloat64},   {"bf16", occlBfloat16},
};
#define NTYPES ((int)(sizeof types / sizeof *types))
#define NTYPE_NAMES 10 /* the first ones are the names rows print */

static const char *const op_names[] = {"sum", "prod", "max", "min", "avg"};
#define NOPS 5

static int find_coll(const char *s)
{
    for (int i = 0; i < NCOLLS; i++)
        if (!strcasecmp(s, colls[i].name) || !strcasecmp(s, occl_coll_name(colls[i].coll)))
            return i;
    return -1;
}

static int find_type(const char *s)
{
    for (int i = 0; i < NTYPES; i++)
        if (!strcasecmp(s, types[i].name))
            return i;
    return -1;
}

static const char *type_row_name(int ti)
{
    for (int i = 0; i < NTYPE_NAMES; i++)
        if (types[i].type == types[ti].type)
            return types[i].name;
    return "?";
}

static int find_op(const char *s)
{
    for (int i = 0; i < NOPS; i++)
        if (!strcasecmp(s, op_names[i]))
            return i;
    return -1;
}

/* A size as occl_perf reads one: decimal bytes, an optional binary unit
 * (K, M, G, T, either case), an optional B or iB. -1 if it is not one or
 * does not fit 64 bits. */
static int parse_size(const char *s, uint64_t *out)
{
    const char *p = s;
    if (*p < '0' || *p > '9')
        return -1;
    uint64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    int shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    case 't': case 'T': shift = 40; p++; break;
    default: break;
    }
    if (shift && (p[0] == 'i' && p[1] == 'B'))
        p += 2;
    else if (*p == 'B')
        p++;
    if (*p)
        return -1;
    if (shift && v > UINT64_MAX >> shift)
        return -1;
    *out = v << shift;
    return 0;
}

/* ---- the job ------------------------------------------------------------------------ */

typedef struct job {
    or_topo *topo;
    int nprocs, per_proc, n; /* processes, devices per process, comm ranks */
    int *dev;                /* comm rank r's topology device */
    int *ring, *node_first, nnodes;
    occl_trees trees;
    uint64_t *bps; /* each rank's memory bandwidth */
    const char *profile;
    uint64_t *clock; /* each rank's stream clock */
    uint64_t *host;  /* each process's host clock */
    uint64_t *entry; /* scratch: the entries of the call being replayed */
} job;

/* The path from comm rank src's device to dst's: the topology's, rounded as
 * the runtime's clock rounds it (src/vclock.c). */
static or_vpath topo_path(void *ctx, int src, int dst)
{
    const job *j = ctx;
    const or_topo_path *p = or_topo_path_between(j->topo, j->dev[src], j->dev[dst]);
    if (!p || p->bandwidth <= 0) { /* no declared path: the runtime's default ones */
        bool net = or_topo_device_node(j->topo, j->dev[src]) != or_topo_device_node(j->topo, j->dev[dst]);
        uint64_t key = (uint64_t)(net ? 6 : 5) << 56 | (uint64_t)(uint32_t)(src + 1) << 28 |
                       (uint64_t)(uint32_t)(dst + 1);
        return net ? (or_vpath){OR_VT_NET_NS, OR_VT_NET_BPS, key, "NET", 0, NULL, false}
                   : (or_vpath){OR_VT_PEER_NS, OR_VT_PEER_BPS, key, "PIX", 0, NULL, false};
    }
    return (or_vpath){.latency_ns = (uint64_t)llround(p->latency_ns),
                      .bytes_per_s = (uint64_t)llround(p->bandwidth),
                      .type = or_topo_path_type_name(p->type),
                      .nhops = p->nhops,
                      .hops = p->hops};
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(1);
    }
    return p;
}

/* The communicator a job of nprocs processes of per_proc devices would make
 * (comm rank p * per_proc + d is device d of process p, as occl_perf's):
 * comm.c's ring sorted by node then rank, replaced by the topology's ring;
 * the virtual nodes as runs of it; the trees from the topology. */
static void job_build(job *j)
{
    int n = j->n;
    j->ring = xcalloc((size_t)n, sizeof *j->ring);
    j->node_first = xcalloc((size_t)n + 1, sizeof *j->node_first);
    j->bps = xcalloc((size_t)n, sizeof *j->bps);
    j->clock = xcalloc((size_t)n, sizeof *j->clock);
    j->entry = xcalloc((size_t)n, sizeof *j->entry);
    j->host = xcalloc((size_t)j->nprocs, sizeof *j->host);
    for (int r = 0; r < n; r++)
        j->ring[r] = r;
    /* Node then rank: ranks are numbered process by process, and a process
     * lives on one node, so a stable sort by node. */
    int *node = xcalloc((size_t)n, sizeof *node);
    for (int r = 0; r < n; r++)
        node[r] = or_topo_device_node(j->topo, j->dev[r]);
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && node[j->ring[k - 1]] > node[j->ring[k]]; k--) {
            int t = j->ring[k];
            j->ring[k] = j->ring[k - 1];
            j->ring[k - 1] = t;
        }
    char why[600];
    if (occl_topo_ring(j->topo, j->dev, n, j->ring, why, sizeof why) != 0)
        fprintf(stderr, PROG ": keeping the ring in node order: %s\n", why);
    j->nnodes = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || node[j->ring[i]] != node[j->ring[i - 1]])
            j->node_first[j->nnodes++] = i;
    j->node_first[j->nnodes] = n;
    free(node);
    occl_trees *T = &j->trees;
    if (occl_trees_alloc(T, n) != 0) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(1);
    }
    T->from_topology = occl_topo_trees(j->topo, j->dev, n, T->v, why, sizeof why) == 0;
    if (!T->from_topology && occl_node_trees(j->ring, j->node_first, j->nnodes, n, T->v) != 0) {
        fprintf(stderr, PROG ": out of memory\n");
        exit(1);
    }
    if (occl_trees_schedule(T) != 0) {
        fprintf(stderr, PROG ": the trees are not trees\n");
        exit(1);
    }
}

static occl_vsystem job_system(job *j)
{
    return (occl_vsystem){.nranks = j->n, .ring = j->ring, .node_first = j->node_first,
                          .nnodes = j->nnodes, .trees = j->trees, .path = topo_path, .ctx = j,
                          /* as a real run spreads traffic between nodes over the NICs (vcost.c) */
                          .rails = occl_vsystem_rails(j->topo, j->dev, j->ring, j->node_first, j->nnodes)};
}

/* ---- calls ----------------------------------------------------------------------------- */

typedef struct call {
    int ci, ti, oi, root;
    uint64_t size; /* nccl-tests' size column: the larger buffer of a rank */
    size_t count;  /* what the call is given (per rank, per peer) */
    int line;      /* in the call file; 0 from the command line */
} call;

/* occl_perf's shapes: `elems` elements of the size column become the
 * call's count (per rank for all-gather and gather, per block for
 * reduce-scatter, scatter and all-to-all) and the bytes of the row. */
static void call_shape(call *c, uint64_t size, int n)
{
    size_t es = occl_type_size(types[c->ti].type), elems = (size_t)(size / es), per = elems / (size_t)n;
    occl_coll k = colls[c->ci].coll;
    size_t send = elems, recv = elems;
    c->count = elems;
    if (k == OCCL_COLL_ALLGATHER || k == OCCL_COLL_GATHER) {
        c->count = per;
        send = per;
        recv = per * (size_t)n;
    } else if (k == OCCL_COLL_REDUCESCATTER || k == OCCL_COLL_SCATTER) {
        c->count = per;
        send = per * (size_t)n;
        recv = per;
    } else if (k == OCCL_COLL_ALLTOALL) {
        c->count = per;
        send = recv = per * (size_t)n;
    }
    c->size = (uint64_t)(send > recv ? send : recv) * es;
}

static double bus_factor(occl_coll k, int n)
{
    switch (k) {
    case OCCL_COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
    case OCCL_COLL_ALLGATHER:
    case OCCL_COLL_REDUCESCATTER:
    case OCCL_COLL_ALLTOALL:
    case OCCL_COLL_GATHER:
    case OCCL_COLL_SCATTER: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

/* The planner's decisions per call shape, as a communicator keeps them. */
typedef struct plan_memo {
    int ci, ti, root;
    size_t count;
    occl_choice choice;
    uint64_t est[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS];
    uint64_t floor[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS]; /* left out: its floor */
} plan_memo;

typedef struct sim {
    job *j;
    occl_vsystem sys;
    plan_memo memo[OCCL_PLAN_CACHE], scratch;
    int nmemo, next;
    int shapes; /* planned */
    occl_choice last; /* of the last call issued, when modelled */
    bool modelled;
    bool verbose, per_rank;
    bool replay_all; /* no candidate left out for its floor */
    FILE *trace;
    bool trace_first;
    uint64_t calls; /* replayed so far */
    double replay_s;
} sim;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The planner's choice for call c, kept as a communicator keeps it
 * (tuning.c's plan_slot): decisions that needed the replay, per collective,
 * type, count and (Reduce only) root, OCCL_PLAN_CACHE of them, the oldest
 * replaced. So a Broadcast with another root reuses the protocol the first
 * one's replay chose, as in a real run. */
static const plan_memo *plan(sim *S, const call *c, const occl_call *oc)
{
    int key_root = oc->coll == OCCL_COLL_REDUCE ? oc->root : -1;
    for (int i = 0; i < S->nmemo; i++) {
        plan_memo *m = &S->memo[i];
        if (m->ci == c->ci && types[m->ti].type == types[c->ti].type && m->count == c->count &&
            m->root == key_root)
            return m;
    }
    plan_memo fresh = {.ci = c->ci, .ti = c->ti, .root = key_root, .count = c->count};
    fresh.choice = occl_plan_system(&S->sys, oc, S->j->bps, S->replay_all, fresh.est, fresh.floor);
    bool replayed = false;
    for (int a = 0; a < OCCL_NUM_ALGOS; a++)
        for (int p = 0; p < OCCL_NUM_PROTOS; p++)
            replayed |= fresh.est[a][p] != UINT64_MAX;
    plan_memo *m = &S->scratch;
    if (replayed) { /* a communicator keeps only decisions of the replay */
        if (S->nmemo < OCCL_PLAN_CACHE)
            S->nmemo++;
        m = &S->memo[S->next];
        S->next = (S->next + 1) % OCCL_PLAN_CACHE;
    }
    *m = fresh;
    S->shapes++;
    if (S->verbose) {
        printf("# plan %s %zu x %s:", colls[c->ci].name, c->count, type_row_name(c->ti));
        for (int a = 0; a < OCCL_NUM_ALGOS; a++)
            for (int p = 0; p < OCCL_NUM_PROTOS; p++)
                if (m->est[a][p] != UINT64_MAX)
                    printf(" %s/%s %llu ns", occl_algo_name((occl_algo)a), occl_proto_name((occl_proto)p),
                           (unsigned long long)m->est[a][p]);
                else if (m->floor[a][p]) /* not replayed: it cannot win */
                    printf(" %s/%s > %llu ns", occl_algo_name((occl_algo)a), occl_proto_name((occl_proto)p),
                           (unsigned long long)m->floor[a][p]);
        printf(" -> %s/%s\n", occl_algo_name(m->choice.algo), occl_proto_name(m->choice.proto));
    }
    return m;
}

static void trace_call(sim *S, const call *c, const occl_call *oc, const plan_memo *m, int r,
                       uint64_t start, uint64_t end)
{
    FILE *f = S->trace;
    fprintf(f, "%s{\"name\":\"occl %s\",\"cat\":\"collective\",\"ph\":\"X\",\"pid\":%d,\"tid\":1,"
            "\"ts\":%llu.%03llu,\"dur\":%llu.%03llu,\"args\":{\"bytes\":%llu,\"count\":%zu,"
            "\"type\":\"%s\"",
            S->trace_first ? "" : ",\n", occl_coll_name(oc->coll), r, (unsigned long long)(start / 1000),
            (unsigned long long)(start % 1000), (unsigned long long)((end - start) / 1000),
            (unsigned long long)((end - start) % 1000),
            (unsigned long long)(oc->count * occl_type_size(oc->type)), oc->count,
            occl_type_name(oc->type));
    S->trace_first = false;
    if (colls[c->ci].reduces)
        fprintf(f, ",\"op\":\"%s\"", op_names[c->oi]);
    if (colls[c->ci].rooted)
        fprintf(f, ",\"root\":%d", oc->root);
    if (m)
        fprintf(f, ",\"algorithm\":\"%s\",\"protocol\":\"%s\"", occl_algo_name(m->choice.algo),
                occl_proto_name(m->choice.proto));
    fprintf(f, ",\"nranks\":%d,\"rank\":%d}}", S->j->n, r);
}

/* Issue call c on every rank's stream: it enters at max(the stream's clock,
 * its process's host clock) and the stream's clock moves to its end, as
 * occl_vrun charges it. Returns the slowest rank's time in the call. */
static uint64_t issue(sim *S, const call *c, uint64_t seq)
{
    job *j = S->j;
    int n = j->n;
    occl_call oc = {.coll = colls[c->ci].coll, .count = c->count, .type = types[c->ti].type,
                    .root = colls[c->ci].rooted ? c->root : -1};
    for (int r = 0; r < n; r++) {
        uint64_t h = j->host[r / j->per_proc];
        j->entry[r] = j->clock[r] > h ? j->clock[r] : h;
    }
    const plan_memo *m = NULL;
    /* A call of one rank, or of no data, is not modelled: it costs nothing. */
    S->modelled = n > 1 && c->count > 0;
    if (S->modelled) {
        m = plan(S, c, &oc);
        S->last = m->choice;
        double t0 = now_s();
        if (!occl_vmodel_ends(&S->sys, &oc, m->choice.algo, m->choice.proto, j->entry, j->bps, j->clock)) {
            fprintf(stderr, PROG ": %s of %zu x %s could not be modelled (out of memory)\n",
                    colls[c->ci].name, c->count, type_row_name(c->ti));
            exit(1);
        }
        S->replay_s += now_s() - t0;
        S->calls++;
    } else {
        memcpy(j->clock, j->entry, (size_t)n * sizeof *j->clock);
    }
    uint64_t slowest = 0;
    for (int r = 0; r < n; r++) {
        uint64_t d = j->clock[r] - j->entry[r];
        slowest = d > slowest ? d : slowest;
        if (S->per_rank)
            printf("call %llu rank %d entry %llu end %llu\n", (unsigned long long)seq, r,
                   (unsigned long long)j->entry[r], (unsigned long long)j->clock[r]);
        if (S->trace)
            trace_call(S, c, &oc, m, r, j->entry[r], j->clock[r]);
    }
    return slowest;
}

/* orStreamSynchronize on every stream of each process: its host clock
 * reaches its latest stream. */
static void sync_procs(job *j)
{
    for (int r = 0; r < j->n; r++) {
        uint64_t *h = &j->host[r / j->per_proc];
        *h = j->clock[r] > *h ? j->clock[r] : *h;
    }
}

/* ---- output ------------------------------------------------------------------------------ */

static void print_header(unsigned place)
{
    printf("#\n# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root");
    for (int p = 1; p <= 2; p <<= 1)
        if (place & (unsigned)p)
            printf("  %7s  %6s  %6s", "vtime", "algbw", "busbw");
    printf("  %s\n", "algorithm");
    printf("# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    for (int p = 1; p <= 2; p <<= 1)
        if (place & (unsigned)p)
            printf("  %7s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)");
    printf("\n");
}

/* occl_perf's time column and bandwidths, from the same doubles. */
static void print_result(double time_s, uint64_t bytes, occl_coll k, int n, double *bw_sum)
{
    double us = time_s * 1e6, algbw = (double)bytes / time_s / 1e9, busbw = algbw * bus_factor(k, n);
    char tm[32];
    snprintf(tm, sizeof tm, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
    printf("  %7s  %6.2f  %6.2f", tm, algbw, busbw);
    *bw_sum += busbw;
}

static void print_row_start(const sim *S, const call *c)
{
    printf("%12llu  %12zu  %8s  %6s  %6d", (unsigned long long)c->size, c->count, type_row_name(c->ti),
           colls[c->ci].reduces ? op_names[c->oi] : "none", colls[c->ci].rooted ? c->root : -1);
    (void)S;
}

/* The algorithm of the row's last call. */
static void print_row_end(const sim *S)
{
    if (S->modelled)
        printf("  %s/%s\n", occl_algo_name(S->last.algo), occl_proto_name(S->last.proto));
    else
        printf("  -\n");
}

/* ---- options ------------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [options] TOPOLOGY\n"
            "Replays OCCL collectives in virtual time on TOPOLOGY (a preset, a synthetic\n"
            "string or an XML file, as orrun --topo) without running them.\n"
            "job:\n"
            "  -n, --ranks N        processes (default: as many as the topology holds)\n"
            "  -d, --devices N      devices per process, each one comm rank (default 1)\n"
            "  --placement P        packed, spread or a placement file (default packed)\n"
            "  --profile NAME       device profile whose memory bandwidth reductions run at:\n"
            "                       " OR_PROFILE_NAMES_TEXT " (default cpu, as OPENREG_DEVICE_PROFILE)\n"
            "calls (a sweep, as occl_perf):\n"
            "  -c, --coll NAME      allreduce, broadcast, reduce, allgather, reducescatter,\n"
            "                       alltoall, gather or scatter (default allreduce)\n"
            "  -b, --minbytes SIZE  first size (default 32M); -e, --maxbytes SIZE last (default -b)\n"
            "  -f, --stepfactor N   multiply the size by N; -i, --stepbytes SIZE add SIZE (default 1M)\n"
            "  -t, --datatype TYPE  int8 uint8 int32 uint32 int64 uint64 half float double bfloat16\n"
            "  -o, --op OP          sum prod max min avg (default sum)\n"
            "  -r, --root N         root of broadcast, reduce, gather, scatter (default 0)\n"
            "  -w, --warmup N       untimed calls per size (default 0)\n"
            "  --iters N            timed calls per size (default 1)\n"
            "  --place out|in|both  occl_perf's placements to time (default out)\n"
            "or calls from a file:\n"
            "  --file FILE          one call a line: COLL SIZE [type=T] [op=OP] [root=N]\n"
            "                       [repeat=N]; '#' comments; the calls run back to back\n"
            "model:\n"
            "  --algo LIST          as OCCL_ALGO (default: OCCL_ALGO's value)\n"
            "  --proto LIST         as OCCL_PROTO (default: OCCL_PROTO's value)\n"
            "  --replay-all         replay every candidate, also those whose floor is above\n"
            "                       the best (the same pick; every time for -v)\n"
            "output:\n"
            "  --per-rank           each rank's entry and end (ns) of every call\n"
            "  --trace FILE         a Chrome trace of every call, one track per rank\n"
            "  -v, --verbose        the planner's candidates for each call shape\n"
            "  --stats              host time and memory of the replay on stderr\n"
            "  -h, --help           this text\n"
            "Exit status: 0, 1 for bad input or a job the topology cannot hold, 2 for bad\n"
            "options.\n");
}

static int die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int die(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(status);
}

static int parse_int(const char *opt, const char *s, int min)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > 1 << 30)
        die(2, "%s '%s' is not a number of %d or more", opt, s, min);
    return (int)v;
}

static uint64_t size_opt(const char *opt, const char *s)
{
    uint64_t v;
    if (parse_size(s, &v) != 0)
        die(2, "%s '%s' is not a size (e.g. 8, 64K, 128M) or does not fit 64 bits", opt, s);
    return v;
}

/* Whether `size` bytes of type ti fit the call's counts and the model's
 * clock: counts are size_t, and a transfer's bytes are multiplied by 1e9
 * (exactly, in 128 bits) - sizes beyond 2^62 bytes are refused. */
static bool size_ok(uint64_t size) { return size <= (UINT64_C(1) << 62); }

/* ---- the call file ------------------------------------------------------------------------ */

typedef struct filecall {
    call c;
    uint64_t repeat;
} filecall;

static filecall *read_calls(const char *path, int n, int *count)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die(1, "%s: cannot open the call file: %s", path, strerror(errno));
    filecall *v = NULL;
    int nv = 0, cap = 0, ln = 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (!strchr(line, '\n') && !feof(f))
            die(1, "%s:%d: line longer than %zu characters", path, ln, sizeof line - 2);
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
        if (!tok)
            continue;
        filecall fc = {.c = {.ti = find_type("float"), .oi = 0, .root = 0, .line = ln}, .repeat = 1};
        fc.c.ci = find_coll(tok);
        if (fc.c.ci < 0)
            die(1, "%s:%d: unknown collective '%s' (known: allreduce, broadcast, reduce, allgather, "
                "reducescatter, alltoall, gather, scatter)", path, ln, tok);
        char *sz = strtok_r(NULL, " \t\r\n", &save);
        uint64_t size;
        if (!sz)
            die(1, "%s:%d: expected 'COLL SIZE [type=T] [op=OP] [root=N] [repeat=N]': no size", path, ln);
        if (parse_size(sz, &size) != 0 || !size_ok(size))
            die(1, "%s:%d: '%s' is not a size (e.g. 8, 64K, 128M) of at most 4 EiB", path, ln, sz);
        bool op_given = false;
        for (char *kv; (kv = strtok_r(NULL, " \t\r\n", &save));) {
            char *eq = strchr(kv, '=');
            if (!eq)
                die(1, "%s:%d: expected KEY=VALUE (type, op, root, repeat), not '%s'", path, ln, kv);
            *eq = '\0';
            const char *val = eq + 1;
            char *end;
            if (!strcmp(kv, "type")) {
                if ((fc.c.ti = find_type(val)) < 0)
                    die(1, "%s:%d: unknown type '%s'", path, ln, val);
            } else if (!strcmp(kv, "op")) {
                if ((fc.c.oi = find_op(val)) < 0)
                    die(1, "%s:%d: unknown op '%s' (sum, prod, max, min, avg)", path, ln, val);
                op_given = true;
            } else if (!strcmp(kv, "root")) {
                long r = strtol(val, &end, 10);
                if (!*val || *end || r < 0 || r >= n)
                    die(1, "%s:%d: root '%s' is not a rank of the job (0 to %d)", path, ln, val, n - 1);
                fc.c.root = (int)r;
            } else if (!strcmp(kv, "repeat")) {
                unsigned long long r = strtoull(val, &end, 10);
                if (!*val || *end || val[0] == '-' || r < 1 || r > 1000000)
                    die(1, "%s:%d: repeat '%s' is not a count of 1 to 1000000", path, ln, val);
                fc.repeat = r;
            } else {
                die(1, "%s:%d: unknown key '%s' (type, op, root, repeat)", path, ln, kv);
            }
        }
        if (!colls[fc.c.ci].reduces && op_given)
            die(1, "%s:%d: %s takes no op", path, ln, colls[fc.c.ci].name);
        call_shape(&fc.c, size, n);
        if (nv == cap) {
            cap = cap ? 2 * cap : 16;
            v = realloc(v, (size_t)cap * sizeof *v);
            if (!v)
                die(1, "out of memory");
        }
        v[nv++] = fc;
    }
    if (ferror(f))
        die(1, "%s: cannot read the call file: %s", path, strerror(errno));
    fclose(f);
    if (!nv)
        die(1, "%s: no calls: the file holds no 'COLL SIZE' line", path);
    *count = nv;
    return v;
}

/* ---- main ---------------------------------------------------------------------------------- */

enum { OPT_PLACEMENT = 256, OPT_PROFILE, OPT_ITERS, OPT_PLACE, OPT_FILE, OPT_ALGO, OPT_PROTO,
       OPT_PER_RANK, OPT_TRACE, OPT_STATS, OPT_REPLAY_ALL };

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"ranks", required_argument, NULL, 'n'},      {"devices", required_argument, NULL, 'd'},
        {"placement", required_argument, NULL, OPT_PLACEMENT},
        {"profile", required_argument, NULL, OPT_PROFILE},
        {"coll", required_argument, NULL, 'c'},       {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},   {"stepfactor", required_argument, NULL, 'f'},
        {"stepbytes", required_argument, NULL, 'i'},  {"datatype", required_argument, NULL, 't'},
        {"op", required_argument, NULL, 'o'},         {"root", required_argument, NULL, 'r'},
        {"warmup", required_argument, NULL, 'w'},     {"warmup_iters", required_argument, NULL, 'w'},
        {"iters", required_argument, NULL, OPT_ITERS}, {"place", required_argument, NULL, OPT_PLACE},
        {"file", required_argument, NULL, OPT_FILE},  {"algo", required_argument, NULL, OPT_ALGO},
        {"proto", required_argument, NULL, OPT_PROTO}, {"per-rank", no_argument, NULL, OPT_PER_RANK},
        {"trace", required_argument, NULL, OPT_TRACE}, {"stats", no_argument, NULL, OPT_STATS},
        {"verbose", no_argument, NULL, 'v'},          {"help", no_argument, NULL, 'h'},
        {"replay-all", no_argument, NULL, OPT_REPLAY_ALL},
        {NULL, 0, NULL, 0}};
    int nprocs = 0, per_proc = 1, ci = 0, ti = find_type("float"), oi = 0, root = 0, warmup = 0, iters = 1;
    uint64_t minb = 32u << 20, maxb = 0, stepb = 1u << 20, factor = 0;
    bool have_max = false, op_given = false, verbose = false, per_rank = false, stats = false, replay_all = false;
    unsigned place = 1;
    const char *placement = "packed", *profile = NULL, *file = NULL, *trace = NULL;
    int opt;
    while ((opt = getopt_long(argc, argv, "n:d:c:b:e:f:i:t:o:r:w:vh", longopts, NULL)) != -1) {
        switch (opt) {
        case 'n': nprocs = parse_int("-n", optarg, 1); break;
        case 'd': per_proc = parse_int("-d", optarg, 1); break;
        case OPT_PLACEMENT: placement = optarg; break;
        case OPT_PROFILE: profile = optarg; break;
        case 'c':
            if ((ci = find_coll(optarg)) < 0)
                die(2, "-c '%s': unknown collective (known: allreduce, broadcast, reduce, allgather, "
                    "reducescatter, alltoall, gather, scatter)", optarg);
            break;
        case 'b': minb = size_opt("-b", optarg); break;
        case 'e': maxb = size_opt("-e", optarg); have_max = true; break;
        case 'f': factor = (uint64_t)parse_int("-f", optarg, 1); break;
        case 'i': stepb = size_opt("-i", optarg); break;
        case 't':
            if ((ti = find_type(optarg)) < 0)
                die(2, "-t '%s': unknown type (int8, uint8, int32, uint32, int64, uint64, half, float, "
                    "double, bfloat16)", optarg);
            break;
        case 'o':
            if ((oi = find_op(optarg)) < 0)
                die(2, "-o '%s': unknown op (sum, prod, max, min, avg)", optarg);
            op_given = true;
            break;
        case 'r': root = parse_int("-r", optarg, 0); break;
        case 'w': warmup = parse_int("-w", optarg, 0); break;
        case OPT_ITERS: iters = parse_int("--iters", optarg, 1); break;
        case OPT_PLACE:
            if (!strcmp(optarg, "out"))
                place = 1;
            else if (!strcmp(optarg, "in"))
                place = 2;
            else if (!strcmp(optarg, "both"))
                place = 3;
            else
                die(2, "--place '%s': expected out, in or both", optarg);
            break;
        case OPT_FILE: file = optarg; break;
        case OPT_ALGO: setenv("OCCL_ALGO", optarg, 1); break;
        case OPT_PROTO: setenv("OCCL_PROTO", optarg, 1); break;
        case OPT_PER_RANK: per_rank = true; break;
        case OPT_REPLAY_ALL: replay_all = true; break;
        case OPT_TRACE: trace = optarg; break;
        case OPT_STATS: stats = true; break;
        case 'v': verbose = true; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, PROG ": %s\n", optind < argc ? "one TOPOLOGY, no other argument" : "no TOPOLOGY");
        usage(stderr);
        return 2;
    }
    if (!have_max)
        maxb = minb;
    if (!size_ok(maxb) || !size_ok(minb))
        die(2, "sizes beyond 4 EiB (2^62 bytes) do not fit the model's clock");
    if (minb > maxb)
        die(2, "-b %llu is above -e %llu", (unsigned long long)minb, (unsigned long long)maxb);
    if (factor == 1 || (factor == 0 && stepb == 0 && minb != maxb) || (factor > 1 && minb == 0 && minb != maxb))
        die(2, "the sizes would never grow: give -f 2 or more, or -i above 0 (and -b above 0 with -f)");
    if (!colls[ci].reduces && op_given)
        die(2, "-o: %s takes no op", colls[ci].name);
    const char *why = occl_algo_setting_error();
    char pwhy[256];
    if (why)
        die(2, "%s", why);
    if (occl_proto_settings(pwhy, sizeof pwhy) != 0)
        die(2, "%s", pwhy);
    if (!profile)
        profile = getenv("OPENREG_DEVICE_PROFILE") && *getenv("OPENREG_DEVICE_PROFILE")
                      ? getenv("OPENREG_DEVICE_PROFILE") : "cpu";
    const or_device_profile *prof = or_profile_find(profile);
    if (!prof)
        die(2, "--profile '%s': unknown profile (%s)", profile, OR_PROFILE_NAMES_TEXT);

    job J = {.per_proc = per_proc, .profile = profile};
    or_topo_error err;
    if (or_topo_load(argv[optind], "TOPOLOGY", &J.topo, &err) != OR_TOPO_OK) {
        char msg[700];
        or_topo_error_format(&err, msg, sizeof msg);
        die(1, "%s", msg);
    }
    if (!nprocs) { /* as many whole processes as the nodes hold */
        for (int k = 0; k < or_topo_node_count(J.topo); k++) {
            int first, cnt;
            or_topo_node_devices(J.topo, k, &first, &cnt);
            nprocs += cnt / per_proc;
        }
        if (!nprocs)
            die(1, "topology '%s' has no node with %d devices for a process", or_topo_name(J.topo), per_proc);
    }
    if ((long long)nprocs * per_proc > or_topo_device_count(J.topo))
        die(1, "%d processes x %d devices need %lld devices; topology '%s' has %d", nprocs, per_proc,
            (long long)nprocs * per_proc, or_topo_name(J.topo), or_topo_device_count(J.topo));
    J.nprocs = nprocs;
    J.n = nprocs * per_proc;
    J.dev = xcalloc((size_t)J.n, sizeof *J.dev);
    if (or_topo_check_fit(J.topo, nprocs, per_proc, &err) != OR_TOPO_OK) {
        char msg[700];
        or_topo_error_format(&err, msg, sizeof msg);
        die(1, "the job does not fit: %s", msg);
    }
    or_topo_status st;
    if (!strcasecmp(placement, "packed") || !strcasecmp(placement, "spread"))
        st = or_topo_place(J.topo, nprocs, per_proc,
                           !strcasecmp(placement, "packed") ? OR_TOPO_PLACE_PACKED : OR_TOPO_PLACE_SPREAD,
                           J.dev, &err);
    else
        st = or_topo_place_file(J.topo, placement, nprocs, per_proc, J.dev, &err);
    if (st != OR_TOPO_OK) {
        char msg[700];
        or_topo_error_format(&err, msg, sizeof msg);
        die(1, "--placement %s: %s", placement, msg);
    }
    if (colls[ci].rooted && root >= J.n)
        die(2, "-r %d: the job has %d ranks", root, J.n);
    job_build(&J);
    /* What the runtime rates a device's memory at in virtual time (a 'cpu'
     * device as one core: src/runtime.c). */
    double gbs = prof->memory_gbs ? prof->memory_gbs : OR_CPU_GBS_PER_CORE * 1;
    for (int r = 0; r < J.n; r++)
        J.bps[r] = (uint64_t)llround(gbs * 1e9);

    int nc = 0;
    filecall *fc = file ? read_calls(file, J.n, &nc) : NULL; /* refused before any output */
    sim S = {.j = &J, .sys = job_system(&J), .verbose = verbose, .per_rank = per_rank,
           .replay_all = replay_all, .trace_first = true};
    if (trace) {
        S.trace = fopen(trace, "w");
        if (!S.trace)
            die(1, "--trace %s: %s", trace, strerror(errno));
        fprintf(S.trace, "{\"traceEvents\":[\n");
        for (int r = 0; r < J.n; r++) {
            fprintf(S.trace, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":"
                    "\"rank %d device %d (process %d, %s)\"}}", r ? ",\n" : "", r, r, r % per_proc,
                    r / per_proc, profile);
        }
        S.trace_first = J.n == 0;
    }
    printf("# occl-sim: %d ranks (%d process%s x %d device%s) on topology '%s', %s placement, %s profile, "
           "%d virtual node%s\n",
           J.n, nprocs, nprocs == 1 ? "" : "es", per_proc, per_proc == 1 ? "" : "s", or_topo_name(J.topo),
           placement, profile, J.nnodes, J.nnodes == 1 ? "" : "s");
    printf("# virtual time: the model a run with OPENREG_TIME=virtual charges; no data is moved\n");

    double t0 = now_s(), bw_sum = 0;
    int rows = 0;
    uint64_t seq = 0;
    if (file) {
        printf("# calls from %s, back to back; vtime: the slowest rank's time in the call\n", file);
        print_header(1);
        for (int i = 0; i < nc; i++) {
            for (uint64_t k = 0; k < fc[i].repeat; k++) {
                uint64_t ns = issue(&S, &fc[i].c, seq++);
                print_row_start(&S, &fc[i].c);
                print_result((double)ns * 1e-9, fc[i].c.size, colls[fc[i].c.ci].coll, J.n, &bw_sum);
                print_row_end(&S);
                rows++;
            }
        }
        free(fc);
    } else {
        printf("# sweep as occl_perf -c 0: %d untimed and %d timed calls per size; vtime: the slowest "
               "rank's time per timed call\n", warmup, iters);
        print_header(place);
        for (uint64_t size = minb; size <= maxb;) {
            call c = {.ci = ci, .ti = ti, .oi = oi, .root = root};
            call_shape(&c, size, J.n);
            double times[2] = {0, 0};
            for (unsigned p = 1; p <= 2; p <<= 1) {
                if (!(place & p))
                    continue;
                for (int k = 0; k < warmup; k++)
                    issue(&S, &c, seq++);
                sync_procs(&J);
                uint64_t *ev0 = xcalloc((size_t)J.n, sizeof *ev0);
                for (int r = 0; r < J.n; r++) {
                    uint64_t h = J.host[r / per_proc];
                    ev0[r] = J.clock[r] > h ? J.clock[r] : h;
                }
                for (int k = 0; k < iters; k++)
                    issue(&S, &c, seq++);
                double elapsed = 0;
                for (int r = 0; r < J.n; r++) {
                    long long ns = (long long)(J.clock[r] - ev0[r]);
                    elapsed = ns * 1e-9 > elapsed ? ns * 1e-9 : elapsed;
                }
                free(ev0);
                sync_procs(&J);
                times[p - 1] = elapsed / iters;
            }
            print_row_start(&S, &c);
            for (unsigned p = 1; p <= 2; p <<= 1)
                if (place & p) {
                    print_result(times[p - 1], c.size, colls[ci].coll, J.n, &bw_sum);
                    rows++;
                }
            print_row_end(&S);
            uint64_t next = factor > 1 ? size * factor : size + stepb;
            if (next <= size || (factor > 1 && next / factor != size))
                break; /* the last size, or the next would overflow */
            size = next;
        }
    }
    printf("# Avg bus bandwidth    : %g\n", rows ? bw_sum / rows : 0.0);
    if (S.trace) {
        fprintf(S.trace, "\n]}\n");
        if (fclose(S.trace) != 0)
            die(1, "--trace %s: %s", trace, strerror(errno));
    }
    if (stats) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        fprintf(stderr, PROG ": %d ranks: %llu calls replayed, %d call shapes planned; %.3f s in total, "
                "%.3f s in the replays of the calls; peak memory %ld MiB\n",
                J.n, (unsigned long long)S.calls, S.shapes, now_s() - t0, S.replay_s, ru.ru_maxrss / 1024);
    }
    occl_trees_release(&J.trees);
    free(J.dev);
    free(J.ring);
    free(J.node_first);
    free(J.bps);
    free(J.clock);
    free(J.host);
    free(J.entry);
    or_topo_free(J.topo);
    return 0;
}
