/* tests/topology/test_placement.c - placement files: what a good one gives,
 * that packed and spread written out read back the same, and that every bad
 * one gets its code, file, line, column and a message naming the problem. */
#include "topo.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef TOPO_DATA_DIR
#error TOPO_DATA_DIR must name tests/topology
#endif

/* The job most files here are written for: 4 ranks x 2 devices on two
 * nodes of four (ids n0.dev0 ... n1.dev3, indices 0 to 7). */
#define JOB_TOPO "nodes:2 devices:4"
#define JOB_RANKS 4
#define JOB_DEVS 2

static or_topo *load(const char *spec)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_load(spec, "test", &t, &err), OR_TOPO_OK, "%s: %s", spec, err.message);
    return t;
}

static void data_path(char *buf, size_t size, const char *dir, const char *name)
{
    snprintf(buf, size, "%s/placement/%s/%s", TOPO_DATA_DIR, dir, name);
}

/* ---- good files ---------------------------------------------------------- */

Test(placement_file, hand_written_mixes_ids_indices_comments_and_rank_order)
{
    static const int want[JOB_RANKS * JOB_DEVS] = {0, 1, 4, 5, 2, 3, 6, 7};
    or_topo *t = load(JOB_TOPO);
    const char *files[] = {"nodes2x4-4x2.txt", "crlf-no-final-newline.txt"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[512];
        data_path(path, sizeof path, "good", files[f]);
        int dev[JOB_RANKS * JOB_DEVS];
        or_topo_error err;
        cr_assert_eq(or_topo_place_file(t, path, JOB_RANKS, JOB_DEVS, dev, &err), OR_TOPO_OK,
                     "%s: %s:%d:%d: %s", files[f], err.source, err.line, err.column,
                     err.message);
        for (int i = 0; i < JOB_RANKS * JOB_DEVS; i++)
            cr_assert_eq(dev[i], want[i], "%s: entry %d is D%d, expected D%d", files[f], i,
                         dev[i], want[i]);
    }
    or_topo_free(t);
}

/* What ortopo --print-placement writes for packed and spread reads back as
 * the same placement, on several shapes and job sizes. */
Test(placement_file, written_packed_and_spread_read_back_equal)
{
    static const struct {
        const char *topo;
        int ranks, per_rank;
    } jobs[] = {
        {"dgx-a100x2", 16, 1}, {"dgx-a100x2", 4, 2},  {"dgx-a100x2", 3, 4},
        {"nodes:3 devices:4", 5, 2}, {"torus4x4", 16, 1}, {"ring8", 2, 3},
        {"nodes:5 devices:1", 5, 1},
    };
    for (size_t j = 0; j < sizeof jobs / sizeof jobs[0]; j++) {
        or_topo *t = load(jobs[j].topo);
        int n = jobs[j].ranks * jobs[j].per_rank;
        for (int how = OR_TOPO_PLACE_PACKED; how <= OR_TOPO_PLACE_SPREAD; how++) {
            int *dev = malloc(sizeof *dev * (size_t)n), *back = malloc(sizeof *back * (size_t)n);
            cr_assert(dev && back);
            or_topo_error err;
            cr_assert_eq(or_topo_place(t, jobs[j].ranks, jobs[j].per_rank,
                                       (or_topo_placement)how, dev, &err),
                         OR_TOPO_OK, "%s", err.message);
            char *text;
            size_t len;
            cr_assert_eq(or_topo_write_placement(t, jobs[j].ranks, jobs[j].per_rank, dev,
                                                 "a comment\nof two lines", &text, &len, &err),
                         OR_TOPO_OK, "%s", err.message);
            cr_assert_eq(strlen(text), len);
            cr_assert_eq(strncmp(text, "# a comment\n# of two lines\n", 27), 0, "%s", text);
            cr_assert_eq(or_topo_place_text(t, text, len, "written", jobs[j].ranks,
                                            jobs[j].per_rank, back, &err),
                         OR_TOPO_OK, "%s:%d: %s\n%s", jobs[j].topo, err.line, err.message, text);
            cr_assert_eq(memcmp(dev, back, sizeof *dev * (size_t)n), 0, "%s %s:\n%s",
                         jobs[j].topo, how ? "spread" : "packed", text);
            free(text);
            free(dev);
            free(back);
        }
        or_topo_free(t);
    }
}

Test(placement_file, one_line_per_rank_with_ids_as_ortopo_prints_them)
{
    or_topo *t = load("dgx-a100x2");
    int dev[4] = {0}, want[4] = {8, 9, 0, 1};
    or_topo_error err;
    static const char text[] = "0: n1.gpu0 n1.gpu1\n1: n0.gpu0 n0.gpu1\n";
    cr_assert_eq(or_topo_place_text(t, text, sizeof text - 1, "p", 2, 2, dev, &err), OR_TOPO_OK,
                 "%s", err.message);
    cr_assert_eq(memcmp(dev, want, sizeof dev), 0);
    char *out;
    size_t len;
    cr_assert_eq(or_topo_write_placement(t, 2, 2, dev, NULL, &out, &len, &err), OR_TOPO_OK);
    cr_assert_not_null(strstr(out, "\n0: n1.gpu0 n1.gpu1\n1: n0.gpu0 n0.gpu1\n"), "%s", out);
    cr_assert_eq(out[0], '#', "a header line says what the lines are");
    free(out);
    or_topo_free(t);
}

/* A device's id wins over an index of the same spelling: the file names
 * devices the way the topology does. */
Test(placement_file, a_device_id_wins_over_an_index)
{
    static const char xml[] =
        "<topology version=\"1\">\n"
        "  <node name=\"a\"><device id=\"1\"/><device id=\"0\"/><device id=\"D0\"/>\n"
        "    <link a=\"1\" b=\"0\" type=\"nvlink\" bandwidth=\"1GB/s\" latency=\"1us\"/>\n"
        "    <link a=\"0\" b=\"D0\" type=\"nvlink\" bandwidth=\"1GB/s\" latency=\"1us\"/>\n"
        "  </node>\n</topology>\n";
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_from_xml_memory(xml, sizeof xml - 1, "ids", &t, &err), OR_TOPO_OK,
                 "%s", err.message);
    int dev[3];
    static const char text[] = "0: 1\n1: D0\n2: D1\n";
    cr_assert_eq(or_topo_place_text(t, text, sizeof text - 1, "p", 3, 1, dev, &err), OR_TOPO_OK,
                 "%s", err.message);
    cr_assert_eq(dev[0], 0, "'1' is the device named 1, the first one");
    cr_assert_eq(dev[1], 2, "'D0' is the device named D0");
    cr_assert_eq(dev[2], 1, "'D1' names no device: index 1, the device named 0");
    or_topo_free(t);
}

/* ---- bad files ----------------------------------------------------------- */

typedef struct {
    char file[48];
    or_topo_status code;
    int line, column; /* 0: none */
    char says[112];
} bad_placement;

/* Criterion hands parameters to a new process by value: arrays, no pointers. */
static bad_placement bad_files[] = {
    {"unknown-device.txt", OR_TOPO_ERR_UNKNOWN_REF, 3, 12,
     "unknown device 'n0.gpu3': neither a device id of topology"},
    {"index-out-of-range.txt", OR_TOPO_ERR_VALUE, 5, 4,
     "device index 8 is out of range: topology 'nodes:2 devices:4' has 8 devices (0 to 7)"},
    {"not-a-device.txt", OR_TOPO_ERR_UNKNOWN_REF, 2, 4, "'n0.cpu' is a cpu of topology"},
    {"device-twice.txt", OR_TOPO_ERR_DUPLICATE, 4, 12,
     "device n0.dev1 (D1) is used twice: it is already rank 0's (line 1)"},
    {"rank-twice.txt", OR_TOPO_ERR_DUPLICATE, 4, 1, "rank 1 is placed twice: already on line 2"},
    {"across-nodes.txt", OR_TOPO_ERR_STRUCTURE, 3, 12,
     "rank 1's devices are on different nodes: n0.dev3 on node 'node0', n1.dev0 on node 'node1'"},
    {"too-many-devices.txt", OR_TOPO_ERR_FIT, 3, 8,
     "rank 2 has more than 2 devices: the job gives each rank 2"},
    {"too-few-devices.txt", OR_TOPO_ERR_FIT, 3, 1,
     "rank 2 has 1 device: the job gives each rank 2"},
    {"missing-rank.txt", OR_TOPO_ERR_FIT, 0, 0,
     "rank 2 is missing: the job has 4 ranks (0 to 3) and the file places 3"},
    {"extra-rank.txt", OR_TOPO_ERR_FIT, 6, 1,
     "rank 4 is not in the job: it has 4 ranks (0 to 3)"},
    {"junk-rank.txt", OR_TOPO_ERR_SYNTAX, 2, 1, "expected 'RANK: DEVICE...'"},
    {"no-colon.txt", OR_TOPO_ERR_SYNTAX, 3, 1, "then the rank's devices), not '2 4 5'"},
    {"junk-device.txt", OR_TOPO_ERR_UNKNOWN_REF, 2, 6, "unknown device '3x'"},
    {"comments-only.txt", OR_TOPO_ERR_SYNTAX, 0, 0, "no ranks: the file holds no"},
    {"empty.txt", OR_TOPO_ERR_SYNTAX, 0, 0, "no ranks"},
};

ParameterizedTestParameters(bad_placement, reports_code_file_line_and_column)
{
    return cr_make_param_array(bad_placement, bad_files, sizeof bad_files / sizeof bad_files[0]);
}

ParameterizedTest(bad_placement *b, bad_placement, reports_code_file_line_and_column)
{
    char path[512];
    data_path(path, sizeof path, "bad", b->file);
    or_topo *t = load(JOB_TOPO);
    int dev[JOB_RANKS * JOB_DEVS];
    for (int i = 0; i < JOB_RANKS * JOB_DEVS; i++)
        dev[i] = -7;
    or_topo_error err;
    or_topo_status rc = or_topo_place_file(t, path, JOB_RANKS, JOB_DEVS, dev, &err);
    cr_assert_eq(rc, b->code, "%s: got %s (%s)", b->file, or_topo_status_name(rc), err.message);
    cr_assert_eq(err.code, b->code);
    for (int i = 0; i < JOB_RANKS * JOB_DEVS; i++)
        cr_assert_eq(dev[i], -7, "the output is left alone on failure");
    cr_assert_str_eq(err.source, path);
    cr_assert_eq(err.line, b->line, "%s: line %d, expected %d (%s)", b->file, err.line, b->line,
                 err.message);
    cr_assert_eq(err.column, b->column, "%s: column %d, expected %d (%s)", b->file, err.column,
                 b->column, err.message);
    cr_assert_not_null(strstr(err.message, b->says), "%s: '%s' does not say '%s'", b->file,
                       err.message, b->says);
    char text[1024], where[600];
    or_topo_error_format(&err, text, sizeof text);
    if (b->line)
        snprintf(where, sizeof where, "%s:%d:%d: ", path, b->line, b->column);
    else
        snprintf(where, sizeof where, "%s: ", path);
    cr_assert_eq(strncmp(text, where, strlen(where)), 0, "'%s' does not start '%s'", text, where);
    or_topo_free(t);
}

Test(bad_placement, unreadable_files_are_io_errors)
{
    or_topo *t = load(JOB_TOPO);
    int dev[JOB_RANKS * JOB_DEVS];
    or_topo_error err;
    cr_assert_eq(or_topo_place_file(t, "/nonexistent/p.txt", JOB_RANKS, JOB_DEVS, dev, &err),
                 OR_TOPO_ERR_IO);
    cr_assert_str_eq(err.source, "/nonexistent/p.txt");
    cr_assert_not_null(strstr(err.message, "No such file"), "%s", err.message);
    /* A directory opens, but does not read. */
    cr_assert_eq(or_topo_place_file(t, TOPO_DATA_DIR, JOB_RANKS, JOB_DEVS, dev, &err),
                 OR_TOPO_ERR_IO, "%s", err.message);
    cr_assert_not_null(strstr(err.message, "cannot read the placement file"), "%s", err.message);
    or_topo_free(t);
}

Test(bad_placement, text_errors_and_jobs_that_cannot_fit)
{
    or_topo *t = load(JOB_TOPO);
    int dev[16];
    or_topo_error err;
    static const char nul[] = "0: 0 1\n1: 2\0 3\n";
    cr_assert_eq(or_topo_place_text(t, nul, sizeof nul - 1, "mem", 2, 2, dev, &err),
                 OR_TOPO_ERR_SYNTAX);
    cr_assert_eq(err.line, 2);
    cr_assert_eq(err.column, 5);
    cr_assert_not_null(strstr(err.message, "NUL"));
    static const char ok[] = "0: 0\n";
    cr_assert_eq(or_topo_place_text(t, ok, sizeof ok - 1, "mem", 0, 1, dev, &err),
                 OR_TOPO_ERR_VALUE);
    cr_assert_eq(or_topo_place_text(t, ok, sizeof ok - 1, "mem", 1, 0, dev, &err),
                 OR_TOPO_ERR_VALUE);
    /* More devices than the topology has: said before reading a line. */
    cr_assert_eq(or_topo_place_text(t, ok, sizeof ok - 1, "mem", 9, 1, dev, &err),
                 OR_TOPO_ERR_FIT);
    cr_assert_not_null(strstr(err.message, "need 9 devices"), "%s", err.message);
    /* A zero-device rank and a huge rank number. */
    static const char none[] = "0:\n";
    cr_assert_eq(or_topo_place_text(t, none, sizeof none - 1, "mem", 1, 1, dev, &err),
                 OR_TOPO_ERR_FIT);
    cr_assert_not_null(strstr(err.message, "rank 0 has 0 devices"), "%s", err.message);
    static const char huge[] = "99999999999999999999: 0\n";
    cr_assert_eq(or_topo_place_text(t, huge, sizeof huge - 1, "mem", 1, 1, dev, &err),
                 OR_TOPO_ERR_FIT);
    cr_assert_not_null(strstr(err.message, "rank 99999999999999999999 is not in the job"), "%s",
                       err.message);
    static const char bigindex[] = "0: 99999999999999999999\n";
    cr_assert_eq(or_topo_place_text(t, bigindex, sizeof bigindex - 1, "mem", 1, 1, dev, &err),
                 OR_TOPO_ERR_VALUE);
    /* The source defaults to a word that says what the text is. */
    cr_assert_eq(or_topo_place_text(t, "x", 1, NULL, 1, 1, dev, &err), OR_TOPO_ERR_SYNTAX);
    cr_assert_str_eq(err.source, "placement");
    /* Writing refuses a device the topology does not have. */
    int bad[2] = {0, 8};
    char *out = NULL;
    size_t len;
    cr_assert_eq(or_topo_write_placement(t, 2, 1, bad, NULL, &out, &len, &err),
                 OR_TOPO_ERR_VALUE);
    cr_assert_null(out);
    or_topo_free(t);
}
