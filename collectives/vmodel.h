/*
 * collectives/vmodel.h - the virtual-time model of a collective without a
 * communicator: the system as the replay sees it (ranks in ring order,
 * virtual nodes, trees, the path between two ranks' devices), for programs
 * that predict a machine they do not run on (tests/perf/validate_model).
 * A communicator's calls go through the same schedules and replay
 * (vcost.c), with the communicator's ring, nodes, trees and paths.
 */
#ifndef OCCL_VMODEL_H
#define OCCL_VMODEL_H

#include <stdint.h>

#include "occl_internal.h"
#include "vclock.h"

typedef struct occl_vsystem {
    int nranks;
    const int *ring;       /* the ranks in ring order, each virtual node a run of it */
    const int *node_first; /* node k is ring[node_first[k] .. node_first[k+1]) */
    int nnodes;
    occl_trees trees;      /* built over these ranks (occl_node_trees, occl_trees_schedule) */
    /* The path a transfer from rank src to rank dst takes. */
    or_vpath (*path)(void *ctx, int src, int dst);
    void *ctx;
    /* The NICs (rails) each node spreads a ring's or a tree's traffic to
     * other nodes over: NCCL runs such a collective on several channels,
     * each leaving its node through its own NIC (its tuning model rates it
     * nChannels x bwInter, src/graph/tuning.cc). 0 or 1: one NIC, the
     * path's. Point-to-point exchanges (AlltoAll) are not spread: each
     * pair's transfer takes its own path. occl_vsystem_rails. */
    int rails;
} occl_vsystem;

/* The communicator's ranks as the model sees them (its ring, nodes, trees,
 * the declared topology's paths or the default ones, its rails): what
 * occl_vmodel_time and occl_vmodel_lower_bound price a candidate on, built
 * once for all the candidates of a call. The same on every rank. 0, or -1
 * when out of memory (then nothing is held). */
typedef struct occl_vcost_view {
    occl_vsystem s;
    int *gdev; /* the ranks' global devices, the paths' context */
} occl_vcost_view;
int occl_vcost_view_make(occlComm_t comm, occl_vcost_view *v);
void occl_vcost_view_release(occl_vcost_view *v);

struct or_topo;
/* The rails of ranks on topology devices dev[] (one per rank, ring order
 * irrelevant), grouped into nodes by node_first[0..nnodes]: the fewest,
 * over the nodes, of the node's NICs that reach the network and of the
 * ranks the collective has on it (a rank's channels leave through the
 * NICs nearest the GPUs that run them). 1 without a topology. */
int occl_vsystem_rails(const struct or_topo *topo, const int *dev, const int *ring,
                       const int *node_first, int nnodes);

/* The time of call c (its coll, count, type and root; c->comm unused) on
 * system s with algorithm algo and protocol proto, every rank entering at
 * 0 and bps[r] the memory bandwidth of rank r's device: the end of the last
 * rank, in ns; UINT64_MAX if it cannot be modelled (out of memory, or a
 * protocol the algorithm does not run). */
uint64_t occl_vmodel_time(const occl_vsystem *s, const occl_call *c, occl_algo algo, occl_proto proto,
                          const uint64_t *bps);

/* A time no replay of call c on system s with algo and proto can beat
 * (every rank entering at 0, the base latency included): what the planner
 * compares with its best replay before replaying a costly candidate. Known
 * for the ring all-reduce (2 n (n-1) transfers), whose floor is each rank's
 * chain of sends, every one at least its path's latency and wire time;
 * 0 (no bound) for the rest. */
uint64_t occl_vmodel_lower_bound(const occl_vsystem *s, const occl_call *c, occl_algo algo, occl_proto proto);

/* Every rank's end of call c on system s (end[r], ns), rank r having
 * entered at entry[r]: what a real run's stream clocks move to (vcost.c
 * charges a communicator's calls with the same function). false if it
 * cannot be modelled (out of memory, or a protocol the algorithm does not
 * run). */
bool occl_vmodel_ends(const occl_vsystem *s, const occl_call *c, occl_algo algo, occl_proto proto,
                      const uint64_t *entry, const uint64_t *bps, uint64_t *end);

/* The planner's choice for call c on system s, as occl_plan_choice makes it
 * in a modelled call (tuning.c): the formulas' candidates that OCCL_ALGO
 * allows and OCCL_PROTO's protocols, compared by the replay with every rank
 * entering at 0, bps[r] rank r's memory bandwidth. est_ns (may be NULL)
 * receives each candidate's completion, UINT64_MAX where none was replayed;
 * floor_ns (may be NULL) the floor (occl_vmodel_lower_bound) of each
 * candidate left out because it was above the pick's completion, 0 for the
 * rest. replay_all: leave none out (the same pick, every candidate's time,
 * for studies that compare them). */
occl_choice occl_plan_system(const occl_vsystem *s, const occl_call *c, const uint64_t *bps, bool replay_all,
                             uint64_t est_ns[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS],
                             uint64_t floor_ns[OCCL_PLAN_MAX_ALGOS][OCCL_NUM_PROTOS]);

/* A schedule written out step by step, for tests and benchmarks of the
 * replay's rules (test_vreplay, vreplay_perf): rank r runs steps
 * step0[r] .. step0[r+1]-1 in order (step0 has nranks + 1 entries, from
 * 0); step k offers ends[end0[k] .. end0[k+1]) as it starts and ends with
 * its last transfer plus compute[k] ns of local work. The k-th send from a
 * to b and the k-th receive of b from a make one transfer (same bytes). */
typedef struct occl_vstep_end {
    int peer;       /* the other rank */
    bool send;      /* a send to peer, else a receive from it */
    bool reduce;    /* a receive reducing into its buffer: it ends no earlier than ready + latency +
                     * 3 x bytes at the receiver's memory bandwidth (bps[receiver]) */
    uint64_t bytes;
} occl_vstep_end;

typedef struct occl_vsteps {
    int nranks;
    const int *step0;
    const int *end0;
    const occl_vstep_end *ends;
    const uint64_t *compute;
} occl_vsteps;

/* What the replay did, as it does it: a step's start, a transfer's ready
 * time (both ends' steps started), its slot on the links and its end. */
typedef struct occl_vtransfer {
    int src, dst;
    uint64_t k; /* the k-th transfer from src to dst */
    uint64_t ready, slot, end;
} occl_vtransfer;

typedef struct occl_vwatch {
    void (*step)(void *ctx, int rank, int step, uint64_t start); /* step: the rank's, from 0 */
    void (*transfer)(void *ctx, const occl_vtransfer *x);
    void *ctx;
} occl_vwatch;

enum { OCCL_VSTEPS_OK = 0, OCCL_VSTEPS_NOMEM = -1, OCCL_VSTEPS_STUCK = -2, OCCL_VSTEPS_INVALID = -3 };

/* Replays schedule st on system s (its nranks, path and ctx; rails > 1
 * spreads transfers between nodes over the rails, as a ring's) with the
 * per-hop latency and wire bytes of protocol proto of family fam (vproto.h)
 * - the replay every call's model runs (vcost.c) - from entry[r]; end[r]:
 * when rank r's last step ended (entry[r] if it has none). watch (may be
 * NULL) sees every step start and transfer. OCCL_VSTEPS_INVALID: a step or
 * end numbering out of order, a peer out of range or the rank itself;
 * OCCL_VSTEPS_STUCK: ends that never pair up (a step waiting for a step
 * behind it, a send without its receive, different bytes); NOMEM. */
int occl_vmodel_replay_steps(const occl_vsystem *s, const occl_vsteps *st, occl_pfam fam, occl_proto proto,
                             const uint64_t *entry, const uint64_t *bps, const occl_vwatch *watch,
                             uint64_t *end);

/* The protocol family (NCCL's table row) algorithm algo of collective coll
 * takes its constants from. */
occl_pfam occl_vmodel_family(occl_coll coll, occl_algo algo);

#endif
