/*
 * collectives/plugin.h - NCCL tuner and profiler plugins in OCCL
 * (nccl_plugin_abi.h is their interface; docs/occl.md "Plugins").
 *
 * A plugin library is opened once per process, at the first communicator
 * that asks for it, and closed when the last communicator using it is
 * freed. Each communicator keeps its own plugin context (the plugin's init
 * and finalize). A plugin that cannot be used is refused with a warning and
 * the communicator goes on without it, as NCCL does.
 */
#ifndef OCCL_PLUGIN_H
#define OCCL_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "nccl_plugin_abi.h"
#include "occl_internal.h"

/* ---- loading (plugin.c) ---- */

typedef enum { OCCL_PLUGIN_TUNER, OCCL_PLUGIN_PROFILER, OCCL_PLUGIN_KINDS } occl_plugin_kind;

/* What the kind's loader finds in an opened library: its newest interface
 * symbol it supports (sym, version), or false after logging why not. */
typedef bool (*occl_plugin_resolve_fn)(void *handle, const char *name, const void **sym, int *version);

typedef struct occl_plugin_lib {
    void *handle;
    const void *sym; /* the plugin's ncclTuner_vN_t / ncclProfiler_vN_t */
    int version;     /* N */
    char name[256];  /* as the environment gave it */
    int users;       /* communicators holding it */
    bool refused;    /* could not be used: not tried again in this process */
} occl_plugin_lib;

/* The kind's library, opened at its first user if its environment variable
 * (OCCL_..._PLUGIN, else NCCL_..._PLUGIN) names one, else shared: NULL if
 * none is asked for, or it is refused (a warning says why). Each non-NULL
 * return is paired with occl_plugin_release. */
const occl_plugin_lib *occl_plugin_acquire(occl_plugin_kind kind, occl_plugin_resolve_fn resolve);
void occl_plugin_release(occl_plugin_kind kind);
/* A library with none of the versions OCCL supports (symbol_vOLDEST to
 * symbol_vNEWEST): refused, naming the unsupported version it exports if
 * it has one. `what` is "tuner" or "profiler". */
void occl_plugin_refuse_versions(void *handle, const char *what, const char *name, const char *symbol,
                                 int oldest, int newest);
/* A communicator goes on without the plugin (its init failed): logged. */
void occl_plugin_refuse_for_comm(occl_plugin_kind kind, occlComm_t comm, const char *why, int result);
/* The logger handed to plugins: OCCL's log. */
void occl_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
                        ...) __attribute__((format(printf, 5, 6)));

/* ---- per communicator (comm.c calls these) ---- */

/* At the end of a communicator's setup: the plugins asked for get their
 * context; a refused one is logged and left out. */
void occl_plugins_comm_init(occlComm_t comm);
/* When the communicator is freed (its tasks have all run). */
void occl_plugins_comm_fini(occlComm_t comm);

/* ---- tuner (tuner.c) ---- */

struct occl_tuner_comm;
void occl_tuner_comm_init(occlComm_t comm);
void occl_tuner_comm_fini(occlComm_t comm);
/* The tuner's choice for c among the algorithms in `avail` (a bit per
 * occl_algo), given OCCL's own costs (us, INFINITY: not by itself), in
 * virtual time the model's estimates per algorithm and protocol (ns,
 * UINT64_MAX: none; else NULL), and OCCL's own choice. ll_us >= 0: the call
 * may take the low-latency path (ll.c), offered under LL at that cost where
 * the model did not price LL; a choice of LL then takes it. Only called
 * with comm->tuner set. */
occl_choice occl_tuner_choose(const occl_call *c, unsigned avail, const double *cost_us,
                              const uint64_t (*est_ns)[OCCL_NUM_PROTOS], occl_choice own,
                              double ll_us);
/* Whether NCCL asks a tuner about collective c (Broadcast .. AllReduce). */
bool occl_tuner_asks(occl_coll c);

/* ---- profiler (profiler.c) ---- */

struct occl_prof_comm;
void occl_prof_comm_init(occlComm_t comm);
void occl_prof_comm_fini(occlComm_t comm);
/* A task (enqueue.c) is a group; each run of consecutive calls in it (one
 * collective, or point-to-point calls together) a set of Coll or P2p
 * events. clock: the task's virtual clock (0 in wall mode). */
void occl_prof_group_start(occlComm_t comm);
void occl_prof_group_stop(occlComm_t comm);
void occl_prof_calls_start(occlComm_t comm, const occl_call *calls, int n, uint64_t clock);
void occl_prof_calls_stop(occlComm_t comm, uint64_t clock);
/* Transfers of a step (transport.c): ProxyOp and ProxyStep events around
 * run(comm, x, n). */
occlResult_t occl_prof_xfers_run(occlComm_t comm, occl_xfer *x, int n,
                                 occlResult_t (*run)(occlComm_t, occl_xfer *, int));

#endif
