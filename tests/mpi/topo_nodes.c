/*
 * OPENREG_TOPO decides the virtual nodes: each rank checks the node the
 * runtime gives it against the expected list. (tests/mpi/ring moves data
 * between the devices of such jobs.)
 *
 *   topo_nodes NODE_OF_RANK0 NODE_OF_RANK1 ...
 */
#include "mpitest.h"

int main(int argc, char **argv)
{
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    CHECK(argc == ci.nranks + 1);
    int nnodes = 0;
    for (int r = 0; r < ci.nranks; r++)
        if (atoi(argv[r + 1]) + 1 > nnodes)
            nnodes = atoi(argv[r + 1]) + 1;
    if (ci.node != atoi(argv[ci.rank + 1]) || ci.nnodes != nnodes) {
        fprintf(stderr, "rank %d: node %d of %d, expected node %s of %d\n", ci.rank, ci.node,
                ci.nnodes, argv[ci.rank + 1], nnodes);
        CHECK(0);
    }
    mpitest_barrier();
    if (ci.rank == 0)
        printf("topo_nodes: %d ranks on %d virtual nodes as expected\n", ci.nranks, ci.nnodes);
    return 0;
}
