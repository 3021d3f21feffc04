/*
 * collectives/tuning.c - which algorithm a call uses: a cost model of each
 * algorithm's steps (alpha-beta, with the hop costs of this machine class),
 * the cheapest allowed one wins. OCCL_ALGO restricts the choice with NCCL's
 * syntax: "ring,tree", "^direct" (all but), or per collective
 * "allreduce:tree;broadcast:ring". OCCL_DEBUG=INFO logs each choice.
 */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "occl_internal.h"

static const char *const algo_names[OCCL_NUM_ALGOS] = {"ring", "tree", "direct"};

const char *occl_algo_name(occl_algo a)
{
    return (unsigned)a < OCCL_NUM_ALGOS ? algo_names[a] : "?";
}

/* Allowed algorithms per collective, from OCCL_ALGO. */
static unsigned allowed[OCCL_COLL_RECV + 1];
static pthread_once_t parse_once = PTHREAD_ONCE_INIT;

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
        else if (n)
            OCCL_WARN("OCCL_ALGO: unknown algorithm '%.*s' ignored (known: ring, tree, direct)",
                      (int)n, p);
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
            else
                OCCL_WARN("OCCL_ALGO: unknown collective '%.*s' ignored", (int)(colon - p), p);
        }
        p = semi ? semi + 1 : end;
    }
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

static bool spans_nodes(occlComm_t comm)
{
    for (int r = 0; r < comm->nranks; r++)
        if (comm->peers[r].node != comm->peers[0].node)
            return true;
    return false;
}

/* Predicted microseconds of an all-reduce of `bytes` with algorithm a. */
static double allreduce_cost(occlComm_t comm, occl_algo a, double bytes)
{
    int n = comm->nranks;
    bool net = spans_nodes(comm);
    double steps_log = ceil(log2(n));
    switch (a) {
    case OCCL_ALGO_RING: return 2.0 * (n - 1) * hop_us(net, bytes / n);
    case OCCL_ALGO_TREE: return 2.0 * steps_log * hop_us(net, bytes) + 2.0 * bytes / (BETA_NODE_GBS * 1e3);
    case OCCL_ALGO_DIRECT:
        /* n-1 messages in and out at once, then an n-way reduction. */
        return hop_us(net, bytes) + (n - 1) * bytes / ((net ? BETA_NET_GBS : BETA_NODE_GBS) * 1e3);
    default: return INFINITY;
    }
}

occl_algo occl_plan(const occl_call *c)
{
    pthread_once(&parse_once, parse_env);
    unsigned mask = allowed[c->coll];
    occl_algo pick = OCCL_ALGO_RING;
    if (c->coll == OCCL_COLL_ALLREDUCE && c->comm->nranks > 2) {
        double bytes = (double)c->count * (double)occl_type_size(c->type), best = INFINITY;
        for (int a = 0; a < OCCL_NUM_ALGOS; a++) {
            if (!(mask & (1u << a)))
                continue;
            /* Direct keeps n copies of the buffer: only for small ones. */
            if (a == OCCL_ALGO_DIRECT && bytes * c->comm->nranks > (double)(64u << 20))
                continue;
            double cost = allreduce_cost(c->comm, (occl_algo)a, bytes);
            if (cost < best) {
                best = cost;
                pick = (occl_algo)a;
            }
        }
    }
    OCCL_INFO("rank %d: %s of %zu x %s: %s", c->comm->rank, occl_coll_name(c->coll), c->count,
              occl_type_name(c->type), occl_algo_name(pick));
    return pick;
}
