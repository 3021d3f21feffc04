/* src/runtime.c - lazy start-up, the device table, per-thread state, teardown. */
#include "internal.h"
#include "fault.h"
#include "proxy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

or_runtime or_rt = {
    .strict_lock = PTHREAD_MUTEX_INITIALIZER,
    .host_lock = PTHREAD_MUTEX_INITIALIZER,
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static _Thread_local int current_device;
static _Thread_local bool worker_thread;

bool or_in_worker(void) { return worker_thread; }

or_device *or_current_device(void) { return &or_rt.devices[current_device]; }

/* Memory of a 'cpu' device: an even share of the host among all its devices.
 * The kernel's count, not hwloc's: some virtual machines report NUMA memory
 * that is a fraction of the real total, and fake topologies report none. */
static size_t host_memory_share(int slots)
{
    uint64_t total = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    size_t share = (size_t)(total / (uint64_t)(slots > 0 ? slots : 1));
    share &= ~(((size_t)1 << 20) - 1); /* whole MiB */
    return share ? share : (size_t)1 << 20;
}

static orError_t device_start(or_device *dev, int id, const or_placement *place,
                              const char *shm_name, bool memfd)
{
    memset(dev, 0, sizeof *dev);
    dev->id = id;
    dev->global_id = or_cl.first_device[or_cl.rank] + id;
    dev->profile = or_profiles()[or_rt.cfg.profile];
    dev->hw.place = *place;
    dev->hw.bind = (or_bind_mode)or_rt.cfg.bind;
    pthread_mutex_init(&dev->mem_lock, NULL);
    or_lock_init(&dev->lock);
    const or_device_profile *prof = dev->profile;
    size_t capacity = or_rt.cfg.device_mem  ? (size_t)or_rt.cfg.device_mem
                      : prof->memory        ? prof->memory
                                            : host_memory_share(or_rt.local_nranks * or_rt.ndevices);
    if (memfd ? or_cpu_device_map_memfd(&dev->hw, capacity)
              : or_cpu_device_map(&dev->hw, capacity, shm_name)) {
        fprintf(stderr,
                "openreg: cannot reserve %zu bytes for device %d (profile %s; set "
                "OPENREG_DEVICE_MEM lower): %s\n",
                capacity, id, prof->name, strerror(errno));
        return orErrorInitialization;
    }
    if (or_rt.cfg.memcheck) {
        /* Guard pages and a quarantine of a quarter of the memory, at most 256 MiB. */
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t quarantine = capacity / 4 < ((size_t)256 << 20) ? capacity / 4 : (size_t)256 << 20;
        if (or_arena_init_guarded(&dev->arena, capacity & ~(page - 1), page, quarantine))
            return orErrorInitialization;
    } else if (or_arena_init(&dev->arena, capacity)) {
        return orErrorInitialization;
    }
    /* Memcheck: only live blocks are ever readable (guarded_alloc). */
    if (or_rt.cfg.strict || or_rt.cfg.memcheck)
        or_cpu_device_set_readable(&dev->hw, capacity, false);

    int nthreads = or_rt.cfg.device_threads ? (int)or_rt.cfg.device_threads : place->ncores;
    if (nthreads < 1)
        nthreads = 1;
    orDeviceProp *p = &dev->prop;
    snprintf(p->name, sizeof p->name, "openreg %s", prof->name);
    p->totalGlobalMem = dev->arena.capacity;
    p->multiProcessorCount = nthreads;
    p->numaNode = place->numa_node;
    snprintf(p->cpuList, sizeof p->cpuList, "%s", place->cpulist);
    p->sharedMemPerBlock = OR_MAX_SHARED_MEM;
    p->maxThreadsPerBlock = (int)OR_MAX_BLOCK_THREADS;
    p->maxThreadsDim[0] = 1024;
    p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = 65535;
    p->maxGridSize[2] = 65535;
    p->asyncEngineCount = prof->copy_engines;
    /* Virtual time must not depend on the host: there a 'cpu' device is
     * charged as one core, whatever its share of this host. */
    int rated_cores = or_rt.cfg.time == OR_TIME_VIRTUAL ? 1 : place->ncores;
    p->computeRateGflops =
        prof->compute_gflops ? prof->compute_gflops : OR_CPU_GFLOPS_PER_CORE * rated_cores;
    p->memoryBandwidthGBs =
        prof->memory_gbs ? prof->memory_gbs : OR_CPU_GBS_PER_CORE * rated_cores;

    or_stream_init(&dev->default_stream, dev, OR_PRIORITY_LEAST, orStreamDefault);
    if (or_cpu_device_start_workers(&dev->hw, nthreads, or_device_worker_main, dev)) {
        fprintf(stderr, "openreg: cannot start %d worker threads for device %d\n", nthreads, id);
        return orErrorInitialization;
    }
    return orSuccess;
}

/* False if a worker did not stop (a host function that never returns):
 * then the device's memory stays, since that code may still use it. */
static bool device_stop_workers(or_device *dev)
{
    or_lock_acquire(&dev->lock);
    dev->stopping = true;
    or_notifier_signal(&dev->work);
    or_lock_release(&dev->lock);
    if (!or_cpu_device_join_workers(&dev->hw, 2000)) {
        OR_WARN("init", "device %d: a worker is still busy at exit; not freeing the device", dev->id);
        return false;
    }
    return true;
}

static void device_free(or_device *dev)
{
    while (dev->streams) {
        or_stream *s = dev->streams;
        dev->streams = s->next;
        or_stream_free_pending(s);
        if (s != &dev->default_stream)
            free(s);
    }
    or_arena_fini(&dev->arena);
    or_cpu_device_unmap(&dev->hw);
    or_placement_release(&dev->hw.place);
}

/* At exit: workers finish the queued work and stop, then everything is freed. */
static void runtime_teardown(void)
{
    bool stopped = true;
    for (int d = 0; d < or_rt.ndevices; d++)
        stopped &= device_stop_workers(&or_rt.devices[d]);
    /* Every rank stops its proxy together, so none stops serving a peer
     * that still needs it; remote copies in flight complete first. */
    or_proxy_stop();
    or_trace_flush(); /* written now: the devices' work is done */
    if (!stopped) {
        /* A busy worker may still record: the buffers stay. MPI is left
         * all the same (workers do not call it; the proxy has stopped):
         * every other rank's MPI_Finalize waits for this rank's. */
        or_cluster_finalize_mpi();
        return;
    }
    or_trace_fini();
    for (int d = 0; d < or_rt.ndevices; d++)
        device_free(&or_rt.devices[d]);
    free(or_rt.devices);
    or_rt.devices = NULL;
    or_rt.ndevices = 0;
    or_memory_fini();
    or_ipc_fini();
    or_placement_fini();
    or_vclock_fini();
    or_cluster_fini();
}

/* The application's MPI_Finalize: the proxy leaves MPI, and the trace is
 * written now in case the launcher ends the process before its exit. */
static void runtime_before_finalize(void)
{
    or_proxy_stop();
    or_trace_flush();
}

/* Tracks of the trace: a process per device, the default stream's thread. */
static orError_t trace_start(void)
{
    orError_t err = or_trace_start(or_rt.cfg.trace, or_rt.cfg.trace_buffer,
                                   or_rt.cfg.time == OR_TIME_VIRTUAL);
    if (err != orSuccess)
        return err;
    for (int d = 0; d < or_rt.ndevices; d++) {
        const or_device *dev = &or_rt.devices[d];
        char name[320];
        snprintf(name, sizeof name, "rank %d device %d (%s)", or_cl.rank, d, dev->prop.name);
        or_trace_name_track(dev->global_id, -1, name);
        or_trace_name_track(dev->global_id, 0, "default stream");
    }
    return orSuccess;
}

static void runtime_init(void)
{
    bool config_ok = or_config_load(&or_rt.cfg) == 0;
    if (config_ok)
        or_log_set_level((or_log_level)or_rt.cfg.debug);
    or_vclock_start(config_ok && or_rt.cfg.time == OR_TIME_VIRTUAL);
    int n = config_ok ? (int)or_rt.cfg.devices : 0;
    or_rt.init_error = or_cluster_init(&or_rt.cfg, n, config_ok);
    if (or_rt.init_error != orSuccess) {
        or_cluster_fini();
        return;
    }
    /* Before the workers start: their faults become errors. */
    if (or_fault_install())
        OR_WARN("init", "cannot install the fault handler: a kernel's illegal access will crash "
                        "the process");
    /* Devices share the real host with every rank on it. */
    or_rt.local_rank = or_cl.host_rank;
    or_rt.local_nranks = or_cl.host_nranks;
    or_placement *places = calloc((size_t)n, sizeof *places);
    char(*shm_names)[OR_SHM_NAME_MAX] = calloc((size_t)n, sizeof *shm_names);
    size_t *capacities = calloc((size_t)n, sizeof *capacities);
    or_rt.devices = calloc((size_t)n, sizeof *or_rt.devices);
    if (!places || !shm_names || !capacities || !or_rt.devices ||
        or_placement_compute(or_rt.local_rank, or_rt.local_nranks, n, places)) {
        fprintf(stderr, "openreg: cannot read the host topology (hwloc)\n");
        free(places);
        free(shm_names);
        free(capacities);
        or_rt.init_error = orErrorInitialization;
        or_cluster_fini();
        return;
    }
    /* Ranks of one virtual node map each other's device memory. */
    bool shared = or_cl.mpi && or_cl.node_nranks > 1;
    /* A process started alone may share its memory with the processes it starts. */
    bool family = !or_cl.mpi && or_rt.cfg.ipc_children;
    or_rt.ndevices = n; /* device_start sizes memory by it */
    int started = 0;
    while (started < n) {
        if (shared) {
            uint32_t salt;
            if (getrandom(&salt, sizeof salt, 0) != sizeof salt)
                salt = (uint32_t)or_now_ns();
            snprintf(shm_names[started], OR_SHM_NAME_MAX, "/openreg-%016llx-r%d-d%d-%08x",
                     (unsigned long long)or_cl.job_id, or_cl.rank, started, salt);
        }
        or_rt.init_error = device_start(&or_rt.devices[started], started, &places[started],
                                        shared ? shm_names[started] : NULL, family);
        capacities[started] = or_rt.devices[started].hw.capacity;
        started++;
        if (or_rt.init_error != orSuccess)
            break;
    }
    for (int d = started; d < n; d++)
        or_placement_release(&places[d]);
    or_rt.ndevices = started;
    free(places);
    if (or_rt.init_error == orSuccess)
        or_rt.init_error = or_ipc_family_init(family);
    if (or_rt.init_error == orSuccess && or_rt.cfg.trace)
        or_rt.init_error = trace_start();
    /* Every rank goes through each collective step below, and they agree on
     * the outcome after each, so one rank's failure never strands the rest. */
    if (!or_cluster_agree(or_rt.init_error == orSuccess)) {
        or_rt.init_error = orErrorInitialization;
        if (shared)
            for (int d = 0; d < started; d++)
                shm_unlink(shm_names[d]);
    } else {
        or_rt.init_error = or_cluster_map_peers(n, shm_names, capacities);
        if (!or_cluster_agree(or_rt.init_error == orSuccess))
            or_rt.init_error = orErrorInitialization;
    }
    free(shm_names);
    free(capacities);
    if (or_rt.init_error == orSuccess)
        or_rt.init_error = or_proxy_start();
    if (or_rt.init_error != orSuccess) {
        runtime_teardown();
        return;
    }
    or_cluster_before_finalize = runtime_before_finalize;
    atexit(runtime_teardown);
    for (int d = 0; d < n; d++)
        OR_INFO("init", "device %d: %s, %zu bytes, %d threads, cpus %s, NUMA node %d", d,
                or_rt.devices[d].prop.name, or_rt.devices[d].prop.totalGlobalMem,
                or_rt.devices[d].prop.multiProcessorCount, or_rt.devices[d].prop.cpuList,
                or_rt.devices[d].prop.numaNode);
}

static atomic_bool init_done;

static void runtime_init_once(void)
{
    runtime_init();
    atomic_store(&init_done, true);
}

orError_t or_init(void)
{
    /* Every API call starts here: once the runtime is up, one load (the
     * store of init_done follows init_error's last store). */
    if (!atomic_load_explicit(&init_done, memory_order_acquire))
        pthread_once(&init_once, runtime_init_once);
    return or_rt.init_error;
}

bool or_init_finished(void) { return atomic_load(&init_done); }

/* Called by each worker thread before it runs anything. */
void or_mark_worker_thread(int device)
{
    worker_thread = true;
    current_device = device;
}

/* Strict mode toggles only up to each arena's high-water mark: beyond it
 * nothing was ever allocated and the pages stay PROT_NONE from start-up.
 * That keeps the mprotect calls proportional to memory in use. */
static void strict_set_all(bool readable)
{
    for (int d = 0; d < or_rt.ndevices; d++) {
        or_device *dev = &or_rt.devices[d];
        if (or_rt.cfg.memcheck) /* guard pages and freed blocks stay closed */
            or_memcheck_set_readable(dev, readable);
        else
            or_cpu_device_set_readable(&dev->hw, atomic_load(&dev->strict_extent), readable);
    }
}

void or_strict_enter(void)
{
    if (!or_rt.cfg.strict)
        return;
    pthread_mutex_lock(&or_rt.strict_lock);
    if (or_rt.strict_open++ == 0)
        strict_set_all(true);
    pthread_mutex_unlock(&or_rt.strict_lock);
}

void or_strict_leave(void)
{
    if (!or_rt.cfg.strict)
        return;
    pthread_mutex_lock(&or_rt.strict_lock);
    if (--or_rt.strict_open == 0)
        strict_set_all(false);
    pthread_mutex_unlock(&or_rt.strict_lock);
}

void or_strict_grow(or_device *dev, size_t high_water)
{
    if (!or_rt.cfg.strict)
        return;
    pthread_mutex_lock(&or_rt.strict_lock);
    if (high_water > atomic_load(&dev->strict_extent)) {
        atomic_store(&dev->strict_extent, high_water);
        /* A window is open: the new allocation must be readable in it too. */
        if (or_rt.strict_open > 0)
            or_cpu_device_set_readable(&dev->hw, high_water, true);
    }
    pthread_mutex_unlock(&or_rt.strict_lock);
}

/* ---- public: devices ---------------------------------------------------- */

orError_t orGetDeviceCount(int *count)
{
    OR_API_BEGIN();
    if (!count)
        OR_RETURN(orErrorInvalidValue);
    *count = or_rt.ndevices;
    return orSuccess;
}

orError_t orSetDevice(int device)
{
    OR_API_BEGIN();
    if (device < 0 || device >= or_rt.ndevices)
        OR_RETURN(orErrorInvalidDevice);
    current_device = device;
    return orSuccess;
}

orError_t orGetDevice(int *device)
{
    OR_API_BEGIN();
    if (!device)
        OR_RETURN(orErrorInvalidValue);
    *device = current_device;
    return orSuccess;
}

orError_t orGetDeviceProperties(orDeviceProp *prop, int device)
{
    OR_API_BEGIN();
    if (!prop)
        OR_RETURN(orErrorInvalidValue);
    if (device < 0 || device >= or_rt.ndevices)
        OR_RETURN(orErrorInvalidDevice);
    *prop = or_rt.devices[device].prop;
    return orSuccess;
}

orError_t orDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    OR_API_BEGIN();
    if (leastPriority)
        *leastPriority = OR_PRIORITY_LEAST;
    if (greatestPriority)
        *greatestPriority = OR_PRIORITY_GREATEST;
    return orSuccess;
}

orError_t orGetClusterInfo(orClusterInfo *info)
{
    OR_API_BEGIN();
    if (!info)
        OR_RETURN(orErrorInvalidValue);
    *info = (orClusterInfo){
        .rank = or_cl.rank,
        .nranks = or_cl.nranks,
        .node = or_cl.node,
        .nnodes = or_cl.nnodes,
        .deviceCount = or_rt.ndevices,
        .globalDeviceCount = or_cl.first_device[or_cl.nranks],
        .firstGlobalDevice = or_cl.first_device[or_cl.rank],
        .nodeRank = or_cl.node_rank,
        .nodeRanks = or_cl.node_nranks,
    };
    return orSuccess;
}

orError_t orDeviceSynchronize(void)
{
    OR_API_BEGIN();
    if (or_in_worker())
        OR_RETURN(orErrorNotPermitted);
    or_device *dev = or_current_device();

    /* Pin every stream with its current tail so a concurrent orStreamDestroy
     * waits for us instead of freeing what we wait on. */
    or_lock_acquire(&dev->lock);
    size_t n = 0, cap = 16;
    struct pinned { or_stream *s; uint64_t seq; } *pins = malloc(cap * sizeof *pins);
    for (or_stream *s = dev->streams; s && pins; s = s->next) {
        if (n == cap) {
            struct pinned *grown = realloc(pins, 2 * cap * sizeof *pins);
            if (!grown)
                break;
            pins = grown;
            cap *= 2;
        }
        atomic_fetch_add(&s->pins, 1);
        pins[n].s = s;
        pins[n].seq = s->last_seq;
        n++;
    }
    or_lock_release(&dev->lock);
    if (!pins)
        OR_RETURN(orErrorMemoryAllocation);
    orError_t err = orSuccess;
    for (size_t i = 0; i < n; i++) {
        or_stream_wait_seq(pins[i].s, pins[i].seq);
        orError_t e = or_stream_take_error(pins[i].s);
        if (err == orSuccess)
            err = e;
    }
    /* Virtual time: the host resumes when the latest stream ends (read
     * after the waits: a held task sets its stream's clock when it runs). */
    uint64_t vt = 0;
    for (size_t i = 0; or_vt_on && i < n; i++) {
        uint64_t t = or_vclock_stream(pins[i].s);
        vt = t > vt ? t : vt;
    }

    or_lock_acquire(&dev->lock);
    for (size_t i = 0; i < n; i++) {
        atomic_fetch_sub(&pins[i].s->pins, 1);
        or_notifier_signal(&pins[i].s->done);
    }
    or_lock_release(&dev->lock);
    free(pins);
    if (or_vt_on)
        or_vclock_host_sync(vt);
    OR_RETURN(err);
}
