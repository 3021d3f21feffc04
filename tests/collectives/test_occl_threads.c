/*
 * test_occl_threads.c - a communicator whose thread cannot be started:
 * occlCommInitAll fails with occlSystemError and the reason, leaves nothing
 * behind, and works once threads can be made again.
 *
 * The program defines pthread_create, so the libraries' calls reach it
 * (the linker exports a symbol of the program that a library it links
 * uses); it fails while refuse_threads is set and passes on to libc's
 * otherwise. The runtime starts its own threads first, before the refusal.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT */
#endif
#include <criterion/criterion.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "occl.h"

static atomic_bool refuse_threads;
static atomic_int refused;

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                   void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real)
        real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(
            RTLD_NEXT, "pthread_create");
    if (atomic_load(&refuse_threads)) {
        atomic_fetch_add(&refused, 1);
        return EAGAIN;
    }
    return real(thread, attr, start, arg);
}

Test(occl_threads, init_fails_then_recovers, .timeout = 60)
{
    cr_assert_eq(setenv("OCCL_TIMEOUT_MS", "10000", 1), 0);
    int ndev = 0;
    cr_assert_eq(orGetDeviceCount(&ndev), orSuccess); /* the runtime's threads, started */
    cr_assert_geq(ndev, 2, "the test needs two devices");

    occlComm_t comms[2] = {NULL, NULL};
    atomic_store(&refuse_threads, true);
    occlResult_t res = occlCommInitAll(comms, 2, NULL);
    atomic_store(&refuse_threads, false);
    cr_assert_eq(res, occlSystemError, "occlCommInitAll gave %d", res);
    cr_assert_geq(atomic_load(&refused), 1, "no thread was asked for: the test proves nothing");
    cr_assert(strstr(occlGetLastError(NULL), "cannot start the communicator's thread"),
              "last error: %s", occlGetLastError(NULL));
    cr_assert(comms[0] == NULL && comms[1] == NULL, "a failed init handed out communicators");

    /* Nothing was left half made: the same devices take communicators now,
     * and they reduce. */
    cr_assert_eq(occlCommInitAll(comms, 2, NULL), occlSuccess, "%s", occlGetLastError(NULL));
    float *buf[2];
    orStream_t st[2];
    cr_assert_eq(occlGroupStart(), occlSuccess);
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orStreamCreate(&st[d]), orSuccess);
        cr_assert_eq(orMalloc((void **)&buf[d], 4 * sizeof(float)), orSuccess);
        float v[4] = {(float)d + 1, (float)d + 1, (float)d + 1, (float)d + 1};
        cr_assert_eq(orMemcpy(buf[d], v, sizeof v, orMemcpyHostToDevice), orSuccess);
        cr_assert_eq(occlAllReduce(buf[d], buf[d], 4, occlFloat32, occlSum, comms[d], st[d]),
                     occlSuccess);
    }
    cr_assert_eq(occlGroupEnd(), occlSuccess, "%s", occlGetLastError(NULL));
    for (int d = 0; d < 2; d++) {
        float v[4];
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orStreamSynchronize(st[d]), orSuccess);
        cr_assert_eq(orMemcpy(v, buf[d], sizeof v, orMemcpyDeviceToHost), orSuccess);
        for (int i = 0; i < 4; i++)
            cr_assert_float_eq(v[i], 3.0f, 0, "device %d element %d: %g", d, i, v[i]);
        cr_assert_eq(occlCommDestroy(comms[d]), occlSuccess);
        orFree(buf[d]);
        orStreamDestroy(st[d]);
    }
}
