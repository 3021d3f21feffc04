/*
 * collectives/comm.c - communicators: unique ids, the bootstrap that turns
 * (id, rank) pairs into a communicator, and its lifetime.
 *
 * Bootstrap: every rank sends a registration (its world rank, node, device
 * and where its control block is) to the process that made the unique id,
 * which answers each with the whole table once all nranks registered. Ranks
 * in the root's own process register locally, so a one-process communicator
 * (occlCommInitAll, or a job without MPI) never touches MPI. Inits inside
 * occlGroupStart/End are deferred to occlGroupEnd and run together, so one
 * thread can create the communicators of all its devices.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sched.h>
#include <sys/random.h>
#include <unistd.h>

#include "group.h"
#include "occl_internal.h"
#include "plugin.h"

#define ID_MAGIC 0x4f43434c55494431ULL   /* "OCCLUID1" */
#define GROW_MAGIC 0x4f43434c47524f57ULL /* "OCCLGROW": occlCommGetUniqueId's */
enum { TAG_REGISTER = 0x0ff00000, TAG_TABLE = 0x0fe00000 }; /* above every comm slot */

typedef struct unique_id {
    uint64_t magic;
    uint64_t job_id;
    uint64_t id;
    int32_t root;          /* world rank of the process that made it */
    int32_t parent_nranks; /* a grow id's: the size of the communicator grown */
} unique_id;
_Static_assert(sizeof(unique_id) <= OCCL_UNIQUE_ID_BYTES, "id fits");

typedef struct registration {
    uint64_t id;
    int32_t nranks, rank, world_rank, node, device;
    or_mem_ref ctrl_ref;
    uint8_t slots_used[OCCL_TAG_SLOTS + 1]; /* tag slots this process has in use */
    uint64_t mem_bps; /* the device's memory bandwidth (occlGroupSimulateEnd's model) */
} registration;

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t slots_used[OCCL_TAG_SLOTS + 1];

/* ---- errors and logging ---------------------------------------------------- */

occl_log_level occl_log_threshold = OCCL_LOG_WARN;
unsigned occl_log_subsys = OCCL_SUBSYS_ALL;
static FILE *log_file; /* OCCL_DEBUG_FILE's; stderr when NULL */
static _Thread_local char thread_error[256];

void occl_log(occl_log_level level, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    static const char *const names[] = {"NONE", "WARN", "INFO", "TRACE"};
    /* One fprintf per line keeps lines of concurrent threads whole. */
    fprintf(log_file ? log_file : stderr, "occl %s: %s\n", names[level], line);
}

occlResult_t occl_fail(occlResult_t res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(thread_error, sizeof thread_error, fmt, ap);
    va_end(ap);
    /* A failure's reason, like a warning, whatever OCCL_DEBUG_SUBSYS selects. */
    if (occl_log_threshold >= OCCL_LOG_INFO)
        occl_log(OCCL_LOG_INFO, "%s: %s", occlGetErrorString(res), thread_error);
    return res;
}

const char *occlGetErrorString(occlResult_t result)
{
    switch (result) {
    case occlSuccess: return "no error";
    case occlUnhandledDeviceError: return "unhandled device (runtime) error";
    case occlSystemError: return "unhandled system error (out of memory, MPI failure)";
    case occlInternalError: return "internal error";
    case occlInvalidArgument: return "invalid argument";
    case occlInvalidUsage: return "invalid usage";
    case occlRemoteError: return "remote process exited or there was a network error";
    case occlInProgress: return "operation in progress";
    case occlTimeout: return "timed out waiting for peers (OCCL_TIMEOUT_MS)";
    default: return "unknown result code";
    }
}

static const char *async_why(occlComm_t comm);

const char *occlGetLastError(occlComm_t comm)
{
    const char *why = comm ? async_why(comm) : NULL;
    if (why)
        return why;
    if (comm && occl_comm_valid(comm) && comm->last_error[0])
        return comm->last_error;
    return thread_error;
}

occlResult_t occlGetVersion(int *version)
{
    if (!version)
        return occl_fail(occlInvalidArgument, "version is NULL");
    *version = OCCL_VERSION_CODE;
    return occlSuccess;
}

/* ---- settings ---------------------------------------------------------------- */

/* The settings' own INFO lines are of the ENV subsystem. */
#define OCCL_INFO_ENV(...)                                                                   \
    do {                                                                                     \
        if (occl_log_threshold >= OCCL_LOG_INFO && (occl_log_subsys & OCCL_SUBSYS_ENV))      \
            occl_log(OCCL_LOG_INFO, __VA_ARGS__);                                            \
    } while (0)

/* The longest OCCL_TIMEOUT_MS, about 31.7 years: waits for ever in practice,
 * and 10^12 ms in ns stays below 2^63, so now + timeout overflows neither a
 * uint64_t deadline nor a signed one. */
#define TIMEOUT_MS_MAX 1000000000000LL
#define TIMEOUT_MS_DEFAULT 300000LL /* five minutes, as generous as a training step needs */

static pthread_once_t settings_once = PTHREAD_ONCE_INIT;
static uint64_t timeout_ns = (uint64_t)TIMEOUT_MS_DEFAULT * 1000000u;
static bool check_calls = true; /* OCCL_CHECK_CALLS: fingerprints (fingerprint.c) */
static char settings_error[320]; /* empty: the settings are valid */

/* OCCL_DEBUG_SUBSYS: NCCL's syntax, names separated by commas, a leading
 * '^' for all but those. The mask, or -1 with an unknown name in *bad. */
static const struct {
    const char *name;
    unsigned bit;
} subsys_names[] = {{"INIT", OCCL_SUBSYS_INIT},     {"COLL", OCCL_SUBSYS_COLL},
                    {"P2P", OCCL_SUBSYS_P2P},       {"NET", OCCL_SUBSYS_NET},
                    {"GRAPH", OCCL_SUBSYS_GRAPH},   {"TUNING", OCCL_SUBSYS_TUNING},
                    {"ENV", OCCL_SUBSYS_ENV},       {"ALL", OCCL_SUBSYS_ALL}};

long occl_parse_debug_subsys(const char *list, char *bad, size_t badlen)
{
    bool invert = list[0] == '^';
    unsigned mask = 0;
    for (const char *p = list + invert; *p;) {
        size_t n = strcspn(p, ",");
        size_t k = 0;
        while (k < sizeof subsys_names / sizeof subsys_names[0] &&
               !(strlen(subsys_names[k].name) == n && strncasecmp(p, subsys_names[k].name, n) == 0))
            k++;
        if (k == sizeof subsys_names / sizeof subsys_names[0]) {
            snprintf(bad, badlen, "%.*s", (int)(n > 40 ? 40 : n), p);
            return -1;
        }
        mask |= subsys_names[k].bit;
        p += n;
        if (*p == ',')
            p++;
    }
    return invert ? (long)(OCCL_SUBSYS_ALL & ~mask) : (long)mask;
}

/* OCCL_DEBUG_FILE with NCCL's substitutions: %h the host name, %p the pid,
 * %% a '%'; any other %x is kept as it is. 0, or -1 if the path is too long. */
int occl_expand_debug_file(const char *pattern, char *out, size_t outlen)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    size_t o = 0;
    for (const char *p = pattern; *p; p++) {
        char piece[300];
        if (*p != '%' || !p[1])
            snprintf(piece, sizeof piece, "%c", *p);
        else if (p[1] == 'h')
            snprintf(piece, sizeof piece, "%s", host), p++;
        else if (p[1] == 'p')
            snprintf(piece, sizeof piece, "%d", (int)getpid()), p++;
        else if (p[1] == '%')
            snprintf(piece, sizeof piece, "%%"), p++;
        else
            snprintf(piece, sizeof piece, "%%%c", p[1]), p++;
        size_t n = strlen(piece);
        if (o + n >= outlen)
            return -1;
        memcpy(out + o, piece, n + 1);
        o += n;
    }
    if (o == 0 && outlen)
        out[0] = 0;
    return 0;
}

static void debug_settings_read(void)
{
    const char *dbg = getenv("OCCL_DEBUG");
    if (dbg && strcmp(dbg, "INFO") == 0)
        occl_log_threshold = OCCL_LOG_INFO;
    if (dbg && strcmp(dbg, "TRACE") == 0)
        occl_log_threshold = OCCL_LOG_TRACE;
    const char *env = getenv("OCCL_DEBUG_SUBSYS");
    if (env) {
        char bad[48];
        long mask = occl_parse_debug_subsys(env, bad, sizeof bad);
        if (mask < 0)
            snprintf(settings_error, sizeof settings_error,
                     "OCCL_DEBUG_SUBSYS='%.40s' is not valid: unknown subsystem '%s' (known: INIT, "
                     "COLL, P2P, NET, GRAPH, TUNING, ENV, ALL; '^' first for all but those)", env, bad);
        else
            occl_log_subsys = (unsigned)mask;
    }
    env = getenv("OCCL_DEBUG_FILE");
    if (env && !settings_error[0]) {
        char path[4096];
        if (!*env || occl_expand_debug_file(env, path, sizeof path) != 0)
            snprintf(settings_error, sizeof settings_error,
                     "OCCL_DEBUG_FILE='%.40s' is not valid: empty, or too long once expanded", env);
        else if (!(log_file = fopen(path, "w")))
            snprintf(settings_error, sizeof settings_error,
                     "OCCL_DEBUG_FILE: cannot open '%.80s' for writing: %s", path, strerror(errno));
        else
            setvbuf(log_file, NULL, _IOLBF, 0); /* whole lines, as they come */
    }
}

static void settings_read(void)
{
    debug_settings_read();
    if (settings_error[0]) {
        OCCL_WARN("%s", settings_error);
        return;
    }
    const char *env = getenv("OCCL_TIMEOUT_MS");
    if (env) {
        char *end;
        errno = 0;
        long long ms = strtoll(env, &end, 10);
        /* Digits only: no sign, no space, nothing after, in range. */
        if (*env < '0' || *env > '9' || errno || *end || ms < 1 || ms > TIMEOUT_MS_MAX)
            snprintf(settings_error, sizeof settings_error,
                     "OCCL_TIMEOUT_MS='%.40s' is not valid: expected an integer from 1 to %lld "
                     "(milliseconds; the largest, about 31 years, waits for ever)",
                     env, TIMEOUT_MS_MAX);
        else {
            timeout_ns = (uint64_t)ms * 1000000u;
            OCCL_INFO_ENV("OCCL_TIMEOUT_MS set by environment to %lld", ms);
        }
    }
    env = getenv("OCCL_CHECK_CALLS");
    if (env && !settings_error[0]) {
        if (strcmp(env, "0") != 0 && strcmp(env, "1") != 0)
            snprintf(settings_error, sizeof settings_error,
                     "OCCL_CHECK_CALLS='%.40s' is not valid: expected 0 (calls unchecked) or 1 "
                     "(every call's fingerprint compared across its ranks, the default)", env);
        else {
            check_calls = *env == '1';
            OCCL_INFO_ENV("OCCL_CHECK_CALLS set by environment to %s", env);
        }
    }
    const char *algo_error = settings_error[0] ? NULL : occl_algo_setting_error();
    if (algo_error)
        snprintf(settings_error, sizeof settings_error, "%s", algo_error);
    else if (!settings_error[0] && getenv("OCCL_ALGO"))
        OCCL_INFO_ENV("OCCL_ALGO set by environment to %.80s", getenv("OCCL_ALGO"));
    if (!settings_error[0])
        occl_ll_settings(settings_error, sizeof settings_error);
    if (!settings_error[0])
        occl_proto_settings(settings_error, sizeof settings_error);
    if (settings_error[0])
        OCCL_WARN("%s", settings_error); /* once: every call that needs it fails with it */
}

/* occlInvalidArgument, with the reason as the call's error, while a
 * setting is not valid: no call runs on a silent default. */
static occlResult_t settings_check(void)
{
    pthread_once(&settings_once, settings_read);
    return settings_error[0] ? occl_fail(occlInvalidArgument, "%s", settings_error) : occlSuccess;
}

uint64_t occl_deadline(void)
{
    pthread_once(&settings_once, settings_read);
    return or_now_ns() + timeout_ns;
}

/* Live communicators of this process: a handle is checked against this
 * list, never dereferenced first, so a destroyed communicator (freed memory)
 * is recognized as such. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static occlComm_t *live;
static int nlive, cap_live;
/* Bumped (under live_lock) whenever a communicator leaves the list: a
 * thread's last communicator found live stays live while it is unchanged,
 * so a call on the communicator the thread used last needs no lock. */
static _Atomic uint64_t live_removals;
static _Thread_local occlComm_t last_live;
static _Thread_local uint64_t last_live_removals;

static bool live_add(occlComm_t comm)
{
    pthread_mutex_lock(&live_lock);
    if (nlive == cap_live) {
        int cap = cap_live ? 2 * cap_live : 16;
        occlComm_t *grown = realloc(live, (size_t)cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&live_lock);
            return false;
        }
        live = grown;
        cap_live = cap;
    }
    live[nlive++] = comm;
    pthread_mutex_unlock(&live_lock);
    return true;
}

static void live_remove(occlComm_t comm)
{
    pthread_mutex_lock(&live_lock);
    for (int i = 0; i < nlive; i++)
        if (live[i] == comm) {
            live[i] = live[--nlive];
            break;
        }
    atomic_fetch_add(&live_removals, 1);
    pthread_mutex_unlock(&live_lock);
}

bool occl_comm_valid(occlComm_t comm)
{
    if (!comm)
        return false;
    if (comm == last_live && atomic_load(&live_removals) == last_live_removals)
        return comm->magic == OCCL_COMM_MAGIC;
    bool found = false;
    pthread_mutex_lock(&live_lock);
    uint64_t removals = atomic_load(&live_removals);
    for (int i = 0; i < nlive && !found; i++)
        found = live[i] == comm;
    pthread_mutex_unlock(&live_lock);
    if (found) {
        last_live = comm;
        last_live_removals = removals;
    }
    return found && comm->magic == OCCL_COMM_MAGIC;
}

/* ---- scratch ----------------------------------------------------------------- */

/* Sizes are rounded up so a sweep of growing calls reallocates rarely. */
static size_t scratch_round(size_t bytes)
{
    size_t unit = (size_t)1 << 20;
    return bytes > SIZE_MAX - unit ? bytes : (bytes + unit - 1) & ~(unit - 1);
}

void *occl_scratch(occlComm_t comm, int slot, size_t bytes)
{
    if (bytes <= comm->scratch_bytes[slot])
        return comm->scratch[slot];
    int prev;
    orGetDevice(&prev);
    orSetDevice(comm->device);
    if (comm->scratch[slot])
        orFree(comm->scratch[slot]);
    comm->scratch[slot] = NULL;
    comm->scratch_bytes[slot] = 0;
    /* Rounding up only spares reallocations: a device too small for it
     * still gets the bytes the call needs. */
    size_t want = scratch_round(bytes);
    void *p = NULL;
    orError_t err = orMalloc(&p, want);
    if (err != orSuccess && want > bytes)
        err = orMalloc(&p, want = bytes);
    if (err == orSuccess) {
        comm->scratch[slot] = p;
        comm->scratch_bytes[slot] = want;
    } else {
        size_t free_bytes = 0, total = 0;
        orMemGetInfo(&free_bytes, &total);
        p = NULL;
        occl_fail(occlUnhandledDeviceError, "no device memory for %zu bytes of scratch on device %d "
                  "(%zu bytes free of %zu; OPENREG_DEVICE_MEM sets the size)",
                  bytes, comm->device, free_bytes, total);
    }
    orSetDevice(prev);
    return p;
}

void *occl_staging_take(occlComm_t comm, size_t bytes)
{
    if (comm->staging_busy)
        return malloc(bytes);
    if (bytes > comm->staging_bytes) {
        free(comm->staging);
        comm->staging_bytes = 0;
        comm->staging = malloc(scratch_round(bytes));
        if (!comm->staging)
            return NULL;
        comm->staging_bytes = scratch_round(bytes);
    }
    comm->staging_busy = true;
    return comm->staging;
}

void occl_staging_give(occlComm_t comm, void *p)
{
    if (p && p == comm->staging)
        comm->staging_busy = false;
    else
        free(p);
}

void occl_scratch_release(occlComm_t comm)
{
    for (int k = 0; k < OCCL_SCRATCH_SLOTS; k++) {
        if (comm->scratch[k])
            orFree(comm->scratch[k]);
        comm->scratch[k] = NULL;
        comm->scratch_bytes[k] = 0;
    }
    free(comm->staging);
    comm->staging = NULL;
    comm->staging_bytes = 0;
    comm->staging_busy = false;
}

void occl_comm_set_error(occlComm_t comm, occlResult_t res)
{
    int none = occlSuccess;
    /* The first failure's reason is the communicator's: the calls skipped
     * after it would otherwise replace it with "failed earlier". */
    if (atomic_compare_exchange_strong(&comm->async_error, &none, (int)res)) {
        if (comm->config.name[0]) /* the config's commName says which communicator */
            snprintf(comm->last_error, sizeof comm->last_error, "comm '%.60s': %.180s", comm->config.name,
                     thread_error);
        else
            snprintf(comm->last_error, sizeof comm->last_error, "%s", thread_error);
    }
}

/* Ranks that pick different algorithms for one collective would run
 * different schedules against each other: the runtime's start-up compares
 * OCCL_ALGO across ranks with its own settings. */
__attribute__((constructor)) static void occl_settings_register(void)
{
    or_config_must_agree("OCCL_ALGO", "");
    or_config_must_agree("OCCL_PROTO", ""); /* the protocol is charged in the replay every rank runs */
    /* With it on, a call's first network message to each peer is a header. */
    or_config_must_agree("OCCL_CHECK_CALLS", "1");
    /* Which calls take the low-latency path (ll.c). */
    or_config_must_agree("OCCL_LL_MAX_BYTES", "4096");
}

/* ---- unique ids -------------------------------------------------------------- */

occlResult_t occlGetUniqueId(occlUniqueId *uniqueId)
{
    if (!uniqueId)
        return occl_fail(occlInvalidArgument, "uniqueId is NULL");
    occlResult_t res = settings_check();
    if (res != occlSuccess)
        return res;
    /* Only the root's world rank and the job's identity: on world rank 0,
     * NCCL's usual root, that needs no other rank, so the id can be made
     * before the others make their first call (they wait for it in an
     * MPI_Bcast). */
    int rank;
    uint64_t job_id;
    if (or_job_identity(&rank, &job_id) != orSuccess)
        return occl_fail(occlUnhandledDeviceError, "the runtime failed to start");
    unique_id u = {ID_MAGIC, job_id, 0, rank, 0};
    if (getrandom(&u.id, sizeof u.id, 0) != sizeof u.id)
        return occl_fail(occlSystemError, "no random numbers");
    memset(uniqueId, 0, sizeof *uniqueId);
    memcpy(uniqueId->internal, &u, sizeof u);
    return occlSuccess;
}

/* ---- control blocks ----------------------------------------------------------- */

/* A control block outlives its communicator until every other rank of the
 * node has let go of it. A peer may still be finishing its last call when
 * this rank destroys the communicator: it reads its acknowledgements (and
 * this rank's current call) here, and a block reused at once by a new
 * communicator would show it that one's, so it would wait for an
 * acknowledgement that never comes. A retired block is freed once all its
 * readers have let go, at the next communicator made or freed here. */
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
static struct retired_ctrl {
    occl_ctrl *ctrl;
    uint32_t readers;
} *retired;
static int nretired, cap_retired;

static bool ctrl_unread(const occl_ctrl *ctrl, uint32_t readers)
{
    return atomic_load_explicit(&ctrl->released, memory_order_acquire) >= readers;
}

static void ctrl_sweep(void)
{
    pthread_mutex_lock(&retired_lock);
    for (int i = 0; i < nretired;) {
        if (ctrl_unread(retired[i].ctrl, retired[i].readers)) {
            orFree(retired[i].ctrl);
            retired[i] = retired[--nretired];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&retired_lock);
}

static void ctrl_retire(occlComm_t c)
{
    for (int r = 0; c->peers && r < c->nranks; r++)
        if (r != c->rank && c->peers[r].ctrl)
            atomic_fetch_add_explicit(&c->peers[r].ctrl->released, 1, memory_order_release);
    if (c->ctrl && ctrl_unread(c->ctrl, c->ctrl_readers)) {
        orFree(c->ctrl);
    } else if (c->ctrl) {
        pthread_mutex_lock(&retired_lock);
        if (nretired == cap_retired) {
            int cap = cap_retired ? 2 * cap_retired : 16;
            struct retired_ctrl *grown = realloc(retired, (size_t)cap * sizeof *grown);
            if (grown) {
                retired = grown;
                cap_retired = cap;
            }
        }
        if (nretired < cap_retired)
            retired[nretired++] = (struct retired_ctrl){c->ctrl, c->ctrl_readers};
        else /* kept for good rather than freed under a reader */
            OCCL_WARN("rank %d: out of memory: %zu bytes of device memory stay allocated",
                      c->rank, c->ctrl_bytes);
        pthread_mutex_unlock(&retired_lock);
    }
    c->ctrl = NULL;
    ctrl_sweep();
}

/* ---- bootstrap --------------------------------------------------------------- */

/* Local registrations waiting for their root in this process. */
static pthread_mutex_t boot_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct pending_init {
    occlComm_t *out;
    int nranks, rank, device;
    unique_id uid;
    occlComm_t comm;
    registration reg;
    occl_comm_config config;
} pending_init;

static occlResult_t comm_alloc(pending_init *pi, const or_job_view *job)
{
    /* A non-blocking init has handed out its handle already. */
    occlComm_t c = pi->comm ? pi->comm : calloc(1, sizeof *c);
    if (!c)
        return occl_fail(occlSystemError, "out of memory");
    c->nranks = pi->nranks;
    c->rank = pi->rank;
    c->device = pi->device;
    c->id = pi->uid.id;
    c->job = *job;
    c->config = pi->config;
    c->peers = calloc((size_t)pi->nranks, sizeof *c->peers);
    c->ring = calloc((size_t)pi->nranks, sizeof *c->ring);
    c->ctrl_bytes = occl_rma_area_offset(pi->nranks) + occl_rma_area_bytes(pi->nranks);
    or_lock_init(&c->lock);
    pthread_mutex_init(&c->runner_lock, NULL);
    pthread_cond_init(&c->runner_cv, NULL);
    pi->comm = c;
    if (!c->peers || !c->ring)
        return occl_fail(occlSystemError, "out of memory");
    occlResult_t res = occl_runner_start(c);
    if (res != occlSuccess)
        return res;
    /* The control block lives in device memory, which the node shares. */
    ctrl_sweep();
    int prev;
    if (orGetDevice(&prev) != orSuccess || orSetDevice(pi->device) != orSuccess ||
        orMalloc((void **)&c->ctrl, c->ctrl_bytes) != orSuccess) {
        orSetDevice(prev);
        return occl_fail(occlUnhandledDeviceError, "cannot allocate %zu bytes on device %d",
                         c->ctrl_bytes, pi->device);
    }
    orSetDevice(prev);
    memset(c->ctrl, 0, c->ctrl_bytes); /* strict mode aside, device memory is host memory */
    c->ctrl->magic = OCCL_COMM_MAGIC;
    occl_ll_init(c->ctrl, c->nranks);
    pi->reg = (registration){c->id, c->nranks, c->rank, job->rank, job->node, pi->device, {0}, {0}, 0};
    or_device_memory_bps(pi->device, &pi->reg.mem_bps);
    if (or_mem_export(c->ctrl, c->ctrl_bytes, &pi->reg.ctrl_ref) != orSuccess)
        return occl_fail(occlInternalError, "control block not exportable");
    pthread_mutex_lock(&slots_lock);
    memcpy(pi->reg.slots_used, slots_used, sizeof slots_used);
    pthread_mutex_unlock(&slots_lock);
    return occlSuccess;
}

static void comm_free(occlComm_t c)
{
    if (!c)
        return;
    live_remove(c);
    if (c->revoke_thread_started)
        pthread_join(c->revoke_thread, NULL);
    occl_runner_stop(c);
    occl_plugins_comm_fini(c);
    occl_notice_release(c);
    if (c->magic == OCCL_COMM_MAGIC)
        occl_rma_release(c);
    if (c->magic == OCCL_COMM_MAGIC && c->network &&
        (atomic_load(&c->async_error) != occlSuccess || atomic_load(&c->revoked)))
        occl_xfer_drain(c);
    if (c->network)
        occl_net_orphans_reap();
    occl_scratch_release(c);
    occl_regs_release(c);
    ctrl_retire(c);
    if (c->tag_slot) {
        pthread_mutex_lock(&slots_lock);
        if (slots_used[c->tag_slot])
            slots_used[c->tag_slot]--;
        pthread_mutex_unlock(&slots_lock);
    }
    pthread_mutex_destroy(&c->runner_lock);
    pthread_cond_destroy(&c->runner_cv);
    free(c->premul);
    free(c->peers);
    free(c->ring);
    free(c->node_first);
    occl_trees_free(c);
    c->magic = 0;
    if (c->async_handle) /* a non-blocking init's handle: freed by occlCommDestroy/Abort */
        return;
    free(c);
}

/* Fill comm from the table of all registrations (slot first, then ranks). */
static occlResult_t comm_setup(occlComm_t c, const registration *table, int slot)
{
    c->tag_slot = slot;
    c->tag_base = slot << 20;
    if (slot) {
        pthread_mutex_lock(&slots_lock);
        slots_used[slot]++;
        pthread_mutex_unlock(&slots_lock);
    }
    /* From here on the other ranks of the node may map this rank's block. */
    for (int r = 0; r < c->nranks; r++)
        c->ctrl_readers += r != c->rank && table[r].node == c->job.node;
    for (int r = 0; r < c->nranks; r++) {
        occl_peer *p = &c->peers[r];
        p->world_rank = table[r].world_rank;
        p->device = table[r].device;
        p->node = table[r].node;
        p->ctrl_ref = table[r].ctrl_ref;
        p->mem_bps = table[r].mem_bps;
        p->ctrl = p->node == c->job.node ? or_mem_import(&p->ctrl_ref) : NULL;
        if (p->node == c->job.node && !p->ctrl)
            return occl_fail(occlInternalError, "cannot map rank %d's control block", r);
        c->network |= !p->ctrl;
    }
    int local = 0;
    for (int r = 0; r < c->nranks; r++)
        local += c->peers[r].ctrl != NULL;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    c->oversubscribed = cores > 0 && local > cores;
    c->check_calls = check_calls;
    /* Ring: by node, then rank, so it leaves each node once. */
    for (int r = 0; r < c->nranks; r++)
        c->ring[r] = r;
    for (int i = 1; i < c->nranks; i++)
        for (int j = i; j > 0; j--) {
            occl_peer *a = &c->peers[c->ring[j - 1]], *b = &c->peers[c->ring[j]];
            if (a->node < b->node || (a->node == b->node && c->ring[j - 1] < c->ring[j]))
                break;
            int t = c->ring[j];
            c->ring[j] = c->ring[j - 1];
            c->ring[j - 1] = t;
        }
    occl_ring_follow_topology(c); /* a declared topology orders it instead */
    for (int i = 0; i < c->nranks; i++)
        if (c->ring[i] == c->rank)
            c->ring_pos = i;
    /* Virtual nodes: runs of one node along the ring. */
    c->node_first = calloc((size_t)c->nranks + 1, sizeof *c->node_first);
    if (!c->node_first)
        return occl_fail(occlSystemError, "out of memory");
    c->nnodes = 0;
    for (int i = 0; i < c->nranks; i++) {
        if (i == 0 || c->peers[c->ring[i]].node != c->peers[c->ring[i - 1]].node)
            c->node_first[c->nnodes++] = i;
        if (i == c->ring_pos)
            c->my_node = c->nnodes - 1;
    }
    c->node_first[c->nnodes] = c->nranks;
    occlResult_t res = occl_trees_build(c);
    if (res != occlSuccess)
        return res;
    if (!live_add(c))
        return occl_fail(occlSystemError, "out of memory");
    occl_plugins_comm_init(c);
    c->magic = OCCL_COMM_MAGIC;
    OCCL_INFO("comm %016llx%s%s%s rank %d/%d on device %d, world rank %d, node %d (%d virtual "
              "nodes), tag slot %d, %sblocking", (unsigned long long)c->id,
              c->config.name[0] ? " '" : "", c->config.name, c->config.name[0] ? "'" : "", c->rank,
              c->nranks, c->device, c->job.rank, c->job.node, c->nnodes, slot,
              c->config.cfg.blocking ? "" : "non-");
    return occlSuccess;
}

/* Wait for an MPI request with back-off and the OCCL deadline. */
static occlResult_t wait_request(MPI_Request *req, uint64_t deadline)
{
    for (unsigned spin = 0;; spin++) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return occl_fail(occlRemoteError, "bootstrap message failed");
        if (done)
            return occlSuccess;
        if (or_now_ns() > deadline) {
            MPI_Cancel(req);
            MPI_Request_free(req);
            return occl_fail(occlTimeout, "bootstrap: peers did not register within "
                                          "OCCL_TIMEOUT_MS");
        }
        if (spin < 1000)
            sched_yield();
        else
            usleep(50);
    }
}

/* Bootstrap every pending init of this thread's group together. */
static occlResult_t bootstrap(pending_init *pi, int n)
{
    occlResult_t res = settings_check();
    if (res != occlSuccess)
        return res;
    or_job_view job;
    if (or_job(&job) != orSuccess)
        return occl_fail(occlUnhandledDeviceError, "the runtime failed to start");
    for (int i = 0; i < n && res == occlSuccess; i++)
        res = comm_alloc(&pi[i], &job);
    uint64_t deadline = occl_deadline();

    /* Each distinct id is one communicator being made. */
    for (int i = 0; i < n && res == occlSuccess; i++) {
        if (pi[i].comm && pi[i].comm->magic == OCCL_COMM_MAGIC)
            continue; /* set up already, with an earlier entry of the same id */
        unique_id *u = &pi[i].uid;
        int nranks = pi[i].nranks;
        int local = 0;
        for (int k = 0; k < n; k++)
            if (pi[k].uid.id == u->id)
                local++;
        bool root = u->root == job.rank;
        /* The tag slots this process uses now, the communicators set up by
         * the ids before this one in the group included: registrations made
         * at comm_alloc would let two communicators of one group between the
         * same processes get the same slot, and each other's messages. */
        pthread_mutex_lock(&slots_lock);
        for (int k = 0; k < n; k++)
            if (pi[k].uid.id == u->id)
                memcpy(pi[k].reg.slots_used, slots_used, sizeof slots_used);
        pthread_mutex_unlock(&slots_lock);
        if (!job.mpi && (!root || local != nranks)) {
            res = occl_fail(occlInvalidUsage, "a communicator of %d ranks needs an MPI job "
                                              "(%d ranks are in this process)", nranks, local);
            break;
        }
        if (job.mpi && nranks > OCCL_MAX_MPI_RANKS && local != nranks) {
            res = occl_fail(occlInvalidUsage, "communicators across processes have at most %d "
                                              "ranks", OCCL_MAX_MPI_RANKS);
            break;
        }
        int tag_reg = TAG_REGISTER | (int)(u->id & 0xfffff);
        int tag_table = TAG_TABLE | (int)(u->id & 0xfffff);
        registration *table = calloc((size_t)nranks, sizeof *table);
        int slot = 0;
        if (!table) {
            res = occl_fail(occlSystemError, "out of memory");
            break;
        }
        if (root) {
            bool *seen = calloc((size_t)nranks, sizeof *seen);
            int *reply_to = calloc((size_t)nranks, sizeof *reply_to);
            if (!seen || !reply_to)
                res = occl_fail(occlSystemError, "out of memory");
            for (int k = 0; k < n && res == occlSuccess; k++)
                if (pi[k].uid.id == u->id) {
                    if (pi[k].nranks != nranks || seen[pi[k].rank]) {
                        res = occl_fail(occlInvalidUsage, "bootstrap: rank %d given twice or with "
                                                          "another rank count (%d, not %d)",
                                        pi[k].rank, pi[k].nranks, nranks);
                        break;
                    }
                    table[pi[k].rank] = pi[k].reg;
                    seen[pi[k].rank] = true;
                    reply_to[pi[k].rank] = -1;
                }
            for (int got = local; got < nranks && res == occlSuccess; got++) {
                registration r;
                MPI_Request req;
                MPI_Status st;
                MPI_Irecv(&r, sizeof r, MPI_BYTE, MPI_ANY_SOURCE, tag_reg, job.comm, &req);
                for (unsigned spin = 0;; spin++) {
                    int done = 0;
                    MPI_Test(&req, &done, &st);
                    if (done)
                        break;
                    if (or_now_ns() > deadline) {
                        MPI_Cancel(&req);
                        MPI_Request_free(&req);
                        res = occl_fail(occlTimeout, "bootstrap: %d of %d ranks registered "
                                                     "within OCCL_TIMEOUT_MS", got, nranks);
                        break;
                    }
                    if (spin < 1000)
                        sched_yield();
                    else
                        usleep(50);
                }
                if (res != occlSuccess)
                    break;
                if (r.id != u->id || r.nranks != nranks || r.rank < 0 || r.rank >= nranks ||
                    seen[r.rank]) {
                    res = occl_fail(occlInvalidUsage, "bootstrap: rank %d registered twice or "
                                                      "with another rank count (%d, not %d)",
                                    r.rank, r.nranks, nranks);
                    break;
                }
                table[r.rank] = r;
                seen[r.rank] = true;
                reply_to[r.rank] = st.MPI_SOURCE;
            }
            if (res == occlSuccess) {
                /* The lowest tag slot no member process uses. */
                for (slot = 1; slot <= OCCL_TAG_SLOTS; slot++) {
                    bool free_everywhere = true;
                    for (int r = 0; r < nranks && free_everywhere; r++)
                        free_everywhere = !table[r].slots_used[slot];
                    if (free_everywhere)
                        break;
                }
                if (slot > OCCL_TAG_SLOTS)
                    res = occl_fail(occlSystemError, "too many communicators at once");
            }
            /* Answer everyone, also with a failure, so nobody waits for nothing. */
            int32_t header[2] = {res == occlSuccess ? slot : -1, (int32_t)res};
            for (int r = 0; r < nranks && reply_to; r++) {
                if (!seen || !seen[r] || reply_to[r] < 0)
                    continue;
                MPI_Request reqs[2];
                MPI_Isend(header, 2, MPI_INT32_T, reply_to[r], tag_table, job.comm, &reqs[0]);
                MPI_Isend(table, nranks * (int)sizeof *table, MPI_BYTE, reply_to[r], tag_table,
                          job.comm, &reqs[1]);
                if (wait_request(&reqs[0], deadline) != occlSuccess ||
                    wait_request(&reqs[1], deadline) != occlSuccess)
                    res = occlRemoteError;
            }
            free(seen);
            free(reply_to);
        } else {
            /* Register every local rank of this id with the root, then read the table. */
            for (int k = 0; k < n && res == occlSuccess; k++) {
                if (pi[k].uid.id != u->id)
                    continue;
                MPI_Request req;
                MPI_Isend(&pi[k].reg, sizeof pi[k].reg, MPI_BYTE, u->root, tag_reg, job.comm, &req);
                res = wait_request(&req, deadline);
            }
            for (int k = 0; k < n && res == occlSuccess; k++) {
                if (pi[k].uid.id != u->id)
                    continue;
                int32_t header[2];
                MPI_Request req;
                MPI_Irecv(header, 2, MPI_INT32_T, u->root, tag_table, job.comm, &req);
                res = wait_request(&req, deadline);
                if (res == occlSuccess) {
                    MPI_Irecv(table, nranks * (int)sizeof *table, MPI_BYTE, u->root, tag_table,
                              job.comm, &req);
                    res = wait_request(&req, deadline);
                }
                if (res == occlSuccess && header[0] < 0)
                    res = occl_fail((occlResult_t)header[1], "bootstrap failed at the root");
                slot = header[0];
            }
        }
        for (int k = 0; k < n && res == occlSuccess; k++)
            if (pi[k].uid.id == u->id)
                res = comm_setup(pi[k].comm, table, slot);
        free(table);
    }
    if (res != occlSuccess)
        for (int i = 0; i < n; i++) {
            comm_free(pi[i].comm);
            pi[i].comm = NULL;
        }
    for (int i = 0; i < n; i++)
        if (res == occlSuccess)
            *pi[i].out = pi[i].comm;
    return res;
}

static occlResult_t check_init(occlComm_t *comm, int nranks, const occlUniqueId *commId,
                               int rank, unique_id *u, int *device)
{
    if (!comm)
        return occl_fail(occlInvalidArgument, "comm is NULL");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return occl_fail(occlInvalidArgument, "rank %d is not in [0, %d)", rank, nranks);
    occlResult_t res = settings_check();
    if (res != occlSuccess)
        return res;
    memcpy(u, commId->internal, sizeof *u);
    or_job_view job;
    if (or_job(&job) != orSuccess)
        return occl_fail(occlUnhandledDeviceError, "the runtime failed to start");
    if (u->magic != ID_MAGIC || u->job_id != job.job_id || u->root < 0 || u->root >= job.nranks)
        return occl_fail(occlInvalidArgument, "commId was not made by occlGetUniqueId in this "
                                              "job");
    if (orGetDevice(device) != orSuccess)
        return occl_fail(occlUnhandledDeviceError, "no current device");
    return occlSuccess;
}

static occlResult_t async_init_start(const pending_init *pi);

static occlResult_t init_rank(occlComm_t *comm, int nranks, occlUniqueId commId, int rank,
                              const occl_comm_config *config)
{
    pending_init pi = {comm, nranks, rank, 0, {0}, NULL, {0}, *config};
    occlResult_t res = check_init(comm, nranks, &commId, rank, &pi.uid, &pi.device);
    if (res != occlSuccess)
        return occl_group_fail(res);
    if (occl_group_depth() > 0)
        return occl_group_add_init(&pi, sizeof pi);
    if (!config->cfg.blocking)
        return async_init_start(&pi);
    pthread_mutex_lock(&boot_lock);
    res = bootstrap(&pi, 1);
    pthread_mutex_unlock(&boot_lock);
    return res;
}

/* ---- non-blocking init ------------------------------------------------------- */

/* A non-blocking occlCommInitRankConfig runs the bootstrap on a thread of
 * its own. Until the thread is joined, its handle is known only here: to
 * occlCommGetAsyncError (occlInProgress, then the outcome), occlGetLastError
 * and occlCommDestroy/Abort. A successful init leaves this list for the live
 * one; a failed init's handle stays here, with its reason, until destroyed. */
typedef struct async_init {
    struct async_init *next;
    occlComm_t handle;
    pthread_t thread;
    pending_init pi;
    _Atomic bool done;
    bool joined;
    occlResult_t res;
    char why[256];
} async_init;

static pthread_mutex_t async_lock = PTHREAD_MUTEX_INITIALIZER;
static async_init *async_inits;

static void *async_init_run(void *arg)
{
    async_init *a = arg;
    orSetDevice(a->pi.device);
    pthread_mutex_lock(&boot_lock);
    a->res = bootstrap(&a->pi, 1);
    pthread_mutex_unlock(&boot_lock);
    if (a->res != occlSuccess && a->pi.config.name[0])
        snprintf(a->why, sizeof a->why, "comm '%.60s': %.180s", a->pi.config.name, thread_error);
    else if (a->res != occlSuccess)
        snprintf(a->why, sizeof a->why, "%s", thread_error);
    atomic_store(&a->done, true);
    return NULL;
}

static occlResult_t async_init_start(const pending_init *pi)
{
    async_init *a = calloc(1, sizeof *a);
    occlComm_t c = calloc(1, sizeof *c);
    if (!a || !c) {
        free(a);
        free(c);
        return occl_fail(occlSystemError, "out of memory");
    }
    c->async_handle = true;
    a->handle = c;
    a->pi = *pi;
    a->pi.comm = c;
    a->pi.out = &a->handle; /* bootstrap's copy out: the same pointer */
    pthread_mutex_lock(&async_lock);
    if (pthread_create(&a->thread, NULL, async_init_run, a) != 0) {
        pthread_mutex_unlock(&async_lock);
        free(a);
        free(c);
        return occl_fail(occlSystemError, "cannot start the thread of a non-blocking init");
    }
    a->next = async_inits;
    async_inits = a;
    pthread_mutex_unlock(&async_lock);
    *pi->out = c;
    return occlInProgress;
}

/* The entry of handle comm, joined if its thread is done; NULL if comm is
 * not a non-blocking init's (any more). A successful one leaves the list:
 * from then on the handle is an ordinary live communicator. Called with
 * async_lock held; *state gets occlInProgress or the init's result. */
static async_init *async_find(occlComm_t comm, occlResult_t *state)
{
    async_init **pp = &async_inits;
    while (*pp && (*pp)->handle != comm)
        pp = &(*pp)->next;
    async_init *a = *pp;
    if (!a)
        return NULL;
    if (!atomic_load(&a->done)) {
        *state = occlInProgress;
        return a;
    }
    if (!a->joined) {
        pthread_join(a->thread, NULL);
        a->joined = true;
    }
    *state = a->res;
    if (a->res == occlSuccess) {
        *pp = a->next;
        a->handle->async_handle = false; /* an ordinary communicator from now on */
        free(a);
        return NULL;
    }
    return a;
}

/* Waits for the init of comm if it is a non-blocking one, then: 1 and the
 * handle freed if it had failed (nothing else to do), 0 otherwise. */
static int async_settle(occlComm_t comm)
{
    for (;;) {
        occlResult_t state;
        pthread_mutex_lock(&async_lock);
        async_init *a = async_find(comm, &state);
        if (!a) {
            pthread_mutex_unlock(&async_lock);
            return 0;
        }
        if (state != occlInProgress) {
            async_init **pp = &async_inits;
            while (*pp != a)
                pp = &(*pp)->next;
            *pp = a->next;
            pthread_mutex_unlock(&async_lock);
            free(a->handle);
            free(a);
            return 1;
        }
        pthread_mutex_unlock(&async_lock);
        usleep(1000); /* the init ends by OCCL_TIMEOUT_MS at the latest */
    }
}

occlResult_t occlCommInitRank(occlComm_t *comm, int nranks, occlUniqueId commId, int rank)
{
    occl_comm_config config;
    occl_config_resolve(NULL, &config);
    return init_rank(comm, nranks, commId, rank, &config);
}

/* A non-blocking config (blocking 0) outside a group returns
 * occlInProgress with *comm set; occlCommGetAsyncError(*comm) says
 * occlInProgress until the init has ended, then its result. In a group the
 * init completes at occlGroupEnd, as a blocking one. */
occlResult_t occlCommInitRankConfig(occlComm_t *comm, int nranks, occlUniqueId commId, int rank,
                                    occlConfig_t *config)
{
    occl_comm_config resolved;
    occlResult_t res = occl_config_resolve(config, &resolved);
    if (res != occlSuccess)
        return occl_group_fail(res);
    return init_rank(comm, nranks, commId, rank, &resolved);
}

/* NCCL spreads its bootstrap over nId roots; OCCL's bootstrap is one
 * exchange with one root, so it uses commIds[0] (whose maker must be a
 * rank, as NCCL requires of every id's) and checks the others were made in
 * this job. Every rank must pass the same ids. */
occlResult_t occlCommInitRankScalable(occlComm_t *newcomm, int nranks, int myrank, int nId,
                                      occlUniqueId *commIds, occlConfig_t *config)
{
    if (!commIds || nId < 1 || nId > nranks)
        return occl_group_fail(occl_fail(occlInvalidArgument, "commIds is NULL, or nId %d is not in "
                                                              "[1, nranks = %d]", nId, nranks));
    for (int i = 1; i < nId; i++) {
        unique_id u;
        memcpy(&u, commIds[i].internal, sizeof u);
        if (u.magic != ID_MAGIC)
            return occl_group_fail(occl_fail(occlInvalidArgument, "commIds[%d] was not made by "
                                                                  "occlGetUniqueId", i));
    }
    return occlCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

occlResult_t occl_group_run_inits(void *inits, int n)
{
    pthread_mutex_lock(&boot_lock);
    occlResult_t res = bootstrap(inits, n);
    pthread_mutex_unlock(&boot_lock);
    return res;
}

occlResult_t occlCommInitAll(occlComm_t *comms, int ndev, const int *devlist)
{
    if (!comms || ndev < 1)
        return occl_fail(occlInvalidArgument, "comms is NULL or ndev %d < 1", ndev);
    int count;
    if (orGetDeviceCount(&count) != orSuccess)
        return occl_fail(occlUnhandledDeviceError, "the runtime failed to start");
    for (int i = 0; i < ndev; i++) {
        int d = devlist ? devlist[i] : i;
        if (d < 0 || d >= count)
            return occl_fail(occlInvalidArgument, "device %d of devlist is not in [0, %d)", d, count);
        for (int j = 0; j < i; j++)
            if ((devlist ? devlist[j] : j) == d)
                return occl_fail(occlInvalidArgument, "device %d appears twice in devlist", d);
    }
    occlUniqueId id;
    occlResult_t res = occlGetUniqueId(&id);
    if (res != occlSuccess)
        return res;
    pending_init *pi = calloc((size_t)ndev, sizeof *pi);
    if (!pi)
        return occl_fail(occlSystemError, "out of memory");
    for (int i = 0; i < ndev && res == occlSuccess; i++) {
        pi[i].out = &comms[i];
        pi[i].nranks = ndev;
        pi[i].rank = i;
        pi[i].device = devlist ? devlist[i] : i;
        memcpy(&pi[i].uid, id.internal, sizeof pi[i].uid);
        occl_config_resolve(NULL, &pi[i].config);
    }
    res = occl_group_run_inits(pi, ndev);
    free(pi);
    return res;
}

/* ---- lifetime ---------------------------------------------------------------- */

occlResult_t occlCommFinalize(occlComm_t comm)
{
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "comm is not a live communicator");
    if (atomic_load(&comm->revoked))
        return occl_fail(occlInvalidUsage, "the communicator was revoked: destroy it (or shrink it)");
    /* Wait for the communicator's queued work: it is on its device. */
    int prev;
    orGetDevice(&prev);
    orSetDevice(comm->device);
    orError_t err = orDeviceSynchronize();
    orSetDevice(prev);
    comm->finalized = true;
    /* No call of it runs any more: its scratch goes back to the device. */
    or_lock_acquire(&comm->lock);
    occl_scratch_release(comm);
    or_lock_release(&comm->lock);
    if (err != orSuccess && err != orErrorTimeout && err != orErrorRemote)
        return occl_fail(occlUnhandledDeviceError, "%s", orGetErrorString(err));
    int async = atomic_load(&comm->async_error);
    return (occlResult_t)async;
}

/* The reason a non-blocking init of comm failed; NULL if it has not. */
static const char *async_why(occlComm_t comm)
{
    occlResult_t state;
    pthread_mutex_lock(&async_lock);
    async_init *a = async_find(comm, &state);
    const char *why = a && state != occlInProgress ? a->why : NULL;
    pthread_mutex_unlock(&async_lock);
    return why; /* stays valid until the handle is destroyed */
}

occlResult_t occlCommDestroy(occlComm_t comm)
{
    if (comm && async_settle(comm))
        return occlSuccess;
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "comm is not a live communicator");
    if (!comm->finalized) {
        occlResult_t res = occlCommFinalize(comm);
        (void)res; /* a failed communicator is still destroyed */
    }
    or_lock_acquire(&comm->lock); /* no task of it is running */
    or_lock_release(&comm->lock);
    comm_free(comm);
    return occlSuccess;
}

occlResult_t occlCommAbort(occlComm_t comm)
{
    /* An init still running is waited for: its bootstrap has no way to be
     * interrupted, and it ends by OCCL_TIMEOUT_MS. */
    if (comm && async_settle(comm))
        return occlSuccess;
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "comm is not a live communicator");
    /* Running and queued tasks see the error and stop at their next wait. */
    int none = occlSuccess;
    atomic_compare_exchange_strong(&comm->async_error, &none, (int)occlRemoteError);
    comm->finalized = true;
    int prev;
    orGetDevice(&prev);
    orSetDevice(comm->device);
    orDeviceSynchronize();
    orSetDevice(prev);
    or_lock_acquire(&comm->lock);
    or_lock_release(&comm->lock);
    comm_free(comm);
    return occlSuccess;
}

/* ---- revoke -------------------------------------------------------------------- */

/* The stopped calls' end: each has failed its stream and ended (waited for
 * by count, not by synchronizing the device, which would take the streams'
 * errors from the program). Then the communicator's state, occlInProgress
 * meanwhile, is occlSuccess again (a failure from before the revoke stays). */
static void revoke_settle(occlComm_t comm)
{
    occl_comm_quiesce_locked(comm);
    occl_scratch_release(comm);
    int busy = occlInProgress;
    atomic_compare_exchange_strong(&comm->async_error, &busy, (int)occlSuccess);
    or_lock_release(&comm->lock);
}

static void *revoke_main(void *arg)
{
    revoke_settle(arg);
    return NULL;
}

occlResult_t occlCommRevoke(occlComm_t comm, int revokeFlags)
{
    if (!comm) /* NCCL's: nothing to revoke */
        return occlSuccess;
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "comm is not a live communicator");
    if (revokeFlags != OCCL_REVOKE_DEFAULT)
        return occl_fail(occlInvalidArgument, "revokeFlags %d: only OCCL_REVOKE_DEFAULT (0) is defined",
                         revokeFlags);
    if (atomic_load(&comm->revoked))
        return occl_fail(occlInvalidArgument, "the communicator is revoked already");
    if (comm->finalized)
        return occl_fail(occlInvalidArgument, "the communicator is finalized");
    /* Running calls see the state at their next wait and stop; queued ones
     * are skipped (task_exec); new ones are refused (enqueue). */
    atomic_store(&comm->revoked, true);
    int none = occlSuccess;
    atomic_compare_exchange_strong(&comm->async_error, &none, (int)occlInProgress);
    comm->finalized = true; /* its scratch goes at the settle; destroy needs no finalize */
    OCCL_INFO("rank %d: communicator revoked", comm->rank);
    if (!comm->config.cfg.blocking) {
        if (pthread_create(&comm->revoke_thread, NULL, revoke_main, comm) == 0) {
            comm->revoke_thread_started = true;
            return occlInProgress;
        }
    }
    revoke_settle(comm);
    return (occlResult_t)atomic_load(&comm->async_error);
}

occlResult_t occlCommGetAsyncError(occlComm_t comm, occlResult_t *asyncError)
{
    if (comm && asyncError) {
        occlResult_t state;
        pthread_mutex_lock(&async_lock);
        async_init *a = async_find(comm, &state);
        pthread_mutex_unlock(&async_lock);
        if (a) { /* still initializing, or failed to */
            *asyncError = state;
            return occlSuccess;
        }
    }
    if (!occl_comm_valid(comm) || !asyncError)
        return occl_fail(occlInvalidArgument, "comm is not a live communicator, or asyncError is NULL");
    /* A peer's notice that a call this rank has finished its part of was
     * mismatched (a Reduce's leaf, done before its root found it): the
     * communicator has failed. While a task runs, its own waits look. */
    if (comm->check_calls && atomic_load(&comm->async_error) == occlSuccess &&
        or_lock_try(&comm->lock)) {
        occlResult_t res = occl_notice_check(comm, false, true);
        if (res != occlSuccess)
            occl_comm_set_error(comm, res);
        or_lock_release(&comm->lock);
    }
    *asyncError = (occlResult_t)atomic_load(&comm->async_error);
    return occlSuccess;
}

occlResult_t occlCommCount(const occlComm_t comm, int *count)
{
    if (!occl_comm_valid(comm) || !count)
        return occl_fail(occlInvalidArgument, "comm is not a live communicator, or count is NULL");
    *count = comm->nranks;
    return occlSuccess;
}

occlResult_t occlCommDevice(const occlComm_t comm, int *device)
{
    if (!occl_comm_valid(comm) || !device)
        return occl_fail(occlInvalidArgument, "comm is not a live communicator, or device is NULL");
    *device = comm->device;
    return occlSuccess;
}

occlResult_t occlCommUserRank(const occlComm_t comm, int *rank)
{
    if (!occl_comm_valid(comm) || !rank)
        return occl_fail(occlInvalidArgument, "comm is not a live communicator, or rank is NULL");
    *rank = comm->rank;
    return occlSuccess;
}

/* ---- reduction operators ------------------------------------------------------ */

bool occl_redop_lookup(occlComm_t comm, occlRedOp_t op, occlDataType_t t, occl_call *call)
{
    int avg = 0;
    call->device_scalar = NULL;
    if (occl_redop_builtin(op, &call->op, &avg) == 0) {
        call->avg = avg;
        return true;
    }
    int i = (int)op - occlNumOps;
    if (i < 0 || i >= comm->npremul || !comm->premul[i].used || comm->premul[i].type != t)
        return false;
    call->op = comm->premul[i].op;
    call->avg = false;
    if (comm->premul[i].residence == occlScalarDevice)
        call->device_scalar = comm->premul[i].device_scalar;
    return true;
}

occlResult_t occlRedOpCreatePreMulSum(occlRedOp_t *op, void *scalar, occlDataType_t datatype,
                                      occlScalarResidence_t residence, occlComm_t comm)
{
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "comm is not a live communicator");
    if (!op || !scalar || (unsigned)datatype >= occlNumTypes ||
        (residence != occlScalarDevice && residence != occlScalarHostImmediate))
        return occl_fail(occlInvalidArgument, "op or scalar is NULL, or the type or residence is "
                                              "unknown");
    if (residence == occlScalarDevice) {
        or_mem_ref ref;
        if (or_mem_export(scalar, occl_type_size(datatype), &ref) != orSuccess)
            return occl_fail(occlInvalidArgument, "a device-resident scalar must be device memory");
    }
    int i = 0;
    while (i < comm->npremul && comm->premul[i].used)
        i++;
    if (i == comm->npremul) {
        struct occl_premul_op *grown = realloc(comm->premul, (size_t)(i + 1) * sizeof *grown);
        if (!grown)
            return occl_fail(occlSystemError, "out of memory");
        comm->premul = grown;
        comm->npremul++;
    }
    comm->premul[i] = (struct occl_premul_op){true, datatype, residence, scalar,
                                              occl_redop_premulsum(scalar, datatype)};
    *op = (occlRedOp_t)(occlNumOps + i);
    return occlSuccess;
}

occlResult_t occlRedOpDestroy(occlRedOp_t op, occlComm_t comm)
{
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "comm is not a live communicator");
    int i = (int)op - occlNumOps;
    if (i < 0 || i >= comm->npremul || !comm->premul[i].used)
        return occl_fail(occlInvalidArgument, "op %d was not made by occlRedOpCreatePreMulSum on "
                                              "this communicator", (int)op);
    comm->premul[i].used = false;
    return occlSuccess;
}

/* ---- split -------------------------------------------------------------------- */

/* words int32s of every rank of comm, in rank order, into all (host
 * memory), by an all-gather over comm after its queued work; *counter (one
 * of comm's child counters) is incremented under the communicator's lock
 * whatever the outcome, so it stays the same on every rank, and *nth gets
 * its new value. Runs on comm's device (the caller's current one). */
static occlResult_t parent_allgather(occlComm_t comm, const int32_t *mine, int words,
                                     int32_t *all, uint64_t *counter, uint64_t *nth)
{
    size_t bytes = (size_t)comm->nranks * (size_t)words * sizeof *all;
    int32_t *dev = NULL;
    if (orMalloc((void **)&dev, bytes) != orSuccess)
        return occl_fail(occlUnhandledDeviceError, "no device memory for the exchange over the "
                                                   "parent communicator");
    int32_t *slot = dev + (size_t)comm->rank * (size_t)words;
    occlResult_t res = occlSuccess;
    if (orMemcpy(slot, mine, (size_t)words * sizeof *mine, orMemcpyHostToDevice) != orSuccess)
        res = occl_fail(occlUnhandledDeviceError, "cannot copy to device memory");
    occl_call gather = {OCCL_COLL_ALLGATHER, comm, slot, dev, (size_t)words, occlInt32,
                        {0}, false, NULL, 0, NULL, comm->device, NULL, NULL, {0}, {0}};
    orDeviceSynchronize(); /* the communicator's queued work comes first */
    or_lock_acquire(&comm->lock);
    if (res == occlSuccess) {
        occl_fp_begin(comm, &gather);
        res = occl_run_call(&gather);
    }
    *nth = ++*counter;
    or_lock_release(&comm->lock);
    if (res == occlSuccess && orMemcpy(all, dev, bytes, orMemcpyDeviceToHost) != orSuccess)
        res = occl_fail(occlUnhandledDeviceError, "cannot copy from device memory");
    orFree(dev);
    return res;
}

occlResult_t occlCommSplit(occlComm_t comm, int color, int key, occlComm_t *newcomm,
                           occlConfig_t *config)
{
    if (!occl_comm_valid(comm) || !newcomm)
        return occl_fail(occlInvalidArgument, "comm is not a live communicator, or newcomm is NULL");
    if (color < 0 && color != OCCL_SPLIT_NOCOLOR)
        return occl_fail(occlInvalidArgument, "color %d is negative (OCCL_SPLIT_NOCOLOR aside)", color);
    /* A split gathers the colors over the parent, whose transfers the
     * revoke may have cut halfway; a shrink exchanges nothing over it. */
    if (atomic_load(&comm->revoked))
        return occl_fail(occlInvalidUsage, "the communicator was revoked: shrink it (excluding no "
                                           "rank) instead of splitting it");
    if (atomic_load(&comm->suspended))
        return occl_fail(occlInvalidUsage, "the communicator is suspended: occlCommResume first");
    /* The child's configuration: the one given, else the parent's (NCCL's rule). */
    occl_comm_config child_config = comm->config;
    if (config) {
        occlResult_t bad = occl_config_resolve(config, &child_config);
        if (bad != occlSuccess)
            return bad;
    }
    int n = comm->nranks;
    /* Everyone's (color, key), gathered over the parent communicator. */
    int32_t mine[2] = {color, key};
    int32_t *all = malloc((size_t)n * 2 * sizeof *all);
    if (!all)
        return occl_fail(occlSystemError, "out of memory");
    int prev;
    orGetDevice(&prev);
    orSetDevice(comm->device);
    uint64_t split;
    occlResult_t res = parent_allgather(comm, mine, 2, all, &comm->splits, &split);
    int members = 0, newrank = 0, root = -1;
    if (res == occlSuccess && color != OCCL_SPLIT_NOCOLOR) {
        for (int r = 0; r < n; r++) {
            if (all[2 * r] != color)
                continue;
            members++;
            /* Order by key, then by rank in the parent. */
            if (all[2 * r + 1] < key || (all[2 * r + 1] == key && r < comm->rank))
                newrank++;
        }
        for (int r = 0; r < n && root < 0; r++) {
            if (all[2 * r] != color)
                continue;
            int before = 0;
            for (int q = 0; q < n; q++)
                if (all[2 * q] == color &&
                    (all[2 * q + 1] < all[2 * r + 1] || (all[2 * q + 1] == all[2 * r + 1] && q < r)))
                    before++;
            if (before == 0)
                root = r;
        }
    }
    free(all);
    if (res != occlSuccess || color == OCCL_SPLIT_NOCOLOR) {
        orSetDevice(prev);
        if (res == occlSuccess)
            *newcomm = NULL;
        return res;
    }
    /* The same id on every member, derived from the parent's. */
    unique_id u = {ID_MAGIC, comm->job.job_id, 0, comm->peers[root].world_rank, 0};
    uint64_t h = comm->id ^ (split * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)(uint32_t)color << 32);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    u.id = h;
    occlUniqueId id;
    memset(&id, 0, sizeof id);
    memcpy(id.internal, &u, sizeof u);
    res = init_rank(newcomm, members, id, newrank, &child_config);
    orSetDevice(prev);
    return res;
}

/* ---- shrink ------------------------------------------------------------------- */

/* Only the remaining ranks call it (the excluded ones may be dead), so
 * nothing is exchanged over the parent: each remaining rank derives the
 * child's id, its rank in it and the bootstrap's root (the first remaining
 * rank) from the list, which they must all pass alike. */
occlResult_t occlCommShrink(occlComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            occlComm_t *newcomm, occlConfig_t *config, int shrinkFlags)
{
    if (!occl_comm_valid(comm) || !newcomm)
        return occl_fail(occlInvalidArgument, "comm is not a live communicator, or newcomm is NULL");
    if (shrinkFlags != OCCL_SHRINK_DEFAULT && shrinkFlags != OCCL_SHRINK_ABORT)
        return occl_fail(occlInvalidArgument, "shrinkFlags %d is neither OCCL_SHRINK_DEFAULT nor "
                                              "OCCL_SHRINK_ABORT", shrinkFlags);
    int n = comm->nranks;
    if (excludeRanksCount < 0 || excludeRanksCount >= n || (excludeRanksCount && !excludeRanksList))
        return occl_fail(occlInvalidArgument, "excludeRanksCount %d is not in [0, %d), or the list "
                                              "is NULL", excludeRanksCount, n);
    bool *out = calloc((size_t)n, sizeof *out);
    if (!out)
        return occl_fail(occlSystemError, "out of memory");
    uint64_t h = comm->id ^ 0x5348524b53485249ULL; /* "SHRKSHRI": apart from splits' ids */
    for (int i = 0; i < excludeRanksCount; i++) {
        int r = excludeRanksList[i];
        if (r < 0 || r >= n || out[r] || r == comm->rank) {
            free(out);
            return occl_fail(occlInvalidArgument, "excludeRanksList[%d] = %d is out of [0, %d), "
                                                  "listed twice, or this rank (which must not "
                                                  "call occlCommShrink then)", i, r, n);
        }
        out[r] = true;
    }
    occl_comm_config child_config = comm->config;
    if (config) {
        occlResult_t bad = occl_config_resolve(config, &child_config);
        if (bad != occlSuccess) {
            free(out);
            return bad;
        }
    }
    int newrank = 0, root = -1;
    for (int r = 0; r < n; r++) {
        if (out[r])
            continue;
        if (root < 0)
            root = r;
        if (r < comm->rank)
            newrank++;
        h = (h ^ (uint64_t)r) * 0x100000001b3ULL; /* the remaining set names the child */
    }
    free(out);
    int prev;
    orGetDevice(&prev);
    orSetDevice(comm->device);
    if (shrinkFlags == OCCL_SHRINK_ABORT) {
        /* The parent's running and queued calls stop at their next wait. */
        int none = occlSuccess;
        atomic_compare_exchange_strong(&comm->async_error, &none, (int)occlRemoteError);
    }
    orDeviceSynchronize(); /* the parent's queued work comes first */
    or_lock_acquire(&comm->lock);
    int slot = 0;
    while (slot < 16 && comm->shrinks[slot].count && comm->shrinks[slot].set != h)
        slot++;
    if (slot == 16) /* 16 sets already: the one this set hashes to is recycled */
        slot = (int)(h % 16), comm->shrinks[slot].count = 0;
    comm->shrinks[slot].set = h;
    uint64_t nth = ++comm->shrinks[slot].count;
    or_lock_release(&comm->lock);
    h ^= nth * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    unique_id u = {ID_MAGIC, comm->job.job_id, h, comm->peers[root].world_rank, 0};
    occlUniqueId id;
    memset(&id, 0, sizeof id);
    memcpy(id.internal, &u, sizeof u);
    occlResult_t res = init_rank(newcomm, n - excludeRanksCount, id, newrank, &child_config);
    orSetDevice(prev);
    return res;
}

/* ---- grow --------------------------------------------------------------------- */

/* The id of comm's next grow: the same on every existing rank, whichever
 * made it, apart from the ids of its splits and shrinks. */
static uint64_t grow_hash(const occlComm_t comm, uint64_t nth)
{
    uint64_t h = comm->id ^ 0x47524f5747524f57ULL ^ (nth * 0x9e3779b97f4a7c15ULL); /* "GROWGROW" */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* A grow id out of uniqueId, checked as far as one rank can: made by
 * occlCommGetUniqueId in this job. */
static occlResult_t grow_id_read(const occlUniqueId *uniqueId, unique_id *u)
{
    memcpy(u, uniqueId->internal, sizeof *u);
    if (u->magic == ID_MAGIC)
        return occl_fail(occlInvalidArgument, "uniqueId was made by occlGetUniqueId: a grow "
                                              "takes occlCommGetUniqueId's");
    or_job_view job;
    if (or_job(&job) != orSuccess)
        return occl_fail(occlUnhandledDeviceError, "the runtime failed to start");
    if (u->magic != GROW_MAGIC || u->job_id != job.job_id || u->root < 0 ||
        u->root >= job.nranks || u->parent_nranks < 1)
        return occl_fail(occlInvalidArgument, "uniqueId was not made by occlCommGetUniqueId in "
                                              "this job");
    return occlSuccess;
}

occlResult_t occlCommGetUniqueId(occlComm_t comm, occlUniqueId *uniqueId)
{
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "comm is not a live communicator");
    if (!uniqueId)
        return occl_fail(occlInvalidArgument, "uniqueId is NULL");
    if (atomic_load(&comm->revoked) || comm->finalized || atomic_load(&comm->suspended))
        return occl_fail(occlInvalidUsage, "the communicator is revoked, finalized or suspended: "
                                           "it cannot grow");
    or_lock_acquire(&comm->lock);
    bool out = comm->grow_id_out;
    uint64_t next = comm->grows + 1;
    comm->grow_id_out = true;
    or_lock_release(&comm->lock);
    if (out)
        return occl_fail(occlInvalidUsage, "this rank's occlCommGetUniqueId id is still "
                                           "outstanding: occlCommGrow consumes it first");
    /* This process is the grown communicator's bootstrap root. */
    unique_id u = {GROW_MAGIC, comm->job.job_id, grow_hash(comm, next), comm->job.rank,
                   comm->nranks};
    memset(uniqueId, 0, sizeof *uniqueId);
    memcpy(uniqueId->internal, &u, sizeof u);
    return occlSuccess;
}

/* A new rank's part: everything it needs is in the id. */
static occlResult_t grow_new_rank(int nRanks, const occlUniqueId *uniqueId, int rank,
                                  occlComm_t *newcomm, occlConfig_t *config)
{
    if (!uniqueId)
        return occl_fail(occlInvalidArgument, "uniqueId is NULL: a new rank (comm NULL) passes "
                                              "the id of occlCommGetUniqueId");
    if (rank < 0 || rank >= nRanks)
        return occl_fail(occlInvalidArgument, "new rank %d is not in [0, nRanks = %d) (comm "
                                              "NULL: a new rank passes its rank)", rank, nRanks);
    unique_id u;
    occlResult_t res = grow_id_read(uniqueId, &u);
    if (res != occlSuccess)
        return res;
    if (nRanks <= u.parent_nranks)
        return occl_fail(occlInvalidArgument, "nRanks %d is not more than the %d ranks of the "
                                              "communicator grown", nRanks, u.parent_nranks);
    if (rank < u.parent_nranks)
        return occl_fail(occlInvalidArgument, "rank %d is an existing rank's: new ranks come "
                                              "after them, in [%d, %d)", rank, u.parent_nranks,
                         nRanks);
    occl_comm_config resolved;
    res = occl_config_resolve(config, &resolved);
    if (res != occlSuccess)
        return res;
    unique_id init = {ID_MAGIC, u.job_id, u.id, u.root, 0};
    occlUniqueId id;
    memset(&id, 0, sizeof id);
    memcpy(id.internal, &init, sizeof init);
    res = init_rank(newcomm, nRanks, id, rank, &resolved);
    /* Only the existing ranks can tell an id used up; here it looks like
     * a root that never answers. */
    if (res == occlTimeout)
        res = occl_fail(occlTimeout, "the existing ranks did not grow the communicator with "
                                     "this rank within OCCL_TIMEOUT_MS: was the id used up by "
                                     "an earlier grow, or did they not call occlCommGrow?");
    return res;
}

/* An existing rank's part: the existing ranks agree over comm on nRanks
 * and on the id (the maker's, which the others need not pass), check it is
 * comm's for this grow, then bootstrap with the new ranks. */
static occlResult_t grow_existing_rank(occlComm_t comm, int nRanks, const occlUniqueId *uniqueId,
                                       int rank, occlComm_t *newcomm, occlConfig_t *config)
{
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "comm is not a live communicator (new ranks pass "
                                              "NULL)");
    if (rank != -1)
        return occl_fail(occlInvalidArgument, "rank %d: an existing rank (comm given) keeps its "
                                              "rank and passes -1", rank);
    int n = comm->nranks;
    if (nRanks <= n)
        return occl_fail(occlInvalidArgument, "nRanks %d is not more than the communicator's %d "
                                              "ranks", nRanks, n);
    if (atomic_load(&comm->revoked) || comm->finalized || atomic_load(&comm->suspended))
        return occl_fail(occlInvalidUsage, "the communicator is revoked, finalized or suspended: "
                                           "it cannot grow");
    unique_id mine = {0};
    if (uniqueId) {
        occlResult_t bad = grow_id_read(uniqueId, &mine);
        if (bad != occlSuccess)
            return bad;
    }
    occl_comm_config child_config = comm->config;
    if (config) {
        occlResult_t bad = occl_config_resolve(config, &child_config);
        if (bad != occlSuccess)
            return bad;
    }
    /* Per rank: nRanks, then the id it passed (all zero: none). */
    enum { WORDS = 1 + (int)(sizeof(unique_id) / sizeof(int32_t)) };
    _Static_assert(sizeof(unique_id) % sizeof(int32_t) == 0, "id in words");
    int32_t offer[WORDS];
    offer[0] = nRanks;
    memcpy(&offer[1], &mine, sizeof mine);
    int32_t *all = malloc((size_t)n * WORDS * sizeof *all);
    if (!all)
        return occl_fail(occlSystemError, "out of memory");
    int prev;
    orGetDevice(&prev);
    orSetDevice(comm->device);
    uint64_t nth;
    occlResult_t res = parent_allgather(comm, offer, WORDS, all, &comm->grows, &nth);
    /* Whatever the outcome, the exchange used up the id outstanding. */
    or_lock_acquire(&comm->lock);
    comm->grow_id_out = false;
    or_lock_release(&comm->lock);
    unique_id u = {0};
    for (int r = 0; r < n && res == occlSuccess; r++) {
        const int32_t *o = all + (size_t)r * WORDS;
        unique_id theirs;
        memcpy(&theirs, &o[1], sizeof theirs);
        if (o[0] != nRanks)
            res = occl_fail(occlInvalidArgument, "existing ranks passed different nRanks (rank "
                                                 "%d: %d, rank %d: %d)", r, o[0], comm->rank,
                            nRanks);
        else if (theirs.magic && u.magic && memcmp(&theirs, &u, sizeof u) != 0)
            res = occl_fail(occlInvalidArgument, "existing ranks passed different uniqueIds "
                                                 "(each grow takes one occlCommGetUniqueId id)");
        else if (theirs.magic)
            u = theirs;
    }
    free(all);
    if (res == occlSuccess && !u.magic)
        res = occl_fail(occlInvalidArgument, "no existing rank passed the uniqueId (the rank that "
                                             "made it with occlCommGetUniqueId passes it)");
    if (res == occlSuccess && (u.id != grow_hash(comm, nth) || u.parent_nranks != n))
        res = occl_fail(occlInvalidArgument, "uniqueId is not this communicator's for this grow: "
                                             "another communicator's, or used by an earlier "
                                             "grow");
    bool root_is_member = false;
    for (int r = 0; r < n && res == occlSuccess; r++)
        root_is_member |= comm->peers[r].world_rank == u.root;
    if (res == occlSuccess && !root_is_member)
        res = occl_fail(occlInvalidArgument, "uniqueId was not made by a rank of the communicator");
    if (res == occlSuccess) {
        unique_id init = {ID_MAGIC, u.job_id, u.id, u.root, 0};
        occlUniqueId id;
        memset(&id, 0, sizeof id);
        memcpy(id.internal, &init, sizeof init);
        res = init_rank(newcomm, nRanks, id, comm->rank, &child_config);
    }
    orSetDevice(prev);
    return res;
}

occlResult_t occlCommGrow(occlComm_t comm, int nRanks, const occlUniqueId *uniqueId, int rank,
                          occlComm_t *newcomm, occlConfig_t *config)
{
    if (!newcomm)
        return occl_fail(occlInvalidArgument, "newcomm is NULL");
    *newcomm = NULL; /* NCCL's: NULL unless a communicator is made */
    if (nRanks < 1)
        return occl_fail(occlInvalidArgument, "nRanks %d is not positive", nRanks);
    if (comm)
        return grow_existing_rank(comm, nRanks, uniqueId, rank, newcomm, config);
    return grow_new_rank(nRanks, uniqueId, rank, newcomm, config);
}
