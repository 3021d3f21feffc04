/*
 * test_occl_scratch.c - a collective's device scratch on a small device: the
 * runtime rounds scratch up to whole MiB to spare reallocations, but a device
 * with less free memory than that still gets the bytes the call needs; a
 * device without even those fails the call with a reason giving the size
 * asked and what the device has free.
 *
 * One process, two devices of OPENREG_DEVICE_MEM=1M, the direct all-reduce
 * (scratch: every rank's input, 2 x the buffer).
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "occl.h"

TestSuite(occl_scratch, .timeout = 60);

static occlComm_t comms[2];
static orStream_t streams[2];
static float *bufs[2];

static void start(size_t count)
{
    cr_assert_eq(setenv("OPENREG_DEVICE_MEM", "1M", 1), 0);
    cr_assert_eq(setenv("OCCL_ALGO", "direct", 1), 0);
    cr_assert_eq(setenv("OCCL_TIMEOUT_MS", "20000", 1), 0);
    cr_assert_eq(occlCommInitAll(comms, 2, NULL), occlSuccess, "%s", occlGetLastError(NULL));
    float *host = malloc(count * sizeof *host);
    cr_assert_not_null(host);
    for (int d = 0; d < 2; d++) {
        for (size_t i = 0; i < count; i++)
            host[i] = (float)(d + 1);
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orMalloc((void **)&bufs[d], count * sizeof(float)), orSuccess);
        cr_assert_eq(orMemcpy(bufs[d], host, count * sizeof(float), orMemcpyHostToDevice),
                     orSuccess);
        cr_assert_eq(orStreamCreate(&streams[d]), orSuccess);
    }
    free(host);
    cr_assert_eq(occlGroupStart(), occlSuccess);
    for (int d = 0; d < 2; d++)
        cr_assert_eq(occlAllReduce(bufs[d], bufs[d], count, occlFloat32, occlSum, comms[d],
                                   streams[d]),
                     occlSuccess);
    occlGroupEnd();
    for (int d = 0; d < 2; d++) {
        orSetDevice(d);
        orStreamSynchronize(streams[d]);
    }
}

/* 8 KiB of scratch fits where the rounded 1 MiB does not. */
Test(occl_scratch, small_device_gets_what_it_needs)
{
    enum { COUNT = 1024 };
    start(COUNT);
    for (int d = 0; d < 2; d++) {
        occlResult_t async;
        cr_assert_eq(occlCommGetAsyncError(comms[d], &async), occlSuccess);
        cr_assert_eq(async, occlSuccess, "device %d: %s", d, occlGetLastError(comms[d]));
        float out[COUNT];
        cr_assert_eq(orMemcpy(out, bufs[d], sizeof out, orMemcpyDeviceToHost), orSuccess);
        for (int i = 0; i < COUNT; i++)
            cr_assert_eq(out[i], 3.0f, "device %d element %d: %g", d, i, (double)out[i]);
    }
}

/* 2 x 384 KiB of scratch beside a 384 KiB buffer on a 1 MiB device: the
 * reason gives the size asked, not a rounded or a smaller one. */
Test(occl_scratch, too_small_device_says_what_was_asked)
{
    start(96 * 1024);
    int failed = 0;
    for (int d = 0; d < 2; d++) {
        occlResult_t async;
        cr_assert_eq(occlCommGetAsyncError(comms[d], &async), occlSuccess);
        if (async == occlSuccess)
            continue;
        failed++;
        const char *why = occlGetLastError(comms[d]);
        cr_assert_not_null(strstr(why, "no device memory for 786432 bytes of scratch on device"),
                           "device %d: %s", d, why);
        cr_assert_not_null(strstr(why, "free of 1048576"), "device %d: %s", d, why);
    }
    cr_assert_gt(failed, 0, "a 768 KiB scratch fitted beside 384 KiB on a 1 MiB device");
}
