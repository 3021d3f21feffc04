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
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
    pthread_mutex_lock(&dev->lock);
    bool was = dev->peer_enabled[peerDevice];
    dev->peer_enabled[peerDevice] = true;
    pthread_mutex_unlock(&dev->lock);
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
    pthread_mutex_lock(&dev->lock);
    bool was = dev->peer_enabled[peerDevice];
    dev->peer_enabled[peerDevice] = false;
    pthread_mutex_unlock(&dev->lock);
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

orError_t orIpcOpenMemHandle(void **devPtr, orIpcMemHandle_t handle, unsigned int flags)
{
    OR_API_BEGIN();
    if (!devPtr || (flags & ~(unsigned)orIpcMemLazyEnablePeerAccess))
        OR_RETURN(orErrorInvalidValue);
    if (or_in_worker())
        OR_RETURN(orErrorNotPermitted);
    ipc_wire w;
    memcpy(&w, handle.reserved, sizeof w);
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
    if (err == orSuccess && nmaps == cap_maps) {
        size_t cap = cap_maps ? 2 * cap_maps : 8;
        or_ipc_map *grown = realloc(maps, cap * sizeof *grown);
        if (grown) {
            maps = grown;
            cap_maps = cap;
        } else {
            err = orErrorMemoryAllocation;
            if (remote)
                munmap(addr, size ? size : 1);
        }
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

void or_ipc_fini(void)
{
    pthread_mutex_lock(&maps_lock);
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].remote)
            munmap(maps[i].addr, maps[i].size ? maps[i].size : 1);
    free(maps);
    maps = NULL;
    nmaps = cap_maps = 0;
    atomic_store(&nremote, 0);
    pthread_mutex_unlock(&maps_lock);
}
