/*
 * test_occl_register.c - occlMemAlloc/occlMemFree and occlCommRegister/
 * occlCommDeregister in one process with two devices: what is allocated is
 * device memory of the current device; a registration needs device memory
 * of the communicator's device, is counted per range, belongs to its
 * communicator, and a collective runs on registered buffers as on others.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "occl_checks.h"

static occlComm_t comms[2];

static void setup(void)
{
    cr_assert_eq(setenv("OCCL_TIMEOUT_MS", "10000", 1), 0);
    cr_assert_eq(occlCommInitAll(comms, 2, NULL), occlSuccess, "%s", occlGetLastError(NULL));
    cr_assert_eq(orSetDevice(0), orSuccess);
}

static void teardown(void)
{
    for (int d = 0; d < 2; d++)
        if (comms[d])
            occlCommDestroy(comms[d]);
}

TestSuite(occl_register, .init = setup, .fini = teardown, .timeout = 60);

Test(occl_register, mem_alloc_and_free)
{
    void *p = NULL;
    EXPECT_REASON(occlMemAlloc(NULL, 64), occlInvalidArgument, "ptr is NULL");
    EXPECT_REASON(occlMemAlloc(&p, 0), occlInvalidArgument, "size is 0");
    cr_assert_eq(orSetDevice(1), orSuccess);
    CHECK_OCCL(occlMemAlloc(&p, 1000));
    orPointerAttributes attr;
    cr_assert_eq(orPointerGetAttributes(&attr, p), orSuccess);
    cr_assert_eq(attr.type, orMemoryTypeDevice);
    cr_assert_eq(attr.device, 1);
    CHECK_OCCL(occlMemFree(p));
    EXPECT_REASON(occlMemFree(p), occlInvalidArgument, "not the start of a live device allocation");
    int host;
    EXPECT_REASON(occlMemFree(&host), occlInvalidArgument, "not the start of a live device allocation");
    CHECK_OCCL(occlMemFree(NULL));
}

Test(occl_register, register_checks_and_counts)
{
    void *buf, *other, *h1 = NULL, *h2 = NULL, *pinned;
    CHECK_OCCL(occlMemAlloc(&buf, 4096));
    CHECK_OCCL(occlCommRegister(comms[0], buf, 4096, &h1));
    CHECK_OCCL(occlCommRegister(comms[0], buf, 4096, &h2));
    cr_assert_not_null(h1);
    cr_assert_eq(h1, h2, "the same range shares its handle");
    void *h3 = NULL;
    CHECK_OCCL(occlCommRegister(comms[0], (char *)buf + 1024, 1024, &h3)); /* a part of it */
    cr_assert_neq(h3, h1);
    /* Comm 1 does not know comm 0's registrations. */
    EXPECT_REASON(occlCommDeregister(comms[1], h1), occlInvalidUsage, "not a registration of this communicator");
    CHECK_OCCL(occlCommDeregister(comms[0], h1));
    CHECK_OCCL(occlCommDeregister(comms[0], h2)); /* the second reference */
    EXPECT_REASON(occlCommDeregister(comms[0], h1), occlInvalidUsage, "deregistered already");
    CHECK_OCCL(occlCommDeregister(comms[0], NULL));
    /* Refused: not device memory, past the allocation, another device's. */
    static char host[4096];
    void *h = NULL;
    EXPECT_REASON(occlCommRegister(comms[0], host, sizeof host, &h), occlInvalidArgument,
           "not within one device allocation");
    cr_assert_eq(orMallocHost(&pinned, 4096), orSuccess);
    EXPECT_REASON(occlCommRegister(comms[0], pinned, 4096, &h), occlInvalidArgument,
           "not within one device allocation");
    EXPECT_REASON(occlCommRegister(comms[0], buf, 4097, &h), occlInvalidArgument,
           "not within one device allocation");
    cr_assert_eq(orSetDevice(1), orSuccess);
    CHECK_OCCL(occlMemAlloc(&other, 4096));
    EXPECT_REASON(occlCommRegister(comms[0], other, 4096, &h), occlInvalidUsage, "device 1");
    CHECK_OCCL(occlCommRegister(comms[1], other, 4096, &h)); /* left for destroy to free */
    EXPECT_REASON(occlCommRegister(comms[0], buf, 16, NULL), occlInvalidArgument, "handle is NULL");
    EXPECT_REASON(occlCommRegister(comms[0], NULL, 16, &h), occlInvalidArgument, "buff or handle is NULL");
    EXPECT_REASON(occlCommRegister(NULL, buf, 16, &h), occlInvalidArgument, "not a live communicator");
    EXPECT_REASON(occlCommDeregister(NULL, h3), occlInvalidArgument, "not a live communicator");
    orFreeHost(pinned);
    CHECK_OCCL(occlMemFree(other));
    CHECK_OCCL(occlMemFree(buf));
}

Test(occl_register, collective_on_registered_buffers)
{
    float *buf[2];
    void *h[2];
    orStream_t s[2];
    float host[256];
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        CHECK_OCCL(occlMemAlloc((void **)&buf[d], sizeof host));
        CHECK_OCCL(occlCommRegister(comms[d], buf[d], sizeof host, &h[d]));
        cr_assert_eq(orStreamCreate(&s[d]), orSuccess);
        for (int i = 0; i < 256; i++)
            host[i] = (float)(i + d);
        cr_assert_eq(orMemcpy(buf[d], host, sizeof host, orMemcpyHostToDevice), orSuccess);
    }
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlAllReduce(buf[d], buf[d], 256, occlFloat32, occlSum, comms[d], s[d]));
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orStreamSynchronize(s[d]), orSuccess);
        cr_assert_eq(orMemcpy(host, buf[d], sizeof host, orMemcpyDeviceToHost), orSuccess);
        for (int i = 0; i < 256; i++)
            cr_assert_eq(host[i], (float)(2 * i + 1));
        CHECK_OCCL(occlCommDeregister(comms[d], h[d]));
        orStreamDestroy(s[d]);
        CHECK_OCCL(occlMemFree(buf[d]));
    }
}

Test(occl_register, mem_stats)
{
    uint64_t total = 0, persist = 0, suspend = 7, suspended = 7;
    EXPECT_REASON(occlCommMemStats(comms[0], occlStatGpuMemTotal, NULL), occlInvalidArgument, "value is NULL");
    EXPECT_REASON(occlCommMemStats(comms[0], (occlCommMemStat_t)9, &total), occlInvalidArgument,
           "unknown statistic 9");
    EXPECT_REASON(occlCommMemStats(NULL, occlStatGpuMemTotal, &total), occlInvalidArgument,
           "not a live communicator");
    CHECK_OCCL(occlCommMemStats(comms[0], occlStatGpuMemTotal, &total));
    CHECK_OCCL(occlCommMemStats(comms[0], occlStatGpuMemPersist, &persist));
    CHECK_OCCL(occlCommMemStats(comms[0], occlStatGpuMemSuspend, &suspend));
    CHECK_OCCL(occlCommMemStats(comms[0], occlStatGpuMemSuspended, &suspended));
    cr_assert_gt(total, 0, "the control block is device memory");
    cr_assert_eq(persist, total);
    cr_assert_eq(suspend, 0);
    cr_assert_eq(suspended, 0);
    /* A reduce-scatter of 4 MiB per rank takes scratch, which finalize gives back. */
    const size_t count = (size_t)1 << 20;
    float *send[2], *recv[2];
    orStream_t s[2];
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        CHECK_OCCL(occlMemAlloc((void **)&send[d], 2 * count * sizeof(float)));
        CHECK_OCCL(occlMemAlloc((void **)&recv[d], count * sizeof(float)));
        cr_assert_eq(orMemset(send[d], 0, 2 * count * sizeof(float)), orSuccess);
        cr_assert_eq(orStreamCreate(&s[d]), orSuccess);
    }
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlReduceScatter(send[d], recv[d], count, occlFloat32, occlSum, comms[d], s[d]));
    CHECK_OCCL(occlGroupEnd());
    uint64_t during = 0, after = 0;
    for (int d = 0; d < 2; d++)
        cr_assert_eq(orStreamSynchronize(s[d]), orSuccess);
    CHECK_OCCL(occlCommMemStats(comms[0], occlStatGpuMemTotal, &during));
    cr_assert_gt(during, total, "scratch counted (%llu, before %llu)", (unsigned long long)during,
                 (unsigned long long)total);
    CHECK_OCCL(occlCommMemStats(comms[0], occlStatGpuMemSuspend, &suspend));
    cr_assert_eq(suspend, during - persist, "the scratch is what a suspend frees");

    /* Suspend: the scratch goes, calls are refused until resume. */
    EXPECT_REASON(occlCommSuspend(comms[0], 0x4), occlInvalidArgument, "unknown flags 0x4");
    EXPECT_REASON(occlCommSuspend(NULL, OCCL_SUSPEND_MEM), occlInvalidArgument, "not a live communicator");
    EXPECT_REASON(occlCommResume(comms[0]), occlInvalidUsage, "not suspended");
    CHECK_OCCL(occlCommSuspend(comms[0], 0)); /* nothing asked: nothing suspended */
    CHECK_OCCL(occlCommMemStats(comms[0], occlStatGpuMemSuspended, &suspended));
    cr_assert_eq(suspended, 0);
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlCommSuspend(comms[d], OCCL_SUSPEND_MEM));
    CHECK_OCCL(occlCommMemStats(comms[0], occlStatGpuMemSuspended, &suspended));
    cr_assert_eq(suspended, 1);
    CHECK_OCCL(occlCommMemStats(comms[0], occlStatGpuMemTotal, &after));
    cr_assert_eq(after, total, "scratch freed by the suspend");
    EXPECT_REASON(occlCommSuspend(comms[0], OCCL_SUSPEND_MEM), occlInvalidUsage, "suspended already");
    cr_assert_eq(orSetDevice(0), orSuccess);
    EXPECT_REASON(occlReduceScatter(send[0], recv[0], count, occlFloat32, occlSum, comms[0], s[0]),
           occlInvalidUsage, "suspended");
    occlComm_t child = NULL;
    EXPECT_REASON(occlCommSplit(comms[0], 0, 0, &child, NULL), occlInvalidUsage, "suspended");
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlCommResume(comms[d]));
    CHECK_OCCL(occlCommMemStats(comms[0], occlStatGpuMemSuspended, &suspended));
    cr_assert_eq(suspended, 0);
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlReduceScatter(send[d], recv[d], count, occlFloat32, occlSum, comms[d], s[d]));
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++)
        cr_assert_eq(orStreamSynchronize(s[d]), orSuccess);
    CHECK_OCCL(occlCommMemStats(comms[0], occlStatGpuMemTotal, &after));
    cr_assert_eq(after, during, "resumed: the scratch is taken again");
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlCommFinalize(comms[d]));
    CHECK_OCCL(occlCommMemStats(comms[0], occlStatGpuMemTotal, &after));
    cr_assert_eq(after, total, "scratch given back at finalize");
    for (int d = 0; d < 2; d++) {
        orStreamDestroy(s[d]);
        CHECK_OCCL(occlMemFree(send[d]));
        CHECK_OCCL(occlMemFree(recv[d]));
    }
}

/* Symmetric memory windows: checked and recorded like registrations; the
 * user pointer comes back; a collective on window buffers is correct;
 * NCCL's errors and OCCL's checks of the handle. */
Test(occl_register, windows)
{
    const size_t count = 1024;
    float *buf[2];
    occlWindow_t win[2] = {NULL, NULL};
    orStream_t s[2];
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        CHECK_OCCL(occlMemAlloc((void **)&buf[d], count * sizeof(float)));
        cr_assert_eq(orStreamCreate(&s[d]), orSuccess);
        float host[1024];
        for (size_t i = 0; i < count; i++)
            host[i] = (float)(d + i);
        cr_assert_eq(orMemcpy(buf[d], host, sizeof host, orMemcpyHostToDevice), orSuccess);
    }
    occlWindow_t w = (occlWindow_t)&count;
    EXPECT_REASON(occlCommWindowRegister(NULL, buf[0], 64, &w, OCCL_WIN_DEFAULT), occlInvalidArgument,
           "not a live communicator");
    EXPECT_REASON(occlCommWindowRegister(comms[0], buf[0], 64, NULL, OCCL_WIN_DEFAULT), occlInvalidArgument,
           "win is NULL");
    EXPECT_REASON(occlCommWindowRegister(comms[0], NULL, 64, &w, OCCL_WIN_DEFAULT), occlInvalidArgument,
           "buff is NULL or size is 0");
    cr_assert_null(w, "win is cleared on failure, as NCCL does");
    EXPECT_REASON(occlCommWindowRegister(comms[0], buf[0], 0, &w, OCCL_WIN_DEFAULT), occlInvalidArgument,
           "size is 0");
    EXPECT_REASON(occlCommWindowRegister(comms[0], buf[0], 64, &w, 0x10), occlInvalidArgument, "unknown flags");
    int host;
    EXPECT_REASON(occlCommWindowRegister(comms[0], &host, sizeof host, &w, OCCL_WIN_DEFAULT),
           occlInvalidArgument, "not within one device allocation");
    EXPECT_REASON(occlCommWindowRegister(comms[0], buf[0], (count + 1) * sizeof(float), &w, OCCL_WIN_DEFAULT),
           occlInvalidArgument, "not within one device allocation");
    EXPECT_REASON(occlCommWindowRegister(comms[0], buf[1], 64, &w, OCCL_WIN_DEFAULT), occlInvalidUsage,
           "memory of device 1");
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlCommWindowRegister(comms[d], buf[d], count * sizeof(float), &win[d],
                                          OCCL_WIN_COLL_SYMMETRIC | OCCL_WIN_STRICT_ORDERING));
    void *user = NULL;
    CHECK_OCCL(occlWinGetUserPtr(comms[1], win[1], &user));
    cr_assert_eq(user, buf[1]);
    EXPECT_REASON(occlWinGetUserPtr(comms[0], win[1], &user), occlInvalidUsage, "not a window of this communicator");
    EXPECT_REASON(occlWinGetUserPtr(comms[0], win[0], NULL), occlInvalidArgument, "NULL");
    EXPECT_REASON(occlWinGetUserPtr(comms[0], NULL, &user), occlInvalidArgument, "NULL");

    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlAllReduce(buf[d], buf[d], count, occlFloat32, occlSum, comms[d], s[d]));
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orStreamSynchronize(s[d]), orSuccess);
        float out[1024];
        cr_assert_eq(orMemcpy(out, buf[d], sizeof out, orMemcpyDeviceToHost), orSuccess);
        for (size_t i = 0; i < count; i++)
            cr_assert_eq(out[i], (float)(1 + 2 * i));
    }
    CHECK_OCCL(occlCommWindowDeregister(comms[0], NULL));
    EXPECT_REASON(occlCommWindowDeregister(comms[0], win[1]), occlInvalidUsage, "not a window of this communicator");
    CHECK_OCCL(occlCommWindowDeregister(comms[0], win[0]));
    EXPECT_REASON(occlCommWindowDeregister(comms[0], win[0]), occlInvalidUsage, "deregistered already");
    EXPECT_REASON(occlWinGetUserPtr(comms[0], win[0], &user), occlInvalidUsage, "not a window");
    /* win[1] is left for destroy to free. */
    for (int d = 0; d < 2; d++) {
        orStreamDestroy(s[d]);
        CHECK_OCCL(occlMemFree(buf[d]));
    }
}
