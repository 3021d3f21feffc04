/* tests/topology/test_topo_runtime.c - OPENREG_TOPO in a process started
 * alone (a one-rank cluster): the job must fit the topology before any
 * device starts; a bad topology stops the runtime with the reason. Each test
 * is its own process, so setenv() before the first call is what the
 * runtime reads. */
#include "openreg.h"

#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdlib.h>

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
        "openreg: OPENREG_PLACEMENT='random' is not valid: expected packed or spread\n");
}
