/*
 * occl_plugins.c - NCCL tuner and profiler plugins in OCCL, on every rank
 * of the job (one device each): the libraries named by OCCL_TUNER_PLUGIN
 * and OCCL_PROFILER_PLUGIN are loaded by the communicator's init and
 * unloaded by its destroy; between them an AllReduce of N floats and a
 * group of a Send and a Recv of M floats to and from the next rank run and
 * are checked. The profiler (tests/collectives/plugins/profiler_count.c)
 * writes what it saw to TEST_PROFILER_OUT.<rank>, which is checked here:
 * the events of each type that TEST_PROFILER_MASK enables (two groups, one
 * Coll, two P2p, a KernelCh per call, a ProxyOp and a ProxyStep per
 * transfer), none of the others, all stopped, each under the right parent,
 * and the sizes they carry. Under OCCL_ALGO=ring the all-reduce moves
 * 2(n-1)/n of its buffer each way; the point-to-point calls move M floats.
 * The KernelCh times are virtual under OPENREG_TIME=virtual: the last one
 * ends at the stream's virtual clock.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_plugin_abi.h"
#include "occltest.h"
#include "runtime_ext.h"

#define N 6000
#define M 1000

/* Whether the library the variable (or its NCCL_ alias) names is loaded. */
static bool loaded(const char *env)
{
    char alias[64];
    snprintf(alias, sizeof alias, "NCCL_%s", env + strlen("OCCL_"));
    const char *path = getenv(env) ? getenv(env) : getenv(alias);
    CHECK(path != NULL);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (h)
        dlclose(h);
    return h != NULL;
}

/* The text of key in file (static storage). */
static const char *text(const char *file, const char *key)
{
    static char out[512];
    FILE *f = fopen(file, "r");
    CHECK(f != NULL);
    char k[64], v[512];
    out[0] = '\0';
    while (fscanf(f, "%63s %511s", k, v) == 2)
        if (strcmp(k, key) == 0)
            snprintf(out, sizeof out, "%s", v);
    fclose(f);
    if (!out[0])
        mpitest_fail(__FILE__, __LINE__, "no value for ", key);
    return out;
}

static unsigned long long value(const char *file, const char *key)
{
    FILE *f = fopen(file, "r");
    CHECK(f != NULL);
    char k[64], v[512];
    unsigned long long out = ~0ull;
    while (fscanf(f, "%63s %511s", k, v) == 2)
        if (strcmp(k, key) == 0)
            out = strtoull(v, NULL, 10);
    fclose(f);
    if (out == ~0ull)
        mpitest_fail(__FILE__, __LINE__, "no value for ", key);
    return out;
}

/* Events of type `type` started and stopped: `want` if the mask enables it, else none. */
static void expect_events(const char *file, int mask, int type, unsigned long long want)
{
    int b = __builtin_ctz((unsigned)type);
    char key[32];
    unsigned long long w = (mask & type) ? want : 0;
    snprintf(key, sizeof key, "start.%d", b);
    unsigned long long started = value(file, key);
    snprintf(key, sizeof key, "stop.%d", b);
    unsigned long long stopped = value(file, key);
    if (started != w || stopped != w) {
        char msg[160];
        snprintf(msg, sizeof msg, "type 0x%x: %llu started, %llu stopped, want %llu", type, started, stopped, w);
        mpitest_fail(__FILE__, __LINE__, "events: ", msg);
    }
}

int main(int argc, char **argv)
{
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    CHECK_OR(orSetDevice(0));
    int n = ci.nranks, next = (ci.rank + 1) % n, prev = (ci.rank + n - 1) % n;
    CHECK(!loaded("OCCL_PROFILER_PLUGIN") && !loaded("OCCL_TUNER_PLUGIN"));
    occlComm_t comm = occltest_comm_world(&ci);
    CHECK(loaded("OCCL_PROFILER_PLUGIN") && loaded("OCCL_TUNER_PLUGIN"));

    float *host = malloc(N * sizeof *host), *buf, *sbuf, *rbuf;
    CHECK(host != NULL);
    CHECK_OR(orMalloc((void **)&buf, N * sizeof *buf));
    CHECK_OR(orMalloc((void **)&sbuf, M * sizeof *sbuf));
    CHECK_OR(orMalloc((void **)&rbuf, M * sizeof *rbuf));
    for (int j = 0; j < N; j++)
        host[j] = (float)(ci.rank + 1) * (float)(j % 7);
    CHECK_OR(orMemcpy(buf, host, N * sizeof *buf, orMemcpyHostToDevice));
    for (int j = 0; j < M; j++)
        host[j] = (float)(ci.rank * 1000 + j);
    CHECK_OR(orMemcpy(sbuf, host, M * sizeof *sbuf, orMemcpyHostToDevice));

    CHECK_OCCL(occlAllReduce(buf, buf, N, occlFloat32, occlSum, comm, NULL));
    CHECK_OCCL(occlGroupStart());
    CHECK_OCCL(occlSend(sbuf, M, occlFloat32, next, comm, NULL));
    CHECK_OCCL(occlRecv(rbuf, M, occlFloat32, prev, comm, NULL));
    CHECK_OCCL(occlGroupEnd());
    CHECK_OR(orStreamSynchronize(NULL));
    uint64_t vclock = or_stream_vclock(NULL);
    occlResult_t async;
    CHECK_OCCL(occlCommGetAsyncError(comm, &async));
    CHECK(async == occlSuccess);

    CHECK_OR(orMemcpy(host, buf, N * sizeof *buf, orMemcpyDeviceToHost));
    float ranks_sum = (float)n * (float)(n + 1) / 2;
    for (int j = 0; j < N; j++)
        CHECK(host[j] == ranks_sum * (float)(j % 7));
    CHECK_OR(orMemcpy(host, rbuf, M * sizeof *rbuf, orMemcpyDeviceToHost));
    for (int j = 0; j < M; j++)
        CHECK(host[j] == (float)(prev * 1000 + j));

    CHECK_OCCL(occlCommDestroy(comm));
    CHECK(!loaded("OCCL_PROFILER_PLUGIN") && !loaded("OCCL_TUNER_PLUGIN"));

    /* What the profiler saw (written at its finalize, in the destroy). */
    char file[512];
    snprintf(file, sizeof file, "%s.%d", getenv("TEST_PROFILER_OUT"), ci.rank);
    const char *m = getenv("TEST_PROFILER_MASK");
    int mask = m ? atoi(m) : 0xfff;
    expect_events(file, mask, ncclProfileGroupApi, 2);
    expect_events(file, mask, ncclProfileGroup, 2);
    expect_events(file, mask, ncclProfileCollApi, 1);
    expect_events(file, mask, ncclProfileColl, 1);
    expect_events(file, mask, ncclProfileP2pApi, 2);
    expect_events(file, mask, ncclProfileP2p, 2);
    expect_events(file, mask, ncclProfileKernelCh, 3);
    expect_events(file, mask, ncclProfileProxyCtrl, 0);
    CHECK(value(file, "orphans") == 0);
    CHECK(value(file, "coll.count") == ((mask & ncclProfileColl) ? N : 0));
    CHECK(value(file, "p2p.count") == ((mask & ncclProfileP2p) ? 2 * M : 0));
    /* NCCL's names: the function and ncclDatatypeToString's type. */
    CHECK(strcmp(text(file, "coll.funcs"), (mask & ncclProfileColl) ? "AllReduce" : "-") == 0);
    const char *types = (mask & ncclProfileColl) && (mask & ncclProfileP2p) ? "ncclFloat32,ncclFloat32,ncclFloat32"
                        : (mask & ncclProfileColl)                        ? "ncclFloat32"
                        : (mask & ncclProfileP2p)                         ? "ncclFloat32,ncclFloat32"
                                                                          : "-";
    CHECK(strcmp(text(file, "types"), types) == 0);
    /* Ring all-reduce: n-1 chunks out in the reduce-scatter, n-1 in the
     * all-gather; the Send: M floats. */
    unsigned long long bytes = (mask & ncclProfileProxyStep)
                                   ? 2ull * (unsigned long long)(n - 1) * (N / n) * sizeof(float) + M * sizeof(float)
                                   : 0;
    if (value(file, "send.bytes") != bytes || value(file, "recv.bytes") != bytes) {
        char msg[160];
        snprintf(msg, sizeof msg, "sent %llu, received %llu, want %llu", value(file, "send.bytes"),
                 value(file, "recv.bytes"), bytes);
        mpitest_fail(__FILE__, __LINE__, "proxy steps: ", msg);
    }
    if (mask & ncclProfileKernelCh) {
        CHECK(value(file, "kernel.ns") > 0);
        if (or_vclock_virtual())
            CHECK(value(file, "kernel.end") == vclock);
        else
            CHECK(value(file, "kernel.end") > vclock); /* monotonic ns, vclock 0 */
    }
    CHECK_OR(orFree(buf));
    CHECK_OR(orFree(sbuf));
    CHECK_OR(orFree(rbuf));
    free(host);
    if (ci.rank == 0)
        printf("occl_plugins: %d ranks, mask 0x%x, %s time: ok\n", n, (unsigned)mask,
               or_vclock_virtual() ? "virtual" : "wall");
    return 0;
}
