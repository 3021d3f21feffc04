/*
 * helpers.h - shared pieces of the runtime unit tests: error-code asserts,
 * time and waiting helpers (every wait has a deadline), and small kernels.
 */
#ifndef OR_TEST_HELPERS_H
#define OR_TEST_HELPERS_H

#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "openreg.h"

/* How long any test waits for something that should happen "soon". */
#define DEADLINE_MS 5000

/* The call must succeed. */
#define CHECK_OR(call)                                                                   \
    do {                                                                                 \
        orError_t check_or_err_ = (call);                                                \
        cr_assert_eq(check_or_err_, orSuccess, "%s -> %s", #call,                        \
                     orGetErrorName(check_or_err_));                                     \
    } while (0)

/* The call must fail with exactly `expected`, that code must be this thread's
 * last error (peek keeps it, get returns it once and then resets it). */
#define EXPECT_OR(call, expected)                                                        \
    do {                                                                                 \
        orError_t expect_or_want_ = (expected);                                          \
        orError_t expect_or_err_ = (call);                                               \
        cr_assert_eq(expect_or_err_, expect_or_want_, "%s -> %s, expected %s", #call,    \
                     orGetErrorName(expect_or_err_), orGetErrorName(expect_or_want_));   \
        if (expect_or_want_ != orSuccess) {                                              \
            orError_t expect_or_peek_ = orPeekAtLastError();                             \
            cr_assert_eq(expect_or_peek_, expect_or_want_,                               \
                         "after %s: orPeekAtLastError -> %s", #call,                     \
                         orGetErrorName(expect_or_peek_));                               \
            orError_t expect_or_last_ = orGetLastError();                                \
            cr_assert_eq(expect_or_last_, expect_or_want_,                               \
                         "after %s: orGetLastError -> %s", #call,                        \
                         orGetErrorName(expect_or_last_));                               \
            expect_or_last_ = orGetLastError();                                          \
            cr_assert_eq(expect_or_last_, orSuccess,                                     \
                         "after %s: second orGetLastError -> %s (not reset)", #call,     \
                         orGetErrorName(expect_or_last_));                               \
        }                                                                                \
    } while (0)

/* Only the returned code; used for orErrorNotReady in tests about ordering, so that
 * whether a query records it as last error is checked by dedicated tests only.
 * Clears the last error so later checks start clean. */
#define EXPECT_CODE(call, expected)                                                      \
    do {                                                                                 \
        orError_t expect_code_want_ = (expected);                                        \
        orError_t expect_code_err_ = (call);                                             \
        cr_assert_eq(expect_code_err_, expect_code_want_, "%s -> %s, expected %s", #call, \
                     orGetErrorName(expect_code_err_), orGetErrorName(expect_code_want_));\
        (void)orGetLastError();                                                          \
    } while (0)

/* Compare two orError_t values (e.g. codes recorded on a worker thread). */
#define CR_ASSERT_OR_EQ(got, want, what)                                                 \
    cr_assert_eq((got), (want), "%s: got %s, expected %s", (what), orGetErrorName(got),  \
                 orGetErrorName(want))

static inline orDim3 dim3(unsigned x, unsigned y, unsigned z)
{
    orDim3 d = {x, y, z};
    return d;
}

static inline void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Wait (sleeping 1 ms between checks) until *v >= target; false on timeout. */
static inline int wait_atomic_ge(atomic_int *v, int target, long timeout_ms)
{
    double end = now_ms() + timeout_ms;
    while (atomic_load(v) < target) {
        if (now_ms() > end)
            return 0;
        sleep_ms(1);
    }
    return 1;
}

/* Poll a query function until it stops returning orErrorNotReady. */
static inline orError_t wait_stream_done(orStream_t s, long timeout_ms)
{
    double end = now_ms() + timeout_ms;
    orError_t e;
    while ((e = orStreamQuery(s)) == orErrorNotReady && now_ms() < end)
        sleep_ms(1);
    return e;
}

static inline void set_env(const char *name, const char *value)
{
    cr_assert_eq(setenv(name, value, 1), 0, "setenv %s", name);
}

/* ---- host functions ---------------------------------------------------- */

/* A gate: a host function that blocks its stream until the test opens it
 * (or the deadline passes, so a bug fails a test instead of hanging it). */
typedef struct {
    atomic_int open;
    atomic_int entered;
} gate_t;

static inline void gate_fn(void *p)
{
    gate_t *g = p;
    atomic_store(&g->entered, 1);
    wait_atomic_ge(&g->open, 1, DEADLINE_MS);
}

static inline void gate_open(gate_t *g)
{
    atomic_store(&g->open, 1);
}

/* Sleep, then store a value: proves ordering by data, not by timing. */
typedef struct {
    long sleep_ms;
    int *dst;
    int value;
} sleep_store_t;

static inline void sleep_store_fn(void *p)
{
    sleep_store_t *a = p;
    sleep_ms(a->sleep_ms);
    *(volatile int *)a->dst = a->value;
}

static inline void sleep_fn(void *p)
{
    sleep_ms((long)(intptr_t)p);
}

/* Sleep, then set an atomic flag. */
typedef struct {
    long sleep_ms;
    atomic_int flag;
} sleep_flag_t;

static inline void sleep_flag_fn(void *p)
{
    sleep_flag_t *a = p;
    sleep_ms(a->sleep_ms);
    atomic_store(&a->flag, 1);
}

/* ---- kernels ----------------------------------------------------------- */

static inline unsigned block_linear(const orKernelContext *c)
{
    return c->blockIdx.x + c->gridDim.x * (c->blockIdx.y + c->gridDim.y * c->blockIdx.z);
}

static inline unsigned block_threads(const orKernelContext *c)
{
    return c->blockDim.x * c->blockDim.y * c->blockDim.z;
}

/* out[i] = out[i] * mul + add for i < n; element i belongs to block i / threads. */
typedef struct {
    int *data;
    size_t n;
    int mul, add;
} axpb_args;

static inline void axpb_kernel(const orKernelContext *c, void *p)
{
    axpb_args *a = p;
    size_t threads = block_threads(c);
    size_t base = (size_t)block_linear(c) * threads;
    for (size_t t = 0; t < threads; t++) {
        size_t i = base + t;
        if (i < a->n)
            a->data[i] = a->data[i] * a->mul + a->add;
    }
}

/* Launch axpb over n ints with 64-thread blocks. */
static inline orError_t launch_axpb(int *data, size_t n, int mul, int add, orStream_t s)
{
    axpb_args a = {data, n, mul, add};
    unsigned blocks = (unsigned)((n + 63) / 64);
    return orLaunchKernel(axpb_kernel, dim3(blocks ? blocks : 1, 1, 1), dim3(64, 1, 1), &a,
                          sizeof a, 0, s);
}

/* What the default 'cpu' profile gives each device: an even share of the
 * host's memory among the host's devices (hwloc's count may differ from
 * sysconf's by a little, hence a range). */
static inline void assert_host_share(size_t got, int devices_on_host)
{
    size_t phys = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    size_t share = phys / (size_t)devices_on_host;
    cr_assert(got <= share + ((size_t)64 << 20) && got >= share - share / 20,
              "device memory %zu is not a share of the host's %zu among %d devices", got,
              phys, devices_on_host);
    cr_assert_eq(got % ((size_t)1 << 20), 0, "device memory %zu is not whole MiB", got);
}

#endif /* OR_TEST_HELPERS_H */
