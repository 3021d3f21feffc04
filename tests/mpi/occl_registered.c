/*
 * occl_registered.c - collectives on registered buffers (occlCommRegister)
 * and on symmetric memory windows (occlCommWindowRegister), one virtual node:
 *   1. every collective, out of place and in place where NCCL defines it, on
 *      plain, registered and window buffers, small (the low-latency path) and
 *      large, checked against the host's reference;
 *   2. with OCCL_ALGO=direct, the all-reduce of registered (or window)
 *      buffers reads its peers' inputs in place: this rank's staged-bytes
 *      counter does not move, while the same call on plain buffers (and in
 *      place, where peers read the output being written) stages (n-1) x bytes.
 * --bench: time a large all-reduce plain and registered in one run (a table,
 * not part of the suite).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpitest.h"
#include "occl_internal.h" /* occl_comm_staged_bytes: the debug counter */
#include "occltest.h"

enum { PLAIN, REGISTERED, WINDOW };
static const char *const mode_names[] = {"plain", "registered", "window"};

static int me, n;
static occlComm_t comm;
static orStream_t stream;

static float val(int rank, size_t i) { return (float)(rank + 1 + (int)(i % 13)); }

typedef struct bufs {
    float *send, *recv;
    void *hs, *hr;
    occlWindow_t ws, wr;
} bufs;

static bufs make(size_t send_elems, size_t recv_elems, int mode)
{
    bufs b = {0};
    CHECK_OCCL(occlMemAlloc((void **)&b.send, send_elems * sizeof(float)));
    CHECK_OCCL(occlMemAlloc((void **)&b.recv, recv_elems * sizeof(float)));
    if (mode == REGISTERED) {
        CHECK_OCCL(occlCommRegister(comm, b.send, send_elems * sizeof(float), &b.hs));
        CHECK_OCCL(occlCommRegister(comm, b.recv, recv_elems * sizeof(float), &b.hr));
    } else if (mode == WINDOW) {
        CHECK_OCCL(occlCommWindowRegister(comm, b.send, send_elems * sizeof(float), &b.ws,
                                          OCCL_WIN_COLL_SYMMETRIC));
        CHECK_OCCL(occlCommWindowRegister(comm, b.recv, recv_elems * sizeof(float), &b.wr,
                                          OCCL_WIN_COLL_SYMMETRIC));
    }
    return b;
}

static void drop(bufs *b)
{
    CHECK_OCCL(occlCommDeregister(comm, b->hs));
    CHECK_OCCL(occlCommDeregister(comm, b->hr));
    CHECK_OCCL(occlCommWindowDeregister(comm, b->ws));
    CHECK_OCCL(occlCommWindowDeregister(comm, b->wr));
    CHECK_OCCL(occlMemFree(b->send));
    CHECK_OCCL(occlMemFree(b->recv));
}

static void fill(float *dev, size_t elems, int rank, size_t offset)
{
    float *h = malloc(elems * sizeof *h);
    CHECK(h != NULL);
    for (size_t i = 0; i < elems; i++)
        h[i] = val(rank, offset + i);
    CHECK_OR(orMemcpy(dev, h, elems * sizeof *h, orMemcpyHostToDevice));
    free(h);
}

/* want(i) for i in [0, elems) of dev; names the case on a difference. */
static void expect(const float *dev, size_t elems, float (*want)(size_t), const char *coll,
                   int mode, size_t count, bool inplace)
{
    float *h = malloc(elems * sizeof *h);
    CHECK(h != NULL);
    CHECK_OR(orMemcpy(h, dev, elems * sizeof *h, orMemcpyDeviceToHost));
    for (size_t i = 0; i < elems; i++)
        if (h[i] != want(i)) {
            char what[160], detail[160];
            snprintf(what, sizeof what, "%s %s count %zu %s", coll, mode_names[mode], count,
                     inplace ? "in place" : "out of place");
            snprintf(detail, sizeof detail, "rank %d element %zu is %g, expected %g", me, i,
                     h[i], want(i));
            mpitest_fail(__FILE__, __LINE__, what, detail);
        }
    free(h);
}

static size_t cur_count;
static float want_sum(size_t i)
{
    float s = 0;
    for (int r = 0; r < n; r++)
        s += val(r, i);
    return s;
}
static float want_root1(size_t i) { return val(1 % n, i); }
static float want_gathered(size_t i) { return val((int)(i / cur_count), i % cur_count); }
static float want_rs(size_t i) { return want_sum((size_t)me * cur_count + i); }
static float want_a2a(size_t i)
{
    return val((int)(i / cur_count), (size_t)me * cur_count + i % cur_count);
}
static float want_scattered(size_t i) { return val(0, (size_t)me * cur_count + i); }

static void sync(void) { CHECK_OR(orStreamSynchronize(stream)); }

static void all_collectives(int mode, size_t count)
{
    cur_count = count;
    size_t big = count * (size_t)n;
    for (int inplace = 0; inplace < 2; inplace++) {
        bufs b = make(big, big, mode);
        /* In place: NCCL's conventions, each call's input inside recv. */
        float *rs_in = inplace ? b.recv : b.send;
        fill(rs_in, count, me, 0);
        CHECK_OCCL(occlAllReduce(rs_in, b.recv, count, occlFloat32, occlSum, comm, stream));
        sync();
        expect(b.recv, count, want_sum, "AllReduce", mode, count, inplace);

        fill(rs_in, count, me, 0);
        CHECK_OCCL(occlBroadcast(rs_in, b.recv, count, occlFloat32, 1 % n, comm, stream));
        sync();
        expect(b.recv, count, want_root1, "Broadcast", mode, count, inplace);

        fill(rs_in, count, me, 0);
        CHECK_OCCL(occlReduce(rs_in, b.recv, count, occlFloat32, occlSum, 0, comm, stream));
        sync();
        if (me == 0)
            expect(b.recv, count, want_sum, "Reduce", mode, count, inplace);

        float *ag_in = inplace ? b.recv + (size_t)me * count : b.send;
        fill(ag_in, count, me, 0);
        CHECK_OCCL(occlAllGather(ag_in, b.recv, count, occlFloat32, comm, stream));
        sync();
        expect(b.recv, big, want_gathered, "AllGather", mode, count, inplace);

        fill(inplace ? b.recv : b.send, big, me, 0);
        CHECK_OCCL(occlReduceScatter(inplace ? b.recv : b.send,
                                     inplace ? b.recv + (size_t)me * count : b.recv, count,
                                     occlFloat32, occlSum, comm, stream));
        sync();
        expect(inplace ? b.recv + (size_t)me * count : b.recv, count, want_rs, "ReduceScatter",
               mode, count, inplace);

        fill(inplace ? b.recv : b.send, big, me, 0);
        CHECK_OCCL(occlAlltoAll(inplace ? b.recv : b.send, b.recv, count, occlFloat32, comm,
                                stream));
        sync();
        expect(b.recv, big, want_a2a, "AlltoAll", mode, count, inplace);

        fill(ag_in, count, me, 0);
        CHECK_OCCL(occlGather(ag_in, b.recv, count, occlFloat32, 0, comm, stream));
        sync();
        if (me == 0)
            expect(b.recv, big, want_gathered, "Gather", mode, count, inplace);

        if (me == 0)
            fill(b.recv, big, 0, 0);
        fill(b.send, big, 0, 0);
        CHECK_OCCL(occlScatter(inplace && me == 0 ? b.recv : b.send,
                               inplace ? b.recv + (size_t)me * count : b.recv, count, occlFloat32,
                               0, comm, stream));
        sync();
        expect(inplace ? b.recv + (size_t)me * count : b.recv, count, want_scattered, "Scatter",
               mode, count, inplace);
        drop(&b);
    }
}

/* Bytes this rank staged for one all-reduce of count floats. */
static uint64_t staged_by_all_reduce(int mode, size_t count, bool inplace)
{
    bufs b = make(count, count, mode);
    float *in = inplace ? b.recv : b.send;
    fill(in, count, me, 0);
    uint64_t before = occl_comm_staged_bytes(comm);
    CHECK_OCCL(occlAllReduce(in, b.recv, count, occlFloat32, occlSum, comm, stream));
    sync();
    uint64_t staged = occl_comm_staged_bytes(comm) - before;
    cur_count = count;
    expect(b.recv, count, want_sum, "AllReduce (staging)", mode, count, inplace);
    drop(&b);
    return staged;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Best of reps all-reduces of bytes, plain and registered alternating. */
static void bench(size_t bytes, int reps)
{
    size_t count = bytes / sizeof(float);
    double best[2] = {1e30, 1e30};
    bufs b[2] = {make(count, count, PLAIN), make(count, count, REGISTERED)};
    for (int k = 0; k < 2; k++)
        fill(b[k].send, count, me, 0);
    for (int rep = 0; rep < reps; rep++)
        for (int k = 0; k < 2; k++) {
            mpitest_barrier();
            double t0 = now_s();
            CHECK_OCCL(occlAllReduce(b[k].send, b[k].recv, count, occlFloat32, occlSum, comm,
                                     stream));
            sync();
            double t = now_s() - t0, tmax;
            MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (tmax < best[k])
                best[k] = tmax;
        }
    if (me == 0)
        printf("| %zu MiB | %.2f | %.2f | %.2f |\n", bytes >> 20, best[0] * 1e3, best[1] * 1e3,
               best[0] / best[1]);
    for (int k = 0; k < 2; k++)
        drop(&b[k]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    comm = occltest_comm_world(&ci);
    CHECK_OCCL(occlCommUserRank(comm, &me));
    CHECK_OCCL(occlCommCount(comm, &n));
    CHECK_OR(orStreamCreate(&stream));
    const char *algo = getenv("OCCL_ALGO");

    if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
        if (me == 0)
            printf("all-reduce float32 sum, %d ranks, OCCL_ALGO=%s, best of 5 (ms)\n\n"
                   "| size | plain | registered | plain / registered |\n|---|---|---|---|\n",
                   n, algo ? algo : "(planner)");
        for (size_t mib = 4; mib <= 64; mib *= 4)
            bench(mib << 20, 5);
    } else {
        for (int mode = PLAIN; mode <= WINDOW; mode++) {
            all_collectives(mode, 7);
            all_collectives(mode, 65536 + 3);
        }
        if (algo && strcmp(algo, "direct") == 0) {
            size_t count = 65536, bytes = count * sizeof(float);
            uint64_t want = bytes * (uint64_t)(n - 1);
            uint64_t plain = staged_by_all_reduce(PLAIN, count, false);
            uint64_t reg = staged_by_all_reduce(REGISTERED, count, false);
            uint64_t win = staged_by_all_reduce(WINDOW, count, false);
            uint64_t reg_inplace = staged_by_all_reduce(REGISTERED, count, true);
            char detail[200];
            snprintf(detail, sizeof detail, "plain %llu, registered %llu, window %llu, registered "
                     "in place %llu bytes staged; expected %llu, 0, 0, %llu",
                     (unsigned long long)plain, (unsigned long long)reg, (unsigned long long)win,
                     (unsigned long long)reg_inplace, (unsigned long long)want,
                     (unsigned long long)want);
            if (plain != want || reg != 0 || win != 0 || reg_inplace != want)
                mpitest_fail(__FILE__, __LINE__, "staged bytes of a direct all-reduce", detail);
            if (me == 0)
                printf("occl_registered: %s\n", detail);
        }
    }
    CHECK_OR(orStreamDestroy(stream));
    CHECK_OCCL(occlCommDestroy(comm));
    mpitest_barrier();
    if (me == 0)
        printf("occl_registered: %d ranks: ok\n", n);
    MPI_Finalize();
    return 0;
}
