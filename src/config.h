/*
 * src/config.h - every environment variable the runtime reads, declared once
 * (name, accepted values, default, help) in config.c's table. `orinfo --env`
 * prints the same table.
 */
#ifndef OR_CONFIG_H
#define OR_CONFIG_H

#include <stddef.h>
#include <stdio.h>

typedef struct or_config {
    long long devices;        /* OPENREG_DEVICES */
    long long profile;        /* OPENREG_DEVICE_PROFILE, index in or_profiles() */
    long long device_mem;     /* OPENREG_DEVICE_MEM, bytes; 0 = the profile's */
    long long device_threads; /* OPENREG_DEVICE_THREADS, 0 = auto */
    long long strict;         /* OPENREG_STRICT */
    long long memcheck;       /* OPENREG_MEMCHECK */
    long long bind;           /* OPENREG_BIND, an or_bind_mode */
    long long ranks_per_node; /* OPENREG_RANKS_PER_NODE, 0 = one node per host */
    long long debug;          /* OPENREG_DEBUG, an or_log_level */
    long long time;           /* OPENREG_TIME, an or_time_mode (vclock.h) */
    const char *trace;        /* OPENREG_TRACE, a file name, NULL = no trace */
    long long trace_buffer;   /* OPENREG_TRACE_BUFFER, records kept per thread */
    long long topo;           /* OPENREG_TOPO given and valid (the text stays in the env) */
    long long placement;      /* OPENREG_PLACEMENT: an or_topo_placement, or
                                 OR_PLACEMENT_FILE (the name stays in the env) */
    long long timeout_ms;     /* OPENREG_TIMEOUT_MS */
    long long copy_spin_us;   /* OPENREG_COPY_SPIN_US */
    long long ipc_children;   /* OPENREG_IPC_CHILDREN */
    const char *ipc_parent;   /* OPENREG_IPC_PARENT, set by a parent process, else NULL */
} or_config;

/* The longest timeout: 10^12 ms (31.7 years) in ns stays below 2^63, so a
 * deadline (now + timeout, now since boot) overflows neither a uint64_t nor
 * an int64_t. */
#define OR_TIMEOUT_MS_MAX 1000000000000LL

/* cfg->placement for a placement file: one past packed and spread. */
#define OR_PLACEMENT_FILE 2

/* STRING: any non-empty text, kept as a const char * field (the environment's).
 * TOPOLOGY: a preset, synthetic string or XML file (topology/topo.h); the
 * value is 1 when it loads.
 * CHOICE_OR_FILE: one of the choices (any case), else the name of a readable
 * regular file, whose value is the number of choices (the name stays in the
 * environment; "./packed" is a file named like a choice). */
typedef enum {
    OR_PARAM_INT,
    OR_PARAM_SIZE,
    OR_PARAM_CHOICE,
    OR_PARAM_STRING,
    OR_PARAM_TOPOLOGY,
    OR_PARAM_CHOICE_OR_FILE
} or_param_kind;

typedef struct or_param {
    const char *name;
    or_param_kind kind;
    const char *default_value; /* NULL: unset means 0, "decided elsewhere" */
    const char *accepted; /* human-readable, used in error messages */
    const char *help;
    long long min, max;          /* INT and SIZE */
    const char *const *choices;  /* CHOICE: NULL-terminated, value = index */
    size_t offset;               /* field in or_config */
} or_param;

/* The table, for tools that list it. */
const or_param *or_config_params(size_t *count);
/* Parse one value; 0 on success, -1 if text is not accepted. */
int or_param_parse(const or_param *p, const char *text, long long *value);
/* Fill cfg from the environment (defaults where unset). On a bad value print
 * one message naming the variable and the accepted values, return -1. */
int or_config_load(or_config *cfg);
/* Why a CHOICE_OR_FILE value that is no choice is not a readable file:
 * strerror's text, or "not a regular file". */
const char *or_config_file_problem(const char *path);
/* Print why OPENREG_TOPO=spec does not load: file, line and reason. */
void or_config_topology_error(const char *spec, FILE *f);
/* Parse a size like "512M", "4G", "1048576" (binary suffixes K, M, G, T). */
int or_parse_size(const char *text, long long *bytes);

#endif
