/* tests/topology/fuzz_topo_placement.c - libFuzzer harness of placement
 * files, read for a few jobs on one topology. A failure must come with a
 * message and leave the output alone; an accepted file must be a placement
 * (each device once, a rank's devices in one node) that writes out and reads
 * back equal. `make fuzz`. */
#include "topo.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static or_topo *topo; /* two nodes of four devices, kept across inputs */

static void check_job(const char *text, size_t size, int nranks, int per_rank)
{
    int dev[8], back[8];
    int n = nranks * per_rank;
    for (int i = 0; i < n; i++)
        dev[i] = -1;
    or_topo_error err;
    if (or_topo_place_text(topo, text, size, "fuzz", nranks, per_rank, dev, &err) != OR_TOPO_OK) {
        if (err.message[0] == '\0')
            abort();
        for (int i = 0; i < n; i++)
            if (dev[i] != -1)
                abort();
        return;
    }
    int used[8] = {0};
    for (int r = 0; r < nranks; r++)
        for (int d = 0; d < per_rank; d++) {
            int x = dev[r * per_rank + d];
            if (x < 0 || x >= 8 || used[x]++ ||
                or_topo_device_node(topo, x) != or_topo_device_node(topo, dev[r * per_rank]))
                abort();
        }
    char *out;
    size_t len;
    if (or_topo_write_placement(topo, nranks, per_rank, dev, "fuzz", &out, &len, &err) !=
            OR_TOPO_OK ||
        or_topo_place_text(topo, out, len, "written", nranks, per_rank, back, &err) !=
            OR_TOPO_OK ||
        memcmp(dev, back, sizeof *dev * (size_t)n) != 0)
        abort();
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!topo && or_topo_from_string("nodes:2 devices:4", "fuzz", &topo, NULL) != OR_TOPO_OK)
        abort();
    if (size > 4096)
        return 0;
    check_job((const char *)data, size, 4, 2);
    check_job((const char *)data, size, 2, 1);
    check_job((const char *)data, size, 8, 1);
    return 0;
}
