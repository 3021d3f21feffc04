/*
 * test_vproto.c - the protocols of the virtual-time model (collectives/
 * vproto.h): NCCL's constants, the bytes each protocol puts on the links,
 * OCCL_PROTO's parse, and the closed forms per protocol of OCCL's ring
 * collectives run through the model without a communicator (vmodel.h) on
 * uniform paths of n devices on one switch:
 *   ring all-reduce    base + 2(n-1) (a + hop + ceil(wire(S/n) / b))
 *   all-gather, reduce-scatter   base + (n-1) (a + hop + ceil(wire(B) / b))
 * with base, hop NCCL's baseLat and hwLat of the protocol (ns) and wire()
 * the protocol's bytes on the links; so a small call is fastest with LL and
 * a large one with Simple, as NCCL finds. NVLS in the switch: NCCL's chunk
 * ladder, and its pipeline of k loops taking base + (k + 2) loop times.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "vmodel.h"

Test(vproto, constants_are_nccls)
{
    /* src/graph/tuning.cc, ncclTunerConstantsDefaults (us). */
    cr_assert_eq(occl_proto_base_ns(OCCL_PFAM_RING, OCCL_PROTO_LL), 6600);
    cr_assert_eq(occl_proto_base_ns(OCCL_PFAM_RING, OCCL_PROTO_LL128), 14000);
    cr_assert_eq(occl_proto_base_ns(OCCL_PFAM_RING, OCCL_PROTO_SIMPLE), 8400);
    cr_assert_eq(occl_proto_base_ns(OCCL_PFAM_TREE, OCCL_PROTO_LL), 6800);
    cr_assert_eq(occl_proto_hop_ns(OCCL_PFAM_RING, OCCL_PROTO_LL, OCCL_HW_NVLINK), 600);
    cr_assert_eq(occl_proto_hop_ns(OCCL_PFAM_RING, OCCL_PROTO_LL128, OCCL_HW_NVLINK), 1900);
    cr_assert_eq(occl_proto_hop_ns(OCCL_PFAM_RING, OCCL_PROTO_SIMPLE, OCCL_HW_NVLINK), 3400);
    cr_assert_eq(occl_proto_hop_ns(OCCL_PFAM_TREE, OCCL_PROTO_LL128, OCCL_HW_NVLINK), 1250);
    cr_assert_eq(occl_proto_hop_ns(OCCL_PFAM_RING, OCCL_PROTO_SIMPLE, OCCL_HW_PCI), 5700);
    cr_assert_eq(occl_proto_hop_ns(OCCL_PFAM_RING, OCCL_PROTO_LL, OCCL_HW_NET), 2700);
    cr_assert_eq(occl_proto_hop_ns(OCCL_PFAM_TREE, OCCL_PROTO_SIMPLE, OCCL_HW_NET), 14000);
    /* NVLS: Simple only, its NVLink latency once per call, nothing per hop. */
    cr_assert_not(occl_proto_supported(OCCL_PFAM_NVLS, OCCL_PROTO_LL));
    cr_assert(occl_proto_supported(OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE));
    cr_assert_eq(occl_proto_base_ns(OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE), 25000);
    cr_assert_eq(occl_proto_hop_ns(OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE, OCCL_HW_NVLINK), 0);
}

Test(vproto, link_classes_and_names)
{
    cr_assert_eq(occl_proto_hw("NVL"), OCCL_HW_NVLINK);
    cr_assert_eq(occl_proto_hw("NVB"), OCCL_HW_NVLINK);
    cr_assert_eq(occl_proto_hw("NET"), OCCL_HW_NET);
    cr_assert_eq(occl_proto_hw("PIX"), OCCL_HW_PCI);
    cr_assert_eq(occl_proto_hw("SYS"), OCCL_HW_PCI);
    cr_assert_eq(occl_proto_hw(NULL), OCCL_HW_PCI);
    cr_assert_str_eq(occl_proto_name(OCCL_PROTO_LL), "LL");
    cr_assert_str_eq(occl_proto_name(OCCL_PROTO_LL128), "LL128");
    cr_assert_str_eq(occl_proto_name(OCCL_PROTO_SIMPLE), "Simple");
    cr_assert_str_eq(occl_proto_name(OCCL_NUM_PROTOS), "?");
}

Test(vproto, wire_bytes)
{
    occl_pfam R = OCCL_PFAM_RING;
    /* LL: 16 bytes per 8; LL128: 128 per 120, rounded up; Simple: as is. */
    cr_assert_eq(occl_proto_wire_bytes(R, OCCL_PROTO_LL, OCCL_HW_PCI, 8, false, 1000), 2000);
    cr_assert_eq(occl_proto_wire_bytes(R, OCCL_PROTO_LL128, OCCL_HW_PCI, 8, false, 1200), 1280);
    cr_assert_eq(occl_proto_wire_bytes(R, OCCL_PROTO_LL128, OCCL_HW_PCI, 8, false, 1), 2);
    cr_assert_eq(occl_proto_wire_bytes(R, OCCL_PROTO_SIMPLE, OCCL_HW_NET, 8, false, 1000), 1000);
    /* NVLink: 25 GB/s of line rate carry 20 of data. */
    cr_assert_eq(occl_proto_wire_bytes(R, OCCL_PROTO_SIMPLE, OCCL_HW_NVLINK, 8, false, 1000), 1250);
    cr_assert_eq(occl_proto_wire_bytes(R, OCCL_PROTO_LL, OCCL_HW_NVLINK, 8, false, 1000), 2500);
    /* NVLS with switch reduction, 8 ranks: x 8 / 14 / 0.85 on top of NVLink's
     * 1.25: 1000 -> ceil(1000 * 25 * 800 / (20 * 14 * 85)) = 841. */
    cr_assert_eq(occl_proto_wire_bytes(OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE, OCCL_HW_NVLINK, 8, true, 1000), 841);
    cr_assert_eq(occl_proto_wire_bytes(OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE, OCCL_HW_NVLINK, 8, false, 1000), 1250);
    cr_assert(occl_proto_sharp(OCCL_HW_NVLINK, 450000000000ull));
    cr_assert_not(occl_proto_sharp(OCCL_HW_NVLINK, 300000000000ull));
    cr_assert_not(occl_proto_sharp(OCCL_HW_NET, 900000000000ull));
}

static const char *const colls[] = {"AllReduce", "Broadcast", "Reduce"};

static int parse(const char *v, unsigned *mask, char *why)
{
    return occl_proto_parse(v, colls, 3, mask, why, 200);
}

Test(vproto, parse_nccl_syntax)
{
    unsigned m[3];
    char why[200] = "";
    cr_assert_eq(parse(NULL, m, why), 0);
    cr_assert_eq(m[0], OCCL_PROTO_ALL);
    cr_assert_eq(parse("", m, why), 0);
    cr_assert_eq(m[2], OCCL_PROTO_ALL);
    cr_assert_eq(parse("LL,simple", m, why), 0);
    for (int c = 0; c < 3; c++)
        cr_assert_eq(m[c], 1u << OCCL_PROTO_LL | 1u << OCCL_PROTO_SIMPLE);
    cr_assert_eq(parse("^LL128", m, why), 0);
    cr_assert_eq(m[1], 1u << OCCL_PROTO_LL | 1u << OCCL_PROTO_SIMPLE);
    /* Per collective, as NCCL_PROTO="^LL128;allreduce:LL128". */
    cr_assert_eq(parse("^LL128;allreduce:LL128", m, why), 0);
    cr_assert_eq(m[0], 1u << OCCL_PROTO_LL128);
    cr_assert_eq(m[1], 1u << OCCL_PROTO_LL | 1u << OCCL_PROTO_SIMPLE);
    cr_assert_eq(parse("reduce:^simple", m, why), 0);
    cr_assert_eq(m[2], 1u << OCCL_PROTO_LL | 1u << OCCL_PROTO_LL128);
    cr_assert_eq(m[0], OCCL_PROTO_ALL);
}

Test(vproto, parse_refuses_what_nccl_refuses)
{
    unsigned m[3];
    char why[200];
    cr_assert_eq(parse("LL,fast", m, why), -1);
    cr_assert_str_eq(why, "unknown protocol 'fast' (known: LL, LL128, Simple)");
    cr_assert_eq(parse("allgather:LL", m, why), -1);
    cr_assert_str_eq(why, "unknown collective 'allgather'");
    cr_assert_eq(parse("Simple;LL", m, why), -1);
    cr_assert(strstr(why, "every entry after the first needs a collective"));
    cr_assert_eq(parse("^LL,LL128,Simple", m, why), -1);
    cr_assert(strstr(why, "leaves no protocol"));
    cr_assert_eq(parse("LL,", m, why), -1);
    cr_assert(strstr(why, "unknown protocol ''"));
}

/* ---- closed forms through the model ---------------------------------------- */

#define N 4
static const uint64_t A = 2000, B = 100000000000ull; /* 2 us, 100 GB/s per direction */
static int hop_keys[N][N][2];
static const char *path_type = "PIX";
static uint64_t path_lat = A, path_bps = B; /* the NVLS tests change them */

/* n devices on one switch: a path is the sender's link up and the
 * receiver's link down, so a ring step's transfers share nothing. */
static or_vpath switch_path(void *ctx, int a, int b)
{
    (void)ctx;
    hop_keys[a][b][0] = 2 * a;
    hop_keys[a][b][1] = 2 * b + 1;
    return (or_vpath){.latency_ns = path_lat, .bytes_per_s = path_bps, .type = path_type, .nhops = 2,
                      .hops = hop_keys[a][b]};
}

static occl_vsystem make_system(void)
{
    static int ring[N] = {0, 1, 2, 3}, node_first[2] = {0, N};
    occl_vsystem s = {.nranks = N, .ring = ring, .node_first = node_first, .nnodes = 1,
                      .path = switch_path};
    cr_assert_eq(occl_trees_alloc(&s.trees, N), 0);
    cr_assert_eq(occl_node_trees(ring, node_first, 1, N, s.trees.v), 0);
    cr_assert_eq(occl_trees_schedule(&s.trees), 0);
    return s;
}

static void free_system(occl_vsystem *s)
{
    occl_trees_release(&s->trees);
}

static uint64_t ceil_div(uint64_t x, uint64_t y) { return (x + y - 1) / y; }

/* One ring step of `bytes` of data with protocol p over the switch path. */
static uint64_t step_ns(occl_proto p, uint64_t bytes)
{
    occl_hw hw = occl_proto_hw(path_type);
    return A + occl_proto_hop_ns(OCCL_PFAM_RING, p, hw) +
           ceil_div(occl_proto_wire_bytes(OCCL_PFAM_RING, p, hw, N, false, bytes) * 1000000000ull, B);
}

static uint64_t bps[N] = {2039000000000ull, 2039000000000ull, 2039000000000ull, 2039000000000ull};

static void check_ring_closed_forms(const char *type)
{
    path_type = type;
    occl_vsystem s = make_system();
    size_t counts[] = {2, 4096, 1 << 20, 4 << 20}; /* floats per rank's block */
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        for (int p = 0; p < OCCL_NUM_PROTOS; p++) {
            size_t block = counts[i];
            uint64_t base = occl_proto_base_ns(OCCL_PFAM_RING, (occl_proto)p), bb = block * 4;
            occl_call ar = {.coll = OCCL_COLL_ALLREDUCE, .type = occlFloat32, .count = block * N};
            /* A reducing receive also costs 3 bytes of memory per byte: far
             * below the link's time here (2039 GB/s against 100). */
            cr_expect_eq(occl_vmodel_time(&s, &ar, OCCL_ALGO_RING, (occl_proto)p, bps),
                         base + 2 * (N - 1) * step_ns((occl_proto)p, bb), "%s all-reduce, %zu B blocks, %s",
                         type, bb, occl_proto_name((occl_proto)p));
            occl_call ag = {.coll = OCCL_COLL_ALLGATHER, .type = occlFloat32, .count = block};
            cr_expect_eq(occl_vmodel_time(&s, &ag, OCCL_ALGO_RING, (occl_proto)p, bps),
                         base + (N - 1) * step_ns((occl_proto)p, bb));
            occl_call rs = {.coll = OCCL_COLL_REDUCESCATTER, .type = occlFloat32, .count = block};
            cr_expect_eq(occl_vmodel_time(&s, &rs, OCCL_ALGO_RING, (occl_proto)p, bps),
                         base + (N - 1) * step_ns((occl_proto)p, bb));
        }
    free_system(&s);
}

Test(vproto, ring_closed_forms_per_protocol_pci) { check_ring_closed_forms("PIX"); }
Test(vproto, ring_closed_forms_per_protocol_nvlink) { check_ring_closed_forms("NVL"); }

/* A ring's transfers between nodes run at the path's bandwidth times the
 * rails (NCCL's channels over every NIC); AlltoAll's pairs do not spread. */
Test(vproto, rails_spread_rings_not_point_to_point)
{
    path_type = "NET";
    occl_vsystem s = make_system();
    occl_hw hw = occl_proto_hw(path_type);
    const size_t block = 1 << 20;
    const uint64_t bb = block * 4;
    occl_call ar = {.coll = OCCL_COLL_ALLREDUCE, .type = occlFloat32, .count = block * N};
    occl_call a2a = {.coll = OCCL_COLL_ALLTOALL, .type = occlFloat32, .count = block};
    uint64_t a2a_one = 0;
    for (int rails = 1; rails <= 4; rails *= 4) {
        s.rails = rails;
        uint64_t step = A + occl_proto_hop_ns(OCCL_PFAM_RING, OCCL_PROTO_SIMPLE, hw) +
                        ceil_div(bb * 1000000000ull, B * (uint64_t)rails);
        cr_expect_eq(occl_vmodel_time(&s, &ar, OCCL_ALGO_RING, OCCL_PROTO_SIMPLE, bps),
                     occl_proto_base_ns(OCCL_PFAM_RING, OCCL_PROTO_SIMPLE) + 2 * (N - 1) * step,
                     "%d rails", rails);
        uint64_t t = occl_vmodel_time(&s, &a2a, OCCL_ALGO_DIRECT, OCCL_PROTO_SIMPLE, bps);
        if (rails == 1)
            a2a_one = t;
        cr_expect_eq(t, a2a_one, "AlltoAll with %d rails", rails);
    }
    free_system(&s);
}

/* The least predicted time picks LL for 8 bytes and Simple for 64 MiB, and
 * the crossing sits where NCCL's formula puts it (LL's lower latency against
 * its halved bandwidth). */
Test(vproto, small_calls_take_ll_large_ones_simple)
{
    path_type = "NVL";
    occl_vsystem s = make_system();
    occl_call small = {.coll = OCCL_COLL_ALLREDUCE, .type = occlFloat32, .count = 2};
    occl_call large = {.coll = OCCL_COLL_ALLREDUCE, .type = occlFloat32, .count = 16 << 20};
    uint64_t t[OCCL_NUM_PROTOS], u[OCCL_NUM_PROTOS];
    for (int p = 0; p < OCCL_NUM_PROTOS; p++) {
        t[p] = occl_vmodel_time(&s, &small, OCCL_ALGO_RING, (occl_proto)p, bps);
        u[p] = occl_vmodel_time(&s, &large, OCCL_ALGO_RING, (occl_proto)p, bps);
    }
    cr_assert_lt(t[OCCL_PROTO_LL], t[OCCL_PROTO_SIMPLE]);
    cr_assert_lt(t[OCCL_PROTO_LL], t[OCCL_PROTO_LL128]);
    cr_assert_lt(u[OCCL_PROTO_SIMPLE], u[OCCL_PROTO_LL128]);
    cr_assert_lt(u[OCCL_PROTO_LL128], u[OCCL_PROTO_LL]);
    /* nvls runs Simple only. */
    cr_assert_eq(occl_vmodel_time(&s, &small, OCCL_ALGO_NVLS, OCCL_PROTO_LL, bps), UINT64_MAX);
    cr_assert_neq(occl_vmodel_time(&s, &small, OCCL_ALGO_NVLS, OCCL_PROTO_SIMPLE, bps), UINT64_MAX);
    free_system(&s);
}

/* NCCL's NVLS chunk ladder (src/enqueue.cc) for 8 heads on 16 channels:
 * 128 concurrent chunks; 16 KiB below 8 MiB, 32 KiB below 64 MiB, 64 KiB
 * below 1 GiB, 128 KiB from there. */
Test(vproto, nvls_loops_follow_nccls_chunk_ladder)
{
    const uint64_t MiB = 1 << 20;
    struct {
        uint64_t bytes, chunk;
    } v[] = {{1, 16384},           {8 * MiB - 1, 16384}, {8 * MiB, 32768},   {64 * MiB - 1, 32768},
             {64 * MiB, 65536},   {1024 * MiB - 1, 65536}, {1024 * MiB, 131072}, {1ull << 40, 131072}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        occl_nvls_loops l = occl_nvls_shape(v[i].bytes, 8);
        cr_expect_eq(l.chunk, v[i].chunk, "%llu bytes", (unsigned long long)v[i].bytes);
        cr_expect_eq(l.loop, 128 * v[i].chunk);
        cr_expect_eq(l.nloops, (v[i].bytes + l.loop - 1) / l.loop);
    }
    /* The first channel takes 8 x chunk of each loop, or what is left. */
    occl_nvls_loops l = occl_nvls_shape(1024, 8);
    cr_assert_eq(l.nloops, 1);
    cr_assert_eq(occl_nvls_channel_bytes(&l, 8, 1024, 0), 1024);
    l = occl_nvls_shape(2 * MiB + 4096, 8); /* loops of 2 MiB: a full one, then 4 KiB */
    cr_assert_eq(l.nloops, 2);
    cr_assert_eq(occl_nvls_channel_bytes(&l, 8, 2 * MiB + 4096, 0), 8 * 16384);
    cr_assert_eq(occl_nvls_channel_bytes(&l, 8, 2 * MiB + 4096, 1), 4096);
    cr_assert_eq(occl_nvls_channel_bytes(&l, 8, 2 * MiB + 4096, 2), 0);
}

static uint64_t nvls_ns(occl_vsystem *s, uint64_t bytes)
{
    occl_call ar = {.coll = OCCL_COLL_ALLREDUCE, .type = occlFloat32, .count = bytes / 4};
    return occl_vmodel_time(s, &ar, OCCL_ALGO_NVLS, OCCL_PROTO_SIMPLE, bps);
}

/* NVLS in the switch (an NVLink path of 450 GB/s: NVLink SHARP) runs as
 * NCCL's pipeline: 4 heads on 16 channels, loops of 1 MiB (16 KiB chunks)
 * below 4 MiB. A call of k loops takes base + (k + 2) loop times once the
 * paths' latency is out of the way, which the first loop alone pays; a
 * call within one loop lasts as long as its first channel's share, so it
 * stops growing once that channel is full (64 KiB). */
Test(vproto, nvls_in_the_switch_is_a_pipeline_of_loops)
{
    const uint64_t MiB = 1 << 20, base = occl_proto_base_ns(OCCL_PFAM_NVLS, OCCL_PROTO_SIMPLE);
    path_type = "NVL";
    path_bps = 450000000000ull;
    occl_vsystem s = make_system();
    path_lat = 0;
    uint64_t one = nvls_ns(&s, MiB) - base;
    cr_assert_gt(one, 0);
    for (uint64_t k = 1; k <= 3; k++)
        cr_expect_eq(3 * (nvls_ns(&s, k * MiB) - base), (k + 2) * one, "%llu loops", (unsigned long long)k);
    uint64_t lat0[4];
    for (uint64_t k = 1; k <= 3; k++)
        lat0[k] = nvls_ns(&s, k * MiB);
    path_lat = A;
    uint64_t once = nvls_ns(&s, MiB) - lat0[1];
    cr_assert_gt(once, 0);
    cr_expect_leq(once, 2 * A, "the latency of the first loop's two phases, not of every loop");
    for (uint64_t k = 2; k <= 3; k++)
        cr_expect_eq(nvls_ns(&s, k * MiB) - lat0[k], once, "%llu loops", (unsigned long long)k);
    /* One loop: the first channel full from 4 x 16 KiB on. */
    cr_expect_lt(nvls_ns(&s, 16384), nvls_ns(&s, 65536));
    cr_expect_eq(nvls_ns(&s, 65536), nvls_ns(&s, 512 * 1024));
    cr_expect_eq(nvls_ns(&s, 65536), nvls_ns(&s, MiB));
    free_system(&s);
    /* Below NVLink SHARP's bandwidth nvls is OCCL's one-pass schedule,
     * charged as it moves its bytes: no plateau. */
    path_bps = B;
    s = make_system();
    cr_expect_lt(nvls_ns(&s, 65536), nvls_ns(&s, MiB));
    free_system(&s);
}
