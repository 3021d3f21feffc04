/*
 * src/peer.c - peer access between devices, peer copies, and IPC memory
 * handles that let any rank of the job name another rank's allocation.
 *
 * A handle names (owner rank, device, offset, allocation id) and carries a
 * SipHash of those under the job's secret key: a forged or corrupted handle,
 * or one of another job, fails authentication. Opening asks the owner's
 * proxy whether the allocation is still the same live one (a stale handle is
 * refused). On the owner's virtual node the opened pointer is the owner's
 * memory itself, through the node's shared arena mappings; on another node it
 * is a reserved, inaccessible address range whose copies the proxies carry
 * out over MPI.
 *
 * A process started alone with OPENREG_IPC_CHILDREN=1 also shares with the
 * processes it starts (its "children", which are no MPI ranks): its device
 * memory is a memfd segment, and OPENREG_IPC_PARENT in its environment tells
 * a child its job identity and where to map that memory (/proc/PID/fd/FD).
 * Such a child opens the parent's handles; an export table (one slot per
 * 256-byte block, shared read-only with the children) says which exported
 * allocations are still live, so that a stale handle is refused as in a job.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "proxy.h"
#include "siphash.h"

#define IPC_MAGIC 0x4f52495043763031ULL /* "ORIPCv01" */

/* The handle's layout inside its 64 opaque bytes. */
typedef struct ipc_wire {
    uint64_t magic;
    uint64_t job_id;
    int32_t rank, device;
    uint64_t offset, size, alloc_id;
    uint64_t mac; /* over every field above */
} ipc_wire;
_Static_assert(sizeof(ipc_wire) <= sizeof(orIpcMemHandle_t), "handle layout fits");

static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static or_ipc_map *maps;
static size_t nmaps, cap_maps;
static _Atomic size_t nremote; /* remote maps open: kernel launches check their args */

/* Sharing with child processes (OPENREG_IPC_CHILDREN / OPENREG_IPC_PARENT). */
#define FAMILY_RANK (-1) /* the owner rank of maps of the parent's memory */
typedef struct family_device {
    int arena_fd, table_fd; /* the parent's descriptors (in the parent's fd table) */
    size_t capacity;
    unsigned char *base;    /* mapped on first use (child side) */
    _Atomic uint64_t *slots; /* alloc id of the exported allocation starting at each block */
} family_device;
static family_device *exports; /* ours, one per device, NULL unless exporting */
static int nexports;
static struct {
    bool present;
    long pid;
    uint64_t job_id, key[2];
    int ndevices;
    family_device *dev;
} parent;

/* ---- peer access ---------------------------------------------------------- */

static bool valid_device(int d) { return d >= 0 && d < or_rt.ndevices; }

orError_t orDeviceCanAccessPeer(int *canAccess, int device, int peerDevice)
{
    OR_API_BEGIN();
    if (!canAccess)
        OR_RETURN(orErrorInvalidValue);
    if (!valid_device(device) || !valid_device(peerDevice))
        OR_RETURN(orErrorInvalidDevice);
    /* Devices of one process share an address space; a device is not its own peer. */
    *canAccess = device != peerDevice;
    return orSuccess;
}

orError_t orDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    OR_API_BEGIN();
    if (flags != 0)
        OR_RETURN(orErrorInvalidValue);
    or_device *dev = or_current_device();
    if (!valid_device(peerDevice) || peerDevice == dev->id)
        OR_RETURN(orErrorInvalidDevice);
    or_lock_acquire(&dev->lock);
    bool was = dev->peer_enabled[peerDevice];
    dev->peer_enabled[peerDevice] = true;
    or_lock_release(&dev->lock);
    if (was)
        OR_RETURN(orErrorPeerAccessAlreadyEnabled);
    return orSuccess;
}

orError_t orDeviceDisablePeerAccess(int peerDevice)
{
    OR_API_BEGIN();
    or_device *dev = or_current_device();
    if (!valid_device(peerDevice) || peerDevice == dev->id)
        OR_RETURN(orErrorInvalidDevice);
    or_lock_acquire(&dev->lock);
    bool was = dev->peer_enabled[peerDevice];
    dev->peer_enabled[peerDevice] = false;
    or_lock_release(&dev->lock);
    if (!was)
        OR_RETURN(orErrorPeerAccessNotEnabled);
    return orSuccess;
}

/* dst and src must be live allocations of the named devices. */
static orError_t check_peer_ranges(void *dst, int dstDevice, const void *src, int srcDevice,
                                   size_t count)
{
    if (!valid_device(dstDevice) || !valid_device(srcDevice))
        return orErrorInvalidDevice;
    or_mem_region d, s;
    orError_t err = or_mem_classify_copy(dst, src, count, &d, &s);
    if (err != orSuccess)
        return err;
    if (!d.dev || d.dev->id != dstDevice || !s.dev || s.dev->id != srcDevice)
        return orErrorInvalidValue; /* not memory of the device the call names */
    return orSuccess;
}

orError_t orMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
    OR_API_BEGIN();
    if (count == 0)
        return orSuccess;
    orError_t err = check_peer_ranges(dst, dstDevice, src, srcDevice, count);
    if (err != orSuccess)
        OR_RETURN(err);
    OR_RETURN(orMemcpy(dst, src, count, orMemcpyDeviceToDevice));
}

orError_t orMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                            size_t count, orStream_t stream)
{
    OR_API_BEGIN();
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err != orSuccess)
        OR_RETURN(err);
    if (count == 0)
        return orSuccess;
    if ((err = check_peer_ranges(dst, dstDevice, src, srcDevice, count)) != orSuccess)
        OR_RETURN(err);
    OR_RETURN(orMemcpyAsync(dst, src, count, orMemcpyDeviceToDevice, stream));
}

/* ---- IPC handles ----------------------------------------------------------- */

static uint64_t wire_mac(const ipc_wire *w)
{
    return or_siphash24(w, offsetof(ipc_wire, mac), or_cl.job_key);
}

orError_t orIpcGetMemHandle(orIpcMemHandle_t *handle, void *devPtr)
{
    OR_API_BEGIN();
    if (!handle || !devPtr)
        OR_RETURN(orErrorInvalidValue);
    or_device *dev;
    or_extent alloc;
    orError_t err = or_mem_allocation_of(devPtr, &dev, &alloc);
    if (err != orSuccess)
        OR_RETURN(err);
    /* As CUDA: the handle names the whole allocation holding devPtr. */
    ipc_wire w = {IPC_MAGIC, or_cl.job_id, or_cl.rank, dev->id, alloc.off, alloc.requested,
                  alloc.id, 0};
    w.mac = wire_mac(&w);
    if (exports && dev->id < nexports)
        atomic_store_explicit(&exports[dev->id].slots[alloc.off / OR_ARENA_ALIGN], alloc.id,
                              memory_order_release);
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &w, sizeof w);
    return orSuccess;
}

static or_ipc_map *find_map_locked(int rank, int device, uint64_t alloc_id)
{
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].rank == rank && maps[i].device == device && maps[i].alloc_id == alloc_id)
            return &maps[i];
    return NULL;
}

static const or_peer_arena *peer_arena(int rank, int device)
{
    for (int i = 0; i < or_cl.npeers; i++)
        if (or_cl.peers[i].rank == rank && or_cl.peers[i].device == device)
            return &or_cl.peers[i];
    return NULL;
}

/* Room for one more entry in maps (maps_lock held); false when out of memory. */
static bool reserve_map_locked(void)
{
    if (nmaps < cap_maps)
        return true;
    size_t cap = cap_maps ? 2 * cap_maps : 8;
    or_ipc_map *grown = realloc(maps, cap * sizeof *grown);
    if (!grown)
        return false;
    maps = grown;
    cap_maps = cap;
    return true;
}

/* Map the parent's device memory and export table of device d (maps_lock held). */
static orError_t map_parent_device(int d)
{
    family_device *f = &parent.dev[d];
    if (f->base)
        return orSuccess;
    char path[64];
    size_t nslots = f->capacity / OR_ARENA_ALIGN;
    snprintf(path, sizeof path, "/proc/%ld/fd/%d", parent.pid, f->arena_fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    void *base = fd < 0 ? MAP_FAILED
                        : mmap(NULL, f->capacity, PROT_READ | PROT_WRITE,
                               MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (fd >= 0)
        close(fd);
    if (base == MAP_FAILED) {
        OR_INFO("ipc", "cannot map the parent's device %d (%s): has process %ld exited?", d,
                path, parent.pid);
        return orErrorInvalidDevicePointer;
    }
    snprintf(path, sizeof path, "/proc/%ld/fd/%d", parent.pid, f->table_fd);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    void *slots = fd < 0 ? MAP_FAILED
                         : mmap(NULL, nslots * sizeof(uint64_t), PROT_READ,
                                MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (fd >= 0)
        close(fd);
    if (slots == MAP_FAILED) {
        munmap(base, f->capacity);
        OR_INFO("ipc", "cannot map the parent's export table of device %d (%s)", d, path);
        return orErrorInvalidDevicePointer;
    }
    f->base = base;
    f->slots = slots;
    return orSuccess;
}

/* A handle made by the parent process (authenticated by the caller's check of
 * the job id; the MAC is checked here with the parent's key). */
static orError_t open_parent_handle(void **devPtr, const ipc_wire *w)
{
    if (w->mac != or_siphash24(w, offsetof(ipc_wire, mac), parent.key) || w->rank != 0 ||
        w->device < 0 || w->device >= parent.ndevices || w->offset % OR_ARENA_ALIGN ||
        w->offset >= parent.dev[w->device].capacity ||
        w->size > parent.dev[w->device].capacity - w->offset) {
        OR_INFO("ipc", "rejected an IPC handle: not made by the parent's orIpcGetMemHandle");
        return orErrorInvalidResourceHandle;
    }
    pthread_mutex_lock(&maps_lock);
    orError_t err = map_parent_device(w->device);
    family_device *f = &parent.dev[w->device];
    if (err == orSuccess &&
        atomic_load_explicit(&f->slots[w->offset / OR_ARENA_ALIGN], memory_order_acquire) !=
            w->alloc_id)
        err = orErrorInvalidDevicePointer; /* freed (and maybe reused) since */
    or_ipc_map *m = err == orSuccess ? find_map_locked(FAMILY_RANK, w->device, w->alloc_id) : NULL;
    if (m) {
        m->refs++;
        *devPtr = m->addr;
    } else if (err == orSuccess && !reserve_map_locked()) {
        err = orErrorMemoryAllocation;
    }
    if (err == orSuccess && !m) {
        unsigned char *addr = f->base + w->offset;
        maps[nmaps++] = (or_ipc_map){addr,     w->size, FAMILY_RANK, w->device, w->offset,
                                     w->alloc_id, false,   1,           or_current_device()->id};
        *devPtr = addr;
    }
    pthread_mutex_unlock(&maps_lock);
    return err;
}

orError_t orIpcOpenMemHandle(void **devPtr, orIpcMemHandle_t handle, unsigned int flags)
{
    OR_API_BEGIN();
    if (!devPtr || (flags & ~(unsigned)orIpcMemLazyEnablePeerAccess))
        OR_RETURN(orErrorInvalidValue);
    if (or_in_worker())
        OR_RETURN(orErrorNotPermitted);
    ipc_wire w;
    memcpy(&w, handle.reserved, sizeof w);
    if (parent.present && w.magic == IPC_MAGIC && w.job_id == parent.job_id &&
        w.job_id != or_cl.job_id)
        OR_RETURN(open_parent_handle(devPtr, &w));
    if (w.magic != IPC_MAGIC || w.job_id != or_cl.job_id || w.mac != wire_mac(&w) ||
        w.rank < 0 || w.rank >= or_cl.nranks || w.device < 0 ||
        w.device >= or_cl.first_device[w.rank + 1] - or_cl.first_device[w.rank]) {
        OR_INFO("ipc", "rejected an IPC handle: not made by this job's orIpcGetMemHandle");
        OR_RETURN(orErrorInvalidResourceHandle);
    }

    /* Is it still the allocation the handle was made for? Ask its owner. */
    uint64_t size = 0;
    unsigned char *local = NULL;
    if (w.rank == or_cl.rank) {
        void *p;
        orError_t err = or_mem_resolve(w.device, w.offset, 0, w.alloc_id, &p, &size);
        if (err != orSuccess)
            OR_RETURN(err);
        local = p;
    } else {
        or_proxy_req req = {.kind = OR_PROXY_VALIDATE, .peer = w.rank, .device = w.device,
                            .offset = w.offset, .alloc_id = w.alloc_id};
        orError_t err = or_proxy_call(&req);
        if (err != orSuccess)
            OR_RETURN(err);
        size = req.size;
    }

    pthread_mutex_lock(&maps_lock);
    or_ipc_map *m = find_map_locked(w.rank, w.device, w.alloc_id);
    if (m) { /* opened before (maybe closed since): the same pointer, one more reference */
        m->refs++;
        *devPtr = m->addr;
        pthread_mutex_unlock(&maps_lock);
        return orSuccess;
    }
    orError_t err = orSuccess;
    bool remote = or_cl.rank_node[w.rank] != or_cl.node;
    unsigned char *addr = local;
    if (!addr && !remote) {
        const or_peer_arena *pa = peer_arena(w.rank, w.device);
        if (pa && w.offset + size <= pa->capacity)
            addr = pa->base + w.offset;
        else
            err = orErrorInvalidResourceHandle;
    } else if (!addr) {
        /* A unique address nobody may touch: copies recognize it, kernels fault. */
        void *p = mmap(NULL, size ? size : 1, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            err = orErrorMemoryAllocation;
        else
            addr = p;
    }
    if (err == orSuccess && !reserve_map_locked()) {
        err = orErrorMemoryAllocation;
        if (remote)
            munmap(addr, size ? size : 1);
    }
    if (err == orSuccess) {
        maps[nmaps++] = (or_ipc_map){addr,     size,       w.rank, w.device, w.offset,
                                     w.alloc_id, remote, 1, or_current_device()->id};
        if (remote)
            atomic_fetch_add(&nremote, 1);
        *devPtr = addr;
    }
    pthread_mutex_unlock(&maps_lock);
    OR_RETURN(err);
}

orError_t orIpcCloseMemHandle(void *devPtr)
{
    OR_API_BEGIN();
    if (!devPtr)
        OR_RETURN(orErrorInvalidValue);
    pthread_mutex_lock(&maps_lock);
    size_t i = 0;
    while (i < nmaps && maps[i].addr != devPtr)
        i++;
    if (i == nmaps || maps[i].refs == 0) {
        pthread_mutex_unlock(&maps_lock);
        OR_RETURN(orErrorInvalidDevicePointer); /* never opened, or closed already */
    }
    if (--maps[i].refs == 0) {
        /* A closed remote range stays reserved and known, so a late use of
         * its address is refused rather than taken for host memory. */
        if (!maps[i].remote)
            maps[i] = maps[--nmaps];
    }
    pthread_mutex_unlock(&maps_lock);
    return orSuccess;
}

bool or_ipc_lookup(const void *p, or_ipc_map *out)
{
    if (!nmaps)
        return false;
    bool found = false;
    pthread_mutex_lock(&maps_lock);
    for (size_t i = 0; i < nmaps && !found; i++) {
        uintptr_t a = (uintptr_t)p, base = (uintptr_t)maps[i].addr;
        if (a >= base && a - base < (maps[i].size ? maps[i].size : 1)) {
            *out = maps[i];
            found = true;
        }
    }
    pthread_mutex_unlock(&maps_lock);
    return found;
}

bool or_ipc_args_name_remote(const void *args, size_t size)
{
    if (!atomic_load(&nremote) || !args)
        return false;
    const unsigned char *a = args;
    for (size_t i = 0; i + sizeof(void *) <= size; i += sizeof(void *)) {
        void *p;
        memcpy(&p, a + i, sizeof p);
        or_ipc_map m;
        if (or_ipc_lookup(p, &m) && m.remote)
            return true;
    }
    return false;
}

/* ---- sharing with child processes ----------------------------------------- */

static void parse_parent(const char *env)
{
    long pid;
    unsigned long long id, k0, k1;
    int nd, used;
    if (sscanf(env, "%ld:%llx:%llx:%llx:%d%n", &pid, &id, &k0, &k1, &nd, &used) != 5 ||
        nd < 1 || nd > 256)
        goto bad;
    family_device *dev = calloc((size_t)nd, sizeof *dev);
    if (!dev)
        return;
    const char *p = env + used;
    for (int d = 0; d < nd; d++) {
        int a, t, n;
        unsigned long long cap;
        if (sscanf(p, ":%d,%d,%llu%n", &a, &t, &cap, &n) != 3 || cap % OR_ARENA_ALIGN) {
            free(dev);
            goto bad;
        }
        dev[d] = (family_device){a, t, (size_t)cap, NULL, NULL};
        p += n;
    }
    parent.pid = pid;
    parent.job_id = id;
    parent.key[0] = k0;
    parent.key[1] = k1;
    parent.ndevices = nd;
    parent.dev = dev;
    parent.present = true;
    return;
bad:
    OR_WARN("ipc", "OPENREG_IPC_PARENT is malformed; the parent's IPC handles will be refused");
}

orError_t or_ipc_family_init(bool export_to_children)
{
    const char *env = or_rt.cfg.ipc_parent; /* read at start-up, before ours is set below */
    if (env)
        parse_parent(env);
    if (!export_to_children)
        return orSuccess;
    int n = or_rt.ndevices;
    exports = calloc((size_t)n, sizeof *exports);
    size_t len = 128 + (size_t)n * 48;
    char *text = malloc(len);
    if (!exports || !text) {
        free(text);
        return orErrorMemoryAllocation;
    }
    nexports = n;
    for (int d = 0; d < n; d++)
        exports[d].table_fd = -1;
    int pos = snprintf(text, len, "%ld:%016" PRIx64 ":%016" PRIx64 ":%016" PRIx64 ":%d",
                       (long)getpid(), or_cl.job_id, or_cl.job_key[0], or_cl.job_key[1], n);
    for (int d = 0; d < n; d++) {
        const or_device *dev = &or_rt.devices[d];
        family_device *f = &exports[d];
        size_t nslots = dev->hw.capacity / OR_ARENA_ALIGN;
        int fd = memfd_create("openreg-exports", MFD_CLOEXEC);
        void *slots = fd < 0 || ftruncate(fd, (off_t)(nslots * sizeof(uint64_t)))
                          ? MAP_FAILED
                          : mmap(NULL, nslots * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_NORESERVE, fd, 0);
        if (slots == MAP_FAILED) {
            if (fd >= 0)
                close(fd);
            fprintf(stderr, "openreg: OPENREG_IPC_CHILDREN: cannot make the export table of "
                            "device %d\n", d);
            free(text);
            return orErrorInitialization;
        }
        *f = (family_device){dev->hw.memfd, fd, dev->hw.capacity, dev->hw.base, slots};
        pos += snprintf(text + pos, len - (size_t)pos, ":%d,%d,%zu", f->arena_fd, fd,
                        f->capacity);
    }
    /* The children's environment: spawned processes inherit it. */
    setenv("OPENREG_IPC_PARENT", text, 1);
    free(text);
    return orSuccess;
}

void or_ipc_family_forget(const or_device *dev, size_t off)
{
    if (!exports || dev->id >= nexports)
        return;
    _Atomic uint64_t *slot = &exports[dev->id].slots[off / OR_ARENA_ALIGN];
    /* Read first: a block never exported keeps its page of the table untouched. */
    if (atomic_load_explicit(slot, memory_order_relaxed))
        atomic_store_explicit(slot, 0, memory_order_release);
}

void or_ipc_fini(void)
{
    pthread_mutex_lock(&maps_lock);
    for (int d = 0; d < nexports; d++) {
        munmap((void *)exports[d].slots,
               exports[d].capacity / OR_ARENA_ALIGN * sizeof(uint64_t));
        close(exports[d].table_fd);
    }
    free(exports);
    exports = NULL;
    nexports = 0;
    for (int d = 0; parent.present && d < parent.ndevices; d++)
        if (parent.dev[d].base) {
            munmap(parent.dev[d].base, parent.dev[d].capacity);
            munmap((void *)parent.dev[d].slots,
                   parent.dev[d].capacity / OR_ARENA_ALIGN * sizeof(uint64_t));
        }
    free(parent.dev);
    parent.dev = NULL;
    parent.present = false;
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].remote)
            munmap(maps[i].addr, maps[i].size ? maps[i].size : 1);
    free(maps);
    maps = NULL;
    nmaps = cap_maps = 0;
    atomic_store(&nremote, 0);
    pthread_mutex_unlock(&maps_lock);
}
