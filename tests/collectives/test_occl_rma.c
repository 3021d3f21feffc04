/*
 * test_occl_rma.c - one-sided calls between two devices of one process:
 * puts both ways in one group over both communicators, a wait that holds
 * its stream until the put it waits for is issued, a put that waits for its
 * peer to register the window, a put into a deregistered window and a wait
 * whose signal never comes failing when they run, with the reason.
 */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "occl_checks.h"

#define N 4096

static occlComm_t comms[2];
static orStream_t streams[2];
static uint32_t *wbuf[2], *src[2];

static void open_comms(void)
{
    cr_assert_eq(occlCommInitAll(comms, 2, NULL), occlSuccess, "%s", occlGetLastError(NULL));
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orStreamCreate(&streams[d]), orSuccess);
        cr_assert_eq(orMalloc((void **)&wbuf[d], N * sizeof(uint32_t)), orSuccess);
        cr_assert_eq(orMalloc((void **)&src[d], N * sizeof(uint32_t)), orSuccess);
        cr_assert_eq(orMemset(wbuf[d], 0, N * sizeof(uint32_t)), orSuccess);
        uint32_t h[N];
        for (int i = 0; i < N; i++)
            h[i] = (uint32_t)(d + 1) << 16 | (uint32_t)i;
        cr_assert_eq(orMemcpy(src[d], h, sizeof h, orMemcpyHostToDevice), orSuccess);
    }
}

static void setup(void)
{
    cr_assert_eq(setenv("OCCL_TIMEOUT_MS", "10000", 1), 0);
    open_comms();
}

static void setup_short(void)
{
    cr_assert_eq(setenv("OCCL_TIMEOUT_MS", "500", 1), 0);
    open_comms();
}

static void teardown(void)
{
    for (int d = 0; d < 2; d++)
        if (comms[d])
            occlCommAbort(comms[d]);
}

/* Device d's window holds elements [0, n) of device `from`'s source. */
static void expect_from(int d, int from, int n)
{
    uint32_t h[N];
    cr_assert_eq(orMemcpy(h, wbuf[d], (size_t)n * sizeof(uint32_t), orMemcpyDeviceToHost), orSuccess);
    for (int i = 0; i < n; i++)
        cr_assert_eq(h[i], (uint32_t)(from + 1) << 16 | (uint32_t)i, "device %d element %d: %#x", d, i,
                     h[i]);
}

TestSuite(occl_rma, .init = setup, .fini = teardown, .timeout = 60);

Test(occl_rma, exchange_in_one_group)
{
    occlWindow_t w[2];
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlCommWindowRegister(comms[d], wbuf[d], N * sizeof(uint32_t), &w[d], OCCL_WIN_DEFAULT));
    occlWaitSignalDesc_t desc[2] = {{1, 1, 0, 0}, {1, 0, 0, 0}};
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++) {
        CHECK_OCCL(occlPutSignal(src[d], N, occlUint32, 1 - d, w[d], 0, 0, 0, 0, comms[d], streams[d]));
        CHECK_OCCL(occlWaitSignal(1, &desc[d], comms[d], streams[d]));
    }
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orStreamSynchronize(streams[d]), orSuccess);
        expect_from(d, 1 - d, N);
    }
}

Test(occl_rma, wait_holds_its_stream_until_the_put)
{
    occlWindow_t w[2];
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlCommWindowRegister(comms[d], wbuf[d], N * sizeof(uint32_t), &w[d], OCCL_WIN_DEFAULT));
    occlWaitSignalDesc_t desc = {2, 1, 0, 0};
    CHECK_OCCL(occlWaitSignal(1, &desc, comms[0], streams[0]));
    usleep(50000);
    cr_assert_eq(orStreamQuery(streams[0]), orErrorNotReady, "the wait ended without a signal");
    CHECK_OCCL(occlSignal(0, 0, 0, 0, comms[1], streams[1]));
    cr_assert_eq(orStreamSynchronize(streams[1]), orSuccess);
    usleep(50000);
    cr_assert_eq(orStreamQuery(streams[0]), orErrorNotReady, "the wait ended after 1 signal of 2");
    CHECK_OCCL(occlPutSignal(src[1], 100, occlUint32, 0, w[1], 0, 0, 0, 0, comms[1], streams[1]));
    cr_assert_eq(orStreamSynchronize(streams[0]), orSuccess);
    expect_from(0, 1, 100);
}

Test(occl_rma, put_waits_for_the_peer_to_register)
{
    occlWindow_t w0, w1;
    CHECK_OCCL(occlCommWindowRegister(comms[0], wbuf[0], N * sizeof(uint32_t), &w0, OCCL_WIN_DEFAULT));
    CHECK_OCCL(occlPutSignal(src[0], N, occlUint32, 1, w0, 0, 0, 0, 0, comms[0], streams[0]));
    usleep(50000);
    cr_assert_eq(orStreamQuery(streams[0]), orErrorNotReady, "the put ended before device 1's window");
    CHECK_OCCL(occlCommWindowRegister(comms[1], wbuf[1], N * sizeof(uint32_t), &w1, OCCL_WIN_DEFAULT));
    cr_assert_eq(orStreamSynchronize(streams[0]), orSuccess);
    occlWaitSignalDesc_t desc = {1, 0, 0, 0};
    CHECK_OCCL(occlWaitSignal(1, &desc, comms[1], streams[1]));
    cr_assert_eq(orStreamSynchronize(streams[1]), orSuccess);
    expect_from(1, 0, N);
}

Test(occl_rma, put_into_a_deregistered_window_fails)
{
    occlWindow_t w0, w1;
    CHECK_OCCL(occlCommWindowRegister(comms[0], wbuf[0], N * sizeof(uint32_t), &w0, OCCL_WIN_DEFAULT));
    CHECK_OCCL(occlCommWindowRegister(comms[1], wbuf[1], N * sizeof(uint32_t), &w1, OCCL_WIN_DEFAULT));
    CHECK_OCCL(occlCommWindowDeregister(comms[1], w1));
    CHECK_OCCL(occlPutSignal(src[0], N, occlUint32, 1, w0, 0, 0, 0, 0, comms[0], streams[0]));
    cr_assert_neq(orStreamSynchronize(streams[0]), orSuccess);
    occlResult_t state;
    CHECK_OCCL(occlCommGetAsyncError(comms[0], &state));
    cr_assert_eq(state, occlInvalidUsage);
    cr_assert(strstr(occlGetLastError(comms[0]), "rank 1 has no window #0 (deregistered"), "%s",
              occlGetLastError(comms[0]));
}

TestSuite(occl_rma_timeout, .init = setup_short, .fini = teardown, .timeout = 60);

Test(occl_rma_timeout, wait_without_a_signal_times_out)
{
    occlWaitSignalDesc_t desc = {3, 1, 0, 0};
    CHECK_OCCL(occlSignal(0, 0, 0, 0, comms[1], streams[1]));
    CHECK_OCCL(occlWaitSignal(1, &desc, comms[0], streams[0]));
    cr_assert_eq(orStreamSynchronize(streams[0]), orErrorTimeout);
    occlResult_t state;
    CHECK_OCCL(occlCommGetAsyncError(comms[0], &state));
    cr_assert_eq(state, occlTimeout);
    cr_assert(strstr(occlGetLastError(comms[0]), "WaitSignal: 1 of 3 signals from rank 1"), "%s",
              occlGetLastError(comms[0]));
}

Test(occl_rma_timeout, put_to_a_window_never_registered_times_out)
{
    occlWindow_t w0;
    CHECK_OCCL(occlCommWindowRegister(comms[0], wbuf[0], N * sizeof(uint32_t), &w0, OCCL_WIN_DEFAULT));
    CHECK_OCCL(occlPutSignal(src[0], 1, occlUint32, 1, w0, 0, 0, 0, 0, comms[0], streams[0]));
    cr_assert_eq(orStreamSynchronize(streams[0]), orErrorTimeout);
    cr_assert(strstr(occlGetLastError(comms[0]), "rank 1 did not register its window #0"), "%s",
              occlGetLastError(comms[0]));
}
