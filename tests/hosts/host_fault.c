/*
 * host_fault - all-reduces in a loop across test hosts, for the fault tests
 * (tests/hosts/hosts_faults.sh): the test breaks the network or kills
 * processes while it runs and reads what every rank reports.
 *
 *   host_fault DIR ITERATIONS ELEMENTS
 *
 * Each iteration all-reduces ELEMENTS float32 values that change with the
 * iteration and checks every element of the result (small integers: exact
 * whatever the order of the additions). After its first all-reduce a rank
 * writes DIR/running.RANK; when it ends it writes DIR/rank.RANK, one line:
 *
 *   rank R host H: ok N all-reduces, M mismatches
 *   rank R host H: error occlTimeout (stream orErrorTimeout) at T after N
 *       all-reduces, M mismatches, abort occlSuccess
 *
 * T is CLOCK_REALTIME in seconds, to compare with the time the test broke
 * something (one machine: one clock). It then waits (at most 30 s) for every
 * rank's line and leaves without MPI_Finalize: after a fault MPI cannot
 * finalize, and over UCX's tcp MPICH 4.0.2 may hang there even without one
 * (docs/cluster.md#test-hosts-on-one-machine). Exit status: 0 if the rank
 * ran every iteration exactly, 3 after an error, 1 on mismatches.
 */
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "occltest.h"

static double realtime_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *result_name(occlResult_t r)
{
    static const char *const names[] = {"occlSuccess",        "occlUnhandledDeviceError",
                                        "occlSystemError",    "occlInternalError",
                                        "occlInvalidArgument", "occlInvalidUsage",
                                        "occlRemoteError",    "occlInProgress",
                                        "occlTimeout"};
    return (unsigned)r < sizeof names / sizeof *names ? names[r] : "unknown";
}

static void write_line(const char *dir, const char *name, int rank, const char *line)
{
    char path[1024], tmp[1100];
    snprintf(path, sizeof path, "%s/%s.%d", dir, name, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(line, f) == EOF || fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "host_fault: rank %d cannot write %s\n", rank, path);
        _exit(2);
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: host_fault DIR ITERATIONS ELEMENTS\n");
        return 2;
    }
    const char *dir = argv[1];
    long iterations = atol(argv[2]);
    size_t n = (size_t)atol(argv[3]);
    if (iterations < 1 || n < 1) {
        fprintf(stderr, "host_fault: ITERATIONS and ELEMENTS must be at least 1\n");
        return 2;
    }
    orClusterInfo ci;
    CHECK_OR(orGetClusterInfo(&ci));
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    occlComm_t comm = occltest_comm_world(&ci);
    float *dev, *hbuf = malloc(n * sizeof *hbuf);
    if (!hbuf)
        return 2;
    CHECK_OR(orMalloc((void **)&dev, n * sizeof *dev));

    long done = 0, mismatches = 0;
    orError_t sync = orSuccess;
    occlResult_t async = occlSuccess;
    double failed_at = 0;
    int nr = ci.nranks;
    for (long it = 0; it < iterations; it++) {
        for (size_t j = 0; j < n; j++)
            hbuf[j] = (float)(ci.rank + 1 + (long)((it + (long)j) % 5));
        CHECK_OR(orMemcpy(dev, hbuf, n * sizeof *hbuf, orMemcpyHostToDevice));
        occlResult_t r = occlAllReduce(dev, dev, n, occlFloat32, occlSum, comm, NULL);
        sync = orStreamSynchronize(NULL);
        occlCommGetAsyncError(comm, &async);
        if (r != occlSuccess || sync != orSuccess || async != occlSuccess) {
            failed_at = realtime_s();
            if (async == occlSuccess)
                async = r;
            break;
        }
        CHECK_OR(orMemcpy(hbuf, dev, n * sizeof *hbuf, orMemcpyDeviceToHost));
        for (size_t j = 0; j < n; j++) {
            float want = (float)(nr * (nr + 1) / 2 + nr * (long)((it + (long)j) % 5));
            mismatches += hbuf[j] != want;
        }
        done++;
        if (done == 1)
            write_line(dir, "running", ci.rank, "running\n");
    }

    char line[512];
    if (failed_at > 0) {
        occlResult_t aborted = occlCommAbort(comm);
        snprintf(line, sizeof line,
                 "rank %d host %s: error %s (stream %s) at %.3f after %ld all-reduces, "
                 "%ld mismatches, abort %s\n",
                 ci.rank, host, result_name(async), orGetErrorName(sync), failed_at, done,
                 mismatches, result_name(aborted));
    } else {
        occlCommDestroy(comm);
        snprintf(line, sizeof line, "rank %d host %s: ok %ld all-reduces, %ld mismatches\n",
                 ci.rank, host, done, mismatches);
    }
    write_line(dir, "rank", ci.rank, line);
    fputs(line, stdout);
    fflush(stdout);
    /* Leave once every rank has written: the first exit may end the job. */
    char path[1024];
    for (int tries = 0; tries < 3000; tries++) {
        int written = 0;
        for (int r = 0; r < nr; r++) {
            snprintf(path, sizeof path, "%s/rank.%d", dir, r);
            written += access(path, F_OK) == 0;
        }
        if (written == nr)
            break;
        usleep(10000);
    }
    _exit(failed_at > 0 ? 3 : mismatches ? 1 : 0);
}
