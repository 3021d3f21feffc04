/*
 * test_occl_orphans.c - a cancelled network send's message outlives its
 * transfer (collectives/transport.c, occl_net_orphan): MPI may read it until
 * the send completes, so it is freed only then, never before.
 */
#include <criterion/criterion.h>

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "occl_internal.h"

static void mpi_up(void)
{
    int provided = 0;
    cr_assert_eq(MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided), MPI_SUCCESS);
}

static void mpi_down(void)
{
    MPI_Finalize();
}

TestSuite(occl_orphans, .init = mpi_up, .fini = mpi_down);

/* A synchronous send nobody has received: open until a receive matches. */
static void *open_send(int tag, MPI_Request *req)
{
    char *msg = malloc(64);
    cr_assert_not_null(msg);
    for (int i = 0; i < 64; i++)
        msg[i] = (char)(tag + i);
    cr_assert_eq(MPI_Issend(msg, 64, MPI_BYTE, 0, tag, MPI_COMM_WORLD, req), MPI_SUCCESS);
    return msg;
}

Test(occl_orphans, kept_until_the_send_completes)
{
    MPI_Request a, b;
    void *ma = open_send(7, &a), *mb = open_send(8, &b);
    occl_net_orphan(&a, 1, ma);
    occl_net_orphan(&b, 1, mb);
    cr_expect_eq(a, MPI_REQUEST_NULL, "the list holds the request now");
    cr_expect_eq(occl_net_orphans_reap(), 2, "no send has completed: both messages are kept");

    /* Receiving one completes its send: MPI read the message intact, and
     * only that one is freed. */
    char got[64];
    cr_assert_eq(MPI_Recv(got, 64, MPI_BYTE, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_SUCCESS);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(got[i], (char)(8 + i), "byte %d of the kept message", i);
    cr_expect_eq(occl_net_orphans_reap(), 1);

    cr_assert_eq(MPI_Recv(got, 64, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_SUCCESS);
    cr_expect_eq(got[63], (char)(7 + 63));
    cr_expect_eq(occl_net_orphans_reap(), 0, "every send completed: every message freed");
}
