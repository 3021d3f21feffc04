/* tests/topology/test_topo_errors.c - every way to give a bad topology gets
 * its code, the file and line (or column of a string) and a message that
 * names the problem. */
#include "topo.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char file[64];
    or_topo_status code;
    int line;
    char says[96];
} bad_file;

/* Criterion hands parameters to a new process by value (its addresses
 * differ): plain character arrays, no pointers. */
static bad_file bad_files[] = {
    {"malformed.xml", OR_TOPO_ERR_SYNTAX, 5, "tag mismatch: device line 4 and node"},
    {"unknown-element.xml", OR_TOPO_ERR_UNKNOWN_NAME, 4, "unknown element <gpu>"},
    {"unknown-attribute.xml", OR_TOPO_ERR_UNKNOWN_NAME, 3, "unknown attribute 'speed'"},
    {"link-unknown-device.xml", OR_TOPO_ERR_UNKNOWN_REF, 6, "unknown 'd7'"},
    {"zero-bandwidth.xml", OR_TOPO_ERR_VALUE, 5, "'0GB/s' must be greater than zero"},
    {"negative-bandwidth.xml", OR_TOPO_ERR_VALUE, 6, "'-25GB/s' is negative"},
    {"bad-unit.xml", OR_TOPO_ERR_VALUE, 5, "unknown unit 'GHz'"},
    {"duplicate-id.xml", OR_TOPO_ERR_DUPLICATE, 5, "id 'd0' is already used (line 3)"},
    {"duplicate-link.xml", OR_TOPO_ERR_DUPLICATE, 6, "second link between 'd0' and 'd1'"},
    {"disconnected.xml", OR_TOPO_ERR_STRUCTURE, 5, "no path from device 'd0' to device 'd2'"},
    {"unreachable-remote-device.xml", OR_TOPO_ERR_STRUCTURE, 16,
     "no path from device 'a.d0' to device 'b.d1'"},
    {"split-network.xml", OR_TOPO_ERR_STRUCTURE, 16, "no path from device 'a.d0' to device 'c.d0'"},
    {"wrong-link-type.xml", OR_TOPO_ERR_STRUCTURE, 5, "nvlink cannot join device 'd0' and nic"},
    {"cross-node-pcie.xml", OR_TOPO_ERR_STRUCTURE, 8, "of different nodes"},
    {"empty-node.xml", OR_TOPO_ERR_STRUCTURE, 5, "node 'spare' has no device"},
    {"wrong-root.xml", OR_TOPO_ERR_UNKNOWN_NAME, 2, "root element is <topo>"},
    {"doctype.xml", OR_TOPO_ERR_SYNTAX, 2, "DOCTYPE"},
    {"bad-version.xml", OR_TOPO_ERR_VALUE, 1, "version '2' is not 1"},
    {"nccl-unknown-nvlink-target.xml", OR_TOPO_ERR_UNKNOWN_REF, 6,
     "nvlink target '0000:99:00.0' is not a GPU"},
    {"nccl-no-gpu.xml", OR_TOPO_ERR_STRUCTURE, 1, "no GPU"},
    {"nccl-duplicate-dev.xml", OR_TOPO_ERR_DUPLICATE, 6, "two GPUs have dev=\"0\""},
    {"nccl-bad-count.xml", OR_TOPO_ERR_VALUE, 5, "<nvlink count>"},
};

ParameterizedTestParameters(bad_xml, reports_code_file_and_line)
{
    return cr_make_param_array(bad_file, bad_files, sizeof bad_files / sizeof bad_files[0]);
}

ParameterizedTest(bad_file *b, bad_xml, reports_code_file_and_line)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad/%s", TOPO_DATA_DIR, b->file);
    or_topo *t = (or_topo *)0x1;
    or_topo_error err;
    or_topo_status rc = or_topo_from_xml_file(path, &t, &err);
    cr_assert_eq(rc, b->code, "%s: got %s (%s)", b->file, or_topo_status_name(rc), err.message);
    cr_assert_eq(err.code, b->code);
    cr_assert_eq(t, (or_topo *)0x1, "the output is left alone on failure");
    cr_assert_str_eq(err.source, path);
    cr_assert_eq(err.line, b->line, "%s: line %d, expected %d (%s)", b->file, err.line, b->line,
                 err.message);
    cr_assert_not_null(strstr(err.message, b->says), "%s: '%s' does not say '%s'", b->file,
                       err.message, b->says);
    char text[1024], where[600];
    or_topo_error_format(&err, text, sizeof text);
    snprintf(where, sizeof where, "%s:%d:", path, b->line);
    cr_assert_eq(strncmp(text, where, strlen(where)), 0, "'%s'", text);
    /* The same through or_topo_load, which picks the XML reader by name. */
    cr_assert_eq(or_topo_load(path, "x", &t, &err), b->code);
}

typedef struct {
    char text[64];
    or_topo_status code;
    int column; /* 0: no column */
    char says[96];
} bad_string;

static bad_string bad_strings[] = {
    {"", OR_TOPO_ERR_SYNTAX, 1, "empty"},
    {"dgx-a200", OR_TOPO_ERR_UNKNOWN_PRESET, 0, "unknown preset 'dgx-a200'"},
    /* A known family with a size out of range: the size is the problem. */
    {"full0", OR_TOPO_ERR_VALUE, 0,
     "preset 'full0': its size is out of range (fullN has from 1 to 1024 devices)"},
    {"ring2000", OR_TOPO_ERR_VALUE, 0,
     "preset 'ring2000': its size is out of range (ringN has from 1 to 1024 devices)"},
    {"switch99999999999999999999", OR_TOPO_ERR_VALUE, 0, "switchN has from 1 to 1024 devices"},
    {"torus40x40", OR_TOPO_ERR_VALUE, 0, "torusAxB has from 1 to 1024 devices, A times B"},
    {"dgx-a100x0", OR_TOPO_ERR_VALUE, 0,
     "preset 'dgx-a100x0': its size is out of range (dgx-a100xN has from 1 to 2048 boxes"},
    {"dgx-h100x2049", OR_TOPO_ERR_VALUE, 0, "dgx-h100xN has from 1 to 2048 boxes"},
    {"nvl72x228", OR_TOPO_ERR_VALUE, 0, "nvl72xN has from 1 to 227 racks of 72 devices"},
    {"ringx", OR_TOPO_ERR_UNKNOWN_PRESET, 0, "unknown preset 'ringx'"},
    {"torus4", OR_TOPO_ERR_UNKNOWN_PRESET, 0, "unknown preset"},
    {"nodes:2 devices:4 intra:300GHz", OR_TOPO_ERR_VALUE, 25, "unknown unit 'GHz'"},
    {"devices:4 intra:300GB/s,1parsec", OR_TOPO_ERR_VALUE, 25, "unknown unit 'parsec'"},
    {"devices:4 intra:300", OR_TOPO_ERR_VALUE, 17, "has no unit"},
    {"devices:4 inter:0GB/s", OR_TOPO_ERR_VALUE, 17, "greater than zero"},
    {"devices:4 intra:-3GB/s", OR_TOPO_ERR_VALUE, 17, "negative"},
    {"devices:4 host:fastGB/s", OR_TOPO_ERR_VALUE, 16, "does not start with a number"},
    {"devices:0", OR_TOPO_ERR_VALUE, 9, "devices:0 is not a whole number"},
    {"devices:4x", OR_TOPO_ERR_VALUE, 9, "devices:4x"},
    {"nodes:2 devices:2 nodez:3", OR_TOPO_ERR_UNKNOWN_NAME, 19, "unknown key 'nodez'"},
    {"devices:2 devices:3", OR_TOPO_ERR_DUPLICATE, 11, "given twice"},
    {"devices:2 shape:star", OR_TOPO_ERR_VALUE, 17, "unknown shape 'star'"},
    {"shape:torus devices:4", OR_TOPO_ERR_SYNTAX, 1, "needs dims"},
    {"shape:torus dims:2x2 devices:5", OR_TOPO_ERR_VALUE, 22, "does not match dims:2x2"},
    {"devices:4 dims:2x2", OR_TOPO_ERR_SYNTAX, 11, "dims applies to shape:torus only"},
    {"shape:torus dims:4by4", OR_TOPO_ERR_VALUE, 18, "not ROWSxCOLUMNS"},
    {"nodes:2", OR_TOPO_ERR_SYNTAX, 0, "needs devices:N"},
    {"nodes:17 devices:1024", OR_TOPO_ERR_LIMIT, 0, "17 nodes x 1024 devices is more than 16384 devices"},
    {"nodes:16385 devices:1", OR_TOPO_ERR_VALUE, 7, "nodes:16385 is not a whole number from 1 to 16384"},
    {"devices:1025", OR_TOPO_ERR_VALUE, 9, "devices:1025 is not a whole number from 1 to 1024"},
    {"shape:torus dims:64x64", OR_TOPO_ERR_LIMIT, 18, "more than 1024"},
    {"devices:800 shape:full", OR_TOPO_ERR_LIMIT, 0, "more than 262144 links"},
    {"box:dgx-a100 devices:4", OR_TOPO_ERR_SYNTAX, 14, "cannot be combined with box:"},
    {"box:dgx-b200", OR_TOPO_ERR_UNKNOWN_PRESET, 5, "unknown box 'dgx-b200'"},
    {"box:nvl72 nics:4", OR_TOPO_ERR_SYNTAX, 11, "nics applies to the dgx boxes only"},
    {"box:nvl72 nodes:228", OR_TOPO_ERR_LIMIT, 0, "228 nodes x 72 devices is more than 16384"},
    {"nodes:2 devices:2 fabric:mesh", OR_TOPO_ERR_VALUE, 26, "unknown fabric 'mesh'"},
    {"nodes:2 devices:2 leaf:2", OR_TOPO_ERR_SYNTAX, 19, "leaf applies to fabric:leaf-spine only"},
    {"nodes:2 devices:2 oversub:2", OR_TOPO_ERR_SYNTAX, 19, "oversub applies to fabric:leaf-spine or fabric:rails only"},
    {"nodes:2 devices:2 fabric:rails oversub:0.5", OR_TOPO_ERR_VALUE, 40, "oversub:0.5 is not a ratio from 1 to 1000"},
    {"nodes:2 devices:2 fabric:leaf-spine leaf:0", OR_TOPO_ERR_VALUE, 42, "leaf:0 is not a whole number"},
    {"devices:2 fabric:rails", OR_TOPO_ERR_SYNTAX, 11, "fabric:rails needs nodes:2 or more"},
    {"box:dgx-h100 nics:9", OR_TOPO_ERR_VALUE, 19, "nics:9 is not a whole number from 1 to 8"},
    {"box:dgx-h100 nics:0", OR_TOPO_ERR_VALUE, 19, "nics:0 is not a whole number"},
    {"nodes:2 devices:2 nics:2", OR_TOPO_ERR_SYNTAX, 19, "nics applies to box: only"},
    {"dgx-a100 nodes:2", OR_TOPO_ERR_SYNTAX, 1, "cannot be combined with keys"},
    {"devices:4 fast", OR_TOPO_ERR_SYNTAX, 11, "expected key:value"},
    {"devices:", OR_TOPO_ERR_VALUE, 9, "has no value"},
};

ParameterizedTestParameters(bad_string, reports_code_and_column)
{
    return cr_make_param_array(bad_string, bad_strings, sizeof bad_strings / sizeof bad_strings[0]);
}

ParameterizedTest(bad_string *b, bad_string, reports_code_and_column)
{
    or_topo *t = NULL;
    or_topo_error err;
    or_topo_status rc = or_topo_from_string(b->text, "OPENREG_TOPO", &t, &err);
    cr_assert_eq(rc, b->code, "'%s': got %s (%s)", b->text, or_topo_status_name(rc),
                 err.message);
    cr_assert_null(t);
    cr_assert_str_eq(err.source, "OPENREG_TOPO");
    cr_assert_eq(err.column, b->column, "'%s': column %d, expected %d (%s)", b->text,
                 err.column, b->column, err.message);
    cr_assert_not_null(strstr(err.message, b->says), "'%s': '%s' does not say '%s'", b->text,
                       err.message, b->says);
}

Test(bad_input, unknown_preset_lists_the_known_ones)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_from_preset("nope", &t, &err), OR_TOPO_ERR_UNKNOWN_PRESET);
    cr_assert_not_null(strstr(err.message, "dgx-a100"));
    cr_assert_not_null(strstr(err.message, "torusAxB"));
    cr_assert_null(or_topo_preset_help("nope"));
}

Test(bad_input, missing_file_is_an_io_error)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_load("/nonexistent/dir/t.XML", NULL, &t, &err), OR_TOPO_ERR_IO);
    cr_assert_str_eq(err.source, "/nonexistent/dir/t.XML");
    cr_assert_not_null(strstr(err.message, "No such file"));
}

Test(bad_input, malformed_memory_and_empty_input)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_from_xml_memory("", 0, "mem", &t, &err), OR_TOPO_ERR_SYNTAX);
    cr_assert_eq(or_topo_from_xml_memory("<topology", 9, "mem", &t, &err), OR_TOPO_ERR_SYNTAX);
    cr_assert_eq(err.line, 1);
    static const char two[] = "<topology version=\"1\">\n<node name=\"a\">\n"
                              "<device id=\"x\"/></node>\n</topology>\n<extra/>\n";
    cr_assert_eq(or_topo_from_xml_memory(two, sizeof two - 1, "mem", &t, &err),
                 OR_TOPO_ERR_SYNTAX);
    cr_assert_eq(err.line, 5);
    cr_assert_not_null(strstr(err.message, "Extra content"));
}

Test(bad_input, text_and_missing_attributes)
{
    or_topo *t = NULL;
    or_topo_error err;
    static const char text[] = "<topology version=\"1\">\n<node name=\"a\">hello\n"
                               "<device id=\"x\"/></node></topology>";
    cr_assert_eq(or_topo_from_xml_memory(text, sizeof text - 1, "m", &t, &err),
                 OR_TOPO_ERR_SYNTAX);
    cr_assert_not_null(strstr(err.message, "unexpected text 'hello"));
    static const char noid[] = "<topology version=\"1\">\n<node name=\"a\">\n"
                               "<device/></node></topology>";
    cr_assert_eq(or_topo_from_xml_memory(noid, sizeof noid - 1, "m", &t, &err),
                 OR_TOPO_ERR_SYNTAX);
    cr_assert_eq(err.line, 3);
    cr_assert_not_null(strstr(err.message, "<device> needs attribute id"), "%s", err.message);
    static const char nolat[] =
        "<topology version=\"1\"><node name=\"a\"><device id=\"x\"/><device id=\"y\"/>\n"
        "<link a=\"x\" b=\"y\" type=\"nvlink\" bandwidth=\"1GB/s\"/></node></topology>";
    cr_assert_eq(or_topo_from_xml_memory(nolat, sizeof nolat - 1, "m", &t, &err),
                 OR_TOPO_ERR_SYNTAX);
    cr_assert_eq(err.line, 2);
    cr_assert_not_null(strstr(err.message, "latency"));
    static const char badtype[] =
        "<topology version=\"1\"><node name=\"a\"><device id=\"x\"/><device id=\"y\"/>\n"
        "<link a=\"x\" b=\"y\" type=\"infiniband\" bandwidth=\"1GB/s\" latency=\"1us\"/>"
        "</node></topology>";
    cr_assert_eq(or_topo_from_xml_memory(badtype, sizeof badtype - 1, "m", &t, &err),
                 OR_TOPO_ERR_VALUE);
    cr_assert_not_null(strstr(err.message, "'infiniband'"));
    static const char netin[] = "<topology version=\"1\"><node name=\"a\"><device id=\"x\"/>\n"
                                "<net-switch id=\"s\"/></node></topology>";
    cr_assert_eq(or_topo_from_xml_memory(netin, sizeof netin - 1, "m", &t, &err),
                 OR_TOPO_ERR_STRUCTURE);
    cr_assert_eq(err.line, 2);
    static const char dupnode[] = "<topology version=\"1\"><node name=\"a\"><device id=\"x\"/>"
                                  "</node>\n<node name=\"a\"><device id=\"y\"/></node></topology>";
    cr_assert_eq(or_topo_from_xml_memory(dupnode, sizeof dupnode - 1, "m", &t, &err),
                 OR_TOPO_ERR_DUPLICATE);
    cr_assert_eq(err.line, 2);
    static const char nonode[] = "<topology version=\"1\"/>";
    cr_assert_eq(or_topo_from_xml_memory(nonode, sizeof nonode - 1, "m", &t, &err),
                 OR_TOPO_ERR_STRUCTURE);
    cr_assert_not_null(strstr(err.message, "no node"));
}

Test(bad_input, more_than_the_device_limit)
{
    /* 16385 devices in the own format: refused at the 16385th, with its line. */
    size_t cap = 32 * 16500, n = 0;
    char *xml = malloc(cap);
    n += (size_t)snprintf(xml + n, cap - n, "<topology version=\"1\"><node name=\"a\">\n");
    for (int i = 0; i < 16385; i++)
        n += (size_t)snprintf(xml + n, cap - n, "<device id=\"d%d\"/>\n", i);
    n += (size_t)snprintf(xml + n, cap - n, "</node></topology>\n");
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_from_xml_memory(xml, n, "big", &t, &err), OR_TOPO_ERR_LIMIT);
    cr_assert_eq(err.line, 16386);
    free(xml);
}

Test(fit, more_ranks_or_devices_than_the_topology_holds)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_from_preset("dgx-a100", &t, &err), OR_TOPO_OK);
    cr_assert_eq(or_topo_check_fit(t, 8, 1, &err), OR_TOPO_OK);
    cr_assert_eq(or_topo_check_fit(t, 4, 2, &err), OR_TOPO_OK);
    cr_assert_eq(or_topo_check_fit(t, 9, 1, &err), OR_TOPO_ERR_FIT);
    cr_assert_not_null(strstr(err.message, "9 ranks x 1 devices need 9 devices"), "%s",
                       err.message);
    cr_assert_not_null(strstr(err.message, "has 8"));
    cr_assert_eq(or_topo_check_fit(t, 8, 2, &err), OR_TOPO_ERR_FIT);
    cr_assert_eq(or_topo_check_fit(t, 0, 1, &err), OR_TOPO_ERR_VALUE);
    cr_assert_eq(or_topo_check_fit(t, 1, 0, &err), OR_TOPO_ERR_VALUE);
    int dev[16];
    cr_assert_eq(or_topo_place(t, 3, 3, OR_TOPO_PLACE_PACKED, dev, &err), OR_TOPO_ERR_FIT);
    or_topo_free(t);
}

Test(fit, a_rank_does_not_span_nodes)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_from_string("nodes:2 devices:3", NULL, &t, &err), OR_TOPO_OK);
    /* 6 devices, but ranks of 2 fit one per node. */
    cr_assert_eq(or_topo_check_fit(t, 2, 2, &err), OR_TOPO_OK);
    cr_assert_eq(or_topo_check_fit(t, 3, 2, &err), OR_TOPO_ERR_FIT);
    cr_assert_not_null(strstr(err.message, "a rank's devices are in one node"), "%s",
                       err.message);
    cr_assert_not_null(strstr(err.message, "room for 2 ranks of 2"), "%s", err.message);
    or_topo_free(t);
}

Test(fit, placements)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_from_string("nodes:2 devices:4", NULL, &t, &err), OR_TOPO_OK);
    int dev[8];
    cr_assert_eq(or_topo_place(t, 4, 2, OR_TOPO_PLACE_PACKED, dev, &err), OR_TOPO_OK);
    int packed[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    cr_assert_arr_eq(dev, packed, sizeof packed);
    cr_assert_eq(or_topo_place(t, 4, 2, OR_TOPO_PLACE_SPREAD, dev, &err), OR_TOPO_OK);
    int spread[8] = {0, 1, 4, 5, 2, 3, 6, 7};
    cr_assert_arr_eq(dev, spread, sizeof spread);
    cr_assert_eq(or_topo_place(t, 3, 1, OR_TOPO_PLACE_SPREAD, dev, &err), OR_TOPO_OK);
    int spread3[3] = {0, 4, 1};
    cr_assert_arr_eq(dev, spread3, sizeof spread3);
    cr_assert_eq(or_topo_place(t, 1, 1, (or_topo_placement)7, dev, &err), OR_TOPO_ERR_VALUE);
    or_topo_free(t);
    /* Uneven nodes: spread moves on when a node is full. */
    static const char xml[] = "<topology version=\"1\">"
                              "<node name=\"a\"><device id=\"a0\"/></node>"
                              "<node name=\"b\"><device id=\"b0\"/><device id=\"b1\"/>"
                              "<device id=\"b2\"/>"
                              "<link a=\"b0\" b=\"b1\" type=\"nvlink\" bandwidth=\"1GB/s\" latency=\"0ns\"/>"
                              "<link a=\"b1\" b=\"b2\" type=\"nvlink\" bandwidth=\"1GB/s\" latency=\"0ns\"/>"
                              "</node></topology>";
    /* Two nodes and no network: devices of different nodes cannot reach
     * each other, which is an error of its own. */
    cr_assert_eq(or_topo_from_xml_memory(xml, sizeof xml - 1, "u", &t, &err),
                 OR_TOPO_ERR_STRUCTURE);
    cr_assert_not_null(strstr(err.message, "no path from device 'a0' to device 'b0'"));
}

Test(rings, bad_device_lists)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_from_preset("full4", &t, &err), OR_TOPO_OK);
    int order[4];
    int devs[2] = {0, 4};
    cr_assert_eq(or_topo_ring(t, devs, 2, order, &err), OR_TOPO_ERR_VALUE);
    cr_assert_not_null(strstr(err.message, "device 4 is not in the topology"));
    cr_assert_eq(or_topo_ring(t, devs, 0, order, &err), OR_TOPO_ERR_VALUE);
    or_topo_tree_vertex tv[4];
    cr_assert_eq(or_topo_trees(t, devs, 2, tv, &err), OR_TOPO_ERR_VALUE);
    or_topo_free(t);
}

Test(errors, names_and_formatting)
{
    cr_assert_str_eq(or_topo_status_name(OR_TOPO_OK), "OR_TOPO_OK");
    cr_assert_str_eq(or_topo_status_name(OR_TOPO_ERR_FIT), "OR_TOPO_ERR_FIT");
    cr_assert_str_eq(or_topo_status_name((or_topo_status)99), "OR_TOPO_ERR_UNKNOWN");
    cr_assert_str_eq(or_topo_status_string(OR_TOPO_ERR_UNKNOWN_REF),
                     "reference to an unknown device or component");
    or_topo_error e = {OR_TOPO_ERR_VALUE, "f.xml", 3, 7, "bad"};
    char buf[128];
    or_topo_error_format(&e, buf, sizeof buf);
    cr_assert_str_eq(buf, "f.xml:3:7: bad");
    e.column = 0;
    or_topo_error_format(&e, buf, sizeof buf);
    cr_assert_str_eq(buf, "f.xml:3: bad");
    e.line = 0;
    or_topo_error_format(&e, buf, sizeof buf);
    cr_assert_str_eq(buf, "f.xml: bad");
    e.source[0] = '\0';
    e.message[0] = '\0';
    or_topo_error_format(&e, buf, sizeof buf);
    cr_assert_str_eq(buf, "invalid value");
}
