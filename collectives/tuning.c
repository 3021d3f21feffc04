/*
 * collectives/tuning.c - which algorithm a call uses: a cost model of each
 * algorithm's steps (alpha-beta, with the hop costs of this machine class),
 * the cheapest allowed one wins. OCCL_ALGO restricts the choice with NCCL's
 * syntax: "ring,tree", "^direct" (all but), or per collective
 * "allreduce:tree;broadcast:ring". A collective the list leaves with no
 * algorithm it has uses its own cheapest, as NCCL falls back for
 * collectives an algorithm does not implement. In virtual time the planner
 * also picks NCCL's protocol (LL, LL128, Simple: vproto.h), which
 * OCCL_PROTO restricts with NCCL_PROTO's syntax. OCCL_DEBUG=INFO logs each
 * choice.
 */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define OCCL_LOG_SUBSYS OCCL_SUBSYS_TUNING
#include "occl_internal.h"
#include "plugin.h"
#include "vmodel.h"

static const char *const algo_names[OCCL_NUM_ALGOS] = {"ring", "tree", "direct", "hierarchical",
                                                        "nvls"};

const char *occl_algo_name(occl_algo a)
{
    return (unsigned)a < OCCL_NUM_ALGOS ? algo_names[a] : "?";
}

/* "ring, tree, ...": the names, for the warning about an unknown one. */
static const char *known_names(void)
{
    static char list[16 * OCCL_NUM_ALGOS];
    if (!list[0])
        for (int a = 0; a < OCCL_NUM_ALGOS; a++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", a ? ", " : "",
                     algo_names[a]);
    return list;
}

/* Allowed algorithms per collective, from OCCL_ALGO. */
static unsigned allowed[OCCL_COLL_RECV + 1];
static pthread_once_t parse_once = PTHREAD_ONCE_INIT;
static char algo_error[200]; /* an unknown name in OCCL_ALGO: an error, as NCCL >= 2.24 */

static unsigned parse_list(const char *list, size_t len)
{
    bool exclude = len && list[0] == '^';
    unsigned mask = 0;
    const char *p = list + exclude, *end = list + len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t n = (size_t)((comma ? comma : end) - p);
        int a = 0;
        while (a < OCCL_NUM_ALGOS && !(strlen(algo_names[a]) == n && strncasecmp(p, algo_names[a], n) == 0))
            a++;
        if (a < OCCL_NUM_ALGOS)
            mask |= 1u << a;
        else if (n && !algo_error[0])
            snprintf(algo_error, sizeof algo_error, "OCCL_ALGO: unknown algorithm '%.*s' (known: %s)",
                     (int)(n > 40 ? 40 : n), p, known_names());
        p += n + 1;
    }
    unsigned all = (1u << OCCL_NUM_ALGOS) - 1;
    return exclude ? all & ~mask : mask;
}

static void parse_env(void)
{
    unsigned all = (1u << OCCL_NUM_ALGOS) - 1;
    for (int c = 0; c <= OCCL_COLL_RECV; c++)
        allowed[c] = all;
    const char *env = getenv("OCCL_ALGO");
    if (!env || !*env)
        return;
    if (!strchr(env, ':')) {
        unsigned m = parse_list(env, strlen(env));
        for (int c = 0; c <= OCCL_COLL_RECV; c++)
            allowed[c] = m;
        return;
    }
    for (const char *p = env; *p;) {
        const char *semi = strchr(p, ';'), *end = semi ? semi : p + strlen(p);
        const char *colon = memchr(p, ':', (size_t)(end - p));
        if (colon) {
            int c = 0;
            while (c <= OCCL_COLL_RECV &&
                   !(strlen(occl_coll_name((occl_coll)c)) == (size_t)(colon - p) &&
                     strncasecmp(p, occl_coll_name((occl_coll)c), (size_t)(colon - p)) == 0))
                c++;
            if (c <= OCCL_COLL_RECV)
                allowed[c] = parse_list(colon + 1, (size_t)(end - colon - 1));
            else if (!algo_error[0])
                snprintf(algo_error, sizeof algo_error, "OCCL_ALGO: unknown collective '%.*s'",
                         (int)(colon - p > 40 ? 40 : colon - p), p);
        }
        p = semi ? semi + 1 : end;
    }
}

/* Allowed protocols per collective, from OCCL_PROTO; a value that is not
 * valid is refused when a communicator starts (comm.c), so the planner
 * never runs on it. */
static unsigned proto_allowed[OCCL_COLL_RECV + 1];
static char proto_error[192];
static pthread_once_t proto_once = PTHREAD_ONCE_INIT;

static void parse_proto_env(void)
{
    const char *names[OCCL_COLL_RECV + 1];
    for (int c = 0; c <= OCCL_COLL_RECV; c++)
        names[c] = occl_coll_name((occl_coll)c);
    const char *env = getenv("OCCL_PROTO");
    char why[120];
    if (occl_proto_parse(env, names, OCCL_COLL_RECV + 1, proto_allowed, why, sizeof why) != 0) {
        snprintf(proto_error, sizeof proto_error, "OCCL_PROTO='%.40s' is not valid: %s", env, why);
        for (int c = 0; c <= OCCL_COLL_RECV; c++)
            proto_allowed[c] = OCCL_PROTO_ALL;
    }
}

int occl_proto_settings(char *why, size_t why_size)
{
    pthread_once(&proto_once, parse_proto_env);
    if (!proto_error[0])
        return 0;
    snprintf(why, why_size, "%s", proto_error);
    return -1;
}

/* Wall time moves the same bytes whatever the protocol: the one reported is
 * NCCL's bulk protocol when allowed. */
static occl_proto wall_proto(unsigned pmask)
{
    for (int p = OCCL_NUM_PROTOS - 1; p >= 0; p--)
        if (pmask & (1u << p))
            return (occl_proto)p;
    return OCCL_PROTO_SIMPLE;
}

const char *occl_algo_setting_error(void)
{
    pthread_once(&parse_once, parse_env);
    return algo_error[0] ? algo_error : NULL;
}

bool occl_algo_restricted(occl_coll c)
{
    pthread_once(&parse_once, parse_env);
    return allowed[c] != (1u << OCCL_NUM_ALGOS) - 1;
}

/* Hop costs: a wake-up and a copy within a node, an MPI message between
 * nodes (both measured on the project's 2-core machines). */
#define ALPHA_NODE_US 15.0
#define BETA_NODE_GBS 8.0
#define ALPHA_NET_US 40.0
#define BETA_NET_GBS 3.0

static double hop_us(bool net, double bytes)
{
    return net ? ALPHA_NET_US + bytes / (BETA_NET_GBS * 1e3) : ALPHA_NODE_US + bytes / (BETA_NODE_GBS * 1e3);
}

/* What the formulas see of the ranks: a communicator's, or a system the
 * model describes without one (occl_plan_system). */
typedef struct plan_view {
    int nranks, nnodes;
    const int *node_first;
    const occl_trees *trees;
} plan_view;

/* Ranks of the most populated virtual node. */
static int max_local(const plan_view *v)
{
    int m = 0;
    for (int k = 0; k < v->nnodes; k++)
        if (v->node_first[k + 1] - v->node_first[k] > m)
            m = v->node_first[k + 1] - v->node_first[k];
    return m;
}

/* Predicted microseconds of an all-reduce of `bytes` with algorithm a;
 * INFINITY where the planner should not pick it by itself. */
static double allreduce_cost(const plan_view *comm, const occl_call *c, occl_algo a, double bytes)
{
    int n = comm->nranks, L = comm->nnodes, m = max_local(comm);
    bool net = L > 1;
    switch (a) {
    case OCCL_ALGO_RING: return 2.0 * (n - 1) * hop_us(net, bytes / n);
    case OCCL_ALGO_TREE: {
        /* The double binary tree: both halves at once, each up and down its
         * tree in chunks; at a step a rank moves a chunk of each tree. */
        double steps = 0, chunk = 0;
        for (int t = 0; t < 2; t++) {
            size_t lo, len, ce, nch, es = occl_type_size(c->type);
            occl_tree_half(c->count, es, t, &lo, &len, &ce, &nch);
            steps = fmax(steps, occl_tree_steps(comm->trees, t, nch));
            chunk = fmax(chunk, (double)(len < ce ? len : ce) * (double)es);
        }
        return steps * hop_us(net, 2.0 * chunk);
    }
    case OCCL_ALGO_DIRECT:
        /* n-1 messages in and out at once, then an n-way reduction;
         * it keeps n copies of the buffer: only for small ones. */
        if (bytes * n > (double)(64u << 20))
            return INFINITY;
        return hop_us(net, bytes) + (n - 1) * bytes / ((net ? BETA_NET_GBS : BETA_NODE_GBS) * 1e3);
    case OCCL_ALGO_HIERARCHICAL:
        /* Only worth it with several nodes of several ranks: the leader
         * reads its m-1 peers' buffers, the leaders' ring crosses the
         * network 2(L-1) times with S/L, the peers copy the result back. */
        if (L < 2 || m < 2)
            return INFINITY;
        return hop_us(false, (m - 1) * bytes) + 2.0 * (L - 1) * hop_us(true, bytes / L) +
               hop_us(false, bytes);
    case OCCL_ALGO_NVLS:
        /* One pass: the peers' (n-1)/n of this rank's slice read and the
         * result written to them, between two hand-shakes (offers mapped,
         * writes released). One virtual node only: occl_plan offers it
         * nowhere else. */
        return ALPHA_NODE_US + hop_us(false, (n - 1) * bytes / n);
    default: return INFINITY;
    }
}

/* Reduce: a pipelined chain (n-1 links, then one chunk time per further
 * chunk) or a binary tree (each level waits for two children's whole
 * buffers). */
static double reduce_cost(const plan_view *comm, const occl_call *c, occl_algo a, double bytes)
{
    int n = comm->nranks;
    bool net = comm->nnodes > 1;
    double chunk = (double)occl_chain_chunk((size_t)bytes);
    double nchunks = ceil(bytes / chunk), piece = bytes < chunk ? bytes : chunk;
    switch (a) {
    case OCCL_ALGO_RING: return (n - 1 + (nchunks > 1 ? nchunks - 1 : 0)) * hop_us(net, piece);
    case OCCL_ALGO_TREE: {
        /* Each half up its tree, re-rooted at the root, in chunks at once. */
        occl_trees R;
        if (occl_trees_reroot(comm->trees, c->root, &R) != 0)
            return INFINITY;
        double steps = 0, piece_t = 0;
        for (int t = 0; t < 2; t++) {
            size_t lo, len, ce, nch, es = occl_type_size(c->type);
            occl_tree_half(c->count, es, t, &lo, &len, &ce, &nch);
            if (nch)
                steps = fmax(steps, R.ready[(size_t)t * n + R.root[t]] + (double)nch - 1);
            piece_t = fmax(piece_t, (double)(len < ce ? len : ce) * (double)es);
        }
        occl_trees_release(&R);
        return steps * hop_us(net, 2.0 * piece_t);
    }
    default: return INFINITY;
    }
}

_Static_assert(OCCL_NUM_ALGOS <= OCCL_PLAN_MAX_ALGOS, "a plan entry records every algorithm");

/* Virtual time: the planner's cached decision for c's shape, or a new entry
 * (the oldest replaced) with used == false. Under comm->lock, as every task
 * of the communicator. */
static struct occl_plan_entry *plan_slot(occlComm_t comm, const occl_call *c, int root)
{
    for (int i = 0; i < OCCL_PLAN_CACHE; i++) {
        struct occl_plan_entry *e = &comm->plan_cache[i];
        if (e->used && e->coll == c->coll && e->type == c->type && e->count == c->count && e->root == root)
            return e;
    }
    struct occl_plan_entry *e = &comm->plan_cache[comm->plan_next];
    comm->plan_next = (comm->plan_next + 1) % OCCL_PLAN_CACHE;
    *e = (struct occl_plan_entry){.used = false, .coll = (unsigned char)c->coll,
                                  .type = (unsigned char)c->type, .root = root, .count = c->count};
    return e;
}

/* How the planner prices a candidate (algorithm, protocol): its replayed
 * completion, every rank entering at 0, and optionally a floor no replay of
 * it can beat (0: none known). */
typedef struct plan_model {
    uint64_t (*estimate)(const void *ctx, const occl_call *c, occl_algo a, occl_proto p);
    uint64_t (*bound)(const void *ctx, const occl_call *c, occl_algo a, occl_proto p); /* NULL: none */
    const void *ctx;
} plan_model;

/* A system of ranks (a communicator's: occl_vcost_view) and their devices'
 * memory bandwidths; s NULL: the system could not be built (out of memory),
 * nothing can be modelled. */
typedef struct system_ctx {
    const occl_vsystem *s;
    const uint64_t *bps;
} system_ctx;

static uint64_t system_estimate(const void *ctx, const occl_call *c, occl_algo a, occl_proto p)
{
    const system_ctx *x = ctx;
    return x->s ? occl_vmodel_time(x->s, c, a, p, x->bps) : UINT64_MAX;
}

static uint64_t system_bound(const void *ctx, const occl_call *c, occl_algo a, occl_proto p)
{
    const system_ctx *x = ctx;
    return x->s ? occl_vmodel_lower_bound(x->s, c, a, p) : 0;
}

/* The candidate pair (algorithm, protocol) with the smallest replayed
 * completion (every rank entering at 0), as NCCL takes the pair of least
 * predicted time; the first in enum order (algorithm, then LL, LL128,
 * Simple) on a tie. The replay depends only on what every rank holds alike
 * (the call, the ring and nodes, the ranks' devices and the bandwidths
 * exchanged with the entry clocks), so every rank picks the same.
 * Candidates are replayed in the order of their floors (m->bound), and one
 * whose floor is above the best completion so far is not replayed: it
 * cannot win, and a ring all-reduce on thousands of ranks is millions of
 * transfers. Its floor is kept in e->floor_ns for the log. */
static occl_choice plan_from_model(const occl_call *c, unsigned cand, unsigned pmask,
                                   struct occl_plan_entry *e, const plan_model *m)
{
    struct { int a, p; uint64_t floor; } order[OCCL_PLAN_MAX_ALGOS * OCCL_NUM_PROTOS];
    int n = 0;
    for (int a = 0; a < OCCL_PLAN_MAX_ALGOS; a++)
        for (int p = 0; p < OCCL_NUM_PROTOS; p++) {
            e->est_ns[a][p] = UINT64_MAX;
            e->floor_ns[a][p] = 0;
            if (a >= OCCL_NUM_ALGOS || !(cand & (1u << a)) || !(pmask & (1u << p)) ||
                !occl_proto_supported(occl_vmodel_family(c->coll, (occl_algo)a), (occl_proto)p))
                continue;
            uint64_t floor = m->bound ? m->bound(m->ctx, c, (occl_algo)a, (occl_proto)p) : 0;
            int i = n++; /* insertion: by floor, enum order among equals */
            for (; i > 0 && order[i - 1].floor > floor; i--)
                order[i] = order[i - 1];
            order[i].a = a;
            order[i].p = p;
            order[i].floor = floor;
        }
    occl_choice pick = {OCCL_NUM_ALGOS, OCCL_PROTO_SIMPLE};
    uint64_t best = UINT64_MAX;
    bool modelled = true;
    for (int i = 0; i < n; i++) {
        int a = order[i].a, p = order[i].p;
        if (pick.algo != OCCL_NUM_ALGOS && order[i].floor > best) {
            e->floor_ns[a][p] = order[i].floor;
            continue;
        }
        uint64_t t = m->estimate(m->ctx, c, (occl_algo)a, (occl_proto)p);
        e->est_ns[a][p] = t;
        if (t == UINT64_MAX) {
            modelled = false;
        } else if (pick.algo == OCCL_NUM_ALGOS || t < best ||
                   (t == best && a * OCCL_NUM_PROTOS + p < (int)pick.algo * OCCL_NUM_PROTOS + (int)pick.proto)) {
            best = t;
            pick = (occl_choice){(occl_algo)a, (occl_proto)p};
        }
    }
    if (pick.algo == OCCL_NUM_ALGOS) /* nothing modelled: the first candidate */
        for (int a = OCCL_NUM_ALGOS - 1; a >= 0; a--)
            if (cand & (1u << a))
                pick = (occl_choice){(occl_algo)a, wall_proto(pmask)};
    e->algo = (unsigned char)pick.algo;
    e->proto = (unsigned char)pick.proto;
    /* A replay that ran out of memory decides nothing for later calls; the
     * ranks may disagree on this one (then the call times out). */
    e->used = modelled;
    if (!modelled && c->comm)
        OCCL_WARN("rank %d: %s: a candidate could not be modelled in virtual time (out of memory); using %s/%s",
                  c->comm->rank, occl_coll_name(c->coll), occl_algo_name(pick.algo),
                  occl_proto_name(pick.proto));
    return pick;
}

/* "ring/LL 12 ns, ring/Simple 15 ns, ring/LL128 > 20 ns" for the log (">":
 * not replayed, its floor above the pick). */
static void format_estimates(const struct occl_plan_entry *e, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int a = 0; a < OCCL_NUM_ALGOS && len < size; a++)
        for (int p = 0; p < OCCL_NUM_PROTOS && len < size; p++) {
            bool replayed = e->est_ns[a][p] != UINT64_MAX;
            if (!replayed && !e->floor_ns[a][p])
                continue;
            int w = snprintf(buf + len, size - len, "%s%s/%s %s%llu ns", len ? ", " : "",
                             occl_algo_name((occl_algo)a), occl_proto_name((occl_proto)p),
                             replayed ? "" : "> ",
                             (unsigned long long)(replayed ? e->est_ns[a][p] : e->floor_ns[a][p]));
            if (w < 0)
                return;
            len += (size_t)w;
        }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The formulas' side of the planner: *mask the algorithms OCCL_ALGO allows
 * among those collective c implements (all it implements when it allows
 * none), *cand those of them with a finite cost, costs[] each one's; returns
 * the formulas' pick (the first allowed when none is finite). */
static occl_algo plan_formulas(const plan_view *view, const occl_call *c, unsigned *mask_out,
                               unsigned *cand_out, double *costs)
{
    pthread_once(&parse_once, parse_env);
    unsigned mask = allowed[c->coll];
    double bytes = (double)c->count * (double)occl_type_size(c->type);
    /* What each collective implements. */
    unsigned has = 1u << OCCL_ALGO_RING;
    if (c->coll == OCCL_COLL_ALLTOALL || c->coll == OCCL_COLL_GATHER || c->coll == OCCL_COLL_SCATTER)
        has = 1u << OCCL_ALGO_DIRECT;
    else if (c->coll == OCCL_COLL_ALLREDUCE)
        /* NVLS reads its peers' memory in place: one virtual node only. */
        has = ((1u << OCCL_NUM_ALGOS) - 1) & ~(view->nnodes > 1 ? 1u << OCCL_ALGO_NVLS : 0u);
    else if (c->coll == OCCL_COLL_REDUCE)
        has |= 1u << OCCL_ALGO_TREE;
    if (!(mask & has))
        mask = has;
    occl_algo pick = OCCL_NUM_ALGOS;
    double best = INFINITY;
    unsigned cand = 0; /* allowed and eligible (a finite cost) */
    for (int a = 0; a < OCCL_NUM_ALGOS; a++) {
        if (!(mask & has & (1u << a)))
            continue;
        if (pick == OCCL_NUM_ALGOS)
            pick = (occl_algo)a; /* allowed: used even if the model would not pick it */
        double cost = c->coll == OCCL_COLL_ALLREDUCE ? allreduce_cost(view, c, (occl_algo)a, bytes)
                      : c->coll == OCCL_COLL_REDUCE  ? reduce_cost(view, c, (occl_algo)a, bytes)
                                                     : 0;
        costs[a] = cost;
        if (cost < INFINITY)
            cand |= 1u << a;
        if (cost < best) {
            best = cost;
            pick = (occl_algo)a;
        }
    }
    *mask_out = mask & has;
    *cand_out = cand;
    return pick;
}

occl_choice occl_plan_system(const occl_vsystem *s, const occl_call *c, const uint64_t *bps, bool replay_all,
                             uint64_t est_ns[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS],
                             uint64_t floor_ns[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS])
{
    pthread_once(&proto_once, parse_proto_env);
    unsigned pmask = proto_allowed[c->coll];
    plan_view view = {s->nranks, s->nnodes, s->node_first, &s->trees};
    unsigned mask, cand;
    double costs[OCCL_NUM_ALGOS];
    occl_algo pick = plan_formulas(&view, c, &mask, &cand, costs);
    struct occl_plan_entry e = {0};
    for (int a = 0; a < OCCL_PLAN_MAX_ALGOS; a++)
        for (int p = 0; p < OCCL_NUM_PROTOS; p++)
            e.est_ns[a][p] = UINT64_MAX;
    occl_choice choice = {pick, wall_proto(pmask)};
    /* As occl_plan_choice in a modelled call: the replay decides when there
     * is a choice to make. */
    if (cand && ((cand & (cand - 1)) || (pmask & (pmask - 1)))) {
        system_ctx ctx = {s, bps};
        plan_model m = {system_estimate, replay_all ? NULL : system_bound, &ctx};
        choice = plan_from_model(c, cand, pmask, &e, &m);
    }
    if (est_ns)
        memcpy(est_ns, e.est_ns, sizeof e.est_ns);
    if (floor_ns)
        memcpy(floor_ns, e.floor_ns, sizeof e.floor_ns);
    return choice;
}

occl_algo occl_plan(const occl_call *c) { return occl_plan_choice(c).algo; }

occl_algo occl_plan_wall(const occl_call *c)
{
    occlComm_t comm = c->comm;
    plan_view view = {comm->nranks, comm->nnodes, comm->node_first, &comm->trees};
    unsigned mask, cand;
    double costs[OCCL_NUM_ALGOS];
    return plan_formulas(&view, c, &mask, &cand, costs);
}

/* The low-latency path (ll.c): one hand-shake, then each rank reads the
 * boxes it needs (all n for the symmetric collectives) at memory speed. */
static double ll_cost_us(const occl_call *c)
{
    double bytes = (double)c->count * (double)occl_type_size(c->type);
    return 2.0 + (double)c->comm->nranks * bytes / (BETA_NODE_GBS * 1e3);
}

bool occl_ll_wanted(const occl_call *c)
{
    if (!c->comm->tuner || !occl_tuner_asks(c->coll))
        return true; /* OCCL's own decision: the call is small enough */
    return occl_plan_choice(c).proto == OCCL_PROTO_LL;
}

occl_choice occl_plan_choice(const occl_call *c)
{
    pthread_once(&parse_once, parse_env);
    pthread_once(&proto_once, parse_proto_env);
    bool timed = occl_log_threshold >= OCCL_LOG_TRACE;
    uint64_t t0 = timed ? now_ns() : 0;
    occlComm_t comm = c->comm;
    plan_view view = {comm->nranks, comm->nnodes, comm->node_first, &comm->trees};
    unsigned mask, cand;
    double costs[OCCL_NUM_ALGOS];
    occl_algo pick = plan_formulas(&view, c, &mask, &cand, costs);
    /* Virtual time: the clock the program sees is the replay's (vcost.c),
     * so the candidates are compared by the replay, not by this host's hop
     * costs. Only while a modelled call runs (comm->vbps); one candidate
     * needs no replay. */
    /* Protocols are compared only there: in wall time they change nothing. */
    unsigned pmask = proto_allowed[c->coll];
    occl_choice choice = {pick, wall_proto(pmask)};
    struct occl_plan_entry *e = NULL;
    bool cached = false;
    if (comm->vbps && cand && ((cand & (cand - 1)) || (pmask & (pmask - 1)))) {
        e = plan_slot(comm, c, c->coll == OCCL_COLL_REDUCE ? c->root : -1);
        cached = e->used;
        if (cached) {
            choice = (occl_choice){(occl_algo)e->algo, (occl_proto)e->proto};
        } else {
            occl_vcost_view model_view;
            bool built = occl_vcost_view_make(comm, &model_view) == 0;
            system_ctx ctx = {built ? &model_view.s : NULL, comm->vbps};
            /* An NCCL tuner plugin is shown every candidate's replayed time:
             * none is left out for its floor. */
            plan_model m = {system_estimate, comm->tuner ? NULL : system_bound, &ctx};
            choice = plan_from_model(c, cand, pmask, e, &m);
            if (built)
                occl_vcost_view_release(&model_view);
        }
        pick = choice.algo;
    }
    if (comm->tuner) { /* an NCCL tuner plugin has the last word (tuner.c) */
        /* A call the low-latency path may take is offered under LL too, and
         * that path is OCCL's own choice for it (ll.c). */
        double ll_us = -1;
        occl_proto own_proto = choice.proto;
        if ((pmask & (1u << OCCL_PROTO_LL)) && occl_ll_eligible(c)) {
            ll_us = ll_cost_us(c);
            if (!e)
                own_proto = OCCL_PROTO_LL;
        }
        choice = occl_tuner_choose(c, mask, costs, e ? e->est_ns : NULL, (occl_choice){pick, own_proto},
                                   ll_us);
        pick = choice.algo;
    }
    if (timed)
        occl_log(OCCL_LOG_TRACE, "rank %d: %s of %zu x %s planned in %.2f us (%s)", comm->rank,
                 occl_coll_name(c->coll), c->count, occl_type_name(c->type), (double)(now_ns() - t0) / 1e3,
                 !e ? "cost formulas" : cached ? "virtual-time model, cached" : "virtual-time model, replayed");
    if (e && occl_log_threshold >= OCCL_LOG_INFO) {
        char est[56 * OCCL_NUM_ALGOS * OCCL_NUM_PROTOS];
        format_estimates(e, est, sizeof est);
        OCCL_INFO("rank %d: %s of %zu x %s on %d ranks, %d virtual nodes (virtual-time model: %s): %s/%s",
                  comm->rank, occl_coll_name(c->coll), c->count, occl_type_name(c->type), comm->nranks,
                  comm->nnodes, est, occl_algo_name(pick), occl_proto_name(choice.proto));
    } else {
        occl_plan_log(c, pick);
    }
    return choice;
}

void occl_plan_log(const occl_call *c, occl_algo algo)
{
    occlComm_t comm = c->comm;
    OCCL_INFO("rank %d: %s of %zu x %s on %d ranks, %d virtual nodes: %s", comm->rank, occl_coll_name(c->coll),
              c->count, occl_type_name(c->type), comm->nranks, comm->nnodes, occl_algo_name(algo));
}
