/*
 * collectives/config.c - occlConfig_t: a user's configuration checked as
 * NCCL 2.31 checks ncclConfig_t, and resolved to a communicator's settings.
 */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "occl_internal.h"

/* NCCL's limit on channels (MAXCHANNELS), which nChannelsPerNetPeer may not pass. */
#define NCCL_MAX_CHANNELS 64

/* Fields NCCL added at each version: a config of an older version has
 * them reset to their defaults (its header did not have them, so they hold
 * whatever followed the struct). */
#define V(x, y, z) OCCL_VERSION(x, y, z)

/* The defaults (NCCL's; the CTA counts are NCCL's too, though OCCL runs no
 * CTAs: kept so a configuration reads back as on NCCL). */
static void fill_defaults(occlConfig_t *c)
{
#define DEFAULT(field, undef, value)                                                             \
    do {                                                                                         \
        if (c->field == (undef))                                                                 \
            c->field = (value);                                                                  \
    } while (0)
    DEFAULT(blocking, OCCL_CONFIG_UNDEF_INT, 1);
    DEFAULT(cgaClusterSize, OCCL_CONFIG_UNDEF_INT, 4);
    DEFAULT(minCTAs, OCCL_CONFIG_UNDEF_INT, 1);
    DEFAULT(maxCTAs, OCCL_CONFIG_UNDEF_INT, NCCL_MAX_CHANNELS);
    DEFAULT(splitShare, OCCL_CONFIG_UNDEF_INT, 0);
    DEFAULT(collnetEnable, OCCL_CONFIG_UNDEF_INT, 0);
    DEFAULT(CTAPolicy, OCCL_CONFIG_UNDEF_INT, OCCL_CTA_POLICY_DEFAULT);
    DEFAULT(shrinkShare, OCCL_CONFIG_UNDEF_INT, 0);
    DEFAULT(nvlinkCentricSched, OCCL_CONFIG_UNDEF_INT, 0);
    DEFAULT(graphUsageMode, OCCL_CONFIG_UNDEF_INT, 2);
    DEFAULT(numRmaCtx, OCCL_CONFIG_UNDEF_INT, 1);
    DEFAULT(graphStreamOrdering, OCCL_CONFIG_UNDEF_INT, 1);
#undef DEFAULT
}

/* A 0/1 field: unset or 0 or 1. */
static bool flag_ok(int v) { return v == OCCL_CONFIG_UNDEF_INT || v == 0 || v == 1; }

occlResult_t occl_config_resolve(const occlConfig_t *user, occl_comm_config *out)
{
    occlConfig_t c = OCCL_CONFIG_INITIALIZER;
    memset(out, 0, sizeof *out);
    if (user) {
        size_t size;
        memcpy(&size, user, sizeof size);
        /* The header (size, magic, version) and blocking at least: NCCL's
         * oldest config, 2.14's. */
        if (size < offsetof(occlConfig_t, cgaClusterSize))
            return occl_fail(occlInvalidArgument,
                             "config->size %zu is too small for an occlConfig_t (at least %zu "
                             "bytes; assign OCCL_CONFIG_INITIALIZER before setting fields)",
                             size, offsetof(occlConfig_t, cgaClusterSize));
        /* A larger struct (a newer header): the fields known here. */
        memcpy(&c, user, size < sizeof c ? size : sizeof c);
        if (c.magic != OCCL_API_MAGIC)
            return occl_fail(occlInvalidArgument,
                             "config->magic is 0x%x, not 0x%x: the config was not initialized with "
                             "OCCL_CONFIG_INITIALIZER", c.magic, OCCL_API_MAGIC);
        occlConfig_t d = OCCL_CONFIG_INITIALIZER;
        /* Fields beyond the caller's size, or newer than its version, are unset. */
        unsigned char *cb = (unsigned char *)&c;
        const unsigned char *db = (const unsigned char *)&d;
        if (size < sizeof c)
            memcpy(cb + size, db + size, sizeof c - size);
        if (c.version < V(2, 14, 0))
            c.blocking = d.blocking;
        if (c.version < V(2, 17, 0)) {
            c.cgaClusterSize = d.cgaClusterSize;
            c.minCTAs = d.minCTAs;
            c.maxCTAs = d.maxCTAs;
            c.netName = d.netName;
        }
        if (c.version < V(2, 25, 0))
            c.trafficClass = d.trafficClass;
        if (c.version < V(2, 27, 0)) {
            c.collnetEnable = d.collnetEnable;
            c.CTAPolicy = d.CTAPolicy;
            c.shrinkShare = d.shrinkShare;
            c.nvlsCTAs = d.nvlsCTAs;
        }
        if (c.version < V(2, 28, 0)) {
            c.nChannelsPerNetPeer = d.nChannelsPerNetPeer;
            c.nvlinkCentricSched = d.nvlinkCentricSched;
        }
        if (c.version < V(2, 29, 0)) {
            c.graphUsageMode = d.graphUsageMode;
            c.numRmaCtx = d.numRmaCtx;
        }
        if (c.version < V(2, 30, 0))
            c.maxP2pPeers = d.maxP2pPeers;
        if (c.version < V(2, 30, 5))
            c.graphStreamOrdering = d.graphStreamOrdering;
    }
    const int U = OCCL_CONFIG_UNDEF_INT;
    const char *bad = NULL;
    int value = 0;
#define CHECK(cond, field)                                                                       \
    do {                                                                                         \
        if (!bad && !(cond)) {                                                                   \
            bad = #field;                                                                        \
            value = c.field;                                                                     \
        }                                                                                        \
    } while (0)
    CHECK(flag_ok(c.blocking), blocking);
    CHECK(c.cgaClusterSize == U || c.cgaClusterSize >= 0, cgaClusterSize);
    CHECK(c.minCTAs == U || c.minCTAs > 0, minCTAs);
    CHECK(c.maxCTAs == U || c.maxCTAs > 0, maxCTAs);
    CHECK(c.minCTAs == U || c.maxCTAs == U || c.minCTAs <= c.maxCTAs, minCTAs);
    CHECK(flag_ok(c.splitShare), splitShare);
    CHECK(flag_ok(c.collnetEnable), collnetEnable);
    CHECK(c.CTAPolicy == U ||
              (c.CTAPolicy >= 0 &&
               c.CTAPolicy <= (OCCL_CTA_POLICY_DEFAULT | OCCL_CTA_POLICY_EFFICIENCY | OCCL_CTA_POLICY_ZERO)),
          CTAPolicy);
    CHECK(flag_ok(c.shrinkShare), shrinkShare);
    CHECK(c.nvlsCTAs == U || c.nvlsCTAs > 0, nvlsCTAs);
    CHECK(c.nChannelsPerNetPeer == U || (c.nChannelsPerNetPeer > 0 && c.nChannelsPerNetPeer <= NCCL_MAX_CHANNELS),
          nChannelsPerNetPeer);
    CHECK(flag_ok(c.nvlinkCentricSched), nvlinkCentricSched);
    CHECK(c.graphUsageMode == U || (c.graphUsageMode >= 0 && c.graphUsageMode <= 2), graphUsageMode);
    CHECK(c.numRmaCtx == U || c.numRmaCtx >= 0, numRmaCtx);
    CHECK(c.maxP2pPeers == U || c.maxP2pPeers > 0, maxP2pPeers);
    CHECK(flag_ok(c.graphStreamOrdering), graphStreamOrdering);
#undef CHECK
    if (bad)
        return occl_fail(occlInvalidArgument, "config->%s = %d is not valid (see NCCL's ncclConfig_t)",
                         bad, value);
    /* OCCL's one network is MPI (between virtual nodes). */
    if (c.netName && strcasecmp(c.netName, "MPI") != 0)
        return occl_fail(occlInvalidArgument, "config->netName '%.40s' names no network of OCCL "
                                              "(its only one is \"MPI\")", c.netName);
    if (c.commName) {
        size_t n = strlen(c.commName);
        if (n >= sizeof out->name)
            return occl_fail(occlInvalidArgument, "config->commName is %zu characters long (at most %zu)",
                             n, sizeof out->name - 1);
        memcpy(out->name, c.commName, n + 1);
    }
    fill_defaults(&c);
    /* The strings live in out (copied: the caller's may go away); the
     * pointers are not kept, so out can be copied as a value. */
    c.commName = NULL;
    c.netName = NULL;
    out->cfg = c;
    return occlSuccess;
}
