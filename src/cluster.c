/* src/cluster.c - MPI bootstrap, hosts and virtual nodes, shared arenas. */
#include "cluster.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "log.h"
#include "sync.h"
#include "topo.h"

or_cluster or_cl = {.comm = MPI_COMM_NULL, .coll_comm = MPI_COMM_NULL, .p2p_comm = MPI_COMM_NULL,
                    .ctl_comm = MPI_COMM_NULL, .node_comm = MPI_COMM_NULL};

/* Set by the runtime: stops whatever uses MPI (the proxy thread) before the
 * application's own MPI_Finalize takes MPI away. */
void (*or_cluster_before_finalize)(void);

static bool launched_by_mpi_launcher(void)
{
    return getenv("PMI_RANK") || getenv("PMI_FD") || getenv("PMI_SIZE") || getenv("PMI_PORT") ||
           getenv("PMIX_RANK");
}

static const char *thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    default: return "MPI_THREAD_MULTIPLE";
    }
}

static void release_mpi_objects(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized || or_cl.stalled)
        return; /* a request stalled at start-up still names them */
    if (or_cl.node_comm != MPI_COMM_NULL)
        MPI_Comm_free(&or_cl.node_comm);
    if (or_cl.comm != MPI_COMM_NULL)
        MPI_Comm_free(&or_cl.comm);
    if (or_cl.coll_comm != MPI_COMM_NULL)
        MPI_Comm_free(&or_cl.coll_comm);
    if (or_cl.p2p_comm != MPI_COMM_NULL)
        MPI_Comm_free(&or_cl.p2p_comm);
    if (or_cl.ctl_comm != MPI_COMM_NULL)
        MPI_Comm_free(&or_cl.ctl_comm);
}

static void detach_from_mpi(void)
{
    if (!or_cl.mpi)
        return;
    if (or_cluster_before_finalize)
        or_cluster_before_finalize();
    release_mpi_objects();
    or_cl.mpi = false;
}

/* An application may finalize MPI itself while the runtime still runs. The
 * runtime's proxy must be out of MPI before MPI_Finalize begins (MPICH tears
 * down its locks under a thread still inside it), so the library provides
 * MPI_Finalize through the MPI profiling interface: stop, then PMPI_Finalize. */
int MPI_Finalize(void)
{
    detach_from_mpi();
    return PMPI_Finalize();
}

/* The runtime's threads call MPI, so it needs MPI_THREAD_MULTIPLE. A program
 * written for CUDA and NCCL calls a plain MPI_Init (NCCL's own examples do),
 * which MPICH answers with MPI_THREAD_SINGLE: the library provides MPI_Init
 * through the profiling interface, as MPI_Finalize, and asks for
 * MPI_THREAD_MULTIPLE, which the standard lets MPI_Init provide. An explicit
 * MPI_Init_thread keeps the level the program asked for. */
int MPI_Init(int *argc, char ***argv)
{
    int provided;
    return PMPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
}

/* Fallback for a program that reaches PMPI_Finalize another way: MPI deletes
 * MPI_COMM_SELF's attributes first thing in finalize. */
static int self_delete(MPI_Comm comm, int keyval, void *value, void *extra)
{
    detach_from_mpi();
    return MPI_SUCCESS;
}

static orError_t fail(const char *fmt, const char *detail)
{
    fprintf(stderr, "openreg: ");
    fprintf(stderr, fmt, detail);
    fputc('\n', stderr);
    return orErrorInitialization;
}

/* The job's identity is drawn once per process; rank 0's is the job's (the
 * start-up hands it to every rank), so rank 0 knows it before start-up. */
static pthread_once_t identity_once = PTHREAD_ONCE_INIT;
static bool identity_drawn;

static void identity_draw(void)
{
    identity_drawn = getrandom(&or_cl.job_id, sizeof or_cl.job_id, 0) == sizeof or_cl.job_id &&
                     getrandom(or_cl.job_key, sizeof or_cl.job_key, 0) == sizeof or_cl.job_key;
}

bool or_cluster_identity_alone(int *rank, uint64_t *job_id)
{
    int initialized = 0, finalized = 0, level = MPI_THREAD_SINGLE, r = -1;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized)
        return false; /* alone, or MPI to start: start-up says which */
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
        return false; /* start-up refuses it, with its message */
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    if (r != 0)
        return false;
    pthread_once(&identity_once, identity_draw);
    if (!identity_drawn)
        return false;
    *rank = 0;
    *job_id = or_cl.job_id;
    return true;
}

/* Wait for one request of the start-up, backing off to sleep (ranks may
 * outnumber cores), for at most OPENREG_TIMEOUT_MS: a rank whose peers never
 * make their first call (they wait for a message of this rank's program)
 * gets an error, not a hang. After a timeout the request is left pending, so
 * MPI is not touched again (or_cl.stalled). */
static orError_t start_wait(MPI_Request *req, const char *step)
{
    uint64_t deadline = or_now_ns() + or_cl.timeout_ns;
    for (unsigned spin = 0;; spin++) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return fail("start-up failed in MPI while %s", step);
        if (done)
            return orSuccess;
        if (or_now_ns() > deadline) {
            or_cl.stalled = true;
            fprintf(stderr,
                    "openreg: rank %d: start-up waited %" PRIu64 " ms (OPENREG_TIMEOUT_MS) for "
                    "the other ranks while %s: every rank must make a first runtime call, and "
                    "none may first wait for a message that another rank sends only after its "
                    "own first call (docs/cluster.md#5-mpi-rules)\n",
                    or_cl.rank, or_cl.timeout_ns / 1000000u, step);
            return orErrorInitialization;
        }
        if (spin < 100)
            sched_yield();
        else
            usleep(spin < 2000 ? 20 : 200);
    }
}

/* ---- settings every rank must share ---------------------------------------- */

/* Compared at start-up: they decide the nodes, the placement, the clock and
 * the collectives' algorithms, which every rank must see alike. */
enum { AGREE_RUNTIME = 4, AGREE_MAX = 16, AGREE_TEXT = 256 };
static const char *agree_names[AGREE_MAX] = {"OPENREG_RANKS_PER_NODE", "OPENREG_TOPO",
                                             "OPENREG_PLACEMENT", "OPENREG_TIME"};
static const char *agree_unset[AGREE_MAX]; /* the layers' settings: what unset means */
static int agree_count = AGREE_RUNTIME;

void or_config_must_agree(const char *name, const char *unset_as)
{
    for (int i = 0; i < agree_count; i++)
        if (strcmp(agree_names[i], name) == 0)
            return;
    if (agree_count < AGREE_MAX) {
        agree_unset[agree_count] = unset_as;
        agree_names[agree_count++] = name;
    }
}

/* What a setting means, as text: the same text on two ranks means the same
 * setting ("0" and unset ranks per node, "Virtual" and "virtual"). */
static void agree_value(const or_config *cfg, int i, char *text, size_t size)
{
    const char *env = getenv(agree_names[i]);
    switch (i) {
    case 0: snprintf(text, size, "%lld", cfg->ranks_per_node); break;
    case 2:
        if (cfg->placement == OR_PLACEMENT_FILE)
            snprintf(text, size, "%s", env);
        else
            snprintf(text, size, "%s", cfg->placement ? "spread" : "packed");
        break;
    case 3: snprintf(text, size, "%s", cfg->time ? "virtual" : "wall"); break;
    default: snprintf(text, size, "%s", env ? env : agree_unset[i] ? agree_unset[i] : ""); break;
    }
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

/* The first exchange of the start-up: whether each rank's settings are
 * valid, and a hash of each setting that must agree. */
typedef struct start_record {
    int32_t ok;
    uint64_t hash[AGREE_MAX];
} start_record;

/* Every rank learns of a mismatch from the records; the two ranks named
 * (rank 0 and the first that differs) hand the others their values. */
static orError_t agree_check(const start_record *all)
{
    int var = -1, other = -1;
    for (int i = 0; i < agree_count && var < 0; i++)
        for (int r = 1; r < or_cl.nranks && var < 0; r++)
            if (all[r].hash[i] != all[0].hash[i]) {
                var = i;
                other = r;
            }
    if (var < 0)
        return orSuccess;
    char first[AGREE_TEXT] = "", second[AGREE_TEXT] = "", mine[AGREE_TEXT];
    const char *env = getenv(agree_names[var]);
    /* The text shown is the one set, or "unset". */
    snprintf(mine, sizeof mine, "%s", env && *env ? env : "unset");
    if (or_cl.rank == 0)
        memcpy(first, mine, sizeof first);
    if (or_cl.rank == other)
        memcpy(second, mine, sizeof second);
    MPI_Request req;
    orError_t err;
    MPI_Ibcast(first, AGREE_TEXT, MPI_CHAR, 0, or_cl.comm, &req);
    if ((err = start_wait(&req, "comparing settings")) != orSuccess)
        return err;
    MPI_Ibcast(second, AGREE_TEXT, MPI_CHAR, other, or_cl.comm, &req);
    if ((err = start_wait(&req, "comparing settings")) != orSuccess)
        return err;
    first[AGREE_TEXT - 1] = second[AGREE_TEXT - 1] = '\0';
    if (or_cl.rank == 0 || or_cl.rank == other)
        fprintf(stderr, "openreg: %s differs: rank 0 has %s, rank %d has %s; every rank of a "
                        "job must have the same\n",
                agree_names[var], first, other, second);
    else
        fprintf(stderr, "openreg: rank %d: %s differs between ranks 0 and %d (see their "
                        "message); not starting\n",
                or_cl.rank, agree_names[var], other);
    return orErrorInitialization;
}

static void single_rank(int ndevices)
{
    or_cl.rank = 0;
    or_cl.nranks = 1;
    or_cl.host_rank = 0;
    or_cl.host_nranks = 1;
    or_cl.node = 0;
    or_cl.nnodes = 1;
    or_cl.node_rank = 0;
    or_cl.node_nranks = 1;
}

static orError_t start_mpi(void)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized)
        return fail("MPI was finalized before the runtime's first call%s", "");
    if (initialized) {
        int level;
        MPI_Query_thread(&level);
        if (level < MPI_THREAD_MULTIPLE)
            return fail("MPI was initialized at %s, but the runtime's threads call MPI: "
                        "initialize with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...), or run "
                        "under orrun (which sets MPIR_CVAR_DEFAULT_THREAD_LEVEL for MPI_Init)",
                        thread_level_name(level));
    } else {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
            return fail("MPI_Init_thread failed%s", "");
        or_cl.mpi_owned = true;
        if (provided < MPI_THREAD_MULTIPLE)
            return fail("this MPI provides only %s; MPI_THREAD_MULTIPLE is required",
                        thread_level_name(provided));
    }
    int keyval;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &keyval, NULL);
    MPI_Comm_set_attr(MPI_COMM_SELF, keyval, NULL);
    or_cl.mpi = true;
    return orSuccess;
}

/* OPENREG_TOPO: place every rank's devices on the topology (counts[r] is
 * rank r's device count) and take each rank's virtual node from it. leaders
 * (the host of each rank, or NULL for one rank) must agree within a node.
 * Fails, with the reason printed, before any rank starts work. */
static orError_t place_on_topology(const or_config *cfg, int nranks, const int *counts,
                                   const int *leaders, int *node_of)
{
    char msg[1200];
    or_topo *t = NULL;
    or_topo_error e;
    if (or_topo_load(getenv("OPENREG_TOPO"), "OPENREG_TOPO", &t, &e) != OR_TOPO_OK) {
        or_topo_error_format(&e, msg, sizeof msg);
        return fail("OPENREG_TOPO is not valid: %s", msg);
    }
    if (cfg->ranks_per_node > 0)
        OR_WARN("cluster", "OPENREG_RANKS_PER_NODE is ignored: OPENREG_TOPO decides the nodes");
    int nd = counts[0];
    for (int r = 1; r < nranks; r++)
        if (counts[r] != nd) {
            snprintf(msg, sizeof msg, "rank %d hosts %d devices and rank 0 %d", r, counts[r], nd);
            or_topo_free(t);
            return fail("OPENREG_TOPO: every rank must host as many devices (%s)", msg);
        }
    int *dev = malloc(sizeof *dev * (size_t)nranks * (size_t)nd);
    if (!dev) {
        or_topo_free(t);
        return fail("out of memory%s", "");
    }
    if (cfg->placement == OR_PLACEMENT_FILE) {
        /* The user's own map, checked whole before any rank starts. */
        if (or_topo_place_file(t, getenv("OPENREG_PLACEMENT"), nranks, nd, dev, &e) !=
            OR_TOPO_OK) {
            or_topo_error_format(&e, msg, sizeof msg);
            free(dev);
            or_topo_free(t);
            return fail("OPENREG_PLACEMENT is not valid for this job: %s", msg);
        }
    } else if (or_topo_place(t, nranks, nd, (or_topo_placement)cfg->placement, dev, &e) !=
               OR_TOPO_OK) {
        snprintf(msg, sizeof msg, "%s", e.message);
        free(dev);
        or_topo_free(t);
        return fail("OPENREG_TOPO: the job does not fit: %s", msg);
    }
    /* Virtual nodes are the topology's nodes the job uses, numbered in order. */
    int nn = or_topo_node_count(t);
    int *number = malloc(sizeof *number * (size_t)nn);
    int *first_rank = malloc(sizeof *first_rank * (size_t)nn);
    if (!number || !first_rank) {
        free(number);
        free(first_rank);
        free(dev);
        or_topo_free(t);
        return fail("out of memory%s", "");
    }
    for (int n = 0; n < nn; n++)
        number[n] = first_rank[n] = -1;
    for (int r = 0; r < nranks; r++) {
        int n = or_topo_device_node(t, dev[r * nd]);
        if (first_rank[n] < 0)
            first_rank[n] = r;
    }
    int used = 0;
    for (int n = 0; n < nn; n++)
        if (first_rank[n] >= 0)
            number[n] = used++;
    orError_t err = orSuccess;
    for (int r = 0; r < nranks && err == orSuccess; r++) {
        int n = or_topo_device_node(t, dev[r * nd]);
        node_of[r] = number[n];
        if (leaders && leaders[r] != leaders[first_rank[n]]) {
            snprintf(msg, sizeof msg, "node '%s' would hold ranks %d and %d, which run on "
                     "different hosts", or_topo_node_name(t, n), first_rank[n], r);
            err = fail("OPENREG_TOPO: %s; a virtual node must be within one host", msg);
        }
    }
    free(number);
    free(first_rank);
    if (err != orSuccess) {
        free(dev);
        or_topo_free(t);
        return err;
    }
    or_cl.topo = t;
    or_cl.topo_device = dev;
    return orSuccess;
}

/* Virtual node of every rank, and a check that none spans real hosts. */
static orError_t assign_nodes(const or_config *cfg, MPI_Comm host_comm, const int *counts,
                              int *node_of)
{
    /* A host is named by the world rank of its first rank. */
    int leader = or_cl.rank;
    MPI_Request req;
    MPI_Ibcast(&leader, 1, MPI_INT, 0, host_comm, &req);
    orError_t err = start_wait(&req, "naming hosts");
    if (err != orSuccess)
        return err;
    int *leaders = malloc((size_t)or_cl.nranks * sizeof *leaders);
    if (!leaders)
        return fail("out of memory%s", "");
    MPI_Iallgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, or_cl.comm, &req);
    if ((err = start_wait(&req, "naming hosts")) != orSuccess) {
        free(leaders);
        return err;
    }
    if (cfg->topo) {
        err = place_on_topology(cfg, or_cl.nranks, counts, leaders, node_of);
        free(leaders);
        return err;
    }
    int k = (int)cfg->ranks_per_node;
    for (int r = 0; r < or_cl.nranks; r++) {
        if (k > 0) {
            node_of[r] = r / k;
            if (leaders[r] != leaders[node_of[r] * k]) {
                char msg[160];
                snprintf(msg, sizeof msg, "%d groups ranks %d and %d, which run on different hosts",
                         k, node_of[r] * k, r);
                err = fail("OPENREG_RANKS_PER_NODE=%s: a virtual node must be within one host", msg);
                break;
            }
        } else {
            /* Hosts numbered in order of their first rank. */
            int id = 0;
            for (int q = 0; q < r; q++)
                if (leaders[q] == q && q < leaders[r])
                    id++;
            node_of[r] = id;
        }
    }
    free(leaders);
    return err;
}

orError_t or_cluster_init(const or_config *cfg, int ndevices, bool config_ok)
{
    pthread_once(&identity_once, identity_draw);
    if (!identity_drawn)
        return fail("no random numbers from the kernel%s", "");
    /* Read even when the settings are bad: the ranks still meet once. */
    long long timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 300000;
    or_cl.timeout_ns = (uint64_t)timeout_ms * 1000000u;
    or_cl.first_device = calloc(2, sizeof *or_cl.first_device);
    or_cl.rank_node = calloc(1, sizeof *or_cl.rank_node);
    or_cl.node_ranks = calloc(1, sizeof *or_cl.node_ranks);
    if (!or_cl.first_device || !or_cl.rank_node || !or_cl.node_ranks)
        return fail("out of memory%s", "");
    or_cl.first_device[1] = ndevices;

    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized && !launched_by_mpi_launcher()) {
        single_rank(ndevices);
        if (config_ok && cfg->topo)
            return place_on_topology(cfg, 1, &ndevices, NULL, or_cl.rank_node);
        return config_ok ? orSuccess : orErrorInitialization;
    }
    orError_t err = start_mpi();
    if (err != orSuccess)
        return err;
    MPI_Comm_rank(MPI_COMM_WORLD, &or_cl.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &or_cl.nranks);
    /* The first step every rank takes together: here a rank waits for the
     * others' first call, so with a deadline. */
    MPI_Request req;
    MPI_Comm_idup(MPI_COMM_WORLD, &or_cl.comm, &req);
    if ((err = start_wait(&req, "waiting for their first runtime call")) != orSuccess)
        return err;
    MPI_Comm_idup(MPI_COMM_WORLD, &or_cl.coll_comm, &req);
    if ((err = start_wait(&req, "making communicators")) != orSuccess)
        return err;
    MPI_Comm_idup(MPI_COMM_WORLD, &or_cl.p2p_comm, &req);
    if ((err = start_wait(&req, "making communicators")) != orSuccess)
        return err;
    MPI_Comm_idup(MPI_COMM_WORLD, &or_cl.ctl_comm, &req);
    if ((err = start_wait(&req, "making communicators")) != orSuccess)
        return err;
    /* A dead peer must be an error the runtime reports, not the end of this
     * process too. */
    MPI_Comm_set_errhandler(or_cl.comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(or_cl.coll_comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(or_cl.p2p_comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(or_cl.ctl_comm, MPI_ERRORS_RETURN);

    /* All ranks start, or none: a rank with a bad setting, or settings that
     * differ between ranks, must not leave the others waiting below. */
    start_record mine;
    memset(&mine, 0, sizeof mine); /* padding too: it is sent */
    mine.ok = config_ok;
    for (int i = 0; i < agree_count && config_ok; i++) {
        char text[AGREE_TEXT];
        agree_value(cfg, i, text, sizeof text);
        mine.hash[i] = fnv1a(text);
    }
    start_record *records = calloc((size_t)or_cl.nranks, sizeof *records);
    if (!records)
        return fail("out of memory%s", ""); /* before any rank waits for this one */
    MPI_Iallgather(&mine, sizeof mine, MPI_BYTE, records, sizeof mine, MPI_BYTE, or_cl.comm, &req);
    if ((err = start_wait(&req, "comparing settings")) != orSuccess) {
        free(records);
        return err;
    }
    int all_ok = 1;
    for (int r = 0; r < or_cl.nranks; r++)
        all_ok &= records[r].ok != 0;
    if (!all_ok) {
        free(records);
        if (config_ok)
            fprintf(stderr, "openreg: rank %d: another rank's configuration is invalid (see its "
                            "message); not starting\n",
                    or_cl.rank);
        return orErrorInitialization;
    }
    err = agree_check(records);
    free(records);
    if (err != orSuccess)
        return err;

    MPI_Comm host_comm;
    MPI_Comm_split_type(or_cl.comm, MPI_COMM_TYPE_SHARED, or_cl.rank, MPI_INFO_NULL, &host_comm);
    MPI_Comm_rank(host_comm, &or_cl.host_rank);
    MPI_Comm_size(host_comm, &or_cl.host_nranks);

    int n = or_cl.nranks;
    int *node_of = realloc(or_cl.rank_node, (size_t)n * sizeof *node_of);
    int *first = realloc(or_cl.first_device, (size_t)(n + 1) * sizeof *first);
    if (!node_of || !first) {
        MPI_Comm_free(&host_comm);
        return fail("out of memory%s", "");
    }
    or_cl.rank_node = node_of;
    or_cl.first_device = first;
    int *counts = malloc((size_t)n * sizeof *counts);
    if (!counts) {
        MPI_Comm_free(&host_comm);
        return fail("out of memory%s", "");
    }
    MPI_Iallgather(&ndevices, 1, MPI_INT, counts, 1, MPI_INT, or_cl.comm, &req);
    err = start_wait(&req, "counting devices");
    if (err == orSuccess)
        err = assign_nodes(cfg, host_comm, counts, node_of);
    MPI_Comm_free(&host_comm);
    first[0] = 0;
    for (int r = 0; r < n; r++)
        first[r + 1] = first[r] + counts[r];
    free(counts);
    if (err != orSuccess)
        return err;
    or_cl.node = node_of[or_cl.rank];
    or_cl.nnodes = 0;
    for (int r = 0; r < n; r++)
        if (node_of[r] + 1 > or_cl.nnodes)
            or_cl.nnodes = node_of[r] + 1;

    MPI_Comm_split(or_cl.comm, or_cl.node, or_cl.rank, &or_cl.node_comm);
    MPI_Comm_rank(or_cl.node_comm, &or_cl.node_rank);
    MPI_Comm_size(or_cl.node_comm, &or_cl.node_nranks);
    int *members = realloc(or_cl.node_ranks, (size_t)or_cl.node_nranks * sizeof *members);
    if (!members)
        return fail("out of memory%s", "");
    or_cl.node_ranks = members;
    MPI_Iallgather(&or_cl.rank, 1, MPI_INT, members, 1, MPI_INT, or_cl.node_comm, &req);
    if ((err = start_wait(&req, "forming nodes")) != orSuccess)
        return err;

    /* One job identity, chosen by rank 0: names shared segments, and keys IPC handles. */
    uint64_t ident[3] = {or_cl.job_id, or_cl.job_key[0], or_cl.job_key[1]};
    MPI_Ibcast(ident, 3, MPI_UINT64_T, 0, or_cl.comm, &req);
    if ((err = start_wait(&req, "sharing the job's identity")) != orSuccess)
        return err;
    or_cl.job_id = ident[0];
    or_cl.job_key[0] = ident[1];
    or_cl.job_key[1] = ident[2];
    OR_INFO("cluster", "rank %d of %d, host rank %d of %d, node %d of %d (%d ranks)", or_cl.rank,
            n, or_cl.host_rank, or_cl.host_nranks, or_cl.node, or_cl.nnodes, or_cl.node_nranks);
    return orSuccess;
}

bool or_cluster_agree(bool ok)
{
    if (!or_cl.mpi)
        return ok;
    if (or_cl.stalled)
        return false; /* a step timed out: MPI is not used again */
    int all = ok;
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, or_cl.comm, &req) != MPI_SUCCESS ||
        start_wait(&req, "starting devices") != orSuccess)
        return false;
    if (ok && !all)
        fprintf(stderr, "openreg: rank %d: another rank failed to start (see its message); "
                        "not starting\n",
                or_cl.rank);
    return all;
}

typedef struct arena_record {
    int32_t rank, device;
    uint64_t capacity;
    char name[OR_SHM_NAME_MAX];
} arena_record;

orError_t or_cluster_map_peers(int ndevices, char (*shm_names)[OR_SHM_NAME_MAX],
                               const size_t *capacities)
{
    if (!or_cl.mpi || or_cl.node_nranks < 2)
        return orSuccess;
    int m = or_cl.node_nranks;
    int *counts = calloc((size_t)m, sizeof *counts), *displs = calloc((size_t)m, sizeof *displs);
    arena_record *mine = calloc((size_t)ndevices, sizeof *mine);
    arena_record *all = NULL;
    orError_t err = orSuccess;
    if (!counts || !displs || !mine) {
        err = fail("out of memory%s", "");
        goto out;
    }
    for (int d = 0; d < ndevices; d++) {
        mine[d].rank = or_cl.rank;
        mine[d].device = d;
        mine[d].capacity = capacities[d];
        memcpy(mine[d].name, shm_names[d], OR_SHM_NAME_MAX);
    }
    int bytes = ndevices * (int)sizeof *mine;
    MPI_Request req;
    MPI_Iallgather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, or_cl.node_comm, &req);
    if ((err = start_wait(&req, "sharing device memory")) != orSuccess)
        goto unlink;
    int total = 0;
    for (int i = 0; i < m; i++) {
        displs[i] = total;
        total += counts[i];
    }
    all = malloc((size_t)total);
    or_cl.peers = calloc((size_t)total / sizeof *all, sizeof *or_cl.peers);
    if (!all || !or_cl.peers) {
        err = fail("out of memory%s", "");
        goto out;
    }
    MPI_Iallgatherv(mine, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, or_cl.node_comm, &req);
    if ((err = start_wait(&req, "sharing device memory")) != orSuccess)
        goto unlink;
    int nrec = total / (int)sizeof *all;
    for (int i = 0; i < nrec; i++) {
        if (all[i].rank == or_cl.rank)
            continue;
        int fd = shm_open(all[i].name, O_RDWR, 0);
        void *p = fd < 0 ? MAP_FAILED
                         : mmap(NULL, all[i].capacity, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_NORESERVE, fd, 0);
        if (fd >= 0)
            close(fd);
        if (p == MAP_FAILED) {
            err = fail("cannot map a device arena of another rank on this node (%s)", all[i].name);
            break;
        }
        or_cl.peers[or_cl.npeers++] =
            (or_peer_arena){all[i].rank, all[i].device, p, all[i].capacity};
    }
    /* Everyone has mapped everything: the names can go, so nothing of the
     * job stays in /dev/shm whatever happens to it from now on. */
    MPI_Ibarrier(or_cl.node_comm, &req);
    orError_t waited = start_wait(&req, "sharing device memory");
    if (err == orSuccess)
        err = waited;
unlink: /* also when the others did not come: this rank's names go */
    for (int d = 0; d < ndevices; d++)
        shm_unlink(shm_names[d]);
out:
    free(counts);
    free(displs);
    free(mine);
    free(all);
    return err;
}

const or_peer_arena *or_cluster_peer_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < or_cl.npeers; i++) {
        uintptr_t base = (uintptr_t)or_cl.peers[i].base;
        if (a >= base && a - base < or_cl.peers[i].capacity)
            return &or_cl.peers[i];
    }
    return NULL;
}

void or_cluster_finalize_mpi(void)
{
    if (!or_cl.mpi)
        return;
    release_mpi_objects();
    int finalized = 0;
    MPI_Finalized(&finalized);
    /* After a stalled start-up MPI_Finalize would wait for the missing
     * ranks as long as they take: exit without it. */
    if (or_cl.mpi_owned && !finalized && !or_cl.stalled)
        PMPI_Finalize();
    or_cl.mpi = false;
}

void or_cluster_fini(void)
{
    for (int i = 0; i < or_cl.npeers; i++)
        munmap(or_cl.peers[i].base, or_cl.peers[i].capacity);
    free(or_cl.peers);
    or_cl.peers = NULL;
    or_cl.npeers = 0;
    or_cluster_finalize_mpi();
    free(or_cl.first_device);
    free(or_cl.rank_node);
    free(or_cl.node_ranks);
    or_cl.first_device = or_cl.rank_node = or_cl.node_ranks = NULL;
    or_topo_free(or_cl.topo);
    free(or_cl.topo_device);
    or_cl.topo = NULL;
    or_cl.topo_device = NULL;
}
