/*
 * src/sync.h - waiting without burning cores.
 *
 * Ranks and threads routinely outnumber cores, so every wait in the runtime
 * is: a short spin (the answer often arrives within microseconds), then
 * sched_yield (lets the thread we wait for run on our core), then a futex
 * sleep. A notifier is a futex word bumped by whoever changes the state a
 * waiter's condition reads.
 */
#ifndef OR_SYNC_H
#define OR_SYNC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct or_notifier {
    _Atomic uint32_t seq;
    _Atomic uint32_t waiters;
} or_notifier;

typedef bool (*or_cond_fn)(void *arg);

/* Wake the waiters of n after changing the state their conditions read. */
void or_notifier_signal(or_notifier *n);

/* Return once cond(arg) is true. deadline_ns is CLOCK_MONOTONIC, 0 = none;
 * returns false if the deadline passed first. */
bool or_wait(or_notifier *n, or_cond_fn cond, void *arg, uint64_t deadline_ns);
/* As or_wait, for an answer that cannot come within a spin: one over the
 * network, which other threads (the proxies) carry. Straight to the futex,
 * leaving the cores to them: with more threads than cores a waiter that
 * spins or yields takes turns from them, and a thread that keeps yielding
 * can wait hundreds of microseconds for its core to come back. */
bool or_wait_sleeping(or_notifier *n, or_cond_fn cond, void *arg, uint64_t deadline_ns);

uint64_t or_now_ns(void); /* CLOCK_MONOTONIC */

/* The lock of a device's streams and of a communicator's tasks, each taken
 * once by every small collective (docs/occl-perf.md): a default pthread
 * mutex's behaviour (a waiter sleeps on the futex at once, no spinning)
 * without its function calls and type checks, so that an uncontended
 * acquire and release are one atomic each, inline. 0 free, 1 held, 2 held
 * and maybe waited for (Drepper, "Futexes Are Tricky"). Within one
 * process. */
typedef struct or_lock {
    _Atomic uint32_t word;
} or_lock;

void or_lock_wait(or_lock *l); /* the contended acquire */
void or_lock_wake(or_lock *l); /* a release that found waiters */

static inline void or_lock_init(or_lock *l) { atomic_init(&l->word, 0); }

static inline bool or_lock_try(or_lock *l)
{
    uint32_t free = 0;
    return atomic_compare_exchange_strong(&l->word, &free, 1);
}

static inline void or_lock_acquire(or_lock *l)
{
    if (!or_lock_try(l))
        or_lock_wait(l);
}

static inline void or_lock_release(or_lock *l)
{
    if (atomic_exchange(&l->word, 0) == 2)
        or_lock_wake(l);
}

/* Asks for the cache line at p in the exclusive state ahead of a write:
 * a line the other cores read since this one last wrote it costs its
 * write a round trip to them (on x86, PREFETCHW; older cores take it for a
 * no-op). */
static inline void or_prefetch_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

static inline void or_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
