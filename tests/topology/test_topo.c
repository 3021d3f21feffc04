/* tests/topology/test_topo.c - the topology model: presets, synthetic
 * strings, XML in both formats, paths and their types, round trips. */
#include "topo.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef TOPO_DATA_DIR
#error TOPO_DATA_DIR must name tests/topology
#endif

static or_topo *load(const char *spec)
{
    or_topo *t = NULL;
    or_topo_error err;
    or_topo_status rc = or_topo_load(spec, "test", &t, &err);
    char msg[1024];
    or_topo_error_format(&err, msg, sizeof msg);
    cr_assert_eq(rc, OR_TOPO_OK, "%s: %s", spec, msg);
    return t;
}

static or_topo *load_data(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/data/%s", TOPO_DATA_DIR, name);
    return load(path);
}

static const or_topo_path *path(const or_topo *t, int a, int b)
{
    const or_topo_path *p = or_topo_path_between(t, a, b);
    cr_assert_not_null(p);
    return p;
}

/* Walks the hops and checks they chain from src's vertex to dst's, and that
 * bandwidth and latency are what the links say. */
static void check_path_consistent(const or_topo *t, int src_vertex, int dst_vertex,
                                  const or_topo_path *p)
{
    int v = src_vertex;
    double bw = INFINITY, lat = 0;
    for (int k = 0; k < p->nhops; k++) {
        or_topo_link_info l = or_topo_link(t, p->hops[k] / 2);
        int from = p->hops[k] % 2 ? l.b : l.a, to = p->hops[k] % 2 ? l.a : l.b;
        cr_assert_eq(from, v, "hop %d does not start where the last ended", k);
        bw = fmin(bw, l.bandwidth);
        lat += l.latency_ns;
        v = to;
    }
    cr_assert_eq(v, dst_vertex);
    if (p->nhops) {
        cr_assert_eq(p->bandwidth, bw);
        cr_assert_float_eq(p->latency_ns, lat, 1e-6);
    }
}

static void check_all_paths(const or_topo *t)
{
    int n = or_topo_device_count(t);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const or_topo_path *p = path(t, i, j);
            check_path_consistent(t, or_topo_device_vertex(t, i), or_topo_device_vertex(t, j), p);
            cr_assert_eq(p->type == OR_TOPO_PATH_LOC, i == j);
            /* Paths are symmetric in what they offer. */
            const or_topo_path *q = path(t, j, i);
            cr_assert_eq(p->bandwidth, q->bandwidth, "%d-%d", i, j);
            cr_assert_eq(p->type, q->type, "%d-%d", i, j);
            cr_assert_eq((or_topo_device_node(t, i) != or_topo_device_node(t, j)),
                         p->type == OR_TOPO_PATH_NET);
        }
}

static void check_round_trip(const or_topo *t)
{
    char *xml;
    size_t len;
    or_topo_error err;
    cr_assert_eq(or_topo_write_xml(t, &xml, &len, &err), OR_TOPO_OK);
    or_topo *back = NULL;
    or_topo_status rc = or_topo_from_xml_memory(xml, len, "written", &back, &err);
    cr_assert_eq(rc, OR_TOPO_OK, "%s at line %d", err.message, err.line);
    cr_assert(or_topo_equal(t, back), "round trip changed %s", or_topo_name(t));
    /* And the paths come out the same. */
    int n = or_topo_device_count(t);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const or_topo_path *p = path(t, i, j), *q = path(back, i, j);
            cr_assert_eq(p->type, q->type);
            cr_assert_eq(p->bandwidth, q->bandwidth);
            cr_assert_eq(p->latency_ns, q->latency_ns);
        }
    /* Writing again gives the same text. */
    char *xml2;
    size_t len2;
    cr_assert_eq(or_topo_write_xml(back, &xml2, &len2, &err), OR_TOPO_OK);
    cr_assert_eq(len, len2);
    cr_assert_eq(memcmp(xml, xml2, len), 0);
    free(xml);
    free(xml2);
    or_topo_free(back);
}

Test(presets, every_listed_preset_builds_validates_and_round_trips)
{
    const char *const *names = or_topo_preset_names();
    int count = 0;
    for (int i = 0; names[i]; i++, count++) {
        or_topo *t = load(names[i]);
        cr_assert_not_null(or_topo_preset_help(names[i]));
        check_all_paths(t);
        check_round_trip(t);
        or_topo_free(t);
    }
    cr_assert_geq(count, 8);
}

Test(presets, fully_connected)
{
    or_topo *t = load("full5");
    cr_assert_eq(or_topo_device_count(t), 5);
    cr_assert_eq(or_topo_node_count(t), 1);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++)
            if (i != j) {
                cr_assert_eq(path(t, i, j)->type, OR_TOPO_PATH_NVL);
                cr_assert_eq(path(t, i, j)->nhops, 1);
                cr_assert_eq(path(t, i, j)->bandwidth, 300e9);
                cr_assert_eq(path(t, i, j)->latency_ns, 1000);
            }
    or_topo_free(t);
}

Test(presets, ring_goes_around_through_devices)
{
    or_topo *t = load("ring8");
    cr_assert_eq(path(t, 0, 1)->type, OR_TOPO_PATH_NVL);
    cr_assert_eq(path(t, 0, 7)->type, OR_TOPO_PATH_NVL);
    /* Opposite side: 4 links either way, through devices. */
    cr_assert_eq(path(t, 0, 4)->type, OR_TOPO_PATH_NVB);
    cr_assert_eq(path(t, 0, 4)->nhops, 4);
    cr_assert_eq(path(t, 0, 4)->latency_ns, 4000);
    cr_assert_eq(path(t, 0, 6)->nhops, 2, "the short way round");
    or_topo_free(t);
}

Test(presets, torus_wraps_in_both_dimensions)
{
    or_topo *t = load("torus4x4");
    cr_assert_eq(or_topo_device_count(t), 16);
    /* (0,0) neighbours (0,1), (0,3), (1,0), (3,0); (2,2) is 4 hops away. */
    cr_assert_eq(path(t, 0, 1)->nhops, 1);
    cr_assert_eq(path(t, 0, 3)->nhops, 1);
    cr_assert_eq(path(t, 0, 4)->nhops, 1);
    cr_assert_eq(path(t, 0, 12)->nhops, 1);
    cr_assert_eq(path(t, 0, 10)->nhops, 4);
    cr_assert_eq(path(t, 0, 15)->nhops, 2);
    cr_assert_eq(or_topo_link_count(t), 32 + 16, "2 links per device, plus host links");
    or_topo_free(t);
}

Test(presets, small_rings_and_tori_have_no_double_links)
{
    or_topo *t = load("ring2");
    cr_assert_eq(or_topo_link_count(t), 1 + 2);
    or_topo_free(t);
    t = load("torus2x2");
    cr_assert_eq(or_topo_link_count(t), 4 + 4);
    or_topo_free(t);
    t = load("ring1");
    cr_assert_eq(or_topo_device_count(t), 1);
    or_topo_free(t);
}

Test(presets, dgx_a100_speeds)
{
    or_topo *t = load("dgx-a100");
    cr_assert_eq(or_topo_device_count(t), 8);
    for (int j = 1; j < 8; j++) {
        const or_topo_path *p = path(t, 0, j);
        cr_assert_eq(p->type, OR_TOPO_PATH_NVL);
        cr_assert_eq(p->bandwidth, 300e9, "12 NVLink3 links x 25 GB/s");
        cr_assert_eq(p->nhops, 2, "through the NVSwitch");
    }
    const or_topo_path *h = or_topo_host_path(t, 0);
    cr_assert_not_null(h);
    cr_assert_float_eq(h->bandwidth, 16e9 * 16 * 128 / 130 / 8, 1, "PCIe Gen4 x16");
    cr_assert_eq(h->type, OR_TOPO_PATH_PHB);
    or_topo_free(t);
}

Test(presets, dgx_h100_speeds)
{
    or_topo *t = load("dgx-h100x2");
    cr_assert_eq(or_topo_device_count(t), 16);
    cr_assert_eq(or_topo_node_count(t), 2);
    cr_assert_eq(path(t, 0, 7)->bandwidth, 450e9, "18 NVLink4 links x 25 GB/s");
    const or_topo_path *p = path(t, 0, 8);
    cr_assert_eq(p->type, OR_TOPO_PATH_NET);
    cr_assert_eq(p->bandwidth, 50e9, "400 Gb/s NIC");
    cr_assert_eq(or_topo_device_node(t, 8), 1);
    or_topo_free(t);
}

Test(presets, boxes_joined_use_the_nearest_nic)
{
    or_topo *t = load("dgx-a100x4");
    cr_assert_eq(or_topo_node_count(t), 4);
    /* Device 5 sits on PCIe switch 2 with NICs 4 and 5: it leaves by one of
     * them, and arrives in the other box through the switch of device 30. */
    const or_topo_path *p = path(t, 5, 30);
    or_topo_link_info first = or_topo_link(t, p->hops[1] / 2);
    int nic = p->hops[1] % 2 ? first.a : first.b;
    cr_assert_str_eq(or_topo_vertex(t, nic).id, "n0.nic4");
    cr_assert_eq(p->bandwidth, 25e9);
    cr_assert_eq(p->nhops, 6);
    or_topo_free(t);
}

Test(presets, a_box_s_nics_reach_the_network)
{
    or_topo *t = load("dgx-h100x2");
    cr_assert_eq(or_topo_node_nics(t, 0), 8);
    cr_assert_eq(or_topo_node_nics(t, 1), 8);
    cr_assert_eq(or_topo_node_nics(t, 2), 0, "no such node");
    or_topo_free(t);
    t = load("dgx-h100");
    cr_assert_eq(or_topo_node_nics(t, 0), 0, "one box: its NICs lead nowhere");
    or_topo_free(t);
    t = load("nodes:3 devices:2 inter:25GB/s,4us");
    cr_assert_eq(or_topo_node_nics(t, 2), 1);
    or_topo_free(t);
}

Test(synthetic, a_box_with_fewer_nics)
{
    /* HGX A100 builds with 4 NICs: one per PCIe switch, next to devices
     * 2k and 2k+1. */
    or_topo *t = load("box:dgx-a100 nodes:3 nics:4");
    cr_assert_eq(or_topo_node_count(t), 3);
    cr_assert_eq(or_topo_device_count(t), 24);
    int nics = 0;
    for (int v = 0; v < or_topo_vertex_count(t); v++)
        nics += or_topo_vertex(t, v).kind == OR_TOPO_NIC;
    cr_assert_eq(nics, 12);
    for (int k = 0; k < 3; k++)
        cr_assert_eq(or_topo_node_nics(t, k), 4);
    /* Device 3 (PCIe switch 1) leaves through NIC 1, its switch's. */
    const or_topo_path *p = path(t, 3, 10);
    or_topo_link_info first = or_topo_link(t, p->hops[1] / 2);
    int nic = p->hops[1] % 2 ? first.a : first.b;
    cr_assert_str_eq(or_topo_vertex(t, nic).id, "n0.nic1");
    cr_assert_eq(p->bandwidth, 25e9);
    or_topo_free(t);
}

/* Counts of network switches and of network links. */
static void count_net(const or_topo *t, int *switches, int *links)
{
    *switches = *links = 0;
    for (int v = 0; v < or_topo_vertex_count(t); v++)
        *switches += or_topo_vertex(t, v).kind == OR_TOPO_NET_SWITCH;
    for (int l = 0; l < or_topo_link_count(t); l++)
        *links += or_topo_link(t, l).kind == OR_TOPO_LINK_NET;
}

/* The bandwidth of the link between the vertices named a and b; 0: none. */
static double link_bw(const or_topo *t, const char *a, const char *b)
{
    for (int l = 0; l < or_topo_link_count(t); l++) {
        or_topo_link_info li = or_topo_link(t, l);
        const char *x = or_topo_vertex(t, li.a).id, *y = or_topo_vertex(t, li.b).id;
        if ((!strcmp(x, a) && !strcmp(y, b)) || (!strcmp(x, b) && !strcmp(y, a)))
            return li.bandwidth;
    }
    return 0;
}

Test(fabric, rail_optimized_boxes)
{
    /* DGX SuperPOD-like: NIC k of every box on leaf k, the 8 leaves under a
     * spine, 2:1 oversubscribed. */
    or_topo *t = load("box:dgx-h100 nodes:4 fabric:rails oversub:2");
    int sw, net;
    count_net(t, &sw, &net);
    cr_assert_eq(sw, 9, "a spine and 8 leaves");
    cr_assert_eq(net, 8 + 4 * 8, "leaf uplinks and the NICs");
    cr_assert_eq(link_bw(t, "leaf3", "spine"), 4 * 50e9 / 2);
    cr_assert_eq(link_bw(t, "n2.nic3", "leaf3"), 50e9);
    cr_assert_eq(link_bw(t, "n2.nic3", "leaf2"), 0, "a NIC joins its rail's leaf only");
    /* Same rail: through its leaf alone. */
    const or_topo_path *p = path(t, 0, 8);
    cr_assert_eq(p->type, OR_TOPO_PATH_NET);
    cr_assert_eq(p->bandwidth, 50e9);
    for (int i = 0; i < p->nhops; i++) {
        or_topo_link_info li = or_topo_link(t, p->hops[i] / 2);
        cr_assert(strcmp(or_topo_vertex(t, li.a).id, "spine") && strcmp(or_topo_vertex(t, li.b).id, "spine"));
    }
    check_all_paths(t);
    check_round_trip(t);
    or_topo_free(t);
}

Test(fabric, leaf_spine_oversubscribed)
{
    /* 6 nodes, 4 to a leaf: leaf0 holds 4 NICs of 25 GB/s, leaf1 2; 4:1. */
    or_topo *t = load("nodes:6 devices:2 inter:25GB/s,4us fabric:leaf-spine leaf:4 oversub:4");
    int sw, net;
    count_net(t, &sw, &net);
    cr_assert_eq(sw, 3);
    cr_assert_eq(net, 2 + 6);
    cr_assert_eq(link_bw(t, "leaf0", "spine"), 25e9);
    cr_assert_eq(link_bw(t, "leaf1", "spine"), 12.5e9);
    cr_assert_eq(path(t, 0, 2)->bandwidth, 25e9, "nodes 0 and 1 share leaf0");
    cr_assert_eq(path(t, 0, 10)->bandwidth, 12.5e9, "node 5 is under leaf1's thin uplink");
    /* 500 ns of PCIe each side and 4 us NIC to NIC within a leaf; through
     * the spine half the inter latency more (1 us up, 1 us down). */
    cr_assert_float_eq(path(t, 0, 2)->latency_ns, 5000, 1e-6);
    cr_assert_float_eq(path(t, 0, 10)->latency_ns, 7000, 1e-6);
    check_all_paths(t);
    check_round_trip(t);
    or_topo_free(t);
}

Test(fabric, one_switch_is_the_default)
{
    or_topo *a = load("box:dgx-a100 nodes:2");
    or_topo *b = load("box:dgx-a100 nodes:2 fabric:switch");
    or_topo *c = load("dgx-a100x2");
    int sw, net;
    for (or_topo *t = a; t; t = t == a ? b : t == b ? c : NULL) {
        cr_assert_eq(or_topo_vertex_count(t), or_topo_vertex_count(c));
        cr_assert_eq(or_topo_link_count(t), or_topo_link_count(c));
        count_net(t, &sw, &net);
        cr_assert_eq(sw, 1, "one network switch");
        cr_assert_eq(net, 16, "every NIC on it");
        cr_assert_eq(path(t, 5, 30 - 16)->bandwidth, 25e9);
    }
    or_topo_free(a);
    or_topo_free(b);
    or_topo_free(c);
}

Test(presets, nvl72_is_one_nvlink_domain)
{
    or_topo *t = load("nvl72x2");
    cr_assert_eq(or_topo_node_count(t), 2);
    cr_assert_eq(or_topo_device_count(t), 144);
    cr_assert_eq(path(t, 0, 71)->type, OR_TOPO_PATH_NVL);
    cr_assert_eq(path(t, 0, 71)->bandwidth, 900e9, "18 NVLink5 links x 50 GB/s, any pair of the rack");
    cr_assert_eq(path(t, 3, 72)->type, OR_TOPO_PATH_NET);
    cr_assert_eq(path(t, 3, 72)->bandwidth, 50e9, "a 400 Gb/s NIC per device");
    cr_assert_eq(or_topo_node_nics(t, 1), 72);
    or_topo_free(t);
}

Test(synthetic, the_design_example)
{
    or_topo *t = load("nodes:2 devices:4 intra:300GB/s,1us inter:25GB/s,5us");
    cr_assert_eq(or_topo_device_count(t), 8);
    cr_assert_eq(or_topo_node_count(t), 2);
    int first, count;
    or_topo_node_devices(t, 1, &first, &count);
    cr_assert_eq(first, 4);
    cr_assert_eq(count, 4);
    cr_assert_eq(or_topo_device_node(t, 3), 0);
    cr_assert_eq(or_topo_device_node(t, 4), 1);
    cr_assert_eq(or_topo_device_node(t, 8), -1);
    const or_topo_path *in = path(t, 0, 1);
    cr_assert_eq(in->type, OR_TOPO_PATH_NVL);
    cr_assert_eq(in->bandwidth, 300e9);
    cr_assert_eq(in->latency_ns, 1000, "intra latency is device to device");
    const or_topo_path *out = path(t, 0, 5);
    cr_assert_eq(out->type, OR_TOPO_PATH_NET);
    cr_assert_eq(out->bandwidth, 25e9);
    /* host link, NIC to NIC, host link */
    cr_assert_eq(out->latency_ns, 500 + 5000 + 500);
    check_all_paths(t);
    check_round_trip(t);
    or_topo_free(t);
}

Test(synthetic, shapes_and_units)
{
    or_topo *t = load("  devices:6 shape:ring intra:200Gb/s,0.5us   host:16GiB/s,2us ");
    cr_assert_eq(path(t, 0, 1)->bandwidth, 25e9);
    cr_assert_eq(path(t, 0, 1)->latency_ns, 500);
    cr_assert_eq(or_topo_host_path(t, 0)->bandwidth, 16.0 * 1024 * 1024 * 1024);
    cr_assert_eq(or_topo_host_path(t, 0)->latency_ns, 2000);
    or_topo_free(t);
    t = load("shape:torus dims:2x3 nodes:2 inter:100Gb/s");
    cr_assert_eq(or_topo_device_count(t), 12);
    cr_assert_eq(path(t, 0, 6)->bandwidth, 12.5e9);
    or_topo_free(t);
    t = load("box:dgx-h100 nodes:3 inter:100Gb/s,4us");
    cr_assert_eq(or_topo_device_count(t), 24);
    cr_assert_eq(path(t, 0, 23)->bandwidth, 12.5e9);
    or_topo_free(t);
}

Test(synthetic, a_lone_word_is_a_preset)
{
    or_topo *t = load("  switch4 ");
    cr_assert_str_eq(or_topo_name(t), "switch4");
    cr_assert_eq(or_topo_device_count(t), 4);
    or_topo_free(t);
}

Test(nccl, azure_ndv4_pci_only_file)
{
    or_topo *t = load_data("azure-ndv4-topo.xml");
    cr_assert_eq(or_topo_device_count(t), 8);
    cr_assert_eq(or_topo_node_count(t), 1);
    /* Pairs share a PCIe switch; others are on other NUMA nodes. */
    cr_assert_eq(path(t, 0, 1)->type, OR_TOPO_PATH_PIX);
    cr_assert_eq(path(t, 0, 2)->type, OR_TOPO_PATH_SYS);
    cr_assert_eq(path(t, 0, 2)->bandwidth, 16e9, "AMD CPUs, as NCCL models them");
    cr_assert_float_eq(path(t, 0, 1)->bandwidth, 16e9 * 16 * 128 / 130 / 8, 1);
    check_all_paths(t);
    check_round_trip(t);
    or_topo_free(t);
}

Test(nccl, dump_with_nvswitches_folds_them_into_one)
{
    or_topo *t = load_data("nccl-dgx-a100-dump.xml");
    cr_assert_eq(or_topo_device_count(t), 8);
    int nvswitches = 0, nics = 0;
    for (int v = 0; v < or_topo_vertex_count(t); v++) {
        nvswitches += or_topo_vertex(t, v).kind == OR_TOPO_NVSWITCH;
        nics += or_topo_vertex(t, v).kind == OR_TOPO_NIC;
    }
    cr_assert_eq(nvswitches, 1);
    cr_assert_eq(nics, 5, "4 on PCIe, 1 on the host");
    for (int j = 1; j < 8; j++) {
        cr_assert_eq(path(t, 0, j)->type, OR_TOPO_PATH_NVL);
        cr_assert_eq(path(t, 0, j)->bandwidth, 300e9, "6 switches x 2 links x 25 GB/s");
    }
    /* The NIC with speed -1 gets NCCL's 10 Gb/s; the others 200 Gb/s. */
    int found_slow = 0, found_fast = 0;
    for (int l = 0; l < or_topo_link_count(t); l++) {
        or_topo_link_info li = or_topo_link(t, l);
        if (li.kind != OR_TOPO_LINK_NET)
            continue;
        found_slow += li.bandwidth == 1.25e9;
        found_fast += li.bandwidth == 25e9;
    }
    cr_assert_eq(found_slow, 1);
    cr_assert_eq(found_fast, 4);
    check_round_trip(t);
    or_topo_free(t);
}

Test(nccl, point_to_point_nvlinks_and_dev_order)
{
    or_topo *t = load_data("nccl-v100-p2p.xml");
    cr_assert_eq(or_topo_device_count(t), 4);
    /* Numbered by <gpu dev>, not file order (dev 1 comes first in the file). */
    cr_assert_eq(path(t, 0, 1)->type, OR_TOPO_PATH_NVL);
    cr_assert_eq(path(t, 0, 1)->bandwidth, 50e9, "two NVLink2 links");
    cr_assert_eq(path(t, 0, 2)->bandwidth, 25e9);
    /* 0-3 have no link: through device 1 or 2 over NVLink beats PCIe. */
    cr_assert_eq(path(t, 0, 3)->type, OR_TOPO_PATH_NVB);
    cr_assert_eq(path(t, 0, 3)->bandwidth, 25e9);
    cr_assert_eq(path(t, 0, 3)->nhops, 2);
    /* Both GPUs list each link: still one link per pair. */
    int nvlinks = 0;
    for (int l = 0; l < or_topo_link_count(t); l++)
        nvlinks += or_topo_link(t, l).kind == OR_TOPO_LINK_NVLINK;
    cr_assert_eq(nvlinks, 4);
    cr_assert_float_eq(or_topo_host_path(t, 0)->bandwidth, 8e9 * 16 * 128 / 130 / 8, 1,
                       "PCIe Gen3 x16");
    check_round_trip(t);
    or_topo_free(t);
}

Test(nccl, host_hash_makes_nodes)
{
    or_topo *t = load_data("nccl-two-hosts.xml");
    cr_assert_eq(or_topo_node_count(t), 2);
    cr_assert_eq(or_topo_device_count(t), 4);
    cr_assert_eq(path(t, 0, 1)->type, OR_TOPO_PATH_PIX);
    const or_topo_path *p = path(t, 1, 2);
    cr_assert_eq(p->type, OR_TOPO_PATH_NET);
    cr_assert_eq(p->bandwidth, 12.5e9, "100 Gb/s");
    /* <net latency> is in microseconds: 2.5 us each side. */
    cr_assert_float_eq(p->latency_ns, 4 * 500 + 2 * 2500, 1e-9);
    check_round_trip(t);
    or_topo_free(t);
}

Test(xml, fat_tree_bottleneck_at_the_spine)
{
    or_topo *t = load_data("fat-tree.xml");
    cr_assert_str_eq(or_topo_name(t), "fat-tree-4x2");
    cr_assert_str_eq(or_topo_node_name(t, 2), "c");
    cr_assert_eq(path(t, 0, 2)->bandwidth, 25e9, "same leaf");
    cr_assert_eq(path(t, 0, 4)->bandwidth, 12.5e9, "over the spine");
    cr_assert_eq(path(t, 0, 4)->nhops, 8);
    check_all_paths(t);
    check_round_trip(t);
    or_topo_free(t);
}

Test(units, parse_and_format_round_trip)
{
    char why[320], buf[64];
    double v;
    cr_assert_eq(or_topo_status_name(OR_TOPO_ERR_FIT)[0], 'O');
    static const struct {
        const char *text;
        double value;
    } bws[] = {{"300GB/s", 300e9},  {"25Gb/s", 3.125e9}, {"1.5TB/s", 1.5e12},
               {"1KiB/s", 1024},    {"8b/s", 1},         {"100Mb/s", 12.5e6},
               {"0.5MB/s", 5e5},    {"2e3B/s", 2000}};
    for (size_t i = 0; i < sizeof bws / sizeof bws[0]; i++) {
        or_topo *t;
        char spec[128];
        /* A host link slower than any of them, so the direct link is the path. */
        snprintf(spec, sizeof spec, "devices:2 shape:full intra:%s host:0.1B/s", bws[i].text);
        t = load(spec);
        cr_assert_eq(path(t, 0, 1)->bandwidth, bws[i].value, "%s", bws[i].text);
        check_round_trip(t);
        or_topo_free(t);
    }
    (void)why;
    (void)buf;
    (void)v;
}

Test(reading, accessors_refuse_out_of_range)
{
    or_topo *t = load("full2");
    cr_assert_null(or_topo_path_between(t, 0, 2));
    cr_assert_null(or_topo_path_between(t, -1, 0));
    cr_assert_null(or_topo_host_path(t, 5));
    cr_assert_eq(or_topo_device_vertex(t, 9), -1);
    cr_assert_null(or_topo_node_name(t, 1));
    cr_assert_null(or_topo_vertex(t, 999).id);
    cr_assert_eq(or_topo_link(t, -1).a, -1);
    const or_topo_path *self = path(t, 1, 1);
    cr_assert_eq(self->type, OR_TOPO_PATH_LOC);
    cr_assert_eq(self->nhops, 0);
    cr_assert_str_eq(or_topo_path_type_name(OR_TOPO_PATH_PXB), "PXB");
    cr_assert_str_eq(or_topo_kind_name(OR_TOPO_NET_SWITCH), "net-switch");
    cr_assert_str_eq(or_topo_link_kind_name(OR_TOPO_LINK_SYS), "sys");
    or_topo_free(t);
}

Test(reading, different_topologies_are_not_equal)
{
    or_topo *a = load("full4"), *b = load("switch4"), *c = load("full4");
    cr_assert(or_topo_equal(a, c));
    cr_assert_not(or_topo_equal(a, b));
    or_topo *d = load("devices:4 shape:full intra:301GB/s");
    cr_assert_not(or_topo_equal(a, d), "names differ");
    or_topo_free(a);
    or_topo_free(b);
    or_topo_free(c);
    or_topo_free(d);
}

Test(paths, pxb_through_two_pci_switches)
{
    static const char xml[] =
        "<topology version=\"1\">\n"
        " <node name=\"n\">\n"
        "  <cpu id=\"c\"/><pci-switch id=\"s0\"/><pci-switch id=\"s1\"/><pci-switch id=\"s2\"/>\n"
        "  <device id=\"a\"/><device id=\"b\"/><device id=\"x\"/>\n"
        "  <link a=\"s0\" b=\"c\" type=\"pcie\" bandwidth=\"16GB/s\" latency=\"1us\"/>\n"
        "  <link a=\"s1\" b=\"s0\" type=\"pcie\" bandwidth=\"32GB/s\" latency=\"1us\"/>\n"
        "  <link a=\"s2\" b=\"s0\" type=\"pcie\" bandwidth=\"32GB/s\" latency=\"1us\"/>\n"
        "  <link a=\"a\" b=\"s1\" type=\"pcie\" bandwidth=\"32GB/s\" latency=\"1us\"/>\n"
        "  <link a=\"b\" b=\"s2\" type=\"pcie\" bandwidth=\"32GB/s\" latency=\"1us\"/>\n"
        "  <link a=\"x\" b=\"c\" type=\"pcie\" bandwidth=\"32GB/s\" latency=\"1us\"/>\n"
        " </node>\n"
        "</topology>\n";
    or_topo *t;
    or_topo_error err;
    cr_assert_eq(or_topo_from_xml_memory(xml, sizeof xml - 1, "pxb", &t, &err), OR_TOPO_OK,
                 "%s", err.message);
    cr_assert_eq(path(t, 0, 1)->type, OR_TOPO_PATH_PXB);
    cr_assert_eq(path(t, 0, 1)->bandwidth, 32e9, "not through the CPU's 16 GB/s link");
    cr_assert_eq(path(t, 0, 2)->type, OR_TOPO_PATH_PHB);
    cr_assert_eq(path(t, 0, 2)->bandwidth, 16e9);
    check_all_paths(t);
    or_topo_free(t);
}

Test(paths, widest_path_wins_over_shorter)
{
    /* a-b direct at 10 GB/s, or a-c-b at 100 GB/s: the wide one, though
     * longer; with equal width the lower latency. */
    static const char xml[] =
        "<topology version=\"1\"><node name=\"n\">"
        "<device id=\"a\"/><device id=\"b\"/><nvswitch id=\"s\"/><nvswitch id=\"s2\"/>"
        "<link a=\"a\" b=\"b\" type=\"nvlink\" bandwidth=\"10GB/s\" latency=\"1ns\"/>"
        "<link a=\"a\" b=\"s\" type=\"nvlink\" bandwidth=\"100GB/s\" latency=\"5us\"/>"
        "<link a=\"s\" b=\"b\" type=\"nvlink\" bandwidth=\"100GB/s\" latency=\"5us\"/>"
        "<link a=\"a\" b=\"s2\" type=\"nvlink\" bandwidth=\"100GB/s\" latency=\"1us\"/>"
        "<link a=\"s2\" b=\"b\" type=\"nvlink\" bandwidth=\"200GB/s\" latency=\"1us\"/>"
        "</node></topology>";
    or_topo *t;
    or_topo_error err;
    cr_assert_eq(or_topo_from_xml_memory(xml, sizeof xml - 1, "w", &t, &err), OR_TOPO_OK, "%s",
                 err.message);
    const or_topo_path *p = path(t, 0, 1);
    cr_assert_eq(p->bandwidth, 100e9);
    cr_assert_eq(p->latency_ns, 2000);
    or_topo_link_info l = or_topo_link(t, p->hops[0] / 2);
    cr_assert_str_eq(or_topo_vertex(t, l.b).id, "s2");
    or_topo_free(t);
}
