/*
 * tests/perf/perf_util.h - what the benchmark programs share: the clock,
 * repetitions calibrated to a duration with the best of them reported,
 * percentiles of latency samples, and the size syntax of options and tables.
 */
#ifndef PERF_UTIL_H
#define PERF_UTIL_H

#include <stddef.h>

#define KiB ((size_t)1024)
#define MiB (KiB * KiB)
#define GiB (KiB * MiB)

/* CLOCK_MONOTONIC, in seconds. */
double perf_now_s(void);

/* memcpy through a volatile pointer, so the compiler cannot drop or shorten
 * the reference copies whose results nobody reads. */
extern void *(*volatile perf_memcpy)(void *, const void *, size_t);

/* How a program reports running out of host memory: its name (default
 * "perf"), and how it stops (default exit(1); an MPI program aborts the job
 * so that no rank waits for a rank that has gone). */
extern const char *perf_prog;
extern void (*perf_fatal)(void);
/* malloc (of at least one byte), or report and stop. */
void *perf_xmalloc(size_t n);

/* Median and 99th percentile (nearest rank) of n > 0 samples; sorts them. */
void perf_percentiles(double *v, size_t n, double *median, double *p99);

/* What is timed: up to count operations on ctx, stopping early once the
 * deadline (perf_now_s() time, 0: none) has passed if the body can; returns
 * how many it ran. */
typedef long (*perf_body)(void *ctx, long count, double deadline);

/* How long a repetition is. */
typedef struct {
    long initial;   /* operations of the untimed warm-up round */
    double min_s;   /* a repetition lasts at least this long */
    double max_s;   /* and at most this long (0: no limit; also ends the warm-up) */
    long max_count; /* and has at most this many operations */
} perf_plan;

/* The untimed warm-up round (caches, page tables, worker threads), which
 * also calibrates: returns the operations per repetition. */
long perf_calibrate(perf_body body, void *ctx, const perf_plan *plan);

/* The shortest wall time, in seconds, of reps repetitions of count
 * operations each: the one least disturbed by the rest of the machine. */
double perf_best_time(perf_body body, void *ctx, long count, int reps);

/* The first line of /proc/loadavg ("1.51 4.05 4.25 2/84 29150"), or "?". */
void perf_load_average(char *buf, size_t len);

/* "4 KiB", "64 MiB", "100 B". */
void perf_format_size(char *buf, size_t len, size_t bytes);
/* A size in bytes, spelt like OPENREG_DEVICE_MEM: decimal digits,
 * then optionally a binary unit K, M, G or T (any case; 1K = 1024) and then
 * optionally B or iB ("65536", "8B", "64K", "64KB", "64KiB", "4g", "16MiB").
 * Zero is a size: callers bound it. Returns 0, or -1 for anything else
 * (signs, spaces, fractions, other suffixes, sizes above SIZE_MAX). */
int perf_parse_size(const char *s, size_t *out);

#endif
