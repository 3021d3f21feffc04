/*
 * collectives/topo_ring.c - a communicator's ring on a declared topology.
 *
 * The topology layer answers in entries of the device list it is given, so
 * with one entry per comm rank its order is the ring of comm ranks. Two
 * ranks sharing a device have no path between them that the topology could
 * rank; they are refused and the communicator keeps its rank-order ring.
 */
#include "topo_ring.h"

#include <stdio.h>
#include <stdlib.h>

#include "topo.h"

int occl_topo_check_devices(const struct or_topo *topo, const int *rank_device, int nranks,
                            char *why, size_t why_size)
{
    if (!topo || nranks < 1) {
        snprintf(why, why_size, "no topology or no ranks");
        return -1;
    }
    int ndev = or_topo_device_count(topo);
    char *seen = calloc((size_t)ndev, 1);
    if (!seen) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    int rc = 0;
    for (int r = 0; r < nranks && rc == 0; r++) {
        int d = rank_device[r];
        if (d < 0 || d >= ndev || seen[d]) {
            snprintf(why, why_size,
                     d < 0 || d >= ndev ? "rank %d's device %d is not in the topology"
                                        : "rank %d shares topology device %d with another rank",
                     r, d);
            rc = -1;
        } else {
            seen[d] = 1;
        }
    }
    free(seen);
    return rc;
}

int occl_topo_ring(const struct or_topo *topo, const int *rank_device, int nranks, int *ring,
                   char *why, size_t why_size)
{
    if (occl_topo_check_devices(topo, rank_device, nranks, why, why_size) != 0)
        return -1;
    or_topo_error err;
    if (or_topo_ring(topo, rank_device, nranks, ring, &err) != OR_TOPO_OK) {
        or_topo_error_format(&err, why, why_size);
        return -1;
    }
    return 0;
}

int occl_topo_ring_crossings(const struct or_topo *topo, const int *rank_device, const int *ring,
                             int nranks)
{
    int crossings = 0;
    for (int i = 0; i < nranks && nranks > 1; i++) {
        int a = rank_device[ring[i]], b = rank_device[ring[(i + 1) % nranks]];
        crossings += or_topo_device_node(topo, a) != or_topo_device_node(topo, b);
    }
    return crossings;
}

/* ---- the communicator's hook ------------------------------------------------ */

#include <string.h>

#define OCCL_LOG_SUBSYS OCCL_SUBSYS_GRAPH
#include "occl_internal.h"

void occl_ring_follow_topology(occlComm_t c)
{
    if (!c->job.topo || !c->job.topo_device)
        return;
    int n = c->nranks;
    int *dev = malloc((size_t)n * sizeof *dev), *ring = malloc((size_t)n * sizeof *ring);
    char why[600] = "out of memory";
    int ok = dev && ring;
    for (int r = 0; ok && r < n; r++) {
        int g = or_global_device(c->peers[r].world_rank, c->peers[r].device);
        dev[r] = g >= 0 ? c->job.topo_device[g] : -1;
    }
    if (ok && occl_topo_ring(c->job.topo, dev, n, ring, why, sizeof why) == 0) {
        memcpy(c->ring, ring, (size_t)n * sizeof *ring);
        if (c->rank == 0 && occl_log_threshold >= OCCL_LOG_INFO) {
            char text[1024];
            size_t len = 0;
            for (int i = 0; i < n && len + 16 < sizeof text; i++)
                len += (size_t)snprintf(text + len, sizeof text - len, " %d", ring[i]);
            if (len + 16 >= sizeof text)
                snprintf(text + len, sizeof text - len, " ...");
            OCCL_INFO("comm %016llx ring from the topology (%d network crossings):%s",
                      (unsigned long long)c->id,
                      occl_topo_ring_crossings(c->job.topo, dev, ring, n), text);
        }
    } else {
        OCCL_INFO("comm %016llx keeps the rank-order ring: %s", (unsigned long long)c->id, why);
    }
    free(dev);
    free(ring);
}
