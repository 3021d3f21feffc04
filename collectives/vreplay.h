/*
 * collectives/vreplay.h - a collective's transfers replayed over contended
 * links, in virtual time (docs/virtual-time.md#collectives).
 *
 * The input is a schedule already paired up (collectives/vcost.c builds it
 * from the algorithm's steps): every rank runs its steps in order, a step
 * holds transfers, each transfer joins a step of its sender and a step of
 * its receiver. The replay is a discrete-event simulation in integer ns:
 * a transfer is ready when both its steps have started; ready transfers are
 * taken in order of ready time (ties: sender, receiver, k), and each takes
 * the earliest slot >= its ready time free on every link of its path, for
 * ceil(bytes / bottleneck), on the replay's own timelines (or_vlinks). So
 * transfers of the collective that share a link share its bandwidth, and
 * the result depends only on the input: every rank computes the same.
 */
#ifndef OCCL_VREPLAY_H
#define OCCL_VREPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "vclock.h"

typedef struct occl_vxfer {
    int src, dst;           /* ranks */
    uint64_t k;             /* k-th transfer from src to dst: the last tie-break */
    int src_step, dst_step; /* the steps holding its ends (numbered as in occl_vreplay) */
    uint64_t bytes;
    or_vpath path;
    /* A reduction fused into the receive, at the receiver's memory: the
     * transfer ends no earlier than ready + latency + reduce_ns. 0: none. */
    uint64_t reduce_ns;
    uint64_t ready, slot, end; /* out: when both ends had started; its slot on the links; end */
} occl_vxfer;

typedef struct occl_vreplay {
    int nranks;
    /* Rank r runs steps step0[r] .. step0[r+1]-1 in order; step0 has
     * nranks + 1 entries. */
    const int *step0;
    const uint64_t *compute; /* per step: local work after its last transfer */
    const uint64_t *entry;   /* per rank: when its first step starts */
    occl_vxfer *x;
    size_t nx;
    uint64_t *start; /* out, per step: when it started */
    uint64_t *end;   /* out, per rank: when its last step ended (its entry if it has none) */
} occl_vreplay;

enum { OCCL_VREPLAY_OK = 0, OCCL_VREPLAY_NOMEM = -1, OCCL_VREPLAY_STUCK = -2 };

/* Runs the replay: OCCL_VREPLAY_OK, OCCL_VREPLAY_NOMEM, or
 * OCCL_VREPLAY_STUCK when some step can never start (a transfer's ends wait
 * for each other: the schedule is inconsistent) or a step number is out of
 * range. */
int occl_vreplay_run(occl_vreplay *r);

#endif
