/*
 * test_strict.c - OPENREG_STRICT=1 keeps device memory unreadable by host
 * code except inside runtime operations and Unprotect/Protect windows.
 */
#include "helpers.h"

/* These tests fault on purpose and expect SIGSEGV; under AddressSanitizer
 * the fault must reach Criterion as a signal, not become an ASan report. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "handle_segv=0"; }

/* A hang (e.g. a wait that never completes) fails the test instead of the run. */
TestSuite(strict, .timeout = 60);

static void strict_on(void)
{
    set_env("OPENREG_STRICT", "1");
}

/* Allocates n ints on the current device, filled with 0..n-1 through orMemcpy. */
static int *device_iota(size_t n)
{
    int *d = NULL;
    CHECK_OR(orMalloc((void **)&d, n * sizeof(int)));
    int *h = malloc(n * sizeof(int));
    for (size_t i = 0; i < n; i++)
        h[i] = (int)i;
    CHECK_OR(orMemcpy(d, h, n * sizeof(int), orMemcpyHostToDevice));
    free(h);
    return d;
}

static int host_read(const int *p)
{
    return *(volatile const int *)p;
}

Test(strict, host_read_faults, .signal = SIGSEGV, .init = strict_on)
{
    int *d = device_iota(64);
    cr_log_info("reading device memory from the host; this must fault");
    int v = host_read(d + 5);
    cr_log_error("read %d without a fault", v);
}

Test(strict, host_write_faults, .signal = SIGSEGV, .init = strict_on)
{
    int *d = device_iota(64);
    *(volatile int *)d = 1;
}

Test(strict, runtime_operations_work, .init = strict_on)
{
    enum { N = 4096 };
    int *d = device_iota(N);
    int *d2 = NULL;
    CHECK_OR(orMalloc((void **)&d2, N * sizeof(int)));
    int *back = malloc(N * sizeof(int));

    CHECK_OR(launch_axpb(d, N, 3, 1, NULL)); /* kernels read and write device memory */
    CHECK_OR(orMemcpy(d2, d, N * sizeof(int), orMemcpyDeviceToDevice));
    CHECK_OR(orMemcpy(back, d2, N * sizeof(int), orMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        cr_assert_eq(back[i], 3 * i + 1, "element %d", i);

    CHECK_OR(orMemset(d2, 0x01, N * sizeof(int)));
    CHECK_OR(orMemcpy(back, d2, N * sizeof(int), orMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        cr_assert_eq(back[i], 0x01010101, "element %d", i);

    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    CHECK_OR(orMemsetAsync(d, 0, N * sizeof(int), s));
    CHECK_OR(launch_axpb(d, N, 1, 9, s));
    CHECK_OR(orMemcpyAsync(back, d, N * sizeof(int), orMemcpyDeviceToHost, s));
    CHECK_OR(orStreamSynchronize(s));
    for (int i = 0; i < N; i++)
        cr_assert_eq(back[i], 9, "element %d", i);
    CHECK_OR(orStreamDestroy(s));

    /* Device memory of the second device is protected the same way and still usable. */
    CHECK_OR(orSetDevice(1));
    int *d3 = device_iota(N);
    CHECK_OR(orMemcpy(back, d3, N * sizeof(int), orMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        cr_assert_eq(back[i], i);
    CHECK_OR(orFree(d3));
    CHECK_OR(orFree(d));
    CHECK_OR(orFree(d2));
    free(back);
}

Test(strict, unprotect_window_allows_access, .init = strict_on)
{
    int *d = device_iota(64);
    CHECK_OR(orMemoryUnprotect(d));
    cr_assert_eq(host_read(d + 7), 7);
    d[8] = 1234; /* the host may write too while the window is open */
    CHECK_OR(orMemoryProtect(d));
    int v = 0;
    CHECK_OR(orMemcpy(&v, d + 8, sizeof v, orMemcpyDeviceToHost));
    cr_assert_eq(v, 1234);
    CHECK_OR(orFree(d));
}

Test(strict, read_after_protect_faults, .signal = SIGSEGV, .init = strict_on)
{
    int *d = device_iota(64);
    CHECK_OR(orMemoryUnprotect(d));
    cr_assert_eq(host_read(d + 1), 1);
    CHECK_OR(orMemoryProtect(d));
    host_read(d + 1);
}

Test(strict, fault_after_runtime_operation, .signal = SIGSEGV, .init = strict_on)
{
    /* Protection comes back once a copy into the memory has finished. */
    int *d = device_iota(64);
    int v = 5;
    CHECK_OR(orMemcpy(d, &v, sizeof v, orMemcpyHostToDevice));
    CHECK_OR(orDeviceSynchronize());
    host_read(d);
}

Test(strict, windows_nest, .init = strict_on)
{
    int *d = device_iota(64);
    CHECK_OR(orMemoryUnprotect(d));
    CHECK_OR(orMemoryUnprotect(d));
    CHECK_OR(orMemoryProtect(d));
    cr_assert_eq(host_read(d + 3), 3, "still one window open");
    CHECK_OR(orMemoryProtect(d));
    EXPECT_OR(orMemoryProtect(d), orErrorInvalidValue); /* more protects than unprotects */
    CHECK_OR(orFree(d));
}

Test(strict, protect_without_unprotect, .init = strict_on)
{
    int *d = device_iota(16);
    EXPECT_OR(orMemoryProtect(d), orErrorInvalidValue);
    CHECK_OR(orFree(d));
}

Test(strict, protect_without_unprotect_non_strict)
{
    int *d = device_iota(16);
    EXPECT_OR(orMemoryProtect(d), orErrorInvalidValue);
    CHECK_OR(orMemoryUnprotect(d));
    CHECK_OR(orMemoryProtect(d));
    EXPECT_OR(orMemoryProtect(d), orErrorInvalidValue);
    CHECK_OR(orFree(d));
}

Test(strict, unprotect_rejects_non_device_memory, .init = strict_on)
{
    int stack_var = 0;
    void *heap = malloc(16);
    void *pinned = NULL;
    CHECK_OR(orMallocHost(&pinned, 64));
    int *d = device_iota(16);
    int *keep = device_iota(16);
    CHECK_OR(orFree(d));
    void *bad[] = {NULL, &stack_var, heap, pinned, d, (void *)0x1234};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        EXPECT_OR(orMemoryUnprotect(bad[i]), orErrorInvalidDevicePointer);
        EXPECT_OR(orMemoryProtect(bad[i]), orErrorInvalidDevicePointer);
    }
    CHECK_OR(orFree(keep));
    CHECK_OR(orFreeHost(pinned));
    free(heap);
}

Test(strict, read_works_without_strict)
{
    int *d = device_iota(64);
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq(host_read(d + 9), 9);
    CHECK_OR(orFree(d));
}

Test(strict, strict_zero_read_works)
{
    set_env("OPENREG_STRICT", "0");
    int *d = device_iota(64);
    cr_assert_eq(host_read(d + 10), 10);
    CHECK_OR(orFree(d));
}
