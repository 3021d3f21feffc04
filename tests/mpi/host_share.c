/*
 * The ranks of one host share it: run as 4 ranks x 2 devices on the fake
 * 8-core host "pack:2 numa:2 core:2 pu:1", every device gets a core of its
 * own (rank r, device d on core 2r + d) on the NUMA node holding it, instead
 * of every rank starting from core 0.
 */
#include <string.h>

#include "mpitest.h"

int main(void)
{
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    CHECK(ci.nranks == 4 && ci.deviceCount == 2);
    for (int d = 0; d < 2; d++) {
        orDeviceProp p;
        CHECK_OR(orGetDeviceProperties(&p, d));
        char want[16];
        snprintf(want, sizeof want, "%d", 2 * ci.rank + d);
        if (strcmp(p.cpuList, want) != 0) {
            fprintf(stderr, "rank %d device %d: cpus %s, expected %s\n", ci.rank, d, p.cpuList, want);
            return 1;
        }
        CHECK(p.numaNode == ci.rank); /* two cores per NUMA node */
    }
    if (ci.rank == 0)
        printf("host shared by 4 ranks x 2 devices: one core each\n");
    return 0;
}
