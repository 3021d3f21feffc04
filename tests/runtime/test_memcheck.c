/*
 * test_memcheck.c - a kernel's (or copy's) illegal access is
 * orErrorIllegalAddress, sticky for the process, never a crash; and with
 * OPENREG_MEMCHECK=1 out-of-bounds accesses and uses after free are caught
 * before they corrupt another allocation.
 *
 * Every check of a neighbour's bytes reads them from the host: after the
 * fault the runtime refuses copies (the error is sticky).
 */
#include "helpers.h"

#include <sys/mman.h>

TestSuite(faults, .timeout = 60);
TestSuite(memcheck, .timeout = 60);

static void memcheck_on(void) { set_env("OPENREG_MEMCHECK", "1"); }

static void memcheck_strict_on(void)
{
    set_env("OPENREG_MEMCHECK", "1");
    set_env("OPENREG_STRICT", "1");
}

/* ---- stderr capture: the fault's log line ---------------------------------- */

typedef struct {
    int saved;
    FILE *tmp;
} capture;

static void capture_start(capture *c)
{
    fflush(stderr);
    c->saved = dup(2);
    c->tmp = tmpfile();
    cr_assert(c->saved >= 0 && c->tmp);
    dup2(fileno(c->tmp), 2);
}

/* What was written to stderr since capture_start, in buf. */
static void capture_end(capture *c, char *buf, size_t len)
{
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    rewind(c->tmp);
    size_t n = fread(buf, 1, len - 1, c->tmp);
    buf[n] = '\0';
    fclose(c->tmp);
    fprintf(stderr, "%s", buf); /* still shown in the test's output */
}

/* ---- kernels ------------------------------------------------------------------ */

/* Block `block` (linear) stores value at p[index]; other blocks do nothing. */
typedef struct {
    int *p;
    long index;
    int value;
    unsigned block;
} poke_args;

static void poke_kernel(const orKernelContext *c, void *args)
{
    const poke_args *a = args;
    if (block_linear(c) == a->block)
        ((volatile int *)a->p)[a->index] = a->value;
}

/* Reads p[index] into *out (host memory). */
typedef struct {
    const int *p;
    long index;
    int *out;
} peek_args;

static void peek_kernel(const orKernelContext *c, void *args)
{
    (void)c;
    const peek_args *a = args;
    *a->out = ((const volatile int *)a->p)[a->index];
}

/* Sets *flag: proves whether a kernel ran. */
static void flag_kernel(const orKernelContext *c, void *args)
{
    (void)c;
    atomic_store(*(atomic_int **)args, 1);
}

static orError_t poke(int *p, long index, int value, unsigned grid, unsigned block,
                      const char *name)
{
    poke_args a = {p, index, value, block};
    orLaunchConfig cfg = {.gridDim = dim3(grid, 1, 1), .blockDim = dim3(1, 1, 1), .name = name};
    orError_t err = orLaunchKernelEx(&cfg, poke_kernel, &a, sizeof a);
    return err != orSuccess ? err : orDeviceSynchronize();
}

/* n ints on the device, all `value`. */
static int *dfill(size_t n, int value)
{
    int *d = NULL, *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = value;
    CHECK_OR(orMalloc((void **)&d, n * sizeof *d));
    CHECK_OR(orMemcpy(d, h, n * sizeof *d, orMemcpyHostToDevice));
    free(h);
    return d;
}

/* Read from the host (device memory is host memory here, readable outside
 * strict mode): every element still `value`. */
static void assert_all(const int *d, size_t n, int value, const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(d[i], value, "%s: element %zu is %d, not %d", what, i, d[i], value);
}

/* Every call that reports errors now returns orErrorIllegalAddress, and the
 * last error is it, for good. */
static void assert_sticky(void)
{
    void *p = NULL;
    int count = 0, host = 0;
    orStream_t s;
    CR_ASSERT_OR_EQ(orGetLastError(), orErrorIllegalAddress, "orGetLastError");
    CR_ASSERT_OR_EQ(orGetLastError(), orErrorIllegalAddress, "orGetLastError again (sticky)");
    CR_ASSERT_OR_EQ(orPeekAtLastError(), orErrorIllegalAddress, "orPeekAtLastError");
    CR_ASSERT_OR_EQ(orMalloc(&p, 64), orErrorIllegalAddress, "orMalloc");
    cr_assert_null(p, "orMalloc wrote its output");
    CR_ASSERT_OR_EQ(orGetDeviceCount(&count), orErrorIllegalAddress, "orGetDeviceCount");
    CR_ASSERT_OR_EQ(orStreamCreate(&s), orErrorIllegalAddress, "orStreamCreate");
    CR_ASSERT_OR_EQ(orDeviceSynchronize(), orErrorIllegalAddress, "orDeviceSynchronize");
    CR_ASSERT_OR_EQ(orStreamSynchronize(NULL), orErrorIllegalAddress, "orStreamSynchronize");
    CR_ASSERT_OR_EQ(orMemcpy(&count, &host, sizeof host, orMemcpyHostToHost),
                    orErrorIllegalAddress, "orMemcpy");
    CR_ASSERT_OR_EQ(poke(&host, 0, 1, 1, 0, "after"), orErrorIllegalAddress, "orLaunchKernelEx");
    cr_assert_eq(host, 0, "a kernel launched after the fault ran");
    CR_ASSERT_OR_EQ(orGetLastError(), orErrorIllegalAddress, "orGetLastError at the end");
}

/* An address no kernel may touch: a PROT_NONE page, kept reserved so that
 * nothing else (AddressSanitizer's allocator, say) maps memory there. */
static int *unmapped_page(void)
{
    int count;
    CHECK_OR(orGetDeviceCount(&count));
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(p, MAP_FAILED);
    return p;
}

/* A fault outside device work goes to the handler installed before the
 * runtime's: AddressSanitizer's reports it and exits with 1 in the
 * sanitizer build (its handler, kept on purpose: the runtime's must chain to
 * it), else the default action kills the process. */
#ifdef __SANITIZE_ADDRESS__
#define HOST_CRASH .exit_code = 1
#else
#define HOST_CRASH .signal = SIGSEGV
#endif

/* ---- faults, with or without the checker ------------------------------------ */

Test(faults, kernel_write_outside_device_memory_is_illegal_address)
{
    int *bad = unmapped_page();
    capture c;
    char log[8192];
    capture_start(&c);
    orError_t err = poke(bad, 0, 7, 4, 2, "poke_unmapped");
    capture_end(&c, log, sizeof log);
    CR_ASSERT_OR_EQ(err, orErrorIllegalAddress, "the faulting kernel's synchronization");
    char addr[32];
    snprintf(addr, sizeof addr, "%p", (void *)bad);
    cr_assert_not_null(strstr(log, "poke_unmapped"), "the log names the kernel: %s", log);
    cr_assert_not_null(strstr(log, "block (2,0,0)"), "the log gives the block: %s", log);
    cr_assert_not_null(strstr(log, addr), "the log gives the address %s: %s", addr, log);
    cr_assert_not_null(strstr(log, "not device memory"), "the log says what it is: %s", log);
}

Test(faults, a_null_pointer_in_a_kernel_is_illegal_address)
{
    capture c;
    char log[8192];
    capture_start(&c);
    orError_t err = poke(NULL, 3, 7, 1, 0, "null_poke");
    capture_end(&c, log, sizeof log);
    CR_ASSERT_OR_EQ(err, orErrorIllegalAddress, "a write through NULL");
    cr_assert_not_null(strstr(log, "null_poke"), "the log names the kernel: %s", log);
    cr_assert_not_null(strstr(log, "0xc"), "the log gives the address: %s", log);
}

Test(faults, kernel_read_beyond_the_arena_is_illegal_address)
{
    /* Device memory is reserved in one mapping; past its end lies whatever
     * the host put there, here nothing. */
    int *bad = unmapped_page(), out = -1;
    peek_args a = {bad, 3, &out};
    CHECK_OR(orLaunchKernel(peek_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &a, sizeof a, 0, NULL));
    CR_ASSERT_OR_EQ(orStreamSynchronize(NULL), orErrorIllegalAddress, "orStreamSynchronize");
    cr_assert_eq(out, -1);
}

Test(faults, the_error_is_sticky)
{
    int *bad = unmapped_page();
    CR_ASSERT_OR_EQ(poke(bad, 0, 1, 1, 0, NULL), orErrorIllegalAddress, "the fault");
    assert_sticky();
}

Test(faults, sticky_on_every_thread)
{
    int *bad = unmapped_page();
    CR_ASSERT_OR_EQ(poke(bad, 0, 1, 1, 0, NULL), orErrorIllegalAddress, "the fault");
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, (void *(*)(void *))assert_sticky, NULL), 0);
    pthread_join(t, NULL);
}

Test(faults, unnamed_kernel_is_named_by_its_address_or_symbol)
{
    int *bad = unmapped_page();
    poke_args a = {bad, 0, 1, 0};
    capture c;
    char log[8192];
    capture_start(&c);
    CHECK_OR(orLaunchKernel(poke_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &a, sizeof a, 0, NULL));
    orError_t err = orDeviceSynchronize();
    capture_end(&c, log, sizeof log);
    CR_ASSERT_OR_EQ(err, orErrorIllegalAddress, "orDeviceSynchronize");
    char addr[32];
    void *fn;
    orKernel_t k = poke_kernel;
    memcpy(&fn, &k, sizeof fn);
    snprintf(addr, sizeof addr, "kernel %p", fn);
    cr_assert(strstr(log, addr) || strstr(log, "kernel poke_kernel"),
              "the log names the kernel by its symbol or address: %s", log);
}

Test(faults, later_work_of_the_stream_does_not_run)
{
    int *bad = unmapped_page();
    atomic_int ran = 0;
    atomic_int *flag = &ran;
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    poke_args a = {bad, 0, 1, 0};
    /* Many blocks: the one that faults is the first; the rest are skipped. */
    CHECK_OR(orLaunchKernel(poke_kernel, dim3(64, 1, 1), dim3(1, 1, 1), &a, sizeof a, 0, s));
    CHECK_OR(orLaunchKernel(flag_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &flag, sizeof flag, 0, s));
    CR_ASSERT_OR_EQ(orStreamSynchronize(s), orErrorIllegalAddress, "orStreamSynchronize");
    cr_assert_eq(atomic_load(&ran), 0, "a kernel queued after the fault ran");
}

Test(faults, a_copy_from_unmapped_host_memory_is_illegal_address)
{
    int *bad = unmapped_page();
    int *d = dfill(256, 5);
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    CHECK_OR(orMemcpyAsync(d, bad, 256 * sizeof(int), orMemcpyHostToDevice, s));
    CR_ASSERT_OR_EQ(orStreamSynchronize(s), orErrorIllegalAddress, "orStreamSynchronize");
    assert_sticky();
}

Test(faults, host_code_faults_still_crash, HOST_CRASH)
{
    int *d = dfill(16, 1); /* the runtime and its handler are up */
    (void)d;
    int *bad = unmapped_page();
    *(volatile int *)bad = 1;
}

/* ---- memcheck ---------------------------------------------------------------- */

enum { N = 1000 }; /* ints: 4000 bytes, not a whole page nor a multiple of 256 */

Test(memcheck, in_bounds_work_is_unchanged, .init = memcheck_on)
{
    enum { M = 10000 };
    int *d = dfill(M, 2), *e = dfill(M, 0);
    int *back = malloc(M * sizeof *back);
    CHECK_OR(launch_axpb(d, M, 3, 1, NULL));
    CHECK_OR(orMemcpy(e, d, M * sizeof *d, orMemcpyDeviceToDevice));
    CHECK_OR(orMemcpy(back, e, M * sizeof *d, orMemcpyDeviceToHost));
    for (int i = 0; i < M; i++)
        cr_assert_eq(back[i], 7, "element %d", i);
    CHECK_OR(orMemset(d, 0, M * sizeof *d));
    CHECK_OR(orFree(d));
    CHECK_OR(orFree(e));
    cr_assert_eq(orGetLastError(), orSuccess);
    free(back);
}

/* Fills bytes [0, n) of p with v: one block, every byte written. */
typedef struct {
    unsigned char *p;
    size_t n;
    unsigned char v;
} fill_args;

static void fill_kernel(const orKernelContext *c, void *args)
{
    (void)c;
    const fill_args *a = args;
    for (size_t i = 0; i < a->n; i++)
        ((volatile unsigned char *)a->p)[i] = a->v;
}

Test(memcheck, allocations_stay_256_byte_aligned, .init = memcheck_on)
{
    const size_t sizes[] = {1, 3, 100, 255, 256, 257, 1000, 4000, 4096, 4097, 12345,
                            ((size_t)1 << 20) + 3, (size_t)1 << 20};
    enum { K = sizeof sizes / sizeof *sizes };
    void *p[K];
    for (int k = 0; k < K; k++) {
        CHECK_OR(orMalloc(&p[k], sizes[k]));
        cr_assert_eq((uintptr_t)p[k] % 256, 0, "allocation of %zu bytes at %p is not 256-byte "
                     "aligned", sizes[k], p[k]);
    }
    /* Every byte of each is the user's: kernels, memsets and copies of the
     * whole size succeed and nothing is reported. */
    unsigned char *h = malloc(sizes[K - 2]);
    for (int k = 0; k < K; k++) {
        fill_args a = {p[k], sizes[k], (unsigned char)(k + 1)};
        CHECK_OR(orLaunchKernel(fill_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &a, sizeof a, 0, NULL));
        CHECK_OR(orDeviceSynchronize());
        CHECK_OR(orMemcpy(h, p[k], sizes[k], orMemcpyDeviceToHost));
        for (size_t i = 0; i < sizes[k]; i++)
            cr_assert_eq(h[i], k + 1, "byte %zu of %zu", i, sizes[k]);
        CHECK_OR(orMemset(p[k], 0, sizes[k]));
    }
    for (int k = 0; k < K; k++)
        CHECK_OR(orFree(p[k]));
    cr_assert_eq(orGetLastError(), orSuccess);
    free(h);
}

Test(memcheck, one_past_the_end_of_an_odd_size_is_caught, .init = memcheck_on)
{
    /* 4000 bytes: the block ends 96 bytes before its trailing guard page;
     * those bytes hold the canary, checked after the kernel. */
    int *a = dfill(N, 1), *b = dfill(N, 2);
    capture c;
    char log[8192];
    capture_start(&c);
    orError_t err = poke(a, N, 99, 8, 5, "overflow");
    capture_end(&c, log, sizeof log);
    CR_ASSERT_OR_EQ(err, orErrorIllegalAddress, "a write one element past the end");
    char where[128];
    snprintf(where, sizeof where, "illegal write at %p: 0 bytes past the end of allocation of "
             "4000 bytes at %p", (void *)(a + N), (void *)a);
    cr_assert_not_null(strstr(log, where), "the log says where (%s): %s", where, log);
    cr_assert_not_null(strstr(log, "kernel overflow"), "the log names the kernel: %s", log);
    assert_all(a, N, 1, "the allocation");
    assert_all(b, N, 2, "the next allocation");
    assert_sticky();
}

Test(memcheck, a_write_anywhere_in_the_slack_is_caught, .init = memcheck_on)
{
    /* 100 bytes: 156 bytes of slack up to the guard page. */
    int *a = dfill(25, 1);
    capture c;
    char log[8192];
    capture_start(&c);
    orError_t err = poke(a, 63, 99, 1, 0, "far_overflow"); /* bytes 252..255 */
    capture_end(&c, log, sizeof log);
    CR_ASSERT_OR_EQ(err, orErrorIllegalAddress, "a write 152 bytes past the end");
    cr_assert_not_null(strstr(log, "152 bytes past the end of allocation of 100 bytes"),
                       "the log says where: %s", log);
    assert_sticky();
}

Test(memcheck, one_past_the_end_of_a_multiple_of_256_faults, .init = memcheck_on)
{
    /* 1024 bytes: no slack, the block ends where the guard page starts. */
    int *a = dfill(256, 1), *b = dfill(256, 2);
    cr_assert_eq((uintptr_t)(a + 256) % (uintptr_t)sysconf(_SC_PAGESIZE), 0);
    capture c;
    char log[8192];
    capture_start(&c);
    orError_t err = poke(a, 256, 99, 8, 5, "overflow256");
    capture_end(&c, log, sizeof log);
    CR_ASSERT_OR_EQ(err, orErrorIllegalAddress, "a write one element past the end");
    cr_assert_not_null(strstr(log, "0 bytes past the end of allocation of 1024 bytes"),
                       "the log says where: %s", log);
    cr_assert_not_null(strstr(log, "block (5,0,0)"), "a guard page: the block is known: %s", log);
    assert_all(a, 256, 1, "the allocation");
    assert_all(b, 256, 2, "the next allocation");
    assert_sticky();
}

Test(memcheck, one_before_the_start_is_caught, .init = memcheck_on)
{
    /* 1000 bytes: the block starts 256-byte aligned, bytes after the leading
     * guard page, which hold the canary. */
    int *a = dfill(250, 1), *b = dfill(250, 2);
    capture c;
    char log[8192];
    capture_start(&c);
    orError_t err = poke(b, -1, 99, 1, 0, "underflow");
    capture_end(&c, log, sizeof log);
    CR_ASSERT_OR_EQ(err, orErrorIllegalAddress, "a write one element before the start");
    cr_assert_not_null(strstr(log, "4 bytes before the start of allocation of 1000 bytes"),
                       "the log says where: %s", log);
    cr_assert_not_null(strstr(log, "underflow"), "the log names the kernel: %s", log);
    assert_all(a, 250, 1, "the previous allocation");
    assert_all(b, 250, 2, "the allocation");
    assert_sticky();
}

Test(memcheck, one_before_a_whole_page_allocation_faults, .init = memcheck_on)
{
    size_t n = (size_t)sysconf(_SC_PAGESIZE) / sizeof(int) * 2;
    int *a = dfill(n, 1), *b = dfill(n, 2);
    capture c;
    char log[8192];
    capture_start(&c);
    orError_t err = poke(b, -1, 99, 4, 3, "underflow_page");
    capture_end(&c, log, sizeof log);
    CR_ASSERT_OR_EQ(err, orErrorIllegalAddress, "a write one element before the start");
    cr_assert_not_null(strstr(log, "block (3,0,0)"), "a guard page, so the block is known: %s",
                       log);
    cr_assert_not_null(strstr(log, "4 bytes before the start"), "the log says where: %s", log);
    assert_all(a, n, 1, "the previous allocation");
    assert_all(b, n, 2, "the allocation");
}

Test(memcheck, reading_past_the_end_faults, .init = memcheck_on)
{
    /* Past the size rounded up to 256 bytes: the guard page. */
    int *a = dfill(N, 1), out = -1;
    (void)dfill(N, 2);
    peek_args p = {a, 1024, &out};
    CHECK_OR(orLaunchKernel(peek_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &p, sizeof p, 0, NULL));
    CR_ASSERT_OR_EQ(orDeviceSynchronize(), orErrorIllegalAddress, "a read past the end");
    cr_assert_eq(out, -1);
}

Test(memcheck, reading_the_slack_is_a_known_gap, .init = memcheck_on)
{
    /* A read within the alignment slack past the end is not caught: it
     * reads the canary (docs/api.md, 12.2, Gaps). */
    int *a = dfill(N, 1), out = -1;
    peek_args p = {a, N, &out};
    CHECK_OR(orLaunchKernel(peek_kernel, dim3(1, 1, 1), dim3(1, 1, 1), &p, sizeof p, 0, NULL));
    CHECK_OR(orDeviceSynchronize());
    cr_assert_eq((unsigned)out, 0xa5a5a5a5u);
}

Test(memcheck, use_after_free_faults, .init = memcheck_on)
{
    int *a = dfill(N, 1);
    CHECK_OR(orFree(a));
    capture c;
    char log[8192];
    capture_start(&c);
    orError_t err = poke(a, 10, 99, 1, 0, "after_free");
    capture_end(&c, log, sizeof log);
    CR_ASSERT_OR_EQ(err, orErrorIllegalAddress, "a write to freed memory");
    cr_assert_not_null(strstr(log, "byte 40 of freed allocation of 4000 bytes"),
                       "the log says where: %s", log);
    assert_sticky();
}

Test(memcheck, a_freed_pointer_never_reaches_a_new_allocation, .init = memcheck_on)
{
    int *a = dfill(N, 1);
    CHECK_OR(orFree(a));
    int *b = dfill(N, 2); /* without the quarantine, the same address */
    cr_assert_neq(a, b, "freed memory was handed out again at once");
    CR_ASSERT_OR_EQ(poke(a, 0, 99, 1, 0, "stale"), orErrorIllegalAddress, "a stale pointer");
    assert_all(b, N, 2, "the new allocation");
}

Test(memcheck, copies_past_the_end_are_refused, .init = memcheck_on)
{
    int *a = dfill(N, 1), *b = dfill(N, 2);
    int *h = calloc(N + 1, sizeof *h);
    EXPECT_OR(orMemcpy(a, h, (N + 1) * sizeof *h, orMemcpyHostToDevice), orErrorInvalidValue);
    EXPECT_OR(orMemcpy(h, a, (N + 1) * sizeof *h, orMemcpyDeviceToHost), orErrorInvalidValue);
    EXPECT_OR(orMemcpy(b, a, (N + 1) * sizeof *h, orMemcpyDeviceToDevice), orErrorInvalidValue);
    EXPECT_OR(orMemset(a, 0, (N + 1) * sizeof *h), orErrorInvalidValue);
    EXPECT_OR(orMemcpy(a - 1, h, sizeof *h, orMemcpyHostToDevice), orErrorInvalidDevicePointer);
    assert_all(a, N, 1, "the allocation");
    assert_all(b, N, 2, "the next allocation");
    /* Refused calls are not faults: nothing sticky. */
    CHECK_OR(orMemcpy(h, a, N * sizeof *h, orMemcpyDeviceToHost));
    free(h);
}

Test(memcheck, a_copy_of_memory_freed_meanwhile_is_illegal_address, .init = memcheck_on)
{
    int *a = dfill(N, 1);
    int *h = calloc(N, sizeof *h);
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    gate_t g = {0};
    CHECK_OR(orLaunchHostFunc(s, gate_fn, &g));
    CHECK_OR(orMemcpyAsync(h, a, N * sizeof *h, orMemcpyDeviceToHost, s));
    cr_assert(wait_atomic_ge(&g.entered, 1, DEADLINE_MS));
    CHECK_OR(orFree(a)); /* before the copy runs */
    gate_open(&g);
    CR_ASSERT_OR_EQ(orStreamSynchronize(s), orErrorIllegalAddress, "the copy");
    free(h);
}

Test(memcheck, strict_mode_keeps_the_guards, .init = memcheck_strict_on)
{
    int *a = dfill(N, 1), *b = dfill(N, 2);
    CHECK_OR(launch_axpb(a, N, 1, 1, NULL)); /* in bounds: fine */
    CHECK_OR(orDeviceSynchronize());
    CR_ASSERT_OR_EQ(poke(a, N, 99, 1, 0, "overflow_strict"), orErrorIllegalAddress,
                    "a write past the end in strict mode");
    /* Strict mode: the host reads device memory only in a window. */
    int *h = malloc(N * sizeof *h);
    CR_ASSERT_OR_EQ(orMemcpy(h, b, N * sizeof *h, orMemcpyDeviceToHost), orErrorIllegalAddress,
                    "sticky");
    free(h);
}

Test(memcheck, strict_mode_keeps_the_guard_pages, .init = memcheck_strict_on)
{
    int *a = dfill(256, 1);
    CR_ASSERT_OR_EQ(poke(a, 256, 99, 1, 0, "overflow_strict256"), orErrorIllegalAddress,
                    "a write past the end of a multiple of 256 in strict mode");
}

Test(memcheck, strict_mode_in_bounds, .init = memcheck_strict_on)
{
    int *a = dfill(N, 1);
    int *h = malloc(N * sizeof *h);
    CHECK_OR(launch_axpb(a, N, 2, 1, NULL));
    int *b = dfill(N, 5); /* allocated while nothing runs: closed, then opened by the copy */
    CHECK_OR(orMemcpy(h, a, N * sizeof *h, orMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        cr_assert_eq(h[i], 3, "element %d", i);
    CHECK_OR(orMemcpy(h, b, N * sizeof *h, orMemcpyDeviceToHost));
    for (int i = 0; i < N; i++)
        cr_assert_eq(h[i], 5, "element %d", i);
    free(h);
}

Test(memcheck, host_reads_of_device_memory_fault_in_strict_mode, .init = memcheck_strict_on,
     HOST_CRASH)
{
    int *a = dfill(N, 1);
    (void)*(volatile int *)a;
}

Test(memcheck, freed_memory_comes_back_when_needed, .init = memcheck_on)
{
    set_env("OPENREG_DEVICE_MEM", "64M");
    void *p, *q;
    /* 10 MiB stay quarantined (the limit is a quarter of the memory); the
     * next allocation only fits once they come back. */
    CHECK_OR(orMalloc(&p, (size_t)10 << 20));
    CHECK_OR(orFree(p));
    size_t fr, tot;
    CHECK_OR(orMemGetInfo(&fr, &tot));
    cr_assert_lt(fr, (size_t)55 << 20, "the freed memory is quarantined: %zu free", fr);
    CHECK_OR(orMalloc(&q, (size_t)60 << 20));
    CHECK_OR(orFree(q));
}

Test(memcheck, two_devices, .init = memcheck_on)
{
    set_env("OPENREG_DEVICES", "2");
    CHECK_OR(orSetDevice(1));
    int *a = dfill(N, 1), *b = dfill(N, 2);
    CR_ASSERT_OR_EQ(poke(a, N, 99, 1, 0, "overflow_dev1"), orErrorIllegalAddress, "device 1");
    assert_all(b, N, 2, "the next allocation");
}
