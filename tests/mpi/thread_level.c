/*
 * An application that initialized MPI below MPI_THREAD_MULTIPLE (with
 * MPI_Init_thread) gets a clear error from the first runtime call (the
 * runtime's own threads call MPI); a plain MPI_Init gets MPI_THREAD_MULTIPLE
 * from the library's MPI_Init, with or without MPIR_CVAR_DEFAULT_THREAD_LEVEL.
 *
 *   thread_level --expect-refusal | --expect-success | --expect-init-failure
 */
#include <string.h>

#include "mpitest.h"

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    int provided;
    if (strcmp(argv[1], "--expect-refusal") == 0)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    else
        MPI_Init(&argc, &argv);
    MPI_Query_thread(&provided);
    int count = -1;
    orError_t err = orGetDeviceCount(&count);
    if (strcmp(argv[1], "--expect-refusal") == 0) {
        CHECK(provided < MPI_THREAD_MULTIPLE);
        EXPECT_OR(err, orErrorInitialization);
        CHECK(count == -1);
        EXPECT_OR(orMalloc((void **)&argv, 16), orErrorInitialization); /* and it stays so */
    } else if (strcmp(argv[1], "--expect-init-failure") == 0) {
        EXPECT_OR(err, orErrorInitialization); /* this rank's or another's settings */
    } else {
        CHECK(provided == MPI_THREAD_MULTIPLE);
        CHECK_OR(err);
        CHECK(count >= 1);
    }
    MPI_Finalize();
    return 0;
}
