/* src/sync.c - spin, yield, then futex. */
#include "sync.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* About 1-2 us of pause-spinning, then up to ~50 yields: on an idle core the
 * answer to a short op arrives in this window; on a busy one the yields hand
 * the core to the thread we are waiting for. */
enum { SPIN_PAUSES = 256, SPIN_YIELDS = 48 };

uint64_t or_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *word, uint32_t seen, uint64_t deadline_ns)
{
    struct timespec ts, *tsp = NULL;
    if (deadline_ns) {
        uint64_t now = or_now_ns();
        uint64_t left = deadline_ns > now ? deadline_ns - now : 0;
        ts.tv_sec = (time_t)(left / 1000000000u);
        ts.tv_nsec = (long)(left % 1000000000u);
        tsp = &ts;
    }
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, tsp, NULL, 0);
}

void or_lock_wait(or_lock *l)
{
    /* Marked as waited for before each sleep: the holder's release wakes. */
    while (atomic_exchange(&l->word, 2) != 0)
        futex_wait(&l->word, 2, 0);
}

void or_lock_wake(or_lock *l) { syscall(SYS_futex, (uint32_t *)&l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

void or_notifier_signal(or_notifier *n)
{
    atomic_fetch_add(&n->seq, 1);
    if (atomic_load(&n->waiters))
        syscall(SYS_futex, (uint32_t *)&n->seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* The futex part of a wait: sleep until cond(arg) or the deadline. */
static bool sleep_until(or_notifier *n, or_cond_fn cond, void *arg, uint64_t deadline_ns)
{
    for (;;) {
        uint32_t seen = atomic_load(&n->seq);
        if (cond(arg))
            return true;
        if (deadline_ns && or_now_ns() >= deadline_ns)
            return false;
        atomic_fetch_add(&n->waiters, 1);
        futex_wait(&n->seq, seen, deadline_ns);
        atomic_fetch_sub(&n->waiters, 1);
    }
}

bool or_wait(or_notifier *n, or_cond_fn cond, void *arg, uint64_t deadline_ns)
{
    for (int i = 0; i < SPIN_PAUSES + SPIN_YIELDS; i++) {
        if (cond(arg))
            return true;
        if (i < SPIN_PAUSES)
            or_cpu_relax();
        else
            sched_yield();
    }
    return sleep_until(n, cond, arg, deadline_ns);
}

bool or_wait_sleeping(or_notifier *n, or_cond_fn cond, void *arg, uint64_t deadline_ns)
{
    return sleep_until(n, cond, arg, deadline_ns);
}
