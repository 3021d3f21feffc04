/*
 * mpi_coll_perf.c - an MPI library's own collectives, timed as occl_perf
 * times OCCL's: the same sizes, warm-up and timed calls, the slowest rank's
 * time. Plain MPI only, so it builds with any MPI: the project builds it with
 * Open MPI's mpicc.openmpi, and occl_perf --ompi runs it with
 * mpirun.openmpi --oversubscribe for the Open MPI column.
 *
 *   mpirun -n N mpi_coll_perf COLL MINBYTES MAXBYTES STEPFACTOR ITERS WARMUP ROOT
 *
 * COLL is allreduce, broadcast, reduce, allgather, reducescatter, alltoall,
 * gather, scatter or sendrecv; float32 data, sum. Sizes are bytes of the
 * larger buffer of one rank, as in occl_perf. Rank 0 prints one line per
 * size: "BYTES TIME_US".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const colls[] = {"allreduce", "broadcast", "reduce",  "allgather", "reducescatter",
                                    "alltoall",  "gather",    "scatter", "sendrecv"};
enum { ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, GATHER, SCATTER, SENDRECV, NCOLLS };

/* Elements per rank block: the larger buffer of a rank holds `bytes`. */
static long count_of(int coll, long bytes, int n)
{
    long elems = bytes / 4;
    switch (coll) {
    case ALLGATHER:
    case REDUCESCATTER:
    case ALLTOALL:
    case GATHER:
    case SCATTER: return elems / n;
    default: return elems;
    }
}

static void call(int coll, float *s, float *r, int c, int root, int me, int n)
{
    MPI_Comm w = MPI_COMM_WORLD;
    switch (coll) {
    case ALLREDUCE: MPI_Allreduce(s, r, c, MPI_FLOAT, MPI_SUM, w); break;
    case BROADCAST: MPI_Bcast(r, c, MPI_FLOAT, root, w); break;
    case REDUCE: MPI_Reduce(s, r, c, MPI_FLOAT, MPI_SUM, root, w); break;
    case ALLGATHER: MPI_Allgather(s, c, MPI_FLOAT, r, c, MPI_FLOAT, w); break;
    case REDUCESCATTER: MPI_Reduce_scatter_block(s, r, c, MPI_FLOAT, MPI_SUM, w); break;
    case ALLTOALL: MPI_Alltoall(s, c, MPI_FLOAT, r, c, MPI_FLOAT, w); break;
    case GATHER: MPI_Gather(s, c, MPI_FLOAT, r, c, MPI_FLOAT, root, w); break;
    case SCATTER: MPI_Scatter(s, c, MPI_FLOAT, r, c, MPI_FLOAT, root, w); break;
    case SENDRECV:
        MPI_Sendrecv(s, c, MPI_FLOAT, (me + 1) % n, 0, r, c, MPI_FLOAT, (me + n - 1) % n, 0, w,
                     MPI_STATUS_IGNORE);
        break;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int coll = 0;
    while (argc == 8 && coll < NCOLLS && strcmp(argv[1], colls[coll]) != 0)
        coll++;
    if (argc != 8 || coll == NCOLLS) {
        if (me == 0)
            fprintf(stderr, "usage: mpi_coll_perf COLL MINBYTES MAXBYTES STEPFACTOR ITERS WARMUP ROOT\n");
        MPI_Finalize();
        return 2;
    }
    long lo = atol(argv[2]), hi = atol(argv[3]), step = atol(argv[4]);
    int iters = atoi(argv[5]), warmup = atoi(argv[6]), root = atoi(argv[7]);
    if (step < 2)
        step = 2;
    size_t cap = (size_t)(hi > 64 ? hi : 64);
    float *s = calloc(cap / 4 + 16, 4), *r = calloc(cap / 4 + 16, 4);
    if (!s || !r)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (long bytes = lo; bytes <= hi; bytes *= step) {
        int c = (int)count_of(coll, bytes, n);
        for (int k = 0; k < warmup; k++)
            call(coll, s, r, c, root, me, n);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int k = 0; k < iters; k++)
            call(coll, s, r, c, root, me, n);
        double us = (MPI_Wtime() - t0) / iters * 1e6, most;
        MPI_Reduce(&us, &most, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (me == 0)
            printf("%ld %.3f\n", bytes, most);
        if (bytes > hi / step)
            break;
    }
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
