/*
 * test_occl_lifetime.c - a communicator's control block outlives the
 * communicator until the other ranks of its node have let go of it.
 *
 * A sender waits for the receiver's acknowledgement in the receiver's
 * block. The receiver may take the bytes, acknowledge, end its call and
 * destroy its communicator before the sender looks: had a new communicator
 * taken the freed block (zeroed), the sender would wait for an
 * acknowledgement that is no longer there. One process, two devices.
 */
#include <criterion/criterion.h>

#include <stdlib.h>

#include "occl_internal.h"

TestSuite(occl_lifetime, .timeout = 60);

static size_t free_bytes(int d)
{
    size_t free_b = 0, total = 0;
    cr_assert_eq(orSetDevice(d), orSuccess);
    cr_assert_eq(orMemGetInfo(&free_b, &total), orSuccess);
    return free_b;
}

/* Rank 0 sends 4 floats to rank 1. */
static void send_one(occlComm_t comms[2], orStream_t streams[2], float *bufs[2])
{
    cr_assert_eq(occlGroupStart(), occlSuccess);
    cr_assert_eq(occlSend(bufs[0], 4, occlFloat32, 1, comms[0], streams[0]), occlSuccess);
    cr_assert_eq(occlRecv(bufs[1], 4, occlFloat32, 0, comms[1], streams[1]), occlSuccess);
    cr_assert_eq(occlGroupEnd(), occlSuccess, "%s", occlGetLastError(NULL));
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orStreamSynchronize(streams[d]), orSuccess);
    }
}

Test(occl_lifetime, destroyed_block_stays_until_the_peer_lets_go)
{
    cr_assert_eq(setenv("OCCL_TIMEOUT_MS", "20000", 1), 0);
    size_t before[2];
    orStream_t streams[2];
    float *bufs[2];
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orStreamCreate(&streams[d]), orSuccess);
        cr_assert_eq(orMalloc((void **)&bufs[d], 4 * sizeof(float)), orSuccess);
        before[d] = free_bytes(d);
    }
    occlComm_t comms[2];
    cr_assert_eq(occlCommInitAll(comms, 2, NULL), occlSuccess, "%s", occlGetLastError(NULL));
    send_one(comms, streams, bufs);

    /* What rank 0 reads of rank 1: its acknowledgement of transfer 1. */
    occl_ctrl *peer_block = comms[0]->peers[1].ctrl;
    const occl_slot *ack = &peer_block->slots[comms[0]->nranks + 0];
    cr_assert_eq(atomic_load(&ack->seq), 1);

    /* Rank 1 is done first; a new pair of communicators is made meanwhile. */
    cr_assert_eq(occlCommDestroy(comms[1]), occlSuccess);
    occlComm_t fresh[2];
    cr_assert_eq(occlCommInitAll(fresh, 2, NULL), occlSuccess, "%s", occlGetLastError(NULL));
    cr_assert_neq((void *)fresh[0]->ctrl, (void *)peer_block);
    cr_assert_neq((void *)fresh[1]->ctrl, (void *)peer_block);
    cr_assert_eq(peer_block->magic, OCCL_COMM_MAGIC);
    cr_assert_eq(atomic_load(&ack->seq), 1, "rank 0 no longer sees rank 1's acknowledgement");
    send_one(fresh, streams, bufs);

    /* Once rank 0 lets go, the block is freed: nothing is left behind. */
    cr_assert_eq(occlCommDestroy(comms[0]), occlSuccess);
    cr_assert_eq(occlCommDestroy(fresh[0]), occlSuccess);
    cr_assert_eq(occlCommDestroy(fresh[1]), occlSuccess);
    for (int d = 0; d < 2; d++)
        cr_assert_eq(free_bytes(d), before[d], "device %d: %zu bytes not freed", d,
                     before[d] - free_bytes(d));
}
