/*
 * src/activity.h - activity records for profilers (orActivity* in openreg.h):
 * what each finished op was, when it ran, and the external correlation id
 * its issuing thread had pushed. Fed from the same places as the trace.
 */
#ifndef OR_ACTIVITY_H
#define OR_ACTIVITY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

extern _Atomic bool or_activity_on;

/* The trace or the activity records want ops: names interned, wall times
 * taken, each finished op handed to or_trace_op. */
bool or_recording(void);

struct or_op;
/* An op is issued: its correlation id (the issuing thread's innermost
 * external id), and when and by whom, while recording. */
void or_activity_issue(struct or_op *op);
/* A worker runs op: slices recorded meanwhile (collectives) belong to it. */
void or_activity_set_running(const struct or_op *op);
/* The correlation id of a slice recorded now on this thread. */
uint64_t or_activity_slice_correlation(void);

/* A finished op (or a resolved event wait): to the trace and the records. */
void or_record_op(const struct or_op *op);
/* A finished op for the records alone; wall_end in CLOCK_MONOTONIC ns. */
void or_activity_op(const struct or_op *op, uint64_t wall_end);
/* A layer's slice on a stream's track (device ordinal, track id); times in
 * the virtual clock, or CLOCK_MONOTONIC ns in wall mode. */
void or_activity_slice(int device, int tid, const char *name, const char *cat, uint64_t start,
                       uint64_t end, const char *args);

#endif
