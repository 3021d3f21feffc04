/*
 * collectives/vproto.c - the protocols' costs (vproto.h).
 *
 * The figures are NCCL's own tuning model, src/graph/tuning.cc
 * (ncclTunerConstantsDefaults: baseLatencies, hwLatencies), and
 * src/graph/topo.h (SM80_NVLINK_BW 20 GB/s per NVLink3 link, SM90 20.6 per
 * NVLink4 link, against 25 GB/s of line rate). NCCL predicts a call's time
 * as baseLat + nsteps x hwLat + bytes / busBw; the replay (vcost.c) charges
 * the same terms where they occur: baseLat once per collective, hwLat on
 * every transfer of a step (over the path's own latency), and the bytes at
 * the link's bandwidth after the protocol's overhead.
 */
#include "vproto.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const proto_names[OCCL_NUM_PROTOS] = {"LL", "LL128", "Simple"};

const char *occl_proto_name(occl_proto p)
{
    return (unsigned)p < OCCL_NUM_PROTOS ? proto_names[p] : "?";
}

occl_hw occl_proto_hw(const char *type)
{
    if (type && (!strcmp(type, "NVL") || !strcmp(type, "NVB")))
        return OCCL_HW_NVLINK;
    if (type && !strcmp(type, "NET"))
        return OCCL_HW_NET;
    return OCCL_HW_PCI;
}

/* Microseconds, { LL, LL128, Simple }: NCCL's baseLatencies rows for Ring
 * and Tree (NVLS has none: its whole latency is its hwLat, below). */
static const double base_us[3][OCCL_NUM_PROTOS] = {
    [OCCL_PFAM_RING] = {6.6, 14.0, 8.4},
    [OCCL_PFAM_TREE] = {6.8, 14.0, 8.4},
    [OCCL_PFAM_NVLS] = {0, 0, 0},
};

/* Microseconds, NCCL's hwLatencies [NVLINK, PCI, NET][algorithm][protocol]. */
static const double hw_us[3][3][OCCL_NUM_PROTOS] = {
    [OCCL_HW_NVLINK] = {[OCCL_PFAM_RING] = {0.6, 1.9, 3.4},
                        [OCCL_PFAM_TREE] = {0.6, 1.25, 4.0},
                        [OCCL_PFAM_NVLS] = {0, 0, 25}},
    [OCCL_HW_PCI] = {[OCCL_PFAM_RING] = {1.0, 2.5, 5.7},
                     [OCCL_PFAM_TREE] = {1.0, 1.9, 4.0},
                     [OCCL_PFAM_NVLS] = {0, 0, 0}},
    [OCCL_HW_NET] = {[OCCL_PFAM_RING] = {2.7, 4.0, 14.0},
                     [OCCL_PFAM_TREE] = {5.0, 8.5, 14.0},
                     [OCCL_PFAM_NVLS] = {0, 0, 18}},
};

static uint64_t us_to_ns(double us) { return (uint64_t)(us * 1000.0 + 0.5); }

bool occl_proto_supported(occl_pfam f, occl_proto p)
{
    return (unsigned)p < OCCL_NUM_PROTOS && (f != OCCL_PFAM_NVLS || p == OCCL_PROTO_SIMPLE);
}

uint64_t occl_proto_base_ns(occl_pfam f, occl_proto p)
{
    if (!occl_proto_supported(f, p))
        return 0;
    /* NVLS: NCCL charges its intra-node hwLat once for the whole call
     * (latencies = intraLat), not per step. */
    if (f == OCCL_PFAM_NVLS)
        return us_to_ns(hw_us[OCCL_HW_NVLINK][f][p]);
    return us_to_ns(base_us[f][p]);
}

uint64_t occl_proto_hop_ns(occl_pfam f, occl_proto p, occl_hw hw)
{
    if (!occl_proto_supported(f, p) || f == OCCL_PFAM_NVLS || (unsigned)hw > OCCL_HW_NET)
        return 0;
    return us_to_ns(hw_us[hw][f][p]);
}

bool occl_proto_sharp(occl_hw hw, uint64_t path_bps)
{
    return hw == OCCL_HW_NVLINK && path_bps >= OCCL_NVLS_SHARP_BPS;
}

uint64_t occl_proto_wire_bytes(occl_pfam f, occl_proto p, occl_hw hw, int nranks, bool sharp,
                               uint64_t bytes)
{
    /* bytes x num / den, rounded up, in 128 bits. LL: 16 bytes on the wire
     * per 8 of data; LL128: 128 per 120. NVLink: NCCL rates a link at 20 of
     * its 25 GB/s (topo.h SM80_NVLINK_BW; NVIDIA quotes ~370 of 450 GB/s on
     * H100, the same ~20 % protocol overhead), so x 25/20. */
    unsigned __int128 num = 1, den = 1;
    if (p == OCCL_PROTO_LL)
        num = 2;
    else if (p == OCCL_PROTO_LL128)
        num = 128, den = 120;
    if (hw == OCCL_HW_NVLINK)
        num *= 25, den *= 20;
    /* NVLS (tuning.cc nvlsEfficiency: 0.85 Hopper): n / (2(n-1)) / 0.85. */
    if (f == OCCL_PFAM_NVLS && sharp && nranks > 1)
        num *= (unsigned)nranks * 100u, den *= 2u * (unsigned)(nranks - 1) * 85u;
    unsigned __int128 w = ((unsigned __int128)bytes * num + den - 1) / den;
    return w > UINT64_MAX / 4 ? UINT64_MAX / 4 : (uint64_t)w;
}

occl_nvls_loops occl_nvls_shape(uint64_t bytes, int nheads)
{
    uint64_t heads = nheads > 0 ? (uint64_t)nheads : 1, ops = OCCL_NVLS_CHANNELS * heads;
    /* NCCL's ladder, its comparisons as written (nBytes < k x ops x chunk). */
    uint64_t chunk = 131072;
    if (bytes / 64 < ops * chunk)
        chunk = 65536;
    if (bytes / 8 < ops * chunk)
        chunk = 32768;
    if (bytes / 2 < ops * chunk)
        chunk = 16384;
    occl_nvls_loops s = {.chunk = chunk, .loop = ops * chunk};
    s.nloops = bytes ? (bytes - 1) / s.loop + 1 : 0;
    return s;
}

uint64_t occl_nvls_channel_bytes(const occl_nvls_loops *s, int nheads, uint64_t bytes, uint64_t l)
{
    uint64_t share = (nheads > 0 ? (uint64_t)nheads : 1) * s->chunk;
    if (l >= s->nloops) /* then l x loop < bytes */
        return 0;
    uint64_t left = bytes - l * s->loop;
    return left < share ? left : share;
}

/* One comma list (len bytes at s) into *mask: names set, or with '^' all
 * but the names. */
static int parse_list(const char *s, size_t len, unsigned *mask, char *why, size_t why_size)
{
    bool exclude = len && s[0] == '^';
    const char *p = s + exclude, *end = s + len;
    unsigned named = 0;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t n = (size_t)((comma ? comma : end) - p);
        int k = 0;
        while (k < OCCL_NUM_PROTOS && !(strlen(proto_names[k]) == n && strncasecmp(p, proto_names[k], n) == 0))
            k++;
        if (k == OCCL_NUM_PROTOS) {
            snprintf(why, why_size, "unknown protocol '%.*s' (known: LL, LL128, Simple)",
                     (int)(n > 40 ? 40 : n), p);
            return -1;
        }
        named |= 1u << k;
        if (!comma)
            break;
        p = comma + 1;
    }
    *mask = exclude ? OCCL_PROTO_ALL & ~named : named;
    if (!*mask) {
        snprintf(why, why_size, "'%.*s' leaves no protocol", (int)(len > 40 ? 40 : len), s);
        return -1;
    }
    return 0;
}

int occl_proto_parse(const char *value, const char *const *coll_names, int ncoll, unsigned *mask,
                     char *why, size_t why_size)
{
    for (int c = 0; c < ncoll; c++)
        mask[c] = OCCL_PROTO_ALL;
    if (!value || !*value)
        return 0;
    bool first = true;
    for (const char *p = value; *p || first; first = false) {
        const char *semi = strchr(p, ';'), *end = semi ? semi : p + strlen(p);
        const char *colon = memchr(p, ':', (size_t)(end - p));
        if (!colon) {
            if (!first) {
                snprintf(why, why_size, "'%.40s': every entry after the first needs a collective "
                         "('allreduce:LL,Simple')", p);
                return -1;
            }
            unsigned m;
            if (parse_list(p, (size_t)(end - p), &m, why, why_size))
                return -1;
            for (int c = 0; c < ncoll; c++)
                mask[c] = m;
        } else {
            int c = 0;
            size_t n = (size_t)(colon - p);
            while (c < ncoll && !(strlen(coll_names[c]) == n && strncasecmp(p, coll_names[c], n) == 0))
                c++;
            if (c == ncoll) {
                snprintf(why, why_size, "unknown collective '%.*s'", (int)(n > 40 ? 40 : n), p);
                return -1;
            }
            if (parse_list(colon + 1, (size_t)(end - colon - 1), &mask[c], why, why_size))
                return -1;
        }
        if (!semi)
            break;
        p = semi + 1;
    }
    return 0;
}
