/*
 * test_occl_debug.c - OCCL_DEBUG_SUBSYS and OCCL_DEBUG_FILE (NCCL's syntax
 * for both), and OCCL_ALGO's unknown names: the parsers directly, then
 * whole processes (Criterion runs each test in its own, so every test
 * reads the environment it sets) whose log file holds exactly the selected
 * subsystems' lines, and whose bad settings fail the first call with
 * occlInvalidArgument and the reason.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "occl_internal.h"

Test(occl_debug, subsys_syntax)
{
    char bad[48] = "";
    cr_assert_eq(occl_parse_debug_subsys("INIT", bad, sizeof bad), OCCL_SUBSYS_INIT);
    cr_assert_eq(occl_parse_debug_subsys("init,Coll", bad, sizeof bad),
                 OCCL_SUBSYS_INIT | OCCL_SUBSYS_COLL);
    cr_assert_eq(occl_parse_debug_subsys("^INIT,TUNING", bad, sizeof bad),
                 OCCL_SUBSYS_ALL & ~(OCCL_SUBSYS_INIT | OCCL_SUBSYS_TUNING));
    cr_assert_eq(occl_parse_debug_subsys("ALL", bad, sizeof bad), OCCL_SUBSYS_ALL);
    cr_assert_eq(occl_parse_debug_subsys("^ALL", bad, sizeof bad), 0);
    cr_assert_eq(occl_parse_debug_subsys("GRAPH,NET,P2P,ENV", bad, sizeof bad),
                 OCCL_SUBSYS_GRAPH | OCCL_SUBSYS_NET | OCCL_SUBSYS_P2P | OCCL_SUBSYS_ENV);
    cr_assert_eq(occl_parse_debug_subsys("INIT,BOGUS", bad, sizeof bad), -1);
    cr_assert_str_eq(bad, "BOGUS");
    cr_assert_eq(occl_parse_debug_subsys("INIT,,COLL", bad, sizeof bad), -1); /* an empty name */
}

Test(occl_debug, file_pattern)
{
    char host[256] = "", want[600], out[600];
    gethostname(host, sizeof host - 1);
    cr_assert_eq(occl_expand_debug_file("/tmp/occl.%h.%p.log", out, sizeof out), 0);
    snprintf(want, sizeof want, "/tmp/occl.%s.%d.log", host, (int)getpid());
    cr_assert_str_eq(out, want);
    cr_assert_eq(occl_expand_debug_file("a%%b%xc%", out, sizeof out), 0);
    cr_assert_str_eq(out, "a%b%xc%"); /* %% is '%'; what is not understood is kept */
    cr_assert_eq(occl_expand_debug_file("%p%p%p", out, 8), -1); /* too long */
}

/* The first failure of making a one-rank communicator, or occlSuccess. */
static occlResult_t make_one(void)
{
    occlUniqueId id;
    occlComm_t c;
    occlResult_t r = occlGetUniqueId(&id);
    if (r == occlSuccess)
        r = occlCommInitRank(&c, 1, id, 0);
    if (r == occlSuccess)
        occlCommDestroy(c);
    return r;
}

static char log_path[256];

/* The log file after a one-rank communicator is made and destroyed. */
static char *run_logged(const char *subsys)
{
    snprintf(log_path, sizeof log_path, "/tmp/occl-debug-test.%d.%%p.log", (int)getpid());
    cr_assert_eq(setenv("OCCL_DEBUG", "INFO", 1), 0);
    cr_assert_eq(setenv("OCCL_DEBUG_FILE", log_path, 1), 0);
    cr_assert_eq(setenv("OCCL_TIMEOUT_MS", "20000", 1), 0);
    if (subsys)
        cr_assert_eq(setenv("OCCL_DEBUG_SUBSYS", subsys, 1), 0);
    cr_assert_eq(make_one(), occlSuccess, "%s", occlGetLastError(NULL));
    char path[256];
    snprintf(path, sizeof path, "/tmp/occl-debug-test.%d.%d.log", (int)getpid(), (int)getpid());
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no log file %s", path);
    static char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    unlink(path);
    return text;
}

Test(occl_debug, file_gets_every_subsystem_by_default)
{
    char *text = run_logged(NULL);
    cr_assert(strstr(text, "occl INFO: OCCL_TIMEOUT_MS set by environment to 20000"), "%s", text);
    cr_assert(strstr(text, " rank 0/1 on device"), "%s", text);
}

Test(occl_debug, subsys_selects_lines)
{
    char *text = run_logged("ENV");
    cr_assert(strstr(text, "OCCL_TIMEOUT_MS set by environment"), "%s", text);
    cr_assert_null(strstr(text, " rank 0/1 on device"), "an INIT line with ENV only: %s", text);
}

Test(occl_debug, subsys_negated)
{
    char *text = run_logged("^ENV");
    cr_assert_null(strstr(text, "set by environment"), "an ENV line with ^ENV: %s", text);
    cr_assert(strstr(text, " rank 0/1 on device"), "%s", text);
}

static void expect_refused(const char *text)
{
    cr_assert_eq(make_one(), occlInvalidArgument);
    cr_assert(strstr(occlGetLastError(NULL), text), "reason '%s' lacks '%s'", occlGetLastError(NULL),
              text);
}

Test(occl_debug, bad_subsys_refused)
{
    cr_assert_eq(setenv("OCCL_DEBUG_SUBSYS", "INIT,PROXY", 1), 0);
    expect_refused("unknown subsystem 'PROXY'");
}

Test(occl_debug, bad_file_refused)
{
    cr_assert_eq(setenv("OCCL_DEBUG_FILE", "/nonexistent-dir/occl.%p.log", 1), 0);
    expect_refused("cannot open '/nonexistent-dir/occl.");
}

Test(occl_debug, empty_file_refused)
{
    cr_assert_eq(setenv("OCCL_DEBUG_FILE", "", 1), 0);
    expect_refused("OCCL_DEBUG_FILE='' is not valid");
}

Test(occl_debug, unknown_algorithm_refused)
{
    cr_assert_eq(setenv("OCCL_ALGO", "ring,bogus", 1), 0);
    expect_refused("OCCL_ALGO: unknown algorithm 'bogus'");
}

Test(occl_debug, unknown_collective_refused)
{
    cr_assert_eq(setenv("OCCL_ALGO", "allreduce:ring;bogus:tree", 1), 0);
    expect_refused("OCCL_ALGO: unknown collective 'bogus'");
}

Test(occl_debug, known_algorithms_accepted)
{
    cr_assert_eq(setenv("OCCL_ALGO", "^Tree", 1), 0);
    cr_assert_eq(make_one(), occlSuccess, "%s", occlGetLastError(NULL));
}
