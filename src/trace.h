/*
 * src/trace.h - Chrome trace-event files (OPENREG_TRACE=file.json).
 *
 * Each thread appends fixed-size records to its own bounded buffer, with no
 * lock: records are published by a release store of the chunk's count, so
 * the writer can read them while workers still run (at MPI_Finalize). The
 * file is written at teardown, sorted by track and time; one file per rank
 * (file.rankN.json) when the job has several. docs/tracing.md has the format.
 */
#ifndef OR_TRACE_H
#define OR_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "openreg.h"

extern bool or_trace_on; /* set once at start-up */

/* Start tracing into path (this rank's name is derived from it); checks the
 * file can be written. Call after the cluster and the devices are up. */
orError_t or_trace_start(const char *path, long long per_thread_cap, bool virtual_time);
/* Write the file from what is recorded so far (again at each call). */
void or_trace_flush(void);
/* Free the buffers (once no thread records any more). */
void or_trace_fini(void);

/* The same text for as long as the trace lives (names of kernels, slices). */
const char *or_trace_intern(const char *s);
/* Names of tracks: a process per device, a thread per stream. */
void or_trace_name_track(int pid, int tid, const char *name);
/* The name of an unnamed kernel's function: its dynamic symbol, else its
 * offset in its object (the same from run to run), written into buf. */
const char *or_kernel_symbol(const void *fn, char *buf, size_t len);
/* A copy's name: "memcpy HtoD", ..., "remote memcpy PtoP" (ends as global
 * device ids or OR_VT_HOST). */
const char *or_copy_name(int32_t src, int32_t dst, bool remote);

struct or_op;
/* An op finished (or, for event waits, was resolved) at wall_end
 * (CLOCK_MONOTONIC ns): record it. */
void or_trace_op(const struct or_op *op, uint64_t wall_end);
/* A slice named by a layer above (collectives) on a stream's track; args is
 * a JSON object's text or NULL. Times: the virtual clock in virtual mode,
 * else CLOCK_MONOTONIC ns. */
void or_trace_slice(int pid, int tid, const char *name, const char *cat, uint64_t start,
                    uint64_t end, const char *args);

#endif
