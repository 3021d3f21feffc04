/*
 * test_config.c - OPENREG_* environment variables: accepted values take
 * effect, bad values make every runtime call fail with orErrorInitialization.
 * Each test runs in its own process, so setenv() before the first runtime
 * call is what the runtime sees at initialization.
 */
#include "helpers.h"

/* A hang (e.g. a wait that never completes) fails the test instead of the run. */
TestSuite(config, .timeout = 60);

#include <fcntl.h>
#include <stdio.h>

/* Every runtime call must fail with orErrorInitialization and leave its
 * outputs alone; the code is this thread's last error after each call. */
static void expect_init_failure_everywhere(void)
{
    int count = -7, dev = -7;
    void *p = (void *)0x1;
    orStream_t s = (orStream_t)0x1;
    orEvent_t e = (orEvent_t)0x1;
    size_t fr = 11, tot = 12;
    orDeviceProp prop;
    memset(&prop, 0x5a, sizeof prop);
    orDeviceProp prop_before = prop;

    for (int round = 0; round < 2; round++) { /* the first call, then later ones */
        EXPECT_OR(orGetDeviceCount(&count), orErrorInitialization);
        EXPECT_OR(orGetDevice(&dev), orErrorInitialization);
        EXPECT_OR(orSetDevice(0), orErrorInitialization);
        EXPECT_OR(orGetDeviceProperties(&prop, 0), orErrorInitialization);
        EXPECT_OR(orMalloc(&p, 256), orErrorInitialization);
        EXPECT_OR(orMallocHost(&p, 256), orErrorInitialization);
        EXPECT_OR(orMemGetInfo(&fr, &tot), orErrorInitialization);
        EXPECT_OR(orStreamCreate(&s), orErrorInitialization);
        EXPECT_OR(orEventCreate(&e), orErrorInitialization);
        EXPECT_OR(orDeviceSynchronize(), orErrorInitialization);
        EXPECT_OR(orStreamSynchronize(NULL), orErrorInitialization);
        EXPECT_OR(orFree(NULL), orErrorInitialization);
    }
    cr_assert_eq(count, -7);
    cr_assert_eq(dev, -7);
    cr_assert_eq(p, (void *)0x1);
    cr_assert_eq(s, (orStream_t)0x1);
    cr_assert_eq(e, (orEvent_t)0x1);
    cr_assert_eq(fr, 11);
    cr_assert_eq(tot, 12);
    cr_assert_eq(memcmp(&prop, &prop_before, sizeof prop), 0, "props written on failure");
}

/* Runs the failing calls with stderr captured in a temp file; the message
 * must name the variable, show the accepted values (hint: a piece of them)
 * and be printed only once. */
static void expect_bad_env_hint(const char *name, const char *value, const char *hint)
{
    set_env(name, value);
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    cr_assert_not_null(tmp);
    dup2(fileno(tmp), 2);

    int count = -7;
    orError_t first = orGetDeviceCount(&count);
    fflush(stderr);
    long after_first = lseek(2, 0, SEEK_END);
    expect_init_failure_everywhere();
    fflush(stderr);
    long after_all = lseek(2, 0, SEEK_END);

    dup2(saved, 2);
    close(saved);

    char buf[4096] = {0};
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    fclose(tmp);

    cr_assert_eq(first, orErrorInitialization, "%s=%s: first call -> %s", name, value,
                 orGetErrorName(first));
    cr_assert_eq(count, -7);
    cr_assert_gt(n, 0, "%s=%s: nothing printed on stderr", name, value);
    cr_assert_not_null(strstr(buf, name), "%s=%s: message does not name the variable: %s",
                       name, value, buf);
    if (hint)
        cr_assert_not_null(strstr(buf, hint), "%s=%s: accepted values (%s) not shown: %s", name,
                           value, hint, buf);
    cr_assert_eq(after_first, after_all, "%s=%s: message repeated by later calls: %s", name,
                 value, buf);
}

Test(config, devices_zero) { expect_bad_env_hint("OPENREG_DEVICES", "0", "256"); }
Test(config, devices_negative) { expect_bad_env_hint("OPENREG_DEVICES", "-1", "256"); }
Test(config, devices_not_a_number) { expect_bad_env_hint("OPENREG_DEVICES", "abc", "256"); }
Test(config, devices_too_many) { expect_bad_env_hint("OPENREG_DEVICES", "100000", "256"); }
Test(config, devices_just_above_max) { expect_bad_env_hint("OPENREG_DEVICES", "257", "256"); }
Test(config, devices_trailing_junk) { expect_bad_env_hint("OPENREG_DEVICES", "2x", "256"); }
Test(config, mem_bad_suffix) { expect_bad_env_hint("OPENREG_DEVICE_MEM", "12Q", "1M"); }
Test(config, mem_zero) { expect_bad_env_hint("OPENREG_DEVICE_MEM", "0", "1M"); }
Test(config, mem_below_minimum) { expect_bad_env_hint("OPENREG_DEVICE_MEM", "512K", "1M"); }
Test(config, mem_not_a_number) { expect_bad_env_hint("OPENREG_DEVICE_MEM", "lots", "1M"); }
Test(config, threads_negative) { expect_bad_env_hint("OPENREG_DEVICE_THREADS", "-3", "256"); }
Test(config, threads_too_many) { expect_bad_env_hint("OPENREG_DEVICE_THREADS", "257", "256"); }
Test(config, strict_two) { expect_bad_env_hint("OPENREG_STRICT", "2", NULL); }
Test(config, strict_word) { expect_bad_env_hint("OPENREG_STRICT", "yes", NULL); }
Test(config, memcheck_two) { expect_bad_env_hint("OPENREG_MEMCHECK", "2", "0 or 1"); }
Test(config, memcheck_word) { expect_bad_env_hint("OPENREG_MEMCHECK", "on", "0 or 1"); }
Test(config, debug_unknown_level) { expect_bad_env_hint("OPENREG_DEBUG", "LOUD", "TRACE"); }
Test(config, profile_unknown) { expect_bad_env_hint("OPENREG_DEVICE_PROFILE", "tpu", "a100"); }
Test(config, profile_empty) { expect_bad_env_hint("OPENREG_DEVICE_PROFILE", "", "h100"); }
Test(config, bind_unknown) { expect_bad_env_hint("OPENREG_BIND", "socket", "numa"); }
Test(config, mem_fraction) { expect_bad_env_hint("OPENREG_DEVICE_MEM", "1.5G", "1M"); }
Test(config, time_unknown) { expect_bad_env_hint("OPENREG_TIME", "fast", "wall or virtual"); }
Test(config, time_empty) { expect_bad_env_hint("OPENREG_TIME", "", "virtual"); }
Test(config, trace_empty) { expect_bad_env_hint("OPENREG_TRACE", "", "file name"); }
Test(config, trace_unwritable)
{
    expect_bad_env_hint("OPENREG_TRACE", "/nonexistent-dir/trace.json", "cannot create");
}
/* A directory gets the trace inside it, not a sibling file next to it. */
Test(config, trace_directory)
{
    char dir[] = "/tmp/openreg-trace-dir-XXXXXX", file[64], sibling[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/trace.json", dir);
    snprintf(sibling, sizeof sibling, "%s.json", dir);
    set_env("OPENREG_TRACE", dir);
    int count = 0;
    CHECK_OR(orGetDeviceCount(&count));
    cr_assert_eq(access(file, F_OK), 0, "no %s", file);
    cr_assert_neq(access(sibling, F_OK), 0, "%s written", sibling);
    unlink(file);
    rmdir(dir);
}
Test(config, trace_directory_missing)
{
    expect_bad_env_hint("OPENREG_TRACE", "/nonexistent-dir/", "/nonexistent-dir/trace.json");
}
Test(config, trace_buffer_too_small) { expect_bad_env_hint("OPENREG_TRACE_BUFFER", "10", "1024"); }
/* Numbers past what a long long holds, or near it, are out of range, never
 * wrapped or cut to a default. */
Test(config, devices_llong_max) { expect_bad_env_hint("OPENREG_DEVICES", "9223372036854775807", "256"); }
Test(config, devices_overflow) { expect_bad_env_hint("OPENREG_DEVICES", "18446744073709551617", "256"); }
Test(config, devices_empty) { expect_bad_env_hint("OPENREG_DEVICES", "", "256"); }
Test(config, devices_leading_space) { expect_bad_env_hint("OPENREG_DEVICES", " 2", "256"); }
Test(config, threads_overflow) { expect_bad_env_hint("OPENREG_DEVICE_THREADS", "99999999999999999999", "256"); }
Test(config, ranks_per_node_negative) { expect_bad_env_hint("OPENREG_RANKS_PER_NODE", "-1", "1048576"); }
Test(config, ranks_per_node_word) { expect_bad_env_hint("OPENREG_RANKS_PER_NODE", "two", "1048576"); }
Test(config, ranks_per_node_overflow)
{
    expect_bad_env_hint("OPENREG_RANKS_PER_NODE", "18446744073709", "1048576");
}
Test(config, trace_buffer_overflow)
{
    expect_bad_env_hint("OPENREG_TRACE_BUFFER", "9223372036854775808", "67108864");
}
Test(config, mem_suffix_overflow) { expect_bad_env_hint("OPENREG_DEVICE_MEM", "16777216T", "1T"); }
Test(config, mem_digits_overflow) { expect_bad_env_hint("OPENREG_DEVICE_MEM", "99999999999999999999", "1T"); }
Test(config, timeout_zero) { expect_bad_env_hint("OPENREG_TIMEOUT_MS", "0", "1000000000000"); }
Test(config, timeout_negative) { expect_bad_env_hint("OPENREG_TIMEOUT_MS", "-1", "1000000000000"); }
Test(config, timeout_word) { expect_bad_env_hint("OPENREG_TIMEOUT_MS", "abc", "1000000000000"); }
Test(config, timeout_empty) { expect_bad_env_hint("OPENREG_TIMEOUT_MS", "", "1000000000000"); }
Test(config, timeout_llong_max)
{
    expect_bad_env_hint("OPENREG_TIMEOUT_MS", "9223372036854775807", "1000000000000");
}
Test(config, timeout_deadline_overflow)
{
    expect_bad_env_hint("OPENREG_TIMEOUT_MS", "18446744073709", "1000000000000");
}
Test(config, timeout_just_above_max)
{
    expect_bad_env_hint("OPENREG_TIMEOUT_MS", "1000000000001", "1000000000000");
}
Test(config, timeout_max_accepted)
{
    set_env("OPENREG_TIMEOUT_MS", "1000000000000");
    int count = 0;
    CHECK_OR(orGetDeviceCount(&count));
    cr_assert_eq(count, 2);
}

Test(config, copy_spin_negative) { expect_bad_env_hint("OPENREG_COPY_SPIN_US", "-1", "1000000"); }
Test(config, copy_spin_too_long) { expect_bad_env_hint("OPENREG_COPY_SPIN_US", "1000001", "1000000"); }
Test(config, copy_spin_word) { expect_bad_env_hint("OPENREG_COPY_SPIN_US", "abc", "1000000"); }
Test(config, copy_spin_zero_accepted)
{
    set_env("OPENREG_COPY_SPIN_US", "0");
    int count = 0;
    CHECK_OR(orGetDeviceCount(&count));
    cr_assert_eq(count, 2);
}

Test(config, failure_also_hits_first_call_of_other_kinds)
{
    /* Initialization is lazy: whichever call comes first must report it. */
    set_env("OPENREG_DEVICES", "0");
    int fd = open("/dev/null", O_WRONLY);
    dup2(fd, 2);
    void *p = (void *)0x1;
    EXPECT_OR(orMalloc(&p, 1024), orErrorInitialization);
    cr_assert_eq(p, (void *)0x1);
    int n = -7;
    EXPECT_OR(orGetDeviceCount(&n), orErrorInitialization);
    cr_assert_eq(n, -7);
}

/* ---- accepted values ------------------------------------------------------ */

static orDeviceProp props(int dev)
{
    orDeviceProp p;
    memset(&p, 0, sizeof p);
    CHECK_OR(orGetDeviceProperties(&p, dev));
    return p;
}

Test(config, defaults)
{
    int n = 0;
    CHECK_OR(orGetDeviceCount(&n));
    cr_assert_eq(n, 2);
    orDeviceProp p = props(0);
    assert_host_share(p.totalGlobalMem, 2); /* OPENREG_DEVICE_MEM unset: the cpu profile's */
    cr_assert_geq(p.multiProcessorCount, 1);
}

Test(config, devices_three)
{
    set_env("OPENREG_DEVICES", "3");
    int n = 0;
    CHECK_OR(orGetDeviceCount(&n));
    cr_assert_eq(n, 3);
}

Test(config, devices_one)
{
    set_env("OPENREG_DEVICES", "1");
    int n = 0;
    CHECK_OR(orGetDeviceCount(&n));
    cr_assert_eq(n, 1);
    EXPECT_OR(orSetDevice(1), orErrorInvalidDevice);
}

Test(config, mem_suffixes)
{
    set_env("OPENREG_DEVICE_MEM", "64M");
    CHECK_OR(orSetDevice(0));
    cr_assert_eq(props(0).totalGlobalMem, (size_t)64 << 20);
    cr_assert_eq(props(1).totalGlobalMem, (size_t)64 << 20, "capacity is per device");
    size_t fr = 0, tot = 0;
    CHECK_OR(orMemGetInfo(&fr, &tot));
    cr_assert_eq(tot, (size_t)64 << 20);
}

Test(config, mem_kilobytes)
{
    set_env("OPENREG_DEVICE_MEM", "2048K");
    cr_assert_eq(props(0).totalGlobalMem, (size_t)2 << 20, "K is 1024 bytes");
}

Test(config, mem_gigabytes)
{
    set_env("OPENREG_DEVICE_MEM", "1G");
    cr_assert_eq(props(0).totalGlobalMem, (size_t)1 << 30);
}

Test(config, mem_plain_bytes_minimum)
{
    set_env("OPENREG_DEVICE_MEM", "1048576");
    cr_assert_eq(props(0).totalGlobalMem, (size_t)1 << 20);
}

Test(config, threads_explicit)
{
    set_env("OPENREG_DEVICE_THREADS", "3");
    cr_assert_eq(props(0).multiProcessorCount, 3);
    cr_assert_eq(props(1).multiProcessorCount, 3);
}

Test(config, threads_auto)
{
    set_env("OPENREG_DEVICE_THREADS", "0");
    orDeviceProp p = props(0);
    cr_assert_geq(p.multiProcessorCount, 1);
    cr_assert_leq(p.multiProcessorCount, 256);
}

Test(config, strict_values_accepted)
{
    set_env("OPENREG_STRICT", "0");
    int n = 0;
    CHECK_OR(orGetDeviceCount(&n));
}

Test(config, strict_one_accepted)
{
    set_env("OPENREG_STRICT", "1");
    int n = 0;
    CHECK_OR(orGetDeviceCount(&n));
    void *p = NULL;
    CHECK_OR(orMalloc(&p, 256));
    CHECK_OR(orFree(p));
}

Test(config, debug_levels_accepted)
{
    set_env("OPENREG_DEBUG", "NONE");
    int n = 0;
    CHECK_OR(orGetDeviceCount(&n));
    cr_assert_eq(n, 2);
}

Test(config, debug_info_accepted)
{
    set_env("OPENREG_DEBUG", "INFO");
    int fd = open("/dev/null", O_WRONLY); /* INFO may talk; keep the log clean */
    int saved = dup(2);
    dup2(fd, 2);
    int n = 0;
    orError_t e = orGetDeviceCount(&n);
    dup2(saved, 2);
    CR_ASSERT_OR_EQ(e, orSuccess, "orGetDeviceCount with OPENREG_DEBUG=INFO");
}
