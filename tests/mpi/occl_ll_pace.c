/*
 * occl_ll_pace.c - a rooted call's readers that catch up with a root
 * running ahead of them nap instead of yielding (collectives/ll.c), and only
 * then:
 *   1. the root posts 100 broadcasts before the leaves look, pauses 1 s, then
 *      posts 100 more: every leaf catches up at the pause, having found the
 *      root two calls ahead, and naps; the root, which reads nothing, never;
 *   2. the same with the roles turned: the leaves post 100 reduces to rank 0
 *      before it looks, pause, post 100 more: the root naps, they never;
 *   3. a Reduce to rank 0 then a Broadcast from it, 200 times: the root is
 *      never two calls ahead of a leaf (its next Broadcast needs the leaf's
 *      next post), nor a leaf of the root, so nobody naps;
 *   4. three windows of broadcasts (OCCL_LL_SMALL_BOXES calls each), rank 1
 *      300 ms late to them: the root's window fills and it sleeps for rank
 *      1; the other leaves, caught up, nap as long as it sleeps (more than
 *      50 naps, where a nap per catch-up makes a few), ever longer naps
 *      (less than 30 ms of CPU beyond twice what the same calls cost with
 *      nobody late; not under ThreadSanitizer), and the root, its window
 *      full again, ends some of them; the root, asleep for its window, is
 *      woken by the leaf that frees it;
 *   5. the root 50 ms late to a broadcast, five times: the leaves sleep for
 *      its post and are woken by it, not only by their periodic look;
 * every result checked. With OCCL_LL_NAP_US=0 nobody naps at all. Needs
 * more ranks than cores, one node (4 ranks of one device on 2 cores).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "mpitest.h"
#include "occl_internal.h" /* occl_comm_ll_naps: the debug counter */
#include "occltest.h"

/* Under ThreadSanitizer CPU time measures its instrumentation (every
 * syscall and atomic of a nap's wake-up), not whether a leaf waits without
 * using the cores: 16 ms for the broadcasts with nobody late and 30 to 70
 * ms behind the late leaf, from run to run. The naps are still counted. */
#if defined(__SANITIZE_THREAD__)
enum { CPU_CHECKED = 0 };
#else
enum { CPU_CHECKED = 1 };
#endif

enum { COUNT = 2, FIRST = 100, SECOND = 100, CHAIN = 200, SETTLE = 20, BLOCKED = 3 * OCCL_LL_SMALL_BOXES, LATE_MS = 300,
       LATE_POSTS = 5, LATE_POST_MS = 50 };

/* CPU time of this process (every thread), in ms. */
static double cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static void expect(const float *dev, float want, const char *what, int call)
{
    float got[COUNT];
    CHECK_OR(orMemcpy(got, dev, sizeof got, orMemcpyDeviceToHost));
    for (int i = 0; i < COUNT; i++)
        if (got[i] != want) {
            char detail[192];
            snprintf(detail, sizeof detail, "call %d, element %d: %g, expected %g", call, i, got[i], want);
            mpitest_fail(__FILE__, __LINE__, what, detail);
        }
}

static void fill(float *dev, float v)
{
    float h[COUNT];
    for (int i = 0; i < COUNT; i++)
        h[i] = v;
    CHECK_OR(orMemcpy(dev, h, sizeof h, orMemcpyHostToDevice));
}

/* Broadcasts from rank 0, the value of each its call number; each leaf's
 * results, one buffer per call, checked after its stream is done. */
static void broadcasts(occlComm_t comm, orStream_t s, float **bufs, int first, int n, bool root)
{
    for (int k = first; k < first + n; k++) {
        if (root)
            fill(bufs[k], (float)k);
        CHECK_OCCL(occlBroadcast(bufs[k], bufs[k], COUNT, occlFloat32, 0, comm, s));
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (ci.deviceCount != 1 || ci.nranks <= cores) {
        char detail[96];
        snprintf(detail, sizeof detail, "%d ranks of %d devices on %ld cores", ci.nranks, ci.deviceCount, cores);
        mpitest_fail(__FILE__, __LINE__, "needs more ranks than cores, one device each: ", detail);
    }
    const char *nap = getenv("OCCL_LL_NAP_US");
    bool naps_on = !nap || strcmp(nap, "0") != 0;
    occlComm_t comm = occltest_comm_world(&ci);
    orStream_t s;
    CHECK_OR(orStreamCreate(&s));
    bool root = ci.rank == 0;
    float *bufs[FIRST + SECOND];
    for (int k = 0; k < FIRST + SECOND; k++)
        CHECK_OR(orMalloc((void **)&bufs[k], COUNT * sizeof(float)));

    /* 1: a root two calls ahead, then a pause. */
    mpitest_barrier();
    if (root) {
        broadcasts(comm, s, bufs, 0, FIRST, true);
        CHECK_OR(orStreamSynchronize(s)); /* posted: a root's Broadcast waits for nobody */
        mpitest_barrier();
        usleep(1000000);
        broadcasts(comm, s, bufs, FIRST, SECOND, true);
    } else {
        mpitest_barrier();
        broadcasts(comm, s, bufs, 0, FIRST + SECOND, false);
    }
    CHECK_OR(orStreamSynchronize(s));
    for (int k = 0; k < FIRST + SECOND; k++)
        expect(bufs[k], (float)k, "a broadcast of a root running ahead: ", k);
    uint64_t napped = occl_comm_ll_naps(comm);
    char detail[192];
    snprintf(detail, sizeof detail, "rank %d napped %llu times in the broadcasts", ci.rank,
             (unsigned long long)napped);
    if (root && napped)
        mpitest_fail(__FILE__, __LINE__, "a root that only posts napped: ", detail);
    if (!root && naps_on && !napped)
        mpitest_fail(__FILE__, __LINE__, "a leaf that caught up with its root never napped: ", detail);
    if (!naps_on && napped)
        mpitest_fail(__FILE__, __LINE__, "OCCL_LL_NAP_US=0 and still a nap: ", detail);

    /* 2: leaves running ahead of the root of reduces. */
    float *red[CHAIN], *out[CHAIN];
    for (int k = 0; k < CHAIN; k++) {
        CHECK_OR(orMalloc((void **)&red[k], COUNT * sizeof(float)));
        CHECK_OR(orMalloc((void **)&out[k], COUNT * sizeof(float)));
        fill(red[k], (float)(ci.rank + k));
    }
    mpitest_barrier();
    uint64_t before = occl_comm_ll_naps(comm);
    for (int k = 0; k < CHAIN; k++) {
        if (!root && k == FIRST) {
            CHECK_OR(orStreamSynchronize(s)); /* posted: a leaf's Reduce waits for nobody */
            mpitest_barrier();
            usleep(1000000);
        }
        if (root && k == 0)
            mpitest_barrier();
        CHECK_OCCL(occlReduce(red[k], out[k], COUNT, occlFloat32, occlSum, 0, comm, s));
    }
    CHECK_OR(orStreamSynchronize(s));
    for (int k = 0; root && k < CHAIN; k++) /* the sum over ranks r of r + k */
        expect(out[k], (float)(ci.nranks * (ci.nranks - 1) / 2 + ci.nranks * k),
               "a reduce of leaves running ahead: ", k);
    napped = occl_comm_ll_naps(comm) - before;
    snprintf(detail, sizeof detail, "rank %d napped %llu times in the reduces", ci.rank, (unsigned long long)napped);
    if (!root && napped)
        mpitest_fail(__FILE__, __LINE__, "a leaf of a reduce, which only posts, napped: ", detail);
    if (root && naps_on && !napped)
        mpitest_fail(__FILE__, __LINE__, "a root that caught up with its leaves never napped: ", detail);
    if (!naps_on && napped)
        mpitest_fail(__FILE__, __LINE__, "OCCL_LL_NAP_US=0 and still a nap: ", detail);

    /* 3: a chain in which each call needs the one before, issued without
     * waiting in between. The first calls let what the calls before left
     * behind run out. */
    for (int k = 0; k < CHAIN; k++)
        fill(out[k], -1);
    for (int k = 0; k < CHAIN; k++) {
        if (k == SETTLE) {
            CHECK_OR(orStreamSynchronize(s));
            before = occl_comm_ll_naps(comm);
        }
        CHECK_OCCL(occlReduce(red[k], out[k], COUNT, occlFloat32, occlSum, 0, comm, s));
        CHECK_OCCL(occlBroadcast(out[k], out[k], COUNT, occlFloat32, 0, comm, s));
    }
    CHECK_OR(orStreamSynchronize(s));
    uint64_t chained = occl_comm_ll_naps(comm) - before;
    for (int k = 0; k < CHAIN; k++) { /* the sum over ranks r of r + k */
        expect(out[k], (float)(ci.nranks * (ci.nranks - 1) / 2 + ci.nranks * k), "a reduce, then a broadcast: ",
               k);
        CHECK_OR(orFree(red[k]));
        CHECK_OR(orFree(out[k]));
    }
    snprintf(detail, sizeof detail, "rank %d napped %llu times in %d calls", ci.rank, (unsigned long long)chained,
             2 * (CHAIN - SETTLE));
    if (chained)
        mpitest_fail(__FILE__, __LINE__, "a chain of calls that need each other napped: ", detail);

    /* 4: a root whose window a late leaf holds. */
    float *all, *many[BLOCKED];
    CHECK_OR(orMalloc((void **)&all, BLOCKED * COUNT * sizeof(float)));
    for (int k = 0; k < BLOCKED; k++) {
        many[k] = all + k * COUNT;
        fill(many[k], root ? (float)k : -1);
    }
    /* The same broadcasts with nobody late first: the CPU the calls cost
     * themselves (ten times more under ThreadSanitizer). Behind the late
     * leaf they may cost twice that (their waits take turns on the cores
     * with the late leaf's catching up) and less than 30 ms more. */
    mpitest_barrier();
    double base0 = cpu_ms();
    for (int k = 0; k < BLOCKED; k++)
        CHECK_OCCL(occlBroadcast(many[k], many[k], COUNT, occlFloat32, 0, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    double base = cpu_ms() - base0;
    for (int k = 0; k < BLOCKED && !root; k++)
        fill(many[k], -1);
    mpitest_barrier();
    before = occl_comm_ll_naps(comm);
    uint64_t woken0 = occl_comm_ll_naps_woken(comm), rung0;
    uint64_t slept0 = occl_comm_ll_sleeps(comm, &rung0);
    double cpu0 = cpu_ms();
    if (ci.rank == 1)
        usleep(LATE_MS * 1000);
    for (int k = 0; k < BLOCKED; k++)
        CHECK_OCCL(occlBroadcast(many[k], many[k], COUNT, occlFloat32, 0, comm, s));
    CHECK_OR(orStreamSynchronize(s));
    double cpu = cpu_ms() - cpu0;
    napped = occl_comm_ll_naps(comm) - before;
    uint64_t woken = occl_comm_ll_naps_woken(comm) - woken0, rung;
    uint64_t slept = occl_comm_ll_sleeps(comm, &rung) - slept0;
    rung -= rung0;
    for (int k = 0; k < BLOCKED; k++)
        expect(many[k], (float)k, "a broadcast behind a late leaf: ", k);
    CHECK_OR(orFree(all));
    snprintf(detail, sizeof detail, "rank %d napped %llu times (%llu ended by the root), %.1f ms of CPU (%.1f with "
             "nobody late), in %d broadcasts behind a leaf %d ms late", ci.rank, (unsigned long long)napped,
             (unsigned long long)woken, cpu, base, BLOCKED, LATE_MS);
    if (ci.rank >= 2 && naps_on && napped <= 50)
        mpitest_fail(__FILE__, __LINE__, "a leaf caught up with a root blocked by another leaf napped too few times: ",
                     detail);
    if (ci.rank >= 2 && naps_on && !woken)
        mpitest_fail(__FILE__, __LINE__, "a root whose window was full again ended no nap of a leaf: ", detail);
    if (CPU_CHECKED && ci.rank >= 2 && cpu >= 2 * base + 30)
        mpitest_fail(__FILE__, __LINE__, "a leaf caught up with a root blocked by another leaf used the CPU: ",
                     detail);
    /* Each time the late leaf, and later the slowest one, frees half its
     * window, the root is woken by that leaf's done; a lost wake-up would
     * leave it to its periodic look, every millisecond. */
    if (root && !rung) {
        snprintf(detail, sizeof detail, "%llu sleeps, none ended by a ring", (unsigned long long)slept);
        mpitest_fail(__FILE__, __LINE__, "a root whose window was full was never woken by a leaf that freed it: ",
                     detail);
    }
    if ((root || !naps_on) && napped)
        mpitest_fail(__FILE__, __LINE__, root ? "a root that only posts napped: " : "OCCL_LL_NAP_US=0 and still a nap: ",
                     detail);
    if (ci.rank == 2)
        printf("occl ll pace: %s%s\n", detail, CPU_CHECKED ? "" : " (CPU not checked under ThreadSanitizer)");

    /* 5: a root late to single broadcasts: the leaves yield, then sleep for
     * its post, which wakes them (a sleep ends by the periodic look too,
     * every millisecond: a leaf may look just as the post comes, but not
     * LATE_POSTS times). */
    slept0 = occl_comm_ll_sleeps(comm, &rung0);
    for (int k = 0; k < LATE_POSTS; k++) {
        fill(bufs[k], root ? (float)(1000 + k) : -1);
        mpitest_barrier();
        if (root)
            usleep(LATE_POST_MS * 1000);
        CHECK_OCCL(occlBroadcast(bufs[k], bufs[k], COUNT, occlFloat32, 0, comm, s));
        CHECK_OR(orStreamSynchronize(s));
        expect(bufs[k], (float)(1000 + k), "a broadcast of a late root: ", k);
    }
    slept = occl_comm_ll_sleeps(comm, &rung) - slept0;
    rung -= rung0;
    snprintf(detail, sizeof detail, "rank %d slept %llu times, %llu of them woken by a ring, in %d broadcasts of a "
             "root %d ms late", ci.rank, (unsigned long long)slept, (unsigned long long)rung, LATE_POSTS,
             LATE_POST_MS);
    if (!root && !slept)
        mpitest_fail(__FILE__, __LINE__, "a leaf waiting for a late root never slept: ", detail);
    if (!root && !rung)
        mpitest_fail(__FILE__, __LINE__, "a leaf asleep for a late root's post was never woken by it: ", detail);
    if (ci.rank == 1)
        printf("occl ll pace: %s\n", detail);

    for (int k = 0; k < FIRST + SECOND; k++)
        CHECK_OR(orFree(bufs[k]));
    CHECK_OR(orStreamDestroy(s));
    CHECK_OCCL(occlCommDestroy(comm));
    if (root)
        printf("occl ll pace: %s; no nap in a chain of calls that need each other\n",
               naps_on ? "readers napped behind posters running ahead" : "OCCL_LL_NAP_US=0: no nap");
    MPI_Finalize();
    return 0;
}
