/*
 * fingerprint_perf.c - host time of the collective fingerprints
 * (collectives/fingerprint.c) that every OCCL call pays with
 * OCCL_CHECK_CALLS=1, the default:
 *   begin      a collective's fingerprint made and published (per call);
 *   transfer   what one transfer adds: the fingerprints it carries copied
 *              into the mailbox post or header, and compared on receipt;
 *   all-reduce begin + 4 transfers: a 2-rank ring all-reduce's share on one
 *              rank (it sends and receives twice);
 * beside a plain memcpy of the 80 bytes a transfer carries, in the same
 * run. Best of 5 repetitions of about 0.2 s each; the load average before
 * the run is printed with the table. The end-to-end figure (occl-perf with
 * the check off and on) is in docs/occl.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "occl_internal.h"
#include "perf_util.h"

typedef struct bench {
    occlComm_t comm;
    occl_call call;
    occl_fp_pair slot;
    unsigned char src[sizeof(occl_fp_pair)], dst[sizeof(occl_fp_pair)];
    long matches;
} bench;

static long body_begin(void *ctx, long count, double deadline)
{
    (void)deadline;
    bench *b = ctx;
    for (long i = 0; i < count; i++)
        occl_fp_begin(b->comm, &b->call);
    return count;
}

static long body_transfer(void *ctx, long count, double deadline)
{
    (void)deadline;
    bench *b = ctx;
    for (long i = 0; i < count; i++) {
        *(volatile occl_fp_pair *)&b->slot = occl_fp_carried(b->comm, &b->comm->fp);
        b->matches += occl_fp_match(&b->comm->fp, &b->slot.cur);
    }
    return count;
}

static long body_allreduce(void *ctx, long count, double deadline)
{
    (void)deadline;
    bench *b = ctx;
    for (long i = 0; i < count; i++) {
        occl_fp_begin(b->comm, &b->call);
        for (int t = 0; t < 4; t++) {
            *(volatile occl_fp_pair *)&b->slot = occl_fp_carried(b->comm, &b->comm->fp);
            b->matches += occl_fp_match(&b->comm->fp, &b->slot.cur);
        }
    }
    return count;
}

static long body_memcpy(void *ctx, long count, double deadline)
{
    (void)deadline;
    bench *b = ctx;
    for (long i = 0; i < count; i++)
        perf_memcpy(b->dst, b->src, sizeof b->src);
    return count;
}

static double ns_per_op(perf_body body, bench *b)
{
    perf_plan plan = {1000, 0.2, 1.0, 100000000};
    long n = perf_calibrate(body, b, &plan);
    return perf_best_time(body, b, n, 5) / (double)n * 1e9;
}

int main(void)
{
    perf_prog = "fingerprint_perf";
    char load[64];
    perf_load_average(load, sizeof load);
    bench *b = perf_xmalloc(sizeof *b);
    memset(b, 0, sizeof *b);
    b->comm = perf_xmalloc(sizeof *b->comm);
    memset(b->comm, 0, sizeof *b->comm);
    b->comm->id = 0x1234;
    b->comm->check_calls = true;
    b->comm->ctrl = perf_xmalloc(sizeof(occl_ctrl));
    memset(b->comm->ctrl, 0, sizeof(occl_ctrl));
    b->call = (occl_call){.coll = OCCL_COLL_ALLREDUCE, .comm = b->comm, .count = 1024,
                          .type = occlFloat32, .op = occl_redop_make(OCCL_RED_SUM), .root = -1};
    double t_copy = ns_per_op(body_memcpy, b);
    double t_begin = ns_per_op(body_begin, b);
    double t_xfer = ns_per_op(body_transfer, b);
    double t_ar = ns_per_op(body_allreduce, b);
    printf("# collective fingerprints, host time per operation (best of 5); load average %s\n", load);
    printf("# %-34s %10s %12s\n", "operation", "ns", "x memcpy");
    printf("  %-34s %10.1f %12.2f\n", "memcpy of 80 bytes (baseline)", t_copy, 1.0);
    printf("  %-34s %10.1f %12.2f\n", "begin (per call)", t_begin, t_begin / t_copy);
    printf("  %-34s %10.1f %12.2f\n", "transfer (carry + compare)", t_xfer, t_xfer / t_copy);
    printf("  %-34s %10.1f %12.2f\n", "2-rank ring all-reduce, one rank", t_ar, t_ar / t_copy);
    if (b->matches <= 0)
        fprintf(stderr, "fingerprint_perf: no comparison matched\n");
    free(b->comm->ctrl);
    free(b->comm);
    free(b);
    return 0;
}
