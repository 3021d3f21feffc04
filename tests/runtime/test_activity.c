/*
 * test_activity.c - activity records (orActivity*): what ran, on which
 * device and stream, when, with the correlation id pushed when it was
 * issued; nothing while off; a bounded buffer that counts what it drops;
 * virtual times equal to the model's charges.
 */
#include "helpers.h"

#include <sys/syscall.h>

#include "runtime_ext.h"

TestSuite(activity, .timeout = 60);

#define MAX_RECS 4096

typedef struct {
    orActivity a[MAX_RECS];
    char names[MAX_RECS][64];
    int n;
} recs_t;

static void collect(const orActivity *a, void *user)
{
    recs_t *r = user;
    if (r->n < MAX_RECS) {
        r->a[r->n] = *a;
        snprintf(r->names[r->n], sizeof r->names[0], "%s", a->name);
        r->a[r->n].name = r->names[r->n];
        r->n++;
    }
}

static recs_t *flush(unsigned long long *dropped)
{
    recs_t *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    CHECK_OR(orActivityFlush(collect, r, dropped));
    return r;
}

static const orActivity *find(const recs_t *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->a[i].name, name) == 0)
            return &r->a[i];
    return NULL;
}

static void fill_kernel(const orKernelContext *c, void *p)
{
    int *out = *(int **)p;
    out[c->blockIdx.x] = (int)c->blockIdx.x + 1;
}

static void host_nop(void *p) { (void)p; }

Test(activity, records_each_op_with_its_correlation_id)
{
    int *dev;
    int host[64] = {0};
    CHECK_OR(orMalloc((void **)&dev, sizeof host));
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    CHECK_OR(orActivityEnable());

    CHECK_OR(orActivityPushExternalCorrelationId(7));
    orLaunchCost cost = {640.0, 256.0};
    orLaunchConfig cfg = {{64, 1, 1}, {1, 1, 1}, 0, s, &cost, "fill"};
    CHECK_OR(orLaunchKernelEx(&cfg, fill_kernel, &dev, sizeof dev));
    CHECK_OR(orActivityPushExternalCorrelationId(8)); /* nested: the innermost counts */
    CHECK_OR(orMemcpyAsync(host, dev, sizeof host, orMemcpyDeviceToHost, s));
    unsigned long long last = 0;
    CHECK_OR(orActivityPopExternalCorrelationId(&last));
    cr_assert_eq(last, 8);
    CHECK_OR(orMemsetAsync(dev, 0, sizeof host, s));
    CHECK_OR(orActivityPopExternalCorrelationId(&last));
    cr_assert_eq(last, 7);
    CHECK_OR(orLaunchHostFunc(s, host_nop, NULL)); /* nothing pushed: 0 */
    CHECK_OR(orStreamSynchronize(s));
    for (int i = 0; i < 64; i++)
        cr_assert_eq(host[i], i + 1);

    unsigned long long dropped = 99;
    recs_t *r = flush(&dropped);
    cr_assert_eq(dropped, 0);
    cr_assert_eq(r->n, 4, "kernel, copy, memset, host function: %d records", r->n);
    const orActivity *k = find(r, "fill"), *c = find(r, "memcpy DtoH"), *m = find(r, "memset"),
                     *h = find(r, "host function");
    cr_assert(k && c && m && h);
    cr_assert_eq(k->kind, orActivityKindKernel);
    cr_assert_str_eq(k->category, "kernel");
    cr_assert_eq(k->correlationId, 7);
    cr_assert_eq(k->flops, 640.0);
    cr_assert_eq(k->bytes, 256);
    cr_assert_eq(c->kind, orActivityKindMemcpy);
    cr_assert_eq(c->correlationId, 8);
    cr_assert_eq(c->bytes, sizeof host);
    cr_assert_eq(c->dstDevice, -1, "to host memory");
    cr_assert_geq(c->srcDevice, 0);
    cr_assert_eq(m->kind, orActivityKindMemset);
    cr_assert_eq(m->correlationId, 7);
    cr_assert_eq(h->kind, orActivityKindHostFunc);
    cr_assert_eq(h->correlationId, 0);
    int me = (int)syscall(SYS_gettid);
    for (int i = 0; i < r->n; i++) {
        cr_assert_eq(r->a[i].issueThread, me, "issued by this thread");
        cr_assert_leq(r->a[i].issueTime, r->a[i].start, "issued before it ran");
        cr_assert_eq(r->a[i].device, 0);
        cr_assert_eq(r->a[i].stream, 1, "the first stream created is track 1");
        cr_assert_eq(r->a[i].virtualTime, 0);
        cr_assert_leq(r->a[i].start, r->a[i].end);
        if (i > 0) /* one stream runs one op at a time, in issue order */
            cr_assert_geq(r->a[i].start, r->a[i - 1].end);
    }
    free(r);

    /* Flushed records are gone. */
    r = flush(NULL);
    cr_assert_eq(r->n, 0);
    free(r);
    CHECK_OR(orStreamDestroy(s));
    CHECK_OR(orFree(dev));
}

Test(activity, nothing_is_kept_while_off)
{
    int *dev;
    CHECK_OR(orMalloc((void **)&dev, 4096));
    CHECK_OR(orMemset(dev, 1, 4096));
    CHECK_OR(orActivityEnable());
    CHECK_OR(orActivityEnable()); /* again: no effect */
    CHECK_OR(orMemset(dev, 2, 4096));
    CHECK_OR(orActivityDisable());
    CHECK_OR(orMemset(dev, 3, 4096));
    CHECK_OR(orDeviceSynchronize());
    recs_t *r = flush(NULL);
    cr_assert_eq(r->n, 1, "only the memset issued while on: %d", r->n);
    cr_assert_str_eq(r->a[0].name, "memset");
    cr_assert_eq(r->a[0].stream, 0, "the default stream is track 0");
    free(r);
    CHECK_OR(orFree(dev));
}

Test(activity, a_full_buffer_counts_what_it_drops)
{
    set_env("OPENREG_TRACE_BUFFER", "1024");
    int *dev;
    CHECK_OR(orMalloc((void **)&dev, 64));
    CHECK_OR(orActivityEnable());
    for (int i = 0; i < 1100; i++)
        CHECK_OR(orMemsetAsync(dev, i, 64, NULL));
    CHECK_OR(orDeviceSynchronize());
    unsigned long long dropped = 0;
    recs_t *r = flush(&dropped);
    cr_assert_eq(r->n, 1024);
    cr_assert_eq(dropped, 76);
    free(r);
    /* The flush emptied the buffer: there is room again. */
    CHECK_OR(orMemsetAsync(dev, 0, 64, NULL));
    CHECK_OR(orDeviceSynchronize());
    r = flush(&dropped);
    cr_assert_eq(r->n, 1);
    cr_assert_eq(dropped, 0);
    free(r);
    CHECK_OR(orFree(dev));
}

Test(activity, virtual_times_are_the_charged_ones)
{
    set_env("OPENREG_TIME", "virtual");
    set_env("OPENREG_DEVICE_PROFILE", "a100");
    set_env("OPENREG_DEVICE_MEM", "256M");
    int *out;
    CHECK_OR(orMalloc((void **)&out, 64 * sizeof(int)));
    CHECK_OR(orActivityEnable());
    /* 19.5 GFLOP at the a100's 19.5 TFLOP/s: 1 ms, plus 3 us of launch. */
    orLaunchCost compute = {19.5e9, 1e6};
    orLaunchConfig cfg = {{64, 1, 1}, {1, 1, 1}, 0, NULL, &compute, "fill"};
    CHECK_OR(orLaunchKernelEx(&cfg, fill_kernel, &out, sizeof out));
    CHECK_OR(orLaunchKernelEx(&cfg, fill_kernel, &out, sizeof out));
    CHECK_OR(orDeviceSynchronize());
    recs_t *r = flush(NULL);
    cr_assert_eq(r->n, 2);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(r->a[i].virtualTime, 1);
        cr_assert_eq(r->a[i].end - r->a[i].start, 3000 + 1000000, "record %d: %llu ns", i,
                     r->a[i].end - r->a[i].start);
    }
    cr_assert_eq(r->a[1].start, r->a[0].end);
    free(r);
    CHECK_OR(orFree(out));
}

Test(activity, a_layers_slice_is_a_collective_record)
{
    CHECK_OR(orActivityEnable());
    cr_assert(or_trace_enabled(), "slices are wanted while records are on");
    CHECK_OR(orActivityPushExternalCorrelationId(42));
    uint64_t t0 = or_trace_now();
    or_trace_stream_slice(NULL, "occl AllReduce", "collective", t0, t0 + 5000,
                          "{\"bytes\":8,\"nranks\":1}");
    CHECK_OR(orActivityPopExternalCorrelationId(NULL));
    recs_t *r = flush(NULL);
    cr_assert_eq(r->n, 1);
    cr_assert_eq(r->a[0].kind, orActivityKindCollective);
    cr_assert_str_eq(r->a[0].name, "occl AllReduce");
    cr_assert_str_eq(r->a[0].category, "collective");
    cr_assert_str_eq(r->a[0].args, "{\"bytes\":8,\"nranks\":1}");
    cr_assert_eq(r->a[0].correlationId, 42);
    cr_assert_eq(r->a[0].end - r->a[0].start, 5000);
    free(r);
}

Test(activity, bad_calls_are_refused)
{
    EXPECT_OR(orActivityFlush(NULL, NULL, NULL), orErrorInvalidValue);
    EXPECT_OR(orActivityPopExternalCorrelationId(NULL), orErrorInvalidValue);
    /* Pushes deeper than the stack keeps stay balanced. */
    for (int i = 0; i < 100; i++)
        CHECK_OR(orActivityPushExternalCorrelationId((unsigned long long)i + 1));
    for (int i = 0; i < 100; i++)
        CHECK_OR(orActivityPopExternalCorrelationId(NULL));
    EXPECT_OR(orActivityPopExternalCorrelationId(NULL), orErrorInvalidValue);
}

Test(activity, an_unnamed_kernel_is_named_as_traces_name_it)
{
    int *dev;
    CHECK_OR(orMalloc((void **)&dev, 256 * sizeof(int)));
    CHECK_OR(orMemset(dev, 0, 256 * sizeof(int)));
    CHECK_OR(orActivityEnable());
    CHECK_OR(launch_axpb(dev, 256, 1, 1, NULL));
    CHECK_OR(orDeviceSynchronize());
    recs_t *r = flush(NULL);
    cr_assert_eq(r->n, 1);
    /* Its dynamic symbol, or its offset in the test program: never empty. */
    cr_assert(strcmp(r->a[0].name, "axpb_kernel") == 0 ||
                  strncmp(r->a[0].name, "kernel@0x", 9) == 0,
              "%s", r->a[0].name);
    free(r);
    CHECK_OR(orFree(dev));
}
