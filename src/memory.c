/*
 * src/memory.c - device allocations, pinned host memory, copies and memsets.
 *
 * Device memory of device d is [base, base + capacity) of its mapping; an
 * address there is device memory only while it lies in a live allocation.
 * Every device-side range a call names is checked against its allocation,
 * so no copy writes past what the user owns.
 */
#include "internal.h"
#include "proxy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The device whose mapping holds p, or NULL. */
static or_device *device_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    for (int d = 0; d < or_rt.ndevices; d++) {
        or_device *dev = &or_rt.devices[d];
        uintptr_t base = (uintptr_t)dev->hw.base;
        if (a >= base && a - base < dev->hw.capacity)
            return dev;
    }
    return NULL;
}

_Atomic uint64_t or_mem_frees;

uint64_t or_mem_free_count(void) { return atomic_load(&or_mem_frees); }

/* The live allocation of dev holding p. */
static bool allocation_of(or_device *dev, const void *p, or_extent *alloc)
{
    size_t off = (size_t)((const unsigned char *)p - dev->hw.base);
    pthread_mutex_lock(&dev->mem_lock);
    bool found = or_arena_find(&dev->arena, off, alloc) == 0;
    pthread_mutex_unlock(&dev->mem_lock);
    return found;
}

orError_t or_mem_allocation_of(const void *p, or_device **dev_out, or_extent *alloc)
{
    or_device *dev = device_of(p);
    if (!dev)
        return or_cluster_peer_of(p) ? orErrorInvalidDevicePointer : orErrorInvalidValue;
    if (!allocation_of(dev, p, alloc))
        return orErrorInvalidDevicePointer;
    *dev_out = dev;
    return orSuccess;
}

orError_t or_mem_classify(const void *p, size_t count, or_mem_region *out)
{
    or_device *dev = device_of(p);
    if (dev) {
        or_extent alloc;
        if (!allocation_of(dev, p, &alloc))
            return orErrorInvalidDevicePointer;
        size_t off = (size_t)((const unsigned char *)p - dev->hw.base);
        /* Bounded by what was asked for, not the rounded block. */
        size_t end = alloc.off + alloc.requested;
        if (off > end || count > end - off)
            return orErrorInvalidValue;
        *out = (or_mem_region){.cls = OR_MEM_DEVICE, .dev = dev};
        return orSuccess;
    }
    or_ipc_map map;
    if (or_ipc_lookup(p, &map)) {
        if (map.refs == 0)
            return orErrorInvalidDevicePointer; /* remote memory, closed */
        size_t off = (size_t)((const unsigned char *)p - map.addr);
        if (count > map.size - off)
            return orErrorInvalidValue;
        *out = (or_mem_region){.cls = map.remote ? OR_MEM_REMOTE : OR_MEM_DEVICE, .map = map};
        return orSuccess;
    }
    /* Another rank's device memory that was not opened with a handle. */
    if (or_cluster_peer_of(p))
        return orErrorInvalidDevicePointer;
    *out = (or_mem_region){.cls = OR_MEM_HOST};
    return orSuccess;
}

orError_t or_mem_classify_copy(const void *dst, const void *src, size_t count, or_mem_region *d,
                               or_mem_region *s)
{
    if (!dst || !src)
        return orErrorInvalidValue;
    orError_t err = or_mem_classify(dst, count, d);
    return err == orSuccess ? or_mem_classify(src, count, s) : err;
}

orError_t or_mem_resolve(int device, uint64_t offset, uint64_t length, uint64_t alloc_id,
                         void **ptr, uint64_t *size)
{
    if (device < 0 || device >= or_rt.ndevices)
        return orErrorInvalidDevice;
    or_device *dev = &or_rt.devices[device];
    if (offset >= dev->hw.capacity)
        return orErrorInvalidValue;
    or_extent alloc;
    if (!allocation_of(dev, dev->hw.base + offset, &alloc))
        return orErrorInvalidDevicePointer;
    if (alloc_id && (alloc.id != alloc_id || alloc.off != offset))
        return orErrorInvalidDevicePointer; /* freed, and maybe reused since */
    uint64_t end = alloc.off + alloc.requested;
    if (offset > end || length > end - offset)
        return orErrorInvalidValue;
    *ptr = dev->hw.base + offset;
    *size = alloc.requested;
    return orSuccess;
}

void or_memory_fini(void)
{
    pthread_mutex_lock(&or_rt.host_lock);
    for (size_t i = 0; i < or_rt.host_allocs.n; i++)
        munmap((void *)or_rt.host_allocs.v[i].off, or_rt.host_allocs.v[i].size);
    or_extent_set_free(&or_rt.host_allocs);
    pthread_mutex_unlock(&or_rt.host_lock);
}

/* ---- memcheck ------------------------------------------------------------- */

/* The bytes between an allocation's leading guard page and its block, and
 * those between its end and the trailing guard page (the slack of its size
 * rounded up to 256 bytes), hold this value while nothing writes there. */
#define CANARY 0xa5
static unsigned char canary_page[65536];
static pthread_once_t canary_once = PTHREAD_ONCE_INIT;
/* Live guarded allocations (all devices) that have canary bytes: none, and
 * the check after a kernel is skipped without taking any lock. */
static atomic_size_t canaried;

static void canary_init(void) { memset(canary_page, CANARY, sizeof canary_page); }

/* The bytes before the block (after the leading guard page) and after it. */
static size_t lead_gap(const or_device *dev, const or_extent *e) { return e->lead - dev->arena.page; }

static void canary_fill(unsigned char *p, size_t n)
{
    for (size_t done = 0; done < n; done += sizeof canary_page)
        memcpy(p + done, canary_page, n - done < sizeof canary_page ? n - done : sizeof canary_page);
}

/* Index of the first byte of [p, p + n) that is not the canary, or n. */
static size_t canary_intact(const unsigned char *p, size_t n)
{
    size_t at = 0;
    while (at < n) {
        size_t piece = n - at < sizeof canary_page ? n - at : sizeof canary_page;
        if (memcmp(p + at, canary_page, piece))
            break;
        at += piece;
    }
    while (at < n && p[at] == CANARY)
        at++;
    return at;
}

/* A guarded allocation's pages: its region without the two guard pages. */
static void block_pages(const or_device *dev, const or_extent *e, unsigned char **start,
                        size_t *len)
{
    size_t page = dev->arena.page;
    *start = dev->hw.base + (e->off - e->lead) + page;
    *len = e->lead + e->size - 2 * page;
}

/* Strict mode also closes the blocks outside its windows; the caller holds
 * strict_lock then, so no window opens or closes meanwhile. */
static bool blocks_readable(void) { return !or_rt.cfg.strict || or_rt.strict_open > 0; }

static orError_t guarded_alloc(or_device *dev, size_t size, void **out)
{
    pthread_once(&canary_once, canary_init);
    if (or_rt.cfg.strict)
        pthread_mutex_lock(&or_rt.strict_lock);
    pthread_mutex_lock(&dev->mem_lock);
    size_t off;
    or_extent e;
    int rc = or_arena_alloc(&dev->arena, size, &off);
    if (rc == 0)
        or_arena_find(&dev->arena, off, &e);
    unsigned char *start;
    size_t len;
    if (rc == 0) {
        block_pages(dev, &e, &start, &len);
        if (mprotect(start, len, PROT_READ | PROT_WRITE)) {
            size_t ignored;
            or_arena_free(&dev->arena, off, &ignored);
            rc = ENOMEM;
        }
    }
    if (rc == 0) {
        size_t gap = lead_gap(dev, &e), slack = or_arena_slack(&e);
        canary_fill(start, gap);
        canary_fill(dev->hw.base + e.off + e.requested, slack);
        if (gap || slack)
            atomic_fetch_add_explicit(&canaried, 1, memory_order_relaxed);
        if (!blocks_readable())
            mprotect(start, len, PROT_NONE);
    }
    size_t used = dev->arena.used;
    pthread_mutex_unlock(&dev->mem_lock);
    if (or_rt.cfg.strict)
        pthread_mutex_unlock(&or_rt.strict_lock);
    if (rc) {
        OR_INFO("memory", "device %d: cannot allocate %zu bytes with guard pages (%zu of %zu in "
                "use or quarantined)", dev->id, size, used, dev->arena.capacity);
        return orErrorMemoryAllocation;
    }
    *out = dev->hw.base + off;
    return orSuccess;
}

/* The block becomes unreachable at once, and its addresses stay out of use
 * while it is in the quarantine: a later access faults. */
static int guarded_free(or_device *dev, size_t off)
{
    if (or_rt.cfg.strict)
        pthread_mutex_lock(&or_rt.strict_lock);
    pthread_mutex_lock(&dev->mem_lock);
    or_extent e;
    int rc = or_arena_find(&dev->arena, off, &e) || e.off != off ? ENOENT : 0;
    size_t ignored;
    if (rc == 0)
        rc = or_arena_free(&dev->arena, off, &ignored);
    if (rc == 0) {
        unsigned char *start;
        size_t len;
        block_pages(dev, &e, &start, &len);
        mprotect(start, len, PROT_NONE);
        if (lead_gap(dev, &e) || or_arena_slack(&e))
            atomic_fetch_sub_explicit(&canaried, 1, memory_order_relaxed);
        or_ipc_family_forget(dev, off);
        or_cpu_device_discard(&dev->hw, e.off - e.lead, e.lead + e.size);
    }
    pthread_mutex_unlock(&dev->mem_lock);
    if (or_rt.cfg.strict)
        pthread_mutex_unlock(&or_rt.strict_lock);
    return rc;
}

void or_memcheck_set_readable(or_device *dev, bool readable)
{
    pthread_mutex_lock(&dev->mem_lock);
    for (size_t i = 0; i < dev->arena.live.n; i++) {
        unsigned char *start;
        size_t len;
        block_pages(dev, &dev->arena.live.v[i], &start, &len);
        mprotect(start, len, readable ? PROT_READ | PROT_WRITE : PROT_NONE);
    }
    pthread_mutex_unlock(&dev->mem_lock);
}

bool or_memcheck_canaries(void **addr, char *buf, size_t len)
{
    if (atomic_load_explicit(&canaried, memory_order_relaxed) == 0)
        return false;
    for (int d = 0; d < or_rt.ndevices; d++) {
        or_device *dev = &or_rt.devices[d];
        pthread_mutex_lock(&dev->mem_lock);
        for (size_t i = 0; i < dev->arena.live.n; i++) {
            const or_extent *e = &dev->arena.live.v[i];
            unsigned char *block = dev->hw.base + e->off;
            size_t gap = lead_gap(dev, e), slack = or_arena_slack(e);
            if (gap) {
                unsigned char *p = block - gap;
                size_t at = canary_intact(p, gap);
                if (at < gap) {
                    *addr = p + at; /* the written byte farthest from the block */
                    snprintf(buf, len, "%zu bytes before the start of allocation of %zu bytes at %p",
                             gap - at, e->requested, (void *)block);
                    memset(p, CANARY, gap); /* reported once */
                    pthread_mutex_unlock(&dev->mem_lock);
                    return true;
                }
            }
            if (slack) {
                unsigned char *p = block + e->requested;
                size_t at = canary_intact(p, slack);
                if (at < slack) {
                    *addr = p + at; /* the written byte nearest the block */
                    snprintf(buf, len, "%zu bytes past the end of allocation of %zu bytes at %p",
                             at, e->requested, (void *)block);
                    memset(p, CANARY, slack);
                    pthread_mutex_unlock(&dev->mem_lock);
                    return true;
                }
            }
        }
        pthread_mutex_unlock(&dev->mem_lock);
    }
    return false;
}

void or_mem_describe(const void *addr, char *buf, size_t len)
{
    or_device *dev = device_of(addr);
    if (!dev) {
        snprintf(buf, len, "%s", or_cluster_peer_of(addr)
                                     ? "another rank's device memory"
                                     : "not device memory of this process (host memory or unmapped)");
        return;
    }
    size_t off = (size_t)((const unsigned char *)addr - dev->hw.base);
    or_extent e;
    pthread_mutex_lock(&dev->mem_lock);
    or_arena_where where = OR_ARENA_NOWHERE;
    if (dev->arena.page)
        where = or_arena_locate(&dev->arena, off, &e);
    else if (or_arena_find(&dev->arena, off, &e) == 0)
        where = OR_ARENA_LIVE;
    pthread_mutex_unlock(&dev->mem_lock);
    const void *block = dev->hw.base + e.off;
    switch (where) {
    case OR_ARENA_LIVE:
        if (off >= e.off + e.requested)
            snprintf(buf, len, "%zu bytes past the end of allocation of %zu bytes at %p",
                     off - (e.off + e.requested), e.requested, block);
        else if (off < e.off)
            snprintf(buf, len, "%zu bytes before the start of allocation of %zu bytes at %p",
                     e.off - off, e.requested, block);
        else
            snprintf(buf, len, "byte %zu of allocation of %zu bytes at %p", off - e.off,
                     e.requested, block);
        return;
    case OR_ARENA_FREED:
        if (off >= e.off && off < e.off + e.requested)
            snprintf(buf, len, "byte %zu of freed allocation of %zu bytes at %p (use after free)",
                     off - e.off, e.requested, block);
        else
            snprintf(buf, len, "%zu bytes %s freed allocation of %zu bytes at %p (use after free)",
                     off < e.off ? e.off - off : off - (e.off + e.requested),
                     off < e.off ? "before the start of" : "past the end of", e.requested, block);
        return;
    case OR_ARENA_NOWHERE:
        break;
    }
    snprintf(buf, len, "device %d memory in no allocation (freed%s, or never allocated)", dev->id,
             dev->arena.page ? " and out of quarantine" : "");
}

/* ---- public: device memory ------------------------------------------------ */

orError_t orMalloc(void **devPtr, size_t size)
{
    OR_API_BEGIN();
    if (!devPtr)
        OR_RETURN(orErrorInvalidValue);
    if (size == 0) { /* as cudaMalloc: success, and nothing to free */
        *devPtr = NULL;
        return orSuccess;
    }
    or_device *dev = or_current_device();
    if (dev->arena.page) {
        void *p;
        orError_t err = guarded_alloc(dev, size, &p);
        if (err != orSuccess)
            OR_RETURN(err);
        *devPtr = p;
        return orSuccess;
    }
    size_t off;
    pthread_mutex_lock(&dev->mem_lock);
    int rc = or_arena_alloc(&dev->arena, size, &off);
    size_t high_water = dev->arena.high_water;
    pthread_mutex_unlock(&dev->mem_lock);
    if (rc) {
        OR_INFO("memory", "device %d: cannot allocate %zu bytes (%zu of %zu in use)", dev->id,
                size, dev->arena.used, dev->arena.capacity);
        OR_RETURN(orErrorMemoryAllocation);
    }
    or_strict_grow(dev, high_water);
    *devPtr = dev->hw.base + off;
    return orSuccess;
}

orError_t orFree(void *devPtr)
{
    OR_API_BEGIN();
    if (!devPtr)
        return orSuccess;
    or_device *dev = device_of(devPtr);
    if (!dev)
        OR_RETURN(orErrorInvalidDevicePointer);
    size_t off = (size_t)((unsigned char *)devPtr - dev->hw.base), size;
    int rc;
    if (dev->arena.page) {
        rc = guarded_free(dev, off);
    } else {
        pthread_mutex_lock(&dev->mem_lock);
        rc = or_arena_free(&dev->arena, off, &size);
        if (rc == 0) {
            or_ipc_family_forget(dev, off);
            or_cpu_device_discard(&dev->hw, off, size);
        }
        pthread_mutex_unlock(&dev->mem_lock);
    }
    if (rc == ENOMEM)
        OR_RETURN(orErrorMemoryAllocation);
    if (rc)
        OR_RETURN(orErrorInvalidDevicePointer);
    atomic_fetch_add(&or_mem_frees, 1);
    return orSuccess;
}

orError_t orMemGetInfo(size_t *free_bytes, size_t *total)
{
    OR_API_BEGIN();
    if (!free_bytes || !total)
        OR_RETURN(orErrorInvalidValue);
    or_device *dev = or_current_device();
    pthread_mutex_lock(&dev->mem_lock);
    *free_bytes = dev->arena.capacity - dev->arena.used;
    *total = dev->arena.capacity;
    pthread_mutex_unlock(&dev->mem_lock);
    return orSuccess;
}

/* ---- public: pinned host memory -------------------------------------------- */

orError_t orMallocHost(void **ptr, size_t size)
{
    OR_API_BEGIN();
    if (!ptr)
        OR_RETURN(orErrorInvalidValue);
    if (size == 0) {
        *ptr = NULL;
        return orSuccess;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (size > SIZE_MAX - page)
        OR_RETURN(orErrorMemoryAllocation);
    size_t len = (size + page - 1) & ~(page - 1);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        OR_RETURN(orErrorMemoryAllocation);
    /* Page-locked when RLIMIT_MEMLOCK allows; the copies work either way. */
    if (mlock(p, len))
        OR_TRACE("memory", "mlock of %zu bytes refused; host buffer stays pageable", len);
    pthread_mutex_lock(&or_rt.host_lock);
    int rc = or_extent_set_add(&or_rt.host_allocs, (or_extent){(size_t)p, len, size, 0, 0});
    pthread_mutex_unlock(&or_rt.host_lock);
    if (rc) {
        munmap(p, len);
        OR_RETURN(orErrorMemoryAllocation);
    }
    *ptr = p;
    return orSuccess;
}

orError_t orFreeHost(void *ptr)
{
    OR_API_BEGIN();
    if (!ptr)
        return orSuccess;
    or_extent e;
    pthread_mutex_lock(&or_rt.host_lock);
    int rc = or_extent_set_remove(&or_rt.host_allocs, (size_t)ptr, &e);
    pthread_mutex_unlock(&or_rt.host_lock);
    if (rc)
        OR_RETURN(orErrorHostMemoryNotRegistered);
    munmap(ptr, e.size);
    return orSuccess;
}

static bool is_pinned(const void *p)
{
    or_extent e;
    pthread_mutex_lock(&or_rt.host_lock);
    bool found = or_extent_set_find(&or_rt.host_allocs, (size_t)p, &e) == 0;
    pthread_mutex_unlock(&or_rt.host_lock);
    return found;
}

orError_t orPointerGetAttributes(orPointerAttributes *attr, const void *ptr)
{
    OR_API_BEGIN();
    if (!attr)
        OR_RETURN(orErrorInvalidValue);
    or_device *dev = device_of(ptr);
    or_extent alloc;
    or_ipc_map map;
    if (dev && allocation_of(dev, ptr, &alloc))
        *attr = (orPointerAttributes){orMemoryTypeDevice, dev->id, (void *)ptr};
    else if (!dev && or_ipc_lookup(ptr, &map) && map.refs > 0)
        *attr = (orPointerAttributes){map.remote ? orMemoryTypeRemote : orMemoryTypeDevice,
                                      map.opened_on, (void *)ptr};
    else if (ptr && !dev && is_pinned(ptr))
        *attr = (orPointerAttributes){orMemoryTypeHost, -1, (void *)ptr};
    else
        *attr = (orPointerAttributes){orMemoryTypeUnmanaged, -1, NULL};
    return orSuccess;
}

orError_t orMemoryUnprotect(void *devPtr)
{
    OR_API_BEGIN();
    or_device *dev;
    or_extent alloc;
    orError_t err = devPtr ? or_mem_allocation_of(devPtr, &dev, &alloc) : orErrorInvalidDevicePointer;
    if (err != orSuccess)
        OR_RETURN(orErrorInvalidDevicePointer);
    pthread_mutex_lock(&or_rt.strict_lock);
    or_rt.strict_user_windows++;
    pthread_mutex_unlock(&or_rt.strict_lock);
    or_strict_enter();
    return orSuccess;
}

orError_t orMemoryProtect(void *devPtr)
{
    OR_API_BEGIN();
    or_device *dev;
    or_extent alloc;
    orError_t err = devPtr ? or_mem_allocation_of(devPtr, &dev, &alloc) : orErrorInvalidDevicePointer;
    if (err != orSuccess)
        OR_RETURN(orErrorInvalidDevicePointer);
    pthread_mutex_lock(&or_rt.strict_lock);
    bool open = or_rt.strict_user_windows > 0;
    if (open)
        or_rt.strict_user_windows--;
    pthread_mutex_unlock(&or_rt.strict_lock);
    if (!open)
        OR_RETURN(orErrorInvalidValue);
    or_strict_leave();
    return orSuccess;
}

/* ---- public: copies and memsets -------------------------------------------- */

static bool is_device(const or_mem_region *r) { return r->cls != OR_MEM_HOST; }

/* The end of a copy as paths name it: a global device, or the host. */
static int32_t path_end(const or_mem_region *r)
{
    if (r->cls == OR_MEM_HOST)
        return OR_VT_HOST;
    if (r->dev)
        return r->dev->global_id;
    if (r->map.rank < 0) /* the parent process's memory: no device of this job; as the
                            device it was opened on (the same host's memory) */
        return or_vclock_global_device(r->map.opened_on);
    return or_cl.first_device[r->map.rank] + r->map.device;
}

/* A copy with one end on another node: the proxy moves the bytes, in pieces
 * of at most OR_PROXY_MAX_BYTES, one op each, linked through op->next. */
static orError_t remote_copy_ops(void *dst, const void *src, size_t count,
                                 const or_mem_region *d, const or_mem_region *s, or_op **out)
{
    if (d->cls == OR_MEM_REMOTE && s->cls == OR_MEM_REMOTE) {
        OR_INFO("memory", "copies between two remote allocations are not supported; stage "
                          "through local memory");
        return orErrorNotSupported;
    }
    if (!or_proxy_running())
        return orErrorNotSupported;
    const or_ipc_map *m = d->cls == OR_MEM_REMOTE ? &d->map : &s->map;
    const unsigned char *remote = d->cls == OR_MEM_REMOTE ? dst : src;
    unsigned char *local = d->cls == OR_MEM_REMOTE ? (unsigned char *)src : dst;
    or_op *first = NULL, **tail = &first;
    for (size_t done = 0; done < count; done += OR_PROXY_MAX_BYTES) {
        size_t piece = count - done < OR_PROXY_MAX_BYTES ? count - done : OR_PROXY_MAX_BYTES;
        or_op *op = or_op_new(OR_OP_REMOTE_COPY, sizeof(or_proxy_req));
        if (!op) {
            while (first) {
                or_op *next = first->next;
                or_op_release(first);
                first = next;
            }
            return orErrorMemoryAllocation;
        }
        or_proxy_req *req = (or_proxy_req *)op->payload;
        memset(req, 0, sizeof *req);
        req->kind = d->cls == OR_MEM_REMOTE ? OR_PROXY_PUT : OR_PROXY_GET;
        req->peer = m->rank;
        req->device = m->device;
        req->offset = m->offset + (uint64_t)(remote - m->addr) + done;
        req->length = piece;
        req->local = local + done;
        op->cost.bytes = piece;
        op->cost.src = path_end(s);
        op->cost.dst = path_end(d);
        *tail = op;
        tail = &op->next;
    }
    *out = first;
    return orSuccess;
}

/* Validate a copy and return the op(s) that perform it, linked through
 * op->next (see enqueue_all). */
static orError_t copy_prepare(void *dst, const void *src, size_t count, orMemcpyKind kind,
                              or_op **out)
{
    if ((unsigned)kind > orMemcpyDefault)
        return orErrorInvalidMemcpyDirection;
    or_mem_region d, s;
    orError_t err = or_mem_classify_copy(dst, src, count, &d, &s);
    if (err != orSuccess)
        return err;
    orMemcpyKind actual = is_device(&d) ? (is_device(&s) ? orMemcpyDeviceToDevice : orMemcpyHostToDevice)
                                        : (is_device(&s) ? orMemcpyDeviceToHost : orMemcpyHostToHost);
    if (kind != orMemcpyDefault && kind != actual) {
        OR_INFO("memory", "memcpy kind %d contradicts the pointers (they say %d)", (int)kind,
                (int)actual);
        return orErrorInvalidValue;
    }
    if (d.cls == OR_MEM_REMOTE || s.cls == OR_MEM_REMOTE)
        return remote_copy_ops(dst, src, count, &d, &s, out);
    or_op *op = or_op_new(OR_OP_COPY, 0);
    if (!op)
        return orErrorMemoryAllocation;
    op->u.copy.dst = dst;
    op->u.copy.src = src;
    op->u.copy.count = count;
    op->cost.bytes = count;
    op->cost.src = path_end(&s);
    op->cost.dst = path_end(&d);
    *out = op;
    return orSuccess;
}

static orError_t memset_prepare(void *devPtr, int value, size_t count, or_op **out)
{
    if (!devPtr)
        return orErrorInvalidValue;
    or_mem_region r;
    orError_t err = or_mem_classify(devPtr, count, &r);
    if (err != orSuccess)
        return err;
    if (r.cls == OR_MEM_HOST)
        return orErrorInvalidValue;
    if (r.cls == OR_MEM_REMOTE)
        return orErrorNotSupported;
    or_op *op = or_op_new(OR_OP_MEMSET, 0);
    if (!op)
        return orErrorMemoryAllocation;
    op->u.memset.dst = devPtr;
    op->u.memset.value = value;
    op->u.memset.count = count;
    op->cost.bytes = count;
    op->cost.src = op->cost.dst = path_end(&r);
    *out = op;
    return orSuccess;
}

/* Enqueue a chain of ops in order; the sequence number of the last. */
static uint64_t enqueue_all(or_stream *s, or_op *op)
{
    uint64_t seq = 0;
    while (op) {
        or_op *next = op->next;
        seq = or_stream_enqueue(s, op);
        op = next;
    }
    return seq;
}

/* Synchronous calls: after the default stream's queued work, return when done. */
static orError_t run_on_default_stream(or_op *op)
{
    or_stream *s = &or_current_device()->default_stream;
    uint64_t seq = enqueue_all(s, op);
    uint64_t vt = or_vt_on ? or_vclock_stream(s) : 0;
    or_stream_wait_seq(s, seq);
    if (or_vt_on) /* the host waited: what it issues next starts after */
        or_vclock_host_sync(vt);
    return or_stream_take_error(s);
}

orError_t orMemcpy(void *dst, const void *src, size_t count, orMemcpyKind kind)
{
    OR_API_BEGIN();
    if ((unsigned)kind > orMemcpyDefault)
        OR_RETURN(orErrorInvalidMemcpyDirection);
    if (count == 0)
        return orSuccess;
    if (or_in_worker())
        OR_RETURN(orErrorNotPermitted);
    or_op *op;
    orError_t err = copy_prepare(dst, src, count, kind, &op);
    if (err != orSuccess)
        OR_RETURN(err);
    if (op->kind == OR_OP_REMOTE_COPY) /* this thread waits for it: it may carry it */
        ((or_proxy_req *)op->payload)->caller_waits = true;
    OR_RETURN(run_on_default_stream(op));
}

orError_t orMemcpyAsync(void *dst, const void *src, size_t count, orMemcpyKind kind,
                        orStream_t stream)
{
    OR_API_BEGIN();
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err != orSuccess)
        OR_RETURN(err);
    if ((unsigned)kind > orMemcpyDefault)
        OR_RETURN(orErrorInvalidMemcpyDirection);
    if (count == 0)
        return orSuccess;
    or_op *op;
    if ((err = copy_prepare(dst, src, count, kind, &op)) != orSuccess)
        OR_RETURN(err);
    enqueue_all(s, op);
    return orSuccess;
}

orError_t orMemset(void *devPtr, int value, size_t count)
{
    OR_API_BEGIN();
    if (count == 0)
        return orSuccess;
    if (or_in_worker())
        OR_RETURN(orErrorNotPermitted);
    or_op *op;
    orError_t err = memset_prepare(devPtr, value, count, &op);
    if (err != orSuccess)
        OR_RETURN(err);
    OR_RETURN(run_on_default_stream(op));
}

orError_t orMemsetAsync(void *devPtr, int value, size_t count, orStream_t stream)
{
    OR_API_BEGIN();
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err != orSuccess)
        OR_RETURN(err);
    if (count == 0)
        return orSuccess;
    or_op *op;
    if ((err = memset_prepare(devPtr, value, count, &op)) != orSuccess)
        OR_RETURN(err);
    or_stream_enqueue(s, op);
    return orSuccess;
}
