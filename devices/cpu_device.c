/* devices/cpu_device.c - memory mapping and bound worker threads. */
#include "cpu_device.h"

#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

int or_cpu_device_map(or_cpu_device *d, size_t capacity, const char *shm_name)
{
    /* NORESERVE: a large device costs nothing until its pages are touched. */
    void *p;
    d->memfd = -1;
    if (shm_name) {
        int fd = shm_open(shm_name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0)
            return -1;
        p = ftruncate(fd, (off_t)capacity) ? MAP_FAILED
                                            : mmap(NULL, capacity, PROT_READ | PROT_WRITE,
                                                   MAP_SHARED | MAP_NORESERVE, fd, 0);
        close(fd);
        if (p == MAP_FAILED) {
            shm_unlink(shm_name);
            return -1;
        }
        d->shared = true;
    } else {
        p = mmap(NULL, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
        if (p == MAP_FAILED)
            return -1;
    }
    d->base = p;
    d->capacity = capacity;
    /* Pages land on the device's node when first touched; best effort, as
     * a single-node host or a fake topology has nothing to bind to. */
    if (d->bind != OR_BIND_NONE)
        or_placement_bind_memory(&d->place, p, capacity);
    return 0;
}

int or_cpu_device_map_memfd(or_cpu_device *d, size_t capacity)
{
    d->memfd = -1;
    int fd = memfd_create("openreg-device", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    void *p = ftruncate(fd, (off_t)capacity) ? MAP_FAILED
                                              : mmap(NULL, capacity, PROT_READ | PROT_WRITE,
                                                     MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return -1;
    }
    d->shared = true;
    d->memfd = fd;
    d->base = p;
    d->capacity = capacity;
    if (d->bind != OR_BIND_NONE)
        or_placement_bind_memory(&d->place, p, capacity);
    return 0;
}

void or_cpu_device_unmap(or_cpu_device *d)
{
    if (d->base) {
        munmap(d->base, d->capacity);
        if (d->memfd >= 0)
            close(d->memfd);
    }
    d->base = NULL;
    d->memfd = -1;
}

int or_cpu_device_set_readable(or_cpu_device *d, size_t len, bool readable)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    len = (len + page - 1) & ~(page - 1);
    if (len > d->capacity)
        len = d->capacity;
    if (len == 0)
        return 0;
    return mprotect(d->base, len, readable ? PROT_READ | PROT_WRITE : PROT_NONE);
}

void or_cpu_device_discard(or_cpu_device *d, size_t off, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t first = (off + page - 1) & ~(page - 1);
    size_t end = (off + len) & ~(page - 1);
    /* Only worth a syscall for large ranges; small ones are reused soon. */
    if (end > first && end - first >= ((size_t)4 << 20))
        /* Shared memory keeps its pages on DONTNEED; REMOVE punches them out. */
        madvise(d->base + first, end - first, d->shared ? MADV_REMOVE : MADV_DONTNEED);
}

static void *worker_trampoline(void *arg)
{
    or_cpu_worker *w = arg;
    /* Best effort: an unbound worker still works. */
    or_placement_bind_thread(&w->dev->place, w->dev->bind, w->index);
    return w->dev->body(w->dev->body_arg);
}

int or_cpu_device_start_workers(or_cpu_device *d, int n, void *(*body)(void *), void *arg)
{
    d->workers = calloc((size_t)n, sizeof *d->workers);
    if (!d->workers)
        return -1;
    d->body = body;
    d->body_arg = arg;
    for (d->nthreads = 0; d->nthreads < n; d->nthreads++) {
        or_cpu_worker *w = &d->workers[d->nthreads];
        w->dev = d;
        w->index = d->nthreads;
        if (pthread_create(&w->thread, NULL, worker_trampoline, w))
            return -1; /* the caller joins the ones that started */
    }
    return 0;
}

bool or_cpu_device_join_workers(or_cpu_device *d, unsigned timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    for (int i = 0; i < d->nthreads; i++)
        if (pthread_timedjoin_np(d->workers[i].thread, NULL, &deadline))
            return false; /* stuck in user code: leave it and what it may touch */
    free(d->workers);
    d->workers = NULL;
    d->nthreads = 0;
    return true;
}
