/* tests/topology/test_topo_runtime.c - OPENREG_TOPO in a process started
 * alone (a one-rank cluster): the job must fit the topology before any
 * device starts; a bad topology or placement file stops the runtime with the
 * reason; a placement file decides the devices' paths. Each test
 * is its own process, so setenv() before the first call is what the
 * runtime reads. */
#include "openreg.h"

#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(topo_runtime, .timeout = 60);

static void environment(const char *topo, const char *devices)
{
    setenv("OPENREG_TOPO", topo, 1);
    setenv("OPENREG_DEVICES", devices, 1);
    setenv("OPENREG_DEVICE_MEM", "64M", 1);
}

Test(topo_runtime, a_job_that_fits_starts)
{
    environment("full2", "2");
    int count = 0;
    cr_assert_eq(orGetDeviceCount(&count), orSuccess);
    cr_assert_eq(count, 2);
    orClusterInfo ci;
    cr_assert_eq(orGetClusterInfo(&ci), orSuccess);
    cr_assert_eq(ci.node, 0);
    cr_assert_eq(ci.nnodes, 1);
}

Test(topo_runtime, more_devices_than_the_topology_holds, .init = cr_redirect_stderr)
{
    environment("full2", "3");
    int count = -1;
    cr_assert_eq(orGetDeviceCount(&count), orErrorInitialization);
    cr_assert_eq(count, -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("openreg: OPENREG_TOPO: the job does not fit: 1 ranks x 3 devices "
                            "need 3 devices; topology 'full2' has 2 (in 1 node)\n");
}

Test(topo_runtime, a_bad_topology_names_file_and_line, .init = cr_redirect_stderr)
{
    char path[512];
    snprintf(path, sizeof path, "%s/bad/zero-bandwidth.xml", TOPO_DATA_DIR);
    environment(path, "1");
    int count = -1;
    cr_assert_eq(orGetDeviceCount(&count), orErrorInitialization);
    fflush(stderr);
    char want[1024];
    snprintf(want, sizeof want,
             "openreg: OPENREG_TOPO is not valid: %s:5: bandwidth '0GB/s' must be greater than "
             "zero\n",
             path);
    cr_assert_stderr_eq_str(want);
}

Test(topo_runtime, a_bad_placement_is_refused, .init = cr_redirect_stderr)
{
    environment("full2", "1");
    setenv("OPENREG_PLACEMENT", "random", 1);
    int count = -1;
    cr_assert_eq(orGetDeviceCount(&count), orErrorInitialization);
    fflush(stderr);
    cr_assert_stderr_eq_str(
        "openreg: OPENREG_PLACEMENT='random' is not valid: expected packed, spread or a "
        "placement file (./packed for a file named packed); as a file: No such file or "
        "directory\n");
}

/* A placement file of the test's own, in the temporary directory. */
static void placement_file(const char *text, char *path, size_t size)
{
    snprintf(path, size, "/tmp/or_placement_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    setenv("OPENREG_PLACEMENT", path, 1);
}

/* Without MPI too, the devices are the file's: on a ring of four, devices 0
 * and 1 placed on D0 and D2 copy through D1, 2 x 2 us (packed: D0, D1, 2 us). */
Test(topo_runtime, a_placement_file_places_the_devices)
{
    environment("devices:4 shape:ring intra:100GB/s,2us", "2");
    setenv("OPENREG_TIME", "virtual", 1);
    char path[64];
    placement_file("# one rank, two devices a hop apart\n0: D0 n0.dev2\n", path, sizeof path);
    void *a, *b;
    size_t bytes = 1 << 20;
    cr_assert_eq(orSetDevice(0), orSuccess);
    cr_assert_eq(orMalloc(&a, bytes), orSuccess);
    cr_assert_eq(orSetDevice(1), orSuccess);
    cr_assert_eq(orMalloc(&b, bytes), orSuccess);
    orStream_t s;
    orEvent_t e0, e1;
    cr_assert_eq(orStreamCreate(&s), orSuccess);
    cr_assert_eq(orEventCreateWithFlags(&e0, orEventEnableTiming), orSuccess);
    cr_assert_eq(orEventCreateWithFlags(&e1, orEventEnableTiming), orSuccess);
    cr_assert_eq(orEventRecord(e0, s), orSuccess);
    cr_assert_eq(orMemcpyPeerAsync(b, 1, a, 0, bytes, s), orSuccess);
    cr_assert_eq(orEventRecord(e1, s), orSuccess);
    cr_assert_eq(orStreamSynchronize(s), orSuccess);
    long long ns = 0;
    cr_assert_eq(orEventElapsedTimeNs(&ns, e0, e1), orSuccess);
    long long want = 4000 + ((long long)bytes * 1000000000ll + 100000000000ll - 1) / 100000000000ll;
    unlink(path);
    cr_assert_eq(ns, want, "copy D0 -> D2: %lld ns, expected %lld (through D1)", ns, want);
}

Test(topo_runtime, a_bad_placement_file_names_its_line, .init = cr_redirect_stderr)
{
    environment("full2", "2");
    char path[64];
    placement_file("0: D1\n0: D0\n", path, sizeof path);
    int count = -1;
    cr_assert_eq(orGetDeviceCount(&count), orErrorInitialization);
    unlink(path);
    fflush(stderr);
    char want[1024];
    snprintf(want, sizeof want,
             "openreg: OPENREG_PLACEMENT is not valid for this job: %s:1:1: rank 0 has 1 "
             "device: the job gives each rank 2 (OPENREG_DEVICES, orrun -d)\n",
             path);
    cr_assert_stderr_eq_str(want);
}

Test(topo_runtime, a_placement_file_needs_a_topology, .init = cr_redirect_stderr)
{
    unsetenv("OPENREG_TOPO");
    char path[64];
    placement_file("0: 0 1\n", path, sizeof path);
    int count = -1;
    cr_assert_eq(orGetDeviceCount(&count), orErrorInitialization);
    unlink(path);
    fflush(stderr);
    char want[256];
    snprintf(want, sizeof want,
             "openreg: OPENREG_PLACEMENT=%s is a placement file, which places ranks on a "
             "topology: set OPENREG_TOPO too\n",
             path);
    cr_assert_stderr_eq_str(want);
}
