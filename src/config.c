/* src/config.c - the table of environment variables and their parsers. */
#include "config.h"

#include "profile.h"
#include "topo.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static const char *const bool_choices[] = {"0", "1", NULL};
static const char *const debug_choices[] = {"NONE", "WARN", "INFO", "TRACE", NULL};
/* Same order as or_topo_placement; a file is OR_PLACEMENT_FILE, next. */
static const char *const placement_choices[] = {"packed", "spread", NULL};
_Static_assert(sizeof placement_choices / sizeof placement_choices[0] - 1 == OR_PLACEMENT_FILE,
               "a placement file's value is the number of choices");
/* Same order as or_bind_mode. */
static const char *const bind_choices[] = {"core", "numa", "none", NULL};
/* Same order as or_time_mode. */
static const char *const time_choices[] = {"wall", "virtual", NULL};

#define KIB 1024LL
static const or_param params[] = {
    {"OPENREG_DEVICES", OR_PARAM_INT, "2", "an integer from 1 to 256",
     "number of simulated devices this process hosts", 1, 256, NULL,
     offsetof(or_config, devices)},
    {"OPENREG_DEVICE_PROFILE", OR_PARAM_CHOICE, "cpu", OR_PROFILE_NAMES_TEXT,
     "device model: memory, copy engines, declared compute rate and bandwidth", 0, 0,
     or_profile_names, offsetof(or_config, profile)},
    {"OPENREG_DEVICE_MEM", OR_PARAM_SIZE, NULL, "a size from 1M to 1T, like 512M or 4G",
     "memory capacity of each device, overriding the profile's (reserved lazily, committed "
     "as used)",
     KIB * KIB, KIB * KIB * KIB * KIB, NULL, offsetof(or_config, device_mem)},
    {"OPENREG_DEVICE_THREADS", OR_PARAM_INT, "0", "an integer from 0 to 256",
     "compute threads per device; 0 = one per core of the device's cpuset", 0, 256, NULL,
     offsetof(or_config, device_threads)},
    {"OPENREG_STRICT", OR_PARAM_CHOICE, "0", "0 or 1",
     "1 makes device memory unreadable by host code outside runtime operations", 0, 0,
     bool_choices, offsetof(or_config, strict)},
    {"OPENREG_MEMCHECK", OR_PARAM_CHOICE, "0", "0 or 1", "1 gives every device allocation guard pages and quarantines freed memory, so a kernel's or copy's out-of-bounds access or use after free is orErrorIllegalAddress (docs/api.md)", 0, 0, bool_choices, offsetof(or_config, memcheck)},
    {"OPENREG_BIND", OR_PARAM_CHOICE, "core", "core, numa or none",
     "binding of device worker threads: one core each, the device's NUMA node, or none; "
     "device memory is bound to the device's NUMA node unless none",
     0, 0, bind_choices, offsetof(or_config, bind)},
    {"OPENREG_RANKS_PER_NODE", OR_PARAM_INT, "0", "an integer from 0 to 1048576",
     "ranks per virtual node: consecutive ranks are grouped into nodes of this many (they "
     "must share a host); 0 = the ranks of each host form one node",
     0, 1048576, NULL, offsetof(or_config, ranks_per_node)},
    {"OPENREG_DEBUG", OR_PARAM_CHOICE, "WARN", "NONE, WARN, INFO or TRACE",
     "log level of the runtime's messages on stderr", 0, 0, debug_choices,
     offsetof(or_config, debug)},
    {"OPENREG_TIME", OR_PARAM_CHOICE, "wall", "wall or virtual",
     "clock of events, orEventElapsedTime and traces: the host's, or a modelled clock per "
     "stream charged from the device profile and the copy paths (docs/virtual-time.md)",
     0, 0, time_choices, offsetof(or_config, time)},
    {"OPENREG_TRACE", OR_PARAM_STRING, NULL, "a file name, like trace.json, or a directory",
     "write a Chrome trace-event file of every kernel, copy, memset, host function and event "
     "at exit; under MPI each rank writes NAME.rankN.json; a directory gets DIR/trace.json "
     "(DIR/trace.rankN.json under MPI) (docs/tracing.md)",
     0, 0, NULL, offsetof(or_config, trace)},
    {"OPENREG_TRACE_BUFFER", OR_PARAM_INT, "262144", "an integer from 1024 to 67108864",
     "trace records kept per thread; later ones are dropped and counted", 1024, 67108864, NULL,
     offsetof(or_config, trace_buffer)},
    {"OPENREG_TOPO", OR_PARAM_TOPOLOGY, NULL,
     "a preset (dgx-a100x2, ...), a synthetic string or an XML file (docs/topology.md)",
     "cluster topology: decides the virtual nodes (superseding OPENREG_RANKS_PER_NODE) and "
     "which topology device each device is; unset = no topology",
     0, 0, NULL, offsetof(or_config, topo)},
    {"OPENREG_PLACEMENT", OR_PARAM_CHOICE_OR_FILE, "packed",
     "packed, spread or a placement file (./packed for a file named packed)",
     "with OPENREG_TOPO: ranks fill the topology's nodes one after the other (packed), go "
     "round robin (spread), or take the topology devices a file gives each rank "
     "(docs/topology.md#placement-files)",
     0, 0, placement_choices, offsetof(or_config, placement)},
    {"OPENREG_TIMEOUT_MS", OR_PARAM_INT, "300000", "an integer from 1 to 1000000000000",
     "milliseconds a rank waits for the others at start-up (every rank's first call that "
     "needs them) before it gives up; the largest, about 31 years, waits for ever",
     1, OR_TIMEOUT_MS_MAX, NULL, offsetof(or_config, timeout_ms)},
    {"OPENREG_COPY_SPIN_US", OR_PARAM_INT, "30", "an integer from 0 to 1000000",
     "microseconds a thread carrying its own synchronous copy with another node's memory "
     "tests for the owner's answer before it leaves the wait to the proxy and sleeps; 0 = "
     "sleep at once (docs/cluster.md)",
     0, 1000000, NULL, offsetof(or_config, copy_spin_us)},
    {"OPENREG_IPC_CHILDREN", OR_PARAM_CHOICE, "0", "0 or 1",
     "1: a process started alone (not under MPI) keeps its device memory in a shared segment "
     "and sets OPENREG_IPC_PARENT, so that the processes it starts can open its IPC handles",
     0, 0, bool_choices, offsetof(or_config, ipc_children)},
    {"OPENREG_IPC_PARENT", OR_PARAM_STRING, NULL,
     "what a parent process with OPENREG_IPC_CHILDREN=1 sets (never set by hand)",
     "the parent's job identity and device memory, so that this process opens the parent's "
     "IPC handles (docs/api.md)",
     0, 0, NULL, offsetof(or_config, ipc_parent)},
};

const or_param *or_config_params(size_t *count)
{
    *count = sizeof params / sizeof params[0];
    return params;
}

static int parse_int(const char *text, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0' || isspace((unsigned char)*text))
        return -1;
    *out = v;
    return 0;
}

int or_parse_size(const char *text, long long *bytes)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*text))
        return -1;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
    }
    if (shift && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || v > (unsigned long long)(LLONG_MAX >> shift))
        return -1;
    *bytes = (long long)(v << shift);
    return 0;
}

int or_param_parse(const or_param *p, const char *text, long long *value)
{
    long long v;
    switch (p->kind) {
    case OR_PARAM_INT:
        if (parse_int(text, &v) || v < p->min || v > p->max)
            return -1;
        break;
    case OR_PARAM_SIZE:
        if (or_parse_size(text, &v) || v < p->min || v > p->max)
            return -1;
        break;
    case OR_PARAM_STRING:
        if (!*text)
            return -1;
        v = 0;
        break;
    case OR_PARAM_CHOICE:
    case OR_PARAM_CHOICE_OR_FILE: {
        for (v = 0; p->choices[v]; v++)
            if (strcasecmp(text, p->choices[v]) == 0)
                break;
        if (p->choices[v])
            break;
        /* Only that it can be read: what it says is checked against the job. */
        FILE *f = p->kind == OR_PARAM_CHOICE_OR_FILE && *text ? fopen(text, "r") : NULL;
        struct stat st;
        bool file = f && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
        if (f)
            fclose(f);
        if (!file)
            return -1;
        break;
    }
    case OR_PARAM_TOPOLOGY: {
        or_topo *t;
        if (or_topo_load(text, p->name, &t, NULL) != OR_TOPO_OK)
            return -1;
        or_topo_free(t);
        v = 1;
        break;
    }
    default:
        return -1;
    }
    *value = v;
    return 0;
}

int or_config_load(or_config *cfg)
{
    int rc = 0;
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        const or_param *p = &params[i];
        const char *env = getenv(p->name);
        long long *field = (long long *)((char *)cfg + p->offset);
        if (p->kind == OR_PARAM_STRING) {
            const char **text = (const char **)((char *)cfg + p->offset);
            *text = env && *env ? env : NULL;
            if (env && !*env) {
                fprintf(stderr, "openreg: %s is set but empty: expected %s\n", p->name,
                        p->accepted);
                rc = -1;
            }
            continue;
        }
        if (!env && !p->default_value) {
            *field = 0;
            continue;
        }
        if (or_param_parse(p, env ? env : p->default_value, field) == 0)
            continue;
        /* Configuration errors are always shown: a silent default would hide them. */
        if (p->kind == OR_PARAM_TOPOLOGY)
            or_config_topology_error(env, stderr);
        else if (p->kind == OR_PARAM_CHOICE_OR_FILE)
            fprintf(stderr, "openreg: %s='%s' is not valid: expected %s; as a file: %s\n",
                    p->name, env, p->accepted, or_config_file_problem(env));
        else
            fprintf(stderr, "openreg: %s='%s' is not valid: expected %s\n", p->name, env,
                    p->accepted);
        rc = -1;
    }
    if (rc == 0 && cfg->placement == OR_PLACEMENT_FILE && !cfg->topo) {
        fprintf(stderr, "openreg: OPENREG_PLACEMENT=%s is a placement file, which places ranks "
                        "on a topology: set OPENREG_TOPO too\n",
                getenv("OPENREG_PLACEMENT"));
        rc = -1;
    }
    return rc;
}

const char *or_config_file_problem(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return strerror(errno);
    struct stat st;
    bool regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    fclose(f);
    return regular ? "readable" : "not a regular file";
}

void or_config_topology_error(const char *spec, FILE *f)
{
    or_topo *t = NULL;
    or_topo_error err;
    char msg[1024];
    if (or_topo_load(spec, "OPENREG_TOPO", &t, &err) == OR_TOPO_OK) {
        or_topo_free(t);
        return;
    }
    or_topo_error_format(&err, msg, sizeof msg);
    fprintf(f, "openreg: OPENREG_TOPO is not valid: %s\n", msg);
}
