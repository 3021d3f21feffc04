/*
 * test_occl_wait.c - how a wait of OCCL backs off when nothing moves
 * (collectives/transport.c, occl_idle_wait): it spins, then yields, then
 * sleeps; a wait within the node sleeps after a few yields, a wait for the
 * network yields for OCCL_NET_YIELD_US first, since nobody rings for a
 * message and a small call between hosts takes tens of microseconds.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <time.h>

#include "occl_internal.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What a wait's sleep touches of its communicator: the doorbell. */
static occlComm_t bare_comm(void)
{
    occlComm_t comm = calloc(1, sizeof *comm);
    cr_assert_not_null(comm);
    comm->ctrl = calloc(1, sizeof *comm->ctrl);
    cr_assert_not_null(comm->ctrl);
    comm->check_calls = true;
    return comm;
}

static void free_comm(occlComm_t comm)
{
    free(comm->ctrl);
    free(comm);
}

Test(occl_wait, when_a_wait_sleeps)
{
    uint64_t window = OCCL_NET_YIELD_US * 1000ull;
    occl_idle w = {OCCL_IDLE_SLEEP - 1, now_ns()};
    cr_assert_not(occl_idle_sleeping(&w, false));
    cr_assert_not(occl_idle_sleeping(&w, true));
    w.looks = OCCL_IDLE_SLEEP;
    cr_assert(occl_idle_sleeping(&w, false), "within the node: asleep after %d looks", OCCL_IDLE_SLEEP);
    cr_assert_not(occl_idle_sleeping(&w, true), "the network: yielding for %d us", OCCL_NET_YIELD_US);
    w.since = now_ns() - window - 1000;
    cr_assert(occl_idle_sleeping(&w, true), "the network: asleep once the window has passed");
}

Test(occl_wait, network_waits_yield_for_their_window)
{
    occlComm_t comm = bare_comm();
    occl_idle w = {0};
    uint64_t t0 = now_ns();
    unsigned looks = 0;
    while (!occl_idle_sleeping(&w, true)) {
        occl_idle_wait(comm, &w, 0, true, 0);
        looks++;
        if (looks == OCCL_IDLE_SPIN)
            cr_assert_geq(w.since, t0, "the window starts at the first yield");
    }
    uint64_t took = now_ns() - t0;
    cr_assert_geq(w.looks, OCCL_IDLE_SLEEP);
    cr_assert_geq(took, OCCL_NET_YIELD_US * 1000ull, "a network wait slept after %llu ns of yielding",
                  (unsigned long long)took);
    /* Progress starts the next wait over: spinning, then its own window. */
    w.looks = 0;
    cr_assert_not(occl_idle_sleeping(&w, true));
    uint64_t t1 = now_ns();
    while (w.looks < OCCL_IDLE_SLEEP)
        occl_idle_wait(comm, &w, 0, true, 0);
    cr_assert_geq(w.since, t1, "a new window after progress");
    free_comm(comm);
}
