/*
 * devices/cpu_device.h - the host resources behind one simulated device:
 * its memory (one reserved mapping, committed page by page as used) and its
 * worker threads, bound to the device's cores.
 */
#ifndef OR_CPU_DEVICE_H
#define OR_CPU_DEVICE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "placement.h"

typedef struct or_cpu_worker {
    struct or_cpu_device *dev;
    int index;
    pthread_t thread;
} or_cpu_worker;

typedef struct or_cpu_device {
    unsigned char *base; /* device memory, capacity bytes */
    size_t capacity;
    bool shared;         /* a shared-memory segment, not private memory */
    int memfd;           /* or_cpu_device_map_memfd: the segment's descriptor, else -1 */
    or_placement place;
    or_bind_mode bind;
    int nthreads;
    or_cpu_worker *workers;
    void *(*body)(void *); /* what every worker runs */
    void *body_arg;
} or_cpu_device;

/* Reserve capacity bytes of address space, bound to the device's NUMA
 * node(s) unless d->bind is OR_BIND_NONE; 0 or -1. With a shm_name the
 * memory is a new POSIX shared-memory segment (mode 0600) that other
 * processes can map until the name is unlinked. */
int or_cpu_device_map(or_cpu_device *d, size_t capacity, const char *shm_name);
/* As or_cpu_device_map, but the memory is an anonymous shared segment
 * (memfd) kept open as d->memfd, so that processes of the same user can map
 * it through /proc/PID/fd/FD while this process lives; nothing is left
 * behind in /dev/shm. */
int or_cpu_device_map_memfd(or_cpu_device *d, size_t capacity);
void or_cpu_device_unmap(or_cpu_device *d);
/* Strict mode: make the first len bytes of the memory (rounded up to whole
 * pages) readable by host code, or not. */
int or_cpu_device_set_readable(or_cpu_device *d, size_t len, bool readable);
/* Give the pages of a freed range back to the host (contents are lost). */
void or_cpu_device_discard(or_cpu_device *d, size_t off, size_t len);
/* Start n workers running body(arg), each bound first as d->bind says. */
int or_cpu_device_start_workers(or_cpu_device *d, int n, void *(*body)(void *), void *arg);
/* Wait up to timeout_ms for the workers to return; false if one did not. */
bool or_cpu_device_join_workers(or_cpu_device *d, unsigned timeout_ms);

#endif
