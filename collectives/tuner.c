/*
 * collectives/tuner.c - an NCCL tuner plugin drives OCCL's algorithm choice.
 *
 * As in NCCL, the plugin gets a cost table float[NCCL_NUM_ALGORITHMS]
 * [NCCL_NUM_PROTOCOLS] with the core's estimates for what it may pick and
 * NCCL_ALGO_PROTO_IGNORE elsewhere, lowers the entry it wants, and the
 * cheapest entry left wins. OCCL fills the table from its own algorithms
 * (the ones OCCL_ALGO allows and the collective implements), each under the
 * NCCL id closest to it; in virtual time each protocol the model priced
 * (LL, LL128, Simple: OCCL's ids are NCCL's), else the one OCCL reports:
 *
 *   RING -> ring, TREE -> tree, COLLNET_DIRECT -> direct,
 *   COLLNET_CHAIN -> hierarchical, NVLS -> nvls; NVLS_TREE and PAT: none.
 *
 * Only the collectives NCCL asks a tuner about (Broadcast, Reduce,
 * AllGather, ReduceScatter, AllReduce) are offered to it. A call small
 * enough for the low-latency path (ll.c) is also offered under LL, and a
 * choice of LL takes that path (occl_ll_wanted, tuning.c).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

static const int nccl_of_occl[OCCL_NUM_ALGOS] = {
    [OCCL_ALGO_RING] = NCCL_ALGO_RING,
    [OCCL_ALGO_TREE] = NCCL_ALGO_TREE,
    [OCCL_ALGO_DIRECT] = NCCL_ALGO_COLLNET_DIRECT,
    [OCCL_ALGO_HIERARCHICAL] = NCCL_ALGO_COLLNET_CHAIN,
    [OCCL_ALGO_NVLS] = NCCL_ALGO_NVLS,
};
static const char *const nccl_algo_names[NCCL_NUM_ALGORITHMS] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN",
                                                                 "NVLS", "NVLS_TREE", "PAT"};
static const char *const nccl_proto_names[NCCL_NUM_PROTOCOLS] = {"LL", "LL128", "SIMPLE"};
_Static_assert(OCCL_PROTO_LL == NCCL_PROTO_LL && OCCL_PROTO_LL128 == NCCL_PROTO_LL128 &&
                   OCCL_PROTO_SIMPLE == NCCL_PROTO_SIMPLE && OCCL_NUM_PROTOS == NCCL_NUM_PROTOCOLS,
               "OCCL's protocol ids are NCCL's");

/* An algorithm OCCL offers but would not pick by itself (an infinite cost
 * in its model) still works: it goes in the table at this cost, above any
 * real one, so that only a tuner that asks for it gets it. */
#define LAST_RESORT_US 1e9f

struct occl_tuner_comm {
    const occl_plugin_lib *lib;
    void *ctx;
    ncclNvlDomainInfo_v6_t domains;
    ncclTunerConstants_v6_t constants; /* handed to v5+ init; OCCL does not read them back */
    /* The call last decided: occl_plan asks again for the same call when it
     * models or traces it, and the plugin is asked once per call. */
    const occl_call *last_call;
    uint64_t last_seq;
    occl_choice last_pick;
    unsigned long calls; /* getCollInfo calls */
    bool warned;         /* a failed getCollInfo was logged */
};

static bool resolve(void *handle, const char *name, const void **sym, int *version)
{
    for (int v = 6; v >= 2; v--) {
        char s[32];
        snprintf(s, sizeof s, "ncclTunerPlugin_v%d", v);
        const void *p = dlsym(handle, s);
        if (!p)
            continue;
        /* Every version starts with name, init, getCollInfo, then its
         * finalize (destroy before v5). */
        const ncclTuner_v4_t *t = p;
        if (!t->name || !t->init || !t->getCollInfo || !t->destroy) {
            OCCL_WARN("tuner plugin '%s' refused: %s lacks a name or a function; continuing without it", name, s);
            return false;
        }
        *sym = p;
        *version = v;
        return true;
    }
    /* Name a version this OCCL does not know, if that is what it has. */
    occl_plugin_refuse_versions(handle, "tuner", name, "ncclTunerPlugin", 2, 6);
    return false;
}

void occl_tuner_comm_init(occlComm_t comm)
{
    const occl_plugin_lib *lib = occl_plugin_acquire(OCCL_PLUGIN_TUNER, resolve);
    if (!lib)
        return;
    struct occl_tuner_comm *t = calloc(1, sizeof *t);
    if (!t) {
        occl_plugin_refuse_for_comm(OCCL_PLUGIN_TUNER, comm, "allocation", ncclSystemError);
        occl_plugin_release(OCCL_PLUGIN_TUNER);
        return;
    }
    t->lib = lib;
    int minr = comm->nranks, maxr = 0;
    for (int k = 0; k < comm->nnodes; k++) {
        int r = comm->node_first[k + 1] - comm->node_first[k];
        minr = r < minr ? r : minr;
        maxr = r > maxr ? r : maxr;
    }
    t->domains = (ncclNvlDomainInfo_v6_t){comm->nnodes, minr, maxr};
    ncclDebugLogger_t log = occl_plugin_logger;
    ncclResult_t r;
    if (lib->version >= 5) /* v5 and v6 share init */
        r = ((const ncclTuner_v5_t *)lib->sym)
                ->init(&t->ctx, comm->id, (size_t)comm->nranks, (size_t)comm->nnodes, log, &t->domains, &t->constants);
    else /* v2 to v4 share init */
        r = ((const ncclTuner_v4_t *)lib->sym)->init((size_t)comm->nranks, (size_t)comm->nnodes, log, &t->ctx);
    if (r != ncclSuccess) {
        occl_plugin_refuse_for_comm(OCCL_PLUGIN_TUNER, comm, "init", r);
        free(t);
        occl_plugin_release(OCCL_PLUGIN_TUNER);
        return;
    }
    comm->tuner = t;
    OCCL_INFO("rank %d: comm %016llx uses tuner plugin '%s' (v%d)", comm->rank, (unsigned long long)comm->id,
              *(const char *const *)lib->sym, lib->version);
}

void occl_tuner_comm_fini(occlComm_t comm)
{
    struct occl_tuner_comm *t = comm->tuner;
    if (!t)
        return;
    const occl_plugin_lib *lib = t->lib;
    ncclResult_t r = lib->version >= 5 ? ((const ncclTuner_v5_t *)lib->sym)->finalize(t->ctx)
                                       : ((const ncclTuner_v4_t *)lib->sym)->destroy(t->ctx);
    if (r != ncclSuccess)
        OCCL_WARN("rank %d: tuner plugin finalize returned %d", comm->rank, r);
    OCCL_INFO("rank %d: comm %016llx done with tuner plugin after %lu calls", comm->rank,
              (unsigned long long)comm->id, t->calls);
    comm->tuner = NULL;
    free(t);
    occl_plugin_release(OCCL_PLUGIN_TUNER);
}

static int nccl_func(occl_coll c)
{
    switch (c) {
    case OCCL_COLL_BROADCAST: return ncclFuncBroadcast;
    case OCCL_COLL_REDUCE: return ncclFuncReduce;
    case OCCL_COLL_ALLGATHER: return ncclFuncAllGather;
    case OCCL_COLL_REDUCESCATTER: return ncclFuncReduceScatter;
    case OCCL_COLL_ALLREDUCE: return ncclFuncAllReduce;
    default: return -1;
    }
}

/* The plugin's answer in table: NCCL's v2 adapter marks the chosen entry
 * with 0 (if offered); later versions edit the table themselves. */
static ncclResult_t ask(struct occl_tuner_comm *t, ncclFunc_t f, size_t bytes, float (*table)[NCCL_NUM_PROTOCOLS])
{
    const occl_plugin_lib *lib = t->lib;
    int nch = 1; /* OCCL has no channels: the answer is not used */
    float **ct = (float **)table;
    switch (lib->version) {
    case 6:
    case 5:
        return ((const ncclTuner_v5_t *)lib->sym)
            ->getCollInfo(t->ctx, f, bytes, 1, ct, NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nch);
    case 4:
        return ((const ncclTuner_v4_t *)lib->sym)
            ->getCollInfo(t->ctx, f, bytes, 1, ct, NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, 0, &nch);
    case 3:
        return ((const ncclTuner_v3_t *)lib->sym)
            ->getCollInfo(t->ctx, f, bytes, 1, ct, NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS, &nch);
    default: {
        int algo = NCCL_ALGO_UNDEF, proto = NCCL_PROTO_UNDEF;
        int collnet = table[NCCL_ALGO_COLLNET_CHAIN][NCCL_PROTO_SIMPLE] != NCCL_ALGO_PROTO_IGNORE;
        int nvls = table[NCCL_ALGO_NVLS][NCCL_PROTO_SIMPLE] != NCCL_ALGO_PROTO_IGNORE;
        ncclResult_t r = ((const ncclTuner_v2_t *)lib->sym)
                             ->getCollInfo(t->ctx, f, bytes, collnet, nvls, 1, &algo, &proto, &nch);
        if (r == ncclSuccess && algo >= 0 && algo < NCCL_NUM_ALGORITHMS && proto >= 0 &&
            proto < NCCL_NUM_PROTOCOLS && table[algo][proto] != NCCL_ALGO_PROTO_IGNORE)
            table[algo][proto] = 0.0f;
        return r;
    }
    }
}

bool occl_tuner_asks(occl_coll c) { return nccl_func(c) >= 0; }

occl_choice occl_tuner_choose(const occl_call *c, unsigned avail, const double *cost_us,
                              const uint64_t (*est_ns)[OCCL_NUM_PROTOS], occl_choice own,
                              double ll_us)
{
    occlComm_t comm = c->comm;
    struct occl_tuner_comm *t = comm->tuner;
    int f = nccl_func(c->coll);
    if (f < 0)
        return own;
    if (t->last_call == c && t->last_seq == comm->fp.seq)
        return t->last_pick;
    size_t bytes = c->count * occl_type_size(c->type);
    if (c->coll == OCCL_COLL_ALLGATHER || c->coll == OCCL_COLL_REDUCESCATTER)
        bytes *= (size_t)comm->nranks; /* NCCL's nBytes: the whole buffer */
    float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
    bool offered[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS] = {{false}};
    for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
        for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
            table[a][p] = NCCL_ALGO_PROTO_IGNORE;
    for (int a = 0; a < OCCL_NUM_ALGOS; a++) {
        if (!(avail & (1u << a)))
            continue;
        int id = nccl_of_occl[a];
        bool modelled = false;
        /* Virtual time: each protocol the model priced (OCCL_PROTO allows
         * it and the algorithm runs it). */
        for (int p = 0; est_ns && p < OCCL_NUM_PROTOS; p++)
            if (est_ns[a][p] != UINT64_MAX) {
                table[id][p] = (float)((double)est_ns[a][p] / 1e3);
                offered[id][p] = modelled = true;
            }
        /* Else the cost formulas, under Simple (the protocol OCCL reports
         * unless OCCL_PROTO excludes it). */
        occl_proto bulk = own.proto == OCCL_PROTO_LL && ll_us >= 0 ? OCCL_PROTO_SIMPLE : own.proto;
        if (!modelled) {
            table[id][bulk] = isfinite(cost_us[a]) ? (float)cost_us[a] : LAST_RESORT_US;
            offered[id][bulk] = true;
        }
        /* A call the low-latency path can take: that path under LL, in every
         * algorithm's row (the path is one step whatever the algorithm),
         * OCCL's own row a hair cheaper so an untouched table keeps it. */
        if (ll_us >= 0 && !offered[id][NCCL_PROTO_LL]) {
            table[id][NCCL_PROTO_LL] = (float)ll_us + (a == (int)own.algo ? 0.0f : 0.01f);
            offered[id][NCCL_PROTO_LL] = true;
        }
    }
    t->calls++;
    ncclResult_t r = ask(t, (ncclFunc_t)f, bytes, table);
    occl_choice out = own;
    int best_a = -1, best_p = -1;
    if (r != ncclSuccess) {
        if (!t->warned)
            OCCL_WARN("rank %d: tuner plugin getCollInfo returned %d for %s; OCCL's own choice is used "
                      "(logged once per communicator)", comm->rank, r, occl_coll_name(c->coll));
        t->warned = true;
    } else {
        /* NCCL's rule: the smallest non-negative entry, first in algorithm
         * then protocol order on a tie; entries OCCL did not offer are
         * skipped whatever the plugin wrote there. */
        float best = INFINITY;
        for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
            for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
                if (offered[a][p] && table[a][p] >= 0 && table[a][p] < best) {
                    best = table[a][p];
                    best_a = a;
                    best_p = p;
                }
        for (int a = 0; a < OCCL_NUM_ALGOS && best_a >= 0; a++)
            if ((avail & (1u << a)) && nccl_of_occl[a] == best_a)
                out = (occl_choice){(occl_algo)a, (occl_proto)best_p}; /* NCCL's protocol ids are OCCL's */
    }
    OCCL_INFO("rank %d: %s of %zu x %s: tuner plugin chose %s/%s: %s/%s (OCCL's own: %s/%s)", comm->rank,
              occl_coll_name(c->coll), c->count, occl_type_name(c->type),
              best_a >= 0 ? nccl_algo_names[best_a] : "none", best_p >= 0 ? nccl_proto_names[best_p] : "none",
              occl_algo_name(out.algo), occl_proto_name(out.proto), occl_algo_name(own.algo),
              occl_proto_name(own.proto));
    t->last_call = c;
    t->last_seq = comm->fp.seq;
    t->last_pick = out;
    return out;
}

/* Ranks must agree on the tuner, as on OCCL_ALGO: checked at start-up. */
__attribute__((constructor)) static void tuner_settings_register(void)
{
    or_config_must_agree("OCCL_TUNER_PLUGIN", "");
    or_config_must_agree("NCCL_TUNER_PLUGIN", "");
}
