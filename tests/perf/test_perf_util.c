/*
 * test_perf_util.c - the size syntax the benchmark programs share
 * (perf_parse_size): every spelling docs/occl-perf.md and docs/performance.md
 * give, and the inputs it must refuse without touching its output.
 */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>

#include "perf_util.h"

static const struct {
    const char *text;
    size_t bytes;
} good[] = {
    {"0", 0},
    {"8", 8},
    {"8B", 8},
    {"8b", 8},
    {"65536", 65536},
    {"4k", 4 * KiB},
    {"4K", 4 * KiB},
    {"4KB", 4 * KiB},
    {"4kb", 4 * KiB},
    {"4KiB", 4 * KiB},
    {"4kib", 4 * KiB},
    {"16M", 16 * MiB},
    {"16MB", 16 * MiB},
    {"16MiB", 16 * MiB},
    {"1G", GiB},
    {"1g", GiB},
    {"1GiB", GiB},
    {"2T", 2048 * GiB},
    {"007K", 7 * KiB},
};

Test(perf_parse_size, documented_spellings)
{
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        size_t got = 12345;
        cr_expect_eq(perf_parse_size(good[i].text, &got), 0, "'%s' refused", good[i].text);
        cr_expect_eq(got, good[i].bytes, "'%s' -> %zu, expected %zu", good[i].text, got,
                     good[i].bytes);
    }
}

Test(perf_parse_size, bad_input_is_refused)
{
    char too_big[64], too_big_shifted[64];
    snprintf(too_big, sizeof too_big, "%zu0", (size_t)SIZE_MAX); /* SIZE_MAX * 10 */
    snprintf(too_big_shifted, sizeof too_big_shifted, "%zuK", (size_t)(SIZE_MAX >> 10) + 1);
    const char *bad[] = {
        "",      "K",     "B",      "x",     "-5",    "+5",     " 5",    "5 ",     "1.5M",
        "4Q",    "4KBx",  "4Ki",    "4iB",   "4BB",   "0x10",   "4 K",   "4KK",    "-0",
        "18446744073709551616", too_big, too_big_shifted,
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t got = 12345;
        cr_expect_eq(perf_parse_size(bad[i], &got), -1, "'%s' accepted", bad[i]);
        cr_expect_eq(got, 12345, "'%s' changed the output on failure", bad[i]);
    }
}

Test(perf_parse_size, largest_sizes)
{
    char text[64];
    size_t got = 0;
    snprintf(text, sizeof text, "%zu", (size_t)SIZE_MAX);
    cr_expect_eq(perf_parse_size(text, &got), 0);
    cr_expect_eq(got, SIZE_MAX);
    snprintf(text, sizeof text, "%zuK", (size_t)(SIZE_MAX >> 10));
    cr_expect_eq(perf_parse_size(text, &got), 0);
    cr_expect_eq(got, (SIZE_MAX >> 10) << 10);
}

Test(perf_format_size, units)
{
    char buf[32];
    perf_format_size(buf, sizeof buf, 100);
    cr_expect_str_eq(buf, "100 B");
    perf_format_size(buf, sizeof buf, 4 * KiB);
    cr_expect_str_eq(buf, "4 KiB");
    perf_format_size(buf, sizeof buf, 64 * MiB);
    cr_expect_str_eq(buf, "64 MiB");
    perf_format_size(buf, sizeof buf, MiB + KiB);
    cr_expect_str_eq(buf, "1025 KiB");
}
