/*
 * orinfo.c - what an OpenReg Cluster job would see: its ranks, their devices
 * and how the devices are placed, or (--env) every environment variable the
 * runtime reads.
 *
 * Usage: orinfo [--env] [--json] [-h|--help]
 *
 * The cluster listing starts MPI itself, so it works alone (a one-rank
 * cluster) or under mpiexec. Each rank starts the runtime, describes its
 * devices and checks where their compute threads really run by launching a
 * kernel whose blocks read their thread's CPU affinity; rank 0 gathers the
 * descriptions and prints them in rank order. docs/orinfo.md has sample
 * output and the JSON layout.
 *
 * Exit status: 0 on success, 1 if the runtime (or MPI, or the probe kernel)
 * failed, 2 on a bad command line.
 */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "topo.h"

/* ---- growable text buffer ----------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
} buf;

static void die_oom(void)
{
    fprintf(stderr, "orinfo: out of host memory\n");
    exit(1);
}

static void buf_reserve(buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p)
        die_oom();
    b->data = p;
    b->cap = cap;
}

__attribute__((format(printf, 2, 3))) static void buf_printf(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        fprintf(stderr, "orinfo: cannot format output\n");
        exit(1);
    }
    buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static void buf_put(buf *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

/* A JSON string literal, or null for NULL. Bytes >= 0x80 pass through: the
 * texts are UTF-8 or ASCII. */
static void buf_json_str(buf *b, const char *s)
{
    if (!s) {
        buf_printf(b, "null");
        return;
    }
    buf_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '"': buf_put(b, "\\\"", 2); break;
        case '\\': buf_put(b, "\\\\", 2); break;
        case '\n': buf_put(b, "\\n", 2); break;
        case '\r': buf_put(b, "\\r", 2); break;
        case '\t': buf_put(b, "\\t", 2); break;
        case '\b': buf_put(b, "\\b", 2); break;
        case '\f': buf_put(b, "\\f", 2); break;
        default:
            if (c < 0x20)
                buf_printf(b, "\\u%04x", c);
            else
                buf_put(b, (const char *)&c, 1);
        }
    }
    buf_put(b, "\"", 1);
}

/* Everything goes out in one write, so a full disk or closed pipe is one
 * check and the exit status reports it. */
static int write_stdout(const buf *b)
{
    if ((b->len && fwrite(b->data, 1, b->len, stdout) != b->len) || fflush(stdout) != 0) {
        fprintf(stderr, "orinfo: cannot write the output: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

static const char *plural(long long n) { return n == 1 ? "" : "s"; }

/* ---- MPI ---------------------------------------------------------------- */

static int mpi_check(int rc, const char *call)
{
    if (rc == MPI_SUCCESS)
        return 0;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", rc);
    fprintf(stderr, "orinfo: %s failed: %s\n", call, text);
    return -1;
}

/* Did any rank fail? Every rank must learn it, or the others would wait in
 * the gather for a rank that gave up. */
static int any_failed(int failed)
{
    int any = 1;
    if (mpi_check(MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
                  "MPI_Allreduce"))
        return 1;
    return any;
}

/* ---- --env --------------------------------------------------------------- */

/* What an unset variable with no default value means; the table says NULL
 * means "decided elsewhere", and this says where. */
static const char *implicit_default(const char *name)
{
    if (strcmp(name, "OPENREG_TRACE") == 0)
        return "(no trace)";
    if (strcmp(name, "OPENREG_TOPO") == 0)
        return "(none)";
    return strcmp(name, "OPENREG_DEVICE_MEM") == 0 ? "(profile)" : "(auto)";
}

/* Variables outside the runtime's table: the launcher's, which the runtime
 * reads, and hwloc's, which decide the topology the devices are placed on. */
typedef struct {
    const char *name, *source, *default_text, *accepted, *help;
} extra_var;

static const extra_var launcher_vars[] = {
    {"PMI_RANK", "launcher", "(unset)", "set by mpiexec",
     "with PMI_SIZE, PMI_FD or PMIX_RANK: the process was started by an MPI launcher, so the "
     "runtime starts MPI on its first call; unset, the process is a one-rank cluster"},
    {"PMI_SIZE", "launcher", "(unset)", "set by mpiexec", "see PMI_RANK"},
    {"MPIR_CVAR_DEFAULT_THREAD_LEVEL", "MPICH", "MPI_THREAD_SINGLE",
     "MPI_THREAD_SINGLE, _FUNNELED, _SERIALIZED or _MULTIPLE",
     "thread level of a plain MPI_Init; the runtime needs MPI_THREAD_MULTIPLE, which orrun "
     "sets"},
};

static const extra_var hwloc_vars[] = {
    {"HWLOC_SYNTHETIC", "hwloc", "(this host)", "an hwloc synthetic description",
     "a made-up topology, e.g. \"pack:2 numa:2 core:2 pu:1\", on which devices are placed "
     "instead of this host's"},
    {"HWLOC_XMLFILE", "hwloc", "(this host)", "a topology file written by lstopo",
     "a saved topology on which devices are placed instead of this host's"},
};


typedef struct {
    const char *name, *source, *value, *default_text, *accepted, *help;
    bool checked; /* validity is known (set and checkable) */
    bool valid;
} env_entry;

/* Text as lines of at most width columns, each indented; words are never split. */
static void buf_wrapped(buf *b, const char *text, int indent, int width)
{
    for (;;) {
        while (*text == ' ')
            text++;
        if (!*text)
            break;
        int room = width - indent, n = (int)strlen(text);
        if (n > room) {
            n = room;
            while (n > 0 && text[n] != ' ')
                n--;
            if (n == 0) /* one word longer than the line */
                n = (int)strcspn(text, " ");
        }
        buf_printf(b, "%*s%.*s\n", indent, "", n, text);
        text += n;
    }
}

static void env_text(buf *b, const env_entry *e)
{
    buf_printf(b, "%s = %s", e->name, e->value ? e->value : "(unset)");
    if (e->checked && !e->valid)
        buf_printf(b, "  INVALID");
    buf_printf(b, "\n    default   %s\n    accepted  %s\n", e->default_text, e->accepted);
    buf_wrapped(b, e->help, 4, 88);
}

static void env_json(buf *b, const env_entry *e, bool last)
{
    buf_printf(b, "    {\"name\": ");
    buf_json_str(b, e->name);
    buf_printf(b, ", \"source\": ");
    buf_json_str(b, e->source);
    buf_printf(b, ", \"value\": ");
    buf_json_str(b, e->value);
    buf_printf(b, ", \"valid\": %s,\n     \"default\": ",
               !e->checked ? "null" : e->valid ? "true" : "false");
    buf_json_str(b, e->default_text);
    buf_printf(b, ", \"accepted\": ");
    buf_json_str(b, e->accepted);
    buf_printf(b, ",\n     \"help\": ");
    buf_json_str(b, e->help);
    buf_printf(b, "}%s\n", last ? "" : ",");
}

/* Reads the table and the environment only: it has to work when a bad value
 * keeps the runtime from starting. */
static void describe_env(buf *out, bool json)
{
    size_t nparams;
    const or_param *params = or_config_params(&nparams);
    size_t nlaunch = sizeof launcher_vars / sizeof launcher_vars[0];
    size_t nhwloc = sizeof hwloc_vars / sizeof hwloc_vars[0];
    size_t n = nparams + nlaunch + nhwloc;
    env_entry *e = calloc(n, sizeof *e);
    if (!e)
        die_oom();

    size_t k = 0;
    for (size_t i = 0; i < nparams; i++, k++) {
        const or_param *p = &params[i];
        long long v;
        e[k] = (env_entry){p->name, "openreg", getenv(p->name),
                           p->default_value ? p->default_value : implicit_default(p->name),
                           p->accepted, p->help, false, false};
        if (e[k].value) {
            e[k].checked = true;
            e[k].valid = or_param_parse(p, e[k].value, &v) == 0;
        }
    }
    for (size_t i = 0; i < nlaunch; i++, k++) {
        const extra_var *x = &launcher_vars[i];
        e[k] = (env_entry){x->name,     x->source, getenv(x->name), x->default_text,
                           x->accepted, x->help,   false,           false};
    }
    for (size_t i = 0; i < nhwloc; i++, k++) {
        const extra_var *x = &hwloc_vars[i];
        e[k] = (env_entry){x->name,     x->source, getenv(x->name), x->default_text,
                           x->accepted, x->help,   false,           false};
    }

    const or_device_profile *const *profiles = or_profiles();
    if (json) {
        buf_printf(out, "{\n  \"env\": [\n");
        for (k = 0; k < n; k++)
            env_json(out, &e[k], k + 1 == n);
        buf_printf(out, "  ],\n  \"profiles\": [\n");
        for (const or_device_profile *const *p = profiles; *p; p++) {
            buf_printf(out, "    {\"name\": ");
            buf_json_str(out, (*p)->name);
            buf_printf(out, ", \"description\": ");
            buf_json_str(out, (*p)->description);
            buf_printf(out, "}%s\n", p[1] ? "," : "");
        }
        buf_printf(out, "  ]\n}\n");
    } else {
        buf_printf(out, "read by the runtime at its first call (a bad value stops it):\n\n");
        for (k = 0; k < nparams; k++)
            env_text(out, &e[k]);
        buf_printf(out, "\nset by the launcher, read by the runtime "
                        "(an invalid pair is ignored: the rank is alone on its host):\n\n");
        for (; k < nparams + nlaunch; k++)
            env_text(out, &e[k]);
        buf_printf(out, "\nread by hwloc when the runtime loads the host topology:\n\n");
        for (; k < n; k++)
            env_text(out, &e[k]);
        buf_printf(out, "\ndevice profiles (OPENREG_DEVICE_PROFILE):\n");
        for (const or_device_profile *const *p = profiles; *p; p++)
            buf_printf(out, "  %-6s %s\n", (*p)->name, (*p)->description);
    }
    free(e);
}

/* ---- the observed binding ----------------------------------------------- */

/* Size of a CPU set the kernel accepts: hosts with more CPUs than
 * CPU_SETSIZE need a larger one, and a smaller one fails with EINVAL. */
static size_t affinity_setsize(void)
{
    for (int ncpus = CPU_SETSIZE; ncpus <= (1 << 20); ncpus *= 2) {
        cpu_set_t *set = CPU_ALLOC(ncpus);
        if (!set)
            return 0;
        size_t size = CPU_ALLOC_SIZE(ncpus);
        int rc = sched_getaffinity(0, size, set);
        int err = errno;
        CPU_FREE(set);
        if (rc == 0)
            return size;
        if (err != EINVAL)
            return 0;
    }
    return 0;
}

/* One slot per block in host memory: blocks run concurrently on different
 * workers, so none shares a slot. */
typedef struct {
    unsigned char *sets; /* nblocks CPU sets of setsize bytes */
    size_t setsize;
    pthread_t *threads;
    int *errs;
} probe_args;

typedef struct {
    unsigned nblocks;
    probe_args args;
} probe;

static void probe_kernel(const orKernelContext *ctx, void *argp)
{
    const probe_args *a = argp;
    size_t b = ctx->blockIdx.x;
    a->errs[b] = pthread_getaffinity_np(pthread_self(), a->setsize,
                                        (cpu_set_t *)(a->sets + b * a->setsize));
    a->threads[b] = pthread_self();
    /* Keep this worker busy a moment so the idle ones take the other blocks
     * and every compute thread is seen. */
    struct timespec pause = {0, 1000000};
    (void)nanosleep(&pause, NULL); /* a signal cutting it short does no harm */
}

static void probe_free(probe *p)
{
    free(p->args.sets);
    free(p->args.threads);
    free(p->args.errs);
}

/* "0-3,8" from a CPU set (the hwloc list syntax the device's cpuList uses). */
static void cpuset_list(buf *b, const cpu_set_t *set, size_t setsize)
{
    int ncpus = (int)(setsize * 8);
    const char *sep = "";
    for (int i = 0; i < ncpus; i++) {
        if (!CPU_ISSET_S(i, setsize, set))
            continue;
        int j = i;
        while (j + 1 < ncpus && CPU_ISSET_S(j + 1, setsize, set))
            j++;
        if (j > i)
            buf_printf(b, "%s%d-%d", sep, i, j);
        else
            buf_printf(b, "%s%d", sep, i);
        sep = ",";
        i = j;
    }
    if (!*sep)
        buf_printf(b, "nothing");
}

/* ---- the cluster listing ------------------------------------------------ */

typedef struct {
    orDeviceProp prop;
    const char *profile;
    const char *bind;
    char *bound;      /* union of the compute threads' affinities */
    int workers_seen; /* distinct compute threads that ran a probe block */
} device_info;

static const char *bind_name(long long mode)
{
    switch ((or_bind_mode)mode) {
    case OR_BIND_CORE: return "core";
    case OR_BIND_NUMA: return "numa";
    case OR_BIND_NONE: return "none";
    }
    return "unknown";
}

static void report_or_error(const char *what, orError_t err)
{
    fprintf(stderr, "orinfo: %s: %s: %s\n", what, orGetErrorName(err), orGetErrorString(err));
}

/* Launch the probe on every device first, then wait for all: the devices
 * run it side by side. */
static int probe_devices(device_info *devs, int ndevices)
{
    size_t setsize = affinity_setsize();
    if (!setsize) {
        fprintf(stderr, "orinfo: cannot read the CPU affinity: %s\n", strerror(errno));
        return -1;
    }
    probe *probes = calloc((size_t)ndevices, sizeof *probes);
    if (!probes)
        die_oom();
    int rc = 0, launched = 0;
    for (int d = 0; d < ndevices && rc == 0; d++) {
        probe *p = &probes[d];
        /* Several blocks per compute thread, so each gets at least one. */
        p->nblocks = 4u * (unsigned)devs[d].prop.multiProcessorCount;
        p->args.setsize = setsize;
        p->args.sets = calloc(p->nblocks, setsize);
        p->args.threads = calloc(p->nblocks, sizeof *p->args.threads);
        p->args.errs = calloc(p->nblocks, sizeof *p->args.errs);
        if (!p->args.sets || !p->args.threads || !p->args.errs)
            die_oom();
        orError_t err = orSetDevice(d);
        if (err == orSuccess)
            err = orLaunchKernel(probe_kernel, (orDim3){p->nblocks, 1, 1}, (orDim3){1, 1, 1},
                                 &p->args, sizeof p->args, 0, NULL);
        if (err != orSuccess) {
            report_or_error("cannot launch the binding probe", err);
            rc = -1;
            break;
        }
        launched++;
    }
    for (int d = 0; d < launched; d++) {
        orError_t err = orSetDevice(d);
        if (err == orSuccess)
            err = orStreamSynchronize(NULL);
        if (err != orSuccess) {
            report_or_error("the binding probe failed", err);
            rc = -1;
        }
    }

    cpu_set_t *all = CPU_ALLOC(setsize * 8);
    if (!all)
        die_oom();
    for (int d = 0; d < launched && rc == 0; d++) {
        const probe *p = &probes[d];
        CPU_ZERO_S(setsize, all);
        int seen = 0;
        for (unsigned b = 0; b < p->nblocks; b++) {
            if (p->args.errs[b]) {
                fprintf(stderr, "orinfo: device %d: pthread_getaffinity_np: %s\n", d,
                        strerror(p->args.errs[b]));
                rc = -1;
                break;
            }
            const cpu_set_t *s = (const cpu_set_t *)(p->args.sets + (size_t)b * setsize);
            CPU_OR_S(setsize, all, all, s);
            bool first = true;
            for (unsigned c = 0; c < b && first; c++)
                first = !pthread_equal(p->args.threads[c], p->args.threads[b]);
            seen += first;
        }
        buf list = {0};
        cpuset_list(&list, all, setsize);
        devs[d].bound = list.data;
        devs[d].workers_seen = seen;
    }
    CPU_FREE(all);
    for (int d = 0; d < ndevices; d++)
        probe_free(&probes[d]);
    free(probes);
    return rc;
}

/* The topology device this rank's device d is (OPENREG_TOPO), or NULL. */
static const char *topology_device(int d)
{
    if (!or_cl.topo || !or_cl.topo_device)
        return NULL;
    int td = or_cl.topo_device[or_cl.first_device[or_cl.rank] + d];
    return or_topo_vertex(or_cl.topo, or_topo_device_vertex(or_cl.topo, td)).id;
}

static void rank_text(buf *b, int rank, const char *host, bool this_host,
                      const device_info *devs, int ndevices)
{
    buf_printf(b, "rank %d: host %s, local rank %d of %d, virtual node %d of %d, %d device%s\n",
               rank, host, or_rt.local_rank, or_rt.local_nranks, or_cl.node, or_cl.nnodes,
               ndevices, plural(ndevices));
    if (!this_host)
        buf_printf(b, "  topology: not this host's (HWLOC_SYNTHETIC or HWLOC_XMLFILE); "
                      "compute threads stay unbound\n");
    for (int d = 0; d < ndevices; d++) {
        const device_info *v = &devs[d];
        const orDeviceProp *p = &v->prop;
        buf_printf(b, "  device %d: %s (profile %s), %.2f GiB, %d compute thread%s, cpus %s, ", d,
                   p->name, v->profile, (double)p->totalGlobalMem / (1 << 30),
                   p->multiProcessorCount, plural(p->multiProcessorCount), p->cpuList);
        if (p->numaNode >= 0)
            buf_printf(b, "NUMA node %d\n", p->numaNode);
        else
            buf_printf(b, "NUMA node unknown\n");
        buf_printf(b, "    declared: %.1f GFLOP/s FP32, %.1f GB/s memory, %d copy engine%s\n",
                   p->computeRateGflops, p->memoryBandwidthGBs, p->asyncEngineCount,
                   plural(p->asyncEngineCount));
        buf_printf(b, "    binding:  %s, bound to %s (%d of %d compute threads seen)\n", v->bind,
                   v->bound, v->workers_seen, p->multiProcessorCount);
        if (topology_device(d))
            buf_printf(b, "    topology: device %s of topology %s (OPENREG_TOPO)\n",
                       topology_device(d),
                       or_topo_name(or_cl.topo));
    }
}

static void rank_json(buf *b, int rank, const char *host, bool this_host,
                      const device_info *devs, int ndevices)
{
    buf_printf(b, "      {\"rank\": %d, \"host\": ", rank);
    buf_json_str(b, host);
    buf_printf(b, ", \"localRank\": %d, \"localRanks\": %d, \"node\": %d, "
                  "\"topologyIsThisHost\": %s,\n"
                  "       \"devices\": [\n",
               or_rt.local_rank, or_rt.local_nranks, or_cl.node, this_host ? "true" : "false");
    for (int d = 0; d < ndevices; d++) {
        const device_info *v = &devs[d];
        const orDeviceProp *p = &v->prop;
        buf_printf(b, "         {\"index\": %d, \"name\": ", d);
        buf_json_str(b, p->name);
        buf_printf(b, ", \"profile\": ");
        buf_json_str(b, v->profile);
        buf_printf(b, ", \"memoryBytes\": %zu, \"computeThreads\": %d,\n          \"cpuList\": ",
                   p->totalGlobalMem, p->multiProcessorCount);
        buf_json_str(b, p->cpuList);
        buf_printf(b, ", \"numaNode\": %d, \"copyEngines\": %d, \"bind\": ", p->numaNode,
                   p->asyncEngineCount);
        buf_json_str(b, v->bind);
        buf_printf(b, ",\n          \"computeRateGflops\": %.1f, \"memoryBandwidthGBs\": %.1f,\n"
                      "          \"boundCpuList\": ",
                   p->computeRateGflops, p->memoryBandwidthGBs);
        buf_json_str(b, v->bound);
        buf_printf(b, ", \"threadsSeen\": %d, \"topologyDevice\": ", v->workers_seen);
        if (topology_device(d))
            buf_json_str(b, topology_device(d));
        else
            buf_printf(b, "null");
        buf_printf(b, "}%s\n", d + 1 < ndevices ? "," : "");
    }
    buf_printf(b, "       ]}");
}

/* Start the runtime (collective: its start-up speaks MPI, and every rank
 * fails together if one rank's configuration is bad); *n is this rank's
 * device count. */
static int start_runtime(int *n)
{
    orError_t err = orGetDeviceCount(n);
    if (err != orSuccess) {
        /* The runtime has printed what was wrong; say that it stopped us. */
        fprintf(stderr, "orinfo: the runtime failed to start: %s: %s\n", orGetErrorName(err),
                orGetErrorString(err));
        if (err == orErrorInitialization)
            fprintf(stderr, "orinfo: 'orinfo --env' lists the variables and marks bad values\n");
        return -1;
    }
    return 0;
}

/* This rank's block (text or a JSON object). 0, or -1 with the reason on
 * stderr; *ndevices is set either way (0 on failure). */
static int describe_rank(buf *out, int rank, bool json, int *ndevices)
{
    *ndevices = 0;
    int n = 0;
    if (start_runtime(&n))
        return -1;
    orError_t err;
    char host[HOST_NAME_MAX + 1];
    if (gethostname(host, sizeof host) != 0) {
        fprintf(stderr, "orinfo: gethostname: %s\n", strerror(errno));
        return -1;
    }
    host[sizeof host - 1] = '\0'; /* truncated names need not be terminated */

    device_info *devs = calloc((size_t)n, sizeof *devs);
    if (!devs)
        die_oom();
    int rc = 0;
    for (int d = 0; d < n && rc == 0; d++) {
        err = orGetDeviceProperties(&devs[d].prop, d);
        if (err != orSuccess) {
            report_or_error("orGetDeviceProperties", err);
            rc = -1;
        }
        devs[d].profile = or_rt.devices[d].profile->name;
        devs[d].bind = bind_name(or_rt.cfg.bind);
    }
    if (rc == 0)
        rc = probe_devices(devs, n);
    if (rc == 0) {
        /* On a synthetic or loaded topology hwloc places but cannot bind: say
         * so, or the read-back would look like a runtime bug. */
        hwloc_topology_t topo = or_placement_topology();
        bool this_host = topo && hwloc_topology_is_thissystem(topo);
        if (json)
            rank_json(out, rank, host, this_host, devs, n);
        else
            rank_text(out, rank, host, this_host, devs, n);
        *ndevices = n;
    }
    for (int d = 0; d < n; d++)
        free(devs[d].bound);
    free(devs);
    return rc;
}

/* Rank 0 collects every rank's block and its device count, in rank order. */
static int gather_cluster(const buf *mine, int ndevices, int rank, int size, bool json,
                          buf *out)
{
    /* -1: too long for MPI's int counts; rank 0 stops everyone below. */
    int my_counts[2] = {mine->len > INT_MAX ? -1 : (int)mine->len, ndevices};
    int *counts = NULL, *lens = NULL, *displs = NULL;
    char *all = NULL;
    int rc = 0;
    if (rank == 0) {
        counts = malloc(2 * (size_t)size * sizeof *counts);
        lens = malloc((size_t)size * sizeof *lens);
        displs = malloc((size_t)size * sizeof *displs);
        if (!counts || !lens || !displs)
            die_oom();
    }
    if (mpi_check(MPI_Gather(my_counts, 2, MPI_INT, counts, 2, MPI_INT, 0, MPI_COMM_WORLD),
                  "MPI_Gather")) {
        free(counts);
        free(lens);
        free(displs);
        return -1;
    }
    long long total_len = 0, total_devices = 0;
    if (rank == 0) {
        for (int r = 0; r < size; r++) {
            displs[r] = (int)total_len;
            lens[r] = counts[2 * r];
            total_len += counts[2 * r];
            total_devices += counts[2 * r + 1];
            if (counts[2 * r] < 0 || total_len > INT_MAX) {
                fprintf(stderr, "orinfo: the cluster's description is too long\n");
                rc = -1;
                break;
            }
        }
        if (rc == 0 && !(all = malloc((size_t)total_len + 1)))
            die_oom();
    }
    /* Rank 0 tells everyone whether the gather happens, so no rank waits in
     * it alone. */
    int abort_gather = rank == 0 ? rc : 0;
    if (mpi_check(MPI_Bcast(&abort_gather, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast") ||
        abort_gather) {
        free(counts);
        free(lens);
        free(displs);
        return -1;
    }
    if (mpi_check(MPI_Gatherv(mine->data ? mine->data : "", (int)mine->len, MPI_CHAR, all, lens,
                              displs, MPI_CHAR, 0, MPI_COMM_WORLD),
                  "MPI_Gatherv"))
        rc = -1;

    if (rank == 0 && rc == 0) {
        if (json) {
            buf_printf(out, "{\n  \"cluster\": {\n    \"nranks\": %d, \"ndevices\": %lld,\n"
                            "    \"ranks\": [\n",
                       size, total_devices);
            for (int r = 0; r < size; r++) {
                buf_put(out, all + displs[r], (size_t)lens[r]);
                buf_printf(out, "%s\n", r + 1 < size ? "," : "");
            }
            buf_printf(out, "    ]\n  }\n}\n");
        } else {
            buf_printf(out, "cluster: %d rank%s, %lld device%s\n", size, plural(size),
                       total_devices, plural(total_devices));
            buf_put(out, all, (size_t)total_len);
        }
    }
    free(all);
    free(counts);
    free(lens);
    free(displs);
    return rc;
}

/* ---- main --------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: orinfo [--env] [--json] [-h|--help]\n"
            "\n"
            "Lists the OpenReg Cluster job this program is part of: every rank, its host and\n"
            "its devices (memory, compute threads, cores, NUMA node, declared rates) and the\n"
            "cores their compute threads are actually bound to. Run it alone for a one-rank\n"
            "cluster or under mpiexec for several.\n"
            "\n"
            "  --env       list every environment variable the runtime reads instead: value,\n"
            "              default, accepted values; bad values are marked INVALID\n"
            "  --json      print the same as a JSON document\n"
            "  -h, --help  print this help\n"
            "\n"
            "Exit status: 0 on success, 1 if the runtime failed, 2 on a bad command line.\n");
}

int main(int argc, char **argv)
{
    bool env = false, json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--env") == 0) {
            env = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return fflush(stdout) == 0 ? 0 : 1;
        } else {
            fprintf(stderr, "orinfo: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }

    /* MULTIPLE: the runtime calls MPI from its own threads, so it adopts an
     * MPI the program started only at that level (and says so otherwise). */
    int provided = MPI_THREAD_SINGLE;
    if (mpi_check(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided),
                  "MPI_Init_thread"))
        return 1;
    int rank = 0, size = 1;
    if (mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank") ||
        mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size")) {
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    int status = 0;
    buf out = {0};
    if (env) {
        /* The environment as rank 0 sees it: the launcher gives every rank the
         * same, PMI_RANK aside. */
        if (rank == 0) {
            describe_env(&out, json);
            status = write_stdout(&out) ? 1 : 0;
        }
    } else {
        buf mine = {0};
        int ndevices = 0;
        int failed = describe_rank(&mine, rank, json, &ndevices) ? 1 : 0;
        if (any_failed(failed))
            status = 1;
        else if (gather_cluster(&mine, ndevices, rank, size, json, &out))
            status = 1;
        else if (rank == 0 && write_stdout(&out))
            status = 1;
        free(mine.data);
    }
    free(out.data);
    if (mpi_check(MPI_Finalize(), "MPI_Finalize"))
        status = 1;
    return status;
}
