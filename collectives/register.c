/*
 * collectives/register.c - occlMemAlloc/occlMemFree, occlCommMemStats and
 * buffer registration (occlCommRegister/occlCommDeregister). Registrations
 * and symmetric memory windows (occlCommWindowRegister) are recorded per
 * communicator and checked (the range must be device memory of the
 * communicator's device), as NCCL checks them; a call whose buffers lie in
 * them may read its peers' inputs in place where it would otherwise copy
 * them into scratch (occl_buffer_registered, algorithms.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "occl_internal.h"

struct occl_reg {
    struct occl_reg *next;
    const char *begin;
    size_t bytes;
    int refs; /* registrations of the same range share one handle, as NCCL's */
};

/* Registrations change rarely: one lock for all communicators. */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

occlResult_t occlMemAlloc(void **ptr, size_t size)
{
    if (!ptr || size == 0)
        return occl_fail(occlInvalidArgument, "occlMemAlloc: ptr is NULL or size is 0");
    if (orMalloc(ptr, size) != orSuccess)
        return occl_fail(occlUnhandledDeviceError, "occlMemAlloc: cannot allocate %zu bytes on the "
                                                   "current device", size);
    return occlSuccess;
}

occlResult_t occlMemFree(void *ptr)
{
    if (!ptr)
        return occlSuccess;
    orPointerAttributes attr;
    if (orPointerGetAttributes(&attr, ptr) != orSuccess || attr.type != orMemoryTypeDevice ||
        orFree(ptr) != orSuccess)
        return occl_fail(occlInvalidArgument, "occlMemFree: %p is not the start of a live device "
                                              "allocation", ptr);
    return occlSuccess;
}

occlResult_t occlCommRegister(const occlComm_t comm, void *buff, size_t size, void **handle)
{
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "occlCommRegister: comm is not a live communicator");
    if (!handle || !buff || size == 0)
        return occl_fail(occlInvalidArgument, "occlCommRegister: buff or handle is NULL, or size is 0");
    or_mem_ref ref;
    if (or_mem_export(buff, size, &ref) != orSuccess)
        return occl_fail(occlInvalidArgument, "occlCommRegister: [%p, +%zu) is not within one device "
                                              "allocation of this process", buff, size);
    if (ref.device != comm->device)
        return occl_fail(occlInvalidUsage, "occlCommRegister: the buffer is memory of device %d, the "
                                           "communicator's is device %d", ref.device, comm->device);
    pthread_mutex_lock(&reg_lock);
    struct occl_reg *r = comm->regs;
    while (r && !(r->begin == buff && r->bytes == size))
        r = r->next;
    if (r)
        r->refs++;
    else if ((r = calloc(1, sizeof *r))) {
        *r = (struct occl_reg){comm->regs, buff, size, 1};
        comm->regs = r;
    }
    pthread_mutex_unlock(&reg_lock);
    if (!r)
        return occl_fail(occlSystemError, "occlCommRegister: out of memory");
    *handle = r;
    OCCL_INFO("comm %016llx rank %d: registered [%p, +%zu) (%d reference%s)",
              (unsigned long long)comm->id, comm->rank, buff, size, r->refs, r->refs > 1 ? "s" : "");
    return occlSuccess;
}

occlResult_t occlCommDeregister(const occlComm_t comm, void *handle)
{
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "occlCommDeregister: comm is not a live communicator");
    if (!handle)
        return occlSuccess; /* NCCL's: a NULL handle (nothing was registered) is fine */
    pthread_mutex_lock(&reg_lock);
    struct occl_reg **pp = &comm->regs;
    while (*pp && *pp != handle)
        pp = &(*pp)->next;
    struct occl_reg *r = *pp;
    if (r && --r->refs == 0)
        *pp = r->next;
    pthread_mutex_unlock(&reg_lock);
    if (!r)
        return occl_fail(occlInvalidUsage, "occlCommDeregister: handle %p is not a registration of "
                                           "this communicator (or was deregistered already)", handle);
    if (r->refs == 0)
        free(r);
    return occlSuccess;
}

/* ---- symmetric memory windows (NCCL 2.27+) ------------------------------------- */

struct occlWindow {
    struct occlWindow *next;
    occlComm_t comm;
    void *user;
    size_t bytes;
    int flags;
    /* Its ordinal on the communicator: the peers' windows of the same
     * ordinal are its counterparts (one-sided calls, rma.c). */
    uint64_t index;
};

occlResult_t occlCommWindowRegister(occlComm_t comm, void *buff, size_t size, occlWindow_t *win,
                                    int winFlags)
{
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "occlCommWindowRegister: comm is not a live communicator");
    if (!win)
        return occl_fail(occlInvalidArgument, "occlCommWindowRegister: win is NULL");
    *win = NULL;
    if (!buff || size == 0)
        return occl_fail(occlInvalidArgument, "occlCommWindowRegister: buff is NULL or size is 0");
    if (winFlags & ~(OCCL_WIN_COLL_SYMMETRIC | OCCL_WIN_STRICT_ORDERING))
        return occl_fail(occlInvalidArgument, "occlCommWindowRegister: unknown flags 0x%x",
                         (unsigned)winFlags);
    or_mem_ref ref;
    if (or_mem_export(buff, size, &ref) != orSuccess)
        return occl_fail(occlInvalidArgument, "occlCommWindowRegister: [%p, +%zu) is not within one "
                                              "device allocation of this process", buff, size);
    if (ref.device != comm->device)
        return occl_fail(occlInvalidUsage, "occlCommWindowRegister: the buffer is memory of device %d, "
                                           "the communicator's is device %d", ref.device, comm->device);
    struct occlWindow *w = calloc(1, sizeof *w);
    if (!w)
        return occl_fail(occlSystemError, "occlCommWindowRegister: out of memory");
    *w = (struct occlWindow){NULL, comm, buff, size, winFlags, 0};
    pthread_mutex_lock(&reg_lock);
    w->index = comm->win_next;
    bool published = occl_rma_publish(comm, w->index, &ref, size);
    if (published) {
        comm->win_next++;
        w->next = comm->wins;
        comm->wins = w;
    }
    pthread_mutex_unlock(&reg_lock);
    if (!published) {
        free(w);
        return occl_fail(occlSystemError, "occlCommWindowRegister: %d windows of this communicator "
                                          "are registered already (the most at once)", OCCL_RMA_WINDOWS);
    }
    *win = w;
    OCCL_INFO("comm %016llx rank %d: window #%llu [%p, +%zu) flags 0x%x", (unsigned long long)comm->id,
              comm->rank, (unsigned long long)w->index, buff, size, (unsigned)winFlags);
    return occlSuccess;
}

/* The window if it is one of comm's (looked up, never dereferenced first). */
static struct occlWindow **window_slot(occlComm_t comm, occlWindow_t win)
{
    struct occlWindow **pp = &comm->wins;
    while (*pp && *pp != win)
        pp = &(*pp)->next;
    return *pp ? pp : NULL;
}

occlResult_t occlCommWindowDeregister(occlComm_t comm, occlWindow_t win)
{
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "occlCommWindowDeregister: comm is not a live "
                                              "communicator");
    if (!win)
        return occlSuccess; /* NCCL's: nothing was registered */
    pthread_mutex_lock(&reg_lock);
    struct occlWindow **pp = window_slot(comm, win), *w = pp ? *pp : NULL;
    if (pp) {
        *pp = w->next;
        occl_rma_withdraw(comm, w->index);
    }
    pthread_mutex_unlock(&reg_lock);
    if (!w)
        return occl_fail(occlInvalidUsage, "occlCommWindowDeregister: %p is not a window of this "
                                           "communicator (or was deregistered already)", (void *)win);
    free(w);
    return occlSuccess;
}

occlResult_t occlWinGetUserPtr(occlComm_t comm, occlWindow_t win, void **outUserPtr)
{
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "occlWinGetUserPtr: comm is not a live communicator");
    if (!outUserPtr || !win)
        return occl_fail(occlInvalidArgument, "occlWinGetUserPtr: win or outUserPtr is NULL");
    pthread_mutex_lock(&reg_lock);
    struct occlWindow **pp = window_slot(comm, win);
    void *user = pp ? (*pp)->user : NULL;
    pthread_mutex_unlock(&reg_lock);
    if (!pp)
        return occl_fail(occlInvalidUsage, "occlWinGetUserPtr: %p is not a window of this "
                                           "communicator", (void *)win);
    *outUserPtr = user;
    return occlSuccess;
}

bool occl_window_find(occlComm_t comm, occlWindow_t win, uint64_t *index, size_t *bytes)
{
    pthread_mutex_lock(&reg_lock);
    struct occlWindow **pp = window_slot(comm, win);
    if (pp) {
        *index = (*pp)->index;
        *bytes = (*pp)->bytes;
    }
    pthread_mutex_unlock(&reg_lock);
    return pp != NULL;
}

bool occl_window_by_index(occlComm_t comm, uint64_t index, void **user, size_t *bytes)
{
    pthread_mutex_lock(&reg_lock);
    struct occlWindow *w = comm->wins;
    while (w && w->index != index)
        w = w->next;
    if (w) {
        *user = w->user;
        *bytes = w->bytes;
    }
    pthread_mutex_unlock(&reg_lock);
    return w != NULL;
}

bool occl_buffer_registered(occlComm_t comm, const void *p, size_t bytes)
{
    const char *b = p;
    bool found = false;
    pthread_mutex_lock(&reg_lock);
    for (struct occl_reg *r = comm->regs; r && !found; r = r->next)
        found = b >= r->begin && bytes <= r->bytes && (size_t)(b - r->begin) <= r->bytes - bytes;
    for (struct occlWindow *w = comm->wins; w && !found; w = w->next) {
        const char *u = w->user;
        found = b >= u && bytes <= w->bytes && (size_t)(b - u) <= w->bytes - bytes;
    }
    pthread_mutex_unlock(&reg_lock);
    return found;
}

uint64_t occl_comm_staged_bytes(occlComm_t comm)
{
    return occl_comm_valid(comm) ? atomic_load(&comm->staged_bytes) : 0;
}

void occl_regs_release(occlComm_t comm)
{
    pthread_mutex_lock(&reg_lock);
    struct occl_reg *r = comm->regs;
    struct occlWindow *w = comm->wins;
    comm->regs = NULL;
    comm->wins = NULL;
    pthread_mutex_unlock(&reg_lock);
    while (r) {
        struct occl_reg *next = r->next;
        free(r);
        r = next;
    }
    while (w) {
        struct occlWindow *next = w->next;
        free(w);
        w = next;
    }
}

void occl_comm_quiesce_locked(occlComm_t comm)
{
    /* Counted, not by synchronizing the device: that would take the
     * streams' errors from the program. A call running on its calling
     * thread is not counted but holds the lock; if its peers were late, it
     * was counted when the communicator's thread took it over. */
    for (unsigned waits = 0;; waits++) {
        if (!atomic_load(&comm->tasks_live)) {
            or_lock_acquire(&comm->lock);
            if (!atomic_load(&comm->tasks_live))
                return;
            or_lock_release(&comm->lock);
        }
        usleep(waits < 10 ? 100 : 2000);
    }
}

/* OCCL's dynamic device memory is its scratch (grown by the calls that need
 * it); the control block, which the peers map, persists. */
occlResult_t occlCommSuspend(occlComm_t comm, int flags)
{
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "occlCommSuspend: comm is not a live communicator");
    if (flags & ~OCCL_SUSPEND_MEM)
        return occl_fail(occlInvalidArgument, "occlCommSuspend: unknown flags 0x%x (only "
                                              "OCCL_SUSPEND_MEM is defined)", (unsigned)flags);
    if (atomic_load(&comm->revoked) || comm->finalized)
        return occl_fail(occlInvalidUsage, "occlCommSuspend: the communicator is finalized or revoked");
    if (!(flags & OCCL_SUSPEND_MEM))
        return occlSuccess; /* NCCL's: nothing asked, nothing suspended */
    if (atomic_load(&comm->suspended))
        return occl_fail(occlInvalidUsage, "occlCommSuspend: the communicator is suspended already");
    atomic_store(&comm->suspended, true); /* new calls are refused from here */
    occl_comm_quiesce_locked(comm); /* the queued ones end first */
    occl_scratch_release(comm);
    or_lock_release(&comm->lock);
    OCCL_INFO("comm %016llx rank %d: suspended (scratch released)", (unsigned long long)comm->id,
              comm->rank);
    return occlSuccess;
}

occlResult_t occlCommResume(occlComm_t comm)
{
    if (!occl_comm_valid(comm))
        return occl_fail(occlInvalidArgument, "occlCommResume: comm is not a live communicator");
    if (!atomic_load(&comm->suspended))
        return occl_fail(occlInvalidUsage, "occlCommResume: the communicator is not suspended");
    /* Scratch comes back as the calls need it, as after the communicator's creation. */
    atomic_store(&comm->suspended, false);
    OCCL_INFO("comm %016llx rank %d: resumed", (unsigned long long)comm->id, comm->rank);
    return occlSuccess;
}

/* The device memory OCCL holds for comm: its control block (persistent) and
 * its scratch (released by occlCommSuspend). */
occlResult_t occlCommMemStats(occlComm_t comm, occlCommMemStat_t stat, uint64_t *value)
{
    if (!occl_comm_valid(comm) || !value)
        return occl_fail(occlInvalidArgument, "occlCommMemStats: comm is not a live communicator, "
                                              "or value is NULL");
    if ((int)stat < occlStatGpuMemSuspend || (int)stat > occlStatGpuMemTotal)
        return occl_fail(occlInvalidArgument, "occlCommMemStats: unknown statistic %d", (int)stat);
    /* Scratch changes size only in a running call, which holds the lock. */
    or_lock_acquire(&comm->lock);
    uint64_t scratch = 0;
    for (int i = 0; i < OCCL_SCRATCH_SLOTS; i++)
        scratch += comm->scratch_bytes[i];
    or_lock_release(&comm->lock);
    switch (stat) {
    case occlStatGpuMemSuspend: *value = scratch; break;
    case occlStatGpuMemSuspended: *value = atomic_load(&comm->suspended); break;
    case occlStatGpuMemPersist: *value = comm->ctrl_bytes; break;
    default: *value = comm->ctrl_bytes + scratch; break;
    }
    return occlSuccess;
}
