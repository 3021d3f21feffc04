"""PyTorch's own generic distributed suite (TestDistBackend, from
torch/testing/_internal/distributed/distributed_test.py) on the occl backend,
with tensors on openreg devices.

PyTorch runs the suite by spawning a process per rank for each test
(MultiProcessTestCase); occl's ranks are an MPI job, so here the job's ranks,
started once by orrun, run the tests one after another instead, each as the
suite's own per-process entry does (TestDistBackend._run): a fresh default
group from a file store, the suite's file barrier before and after, then
destroy_process_group. The suite's tensors are made without a device (its
CPU tests, written for gloo): the default device is openreg, so they are on
this rank's device. The ranks agree on every test's outcome through files.

    orrun -n 2 -d 1 -- python dist_suite.py WORKDIR [--list FILE] [-k REGEX]

Prints one line per test (rank 0): PASS, FAIL (with the first rank's error),
SKIP (with the reason); then the counts. The exit status is 1 if any test
failed, or, with --expect FILE, if a test FILE names did not pass (so that a
test cannot turn into a skip unnoticed).
"""
import argparse
import os
import re
import shutil
import sys
import time
import traceback
import unittest

os.environ.setdefault("BACKEND", "occl")  # read by distributed_test at import
os.environ["WORLD_SIZE"] = os.environ.get("WORLD_SIZE", os.environ.get("PMI_SIZE", "1"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal import common_utils  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases, TEST_SKIPS  # noqa: E402

import torch_openreg  # noqa: E402,F401

# What the suite asks a backend to declare (its sets of backend names, meant
# for backends from outside PyTorch), before the suite's decorators read them:
# occl has DDP, subgroups and receives from any source; like nccl, it takes
# device tensors only (the suite's CPU barrier test makes a CPU tensor
# whatever the default device).
BACKEND = os.environ["BACKEND"]
for feature in ("plugin", "ddp", "subgroup"):
    DistTestCases.backend_feature[feature].add(BACKEND)
DistTestCases.skip_collective["cpu barrier"].add(BACKEND)

from torch.testing._internal.distributed import distributed_test as dt  # noqa: E402

RANK = int(os.environ.get("RANK", os.environ.get("PMI_RANK", "0")))
WORLD = int(os.environ["WORLD_SIZE"])
SKIP_CODES = {v.exit_code: k for k, v in TEST_SKIPS.items()}
# Tests that end a process on purpose (the suite expects a crash) or wait for
# a rank to die: they would end this job.
NOT_HERE = {
    "test_ddp_has_finalized": "expects its process to crash",
    "test_monitored_barrier_failure_order": "waits for ranks that exit",
    # PyTorch's ProcessGroup names every backend from outside PyTorch
    # "custom" (c10d::ProcessGroup::getBackendName), which DDP logs.
    "test_ddp_logging_data_cpu": "DDP logs a third-party backend's name as 'custom'",
}


class Suite(dt.TestDistBackend, dt.DistributedTest._DistTestBase):
    pass


def wait_for(paths, timeout):
    deadline = time.time() + timeout
    while not all(os.path.exists(p) for p in paths):
        if time.time() > deadline:
            return False
        time.sleep(0.02)
    return True


def error_line(text):
    """The exception's own line of a traceback (not PyTorch's repro hints)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Failure|Exit)\b", line):
            return line[:200]
    return lines[-1][:200] if lines else ""


def run_one(name, workdir, index, timeout):
    """This rank's outcome of one test: ("pass"|"skip"|"fail", text)."""
    tdir = os.path.join(workdir, f"t{index}")
    for sub in ("barrier", "test_dir", "init_dir"):
        os.makedirs(os.path.join(tdir, sub), exist_ok=True)
    os.environ["TEMP_DIR"] = tdir
    os.environ["INIT_METHOD"] = "file://" + os.path.join(tdir, "init_dir", "shared_init_file")
    dt.Barrier.barrier_id = 0
    test = Suite(name)
    test.rank = RANK
    test.file_name = os.path.join(tdir, "store")
    common_utils.set_rng_seed()  # the same data on every rank, as the suite's runner
    try:
        dist.init_process_group(init_method=test.init_method, backend=os.environ["BACKEND"],
                                world_size=WORLD, rank=RANK, timeout=timeout)
        test._barrier()
        try:
            getattr(test, name)()
        finally:
            test._barrier()
        return "pass", ""
    except unittest.SkipTest as e:
        return "skip", str(e)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
        if code in SKIP_CODES:
            return "skip", TEST_SKIPS[SKIP_CODES[code]].message
        return "fail", f"exit {e.code}"
    except BaseException:  # noqa: B902 - a test's failure, whatever it raised
        return "fail", traceback.format_exc(limit=6)
    finally:
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except BaseException:  # noqa: B902
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("-k", default="", help="run the tests whose name matches")
    ap.add_argument("--expect", help="file naming the tests that must pass")
    ap.add_argument("--timeout", type=float, default=30, help="group timeout, seconds")
    opts = ap.parse_args()
    os.makedirs(opts.workdir, exist_ok=True)
    torch.set_default_device(torch_openreg.device(RANK % torch.openreg.device_count()))
    names = sorted(n for n in dir(Suite) if n.startswith("test_") and re.search(opts.k, n))
    from datetime import timedelta
    timeout = timedelta(seconds=opts.timeout)
    counts = {"pass": 0, "skip": 0, "fail": 0}
    passed = set()
    for i, name in enumerate(names):
        method = getattr(Suite, name)
        if name in NOT_HERE:
            outcome, text = "skip", NOT_HERE[name]
        elif getattr(method, "__unittest_skip__", False):  # unittest's own skip marks
            outcome, text = "skip", getattr(method, "__unittest_skip_why__", "")
        else:
            outcome, text = run_one(name, opts.workdir, i, timeout)
        mine = os.path.join(opts.workdir, f"r{i}.{RANK}")
        with open(mine + ".tmp", "w") as f:
            f.write(f"{outcome}\n{text}")
        os.rename(mine + ".tmp", mine)
        files = [os.path.join(opts.workdir, f"r{i}.{r}") for r in range(WORLD)]
        if not wait_for(files, 3 * opts.timeout + 30):
            print(f"rank {RANK}: ranks lost in {name}", flush=True)
            sys.exit(2)
        results = [open(p).read().split("\n", 1) for p in files]
        outcomes = {o for o, _ in results}
        final = "fail" if "fail" in outcomes else "pass" if outcomes == {"pass"} else "skip"
        counts[final] += 1
        if final == "pass":
            passed.add(name)
        if RANK == 0:
            why = ""
            if final == "fail":
                why = error_line(next(t for o, t in results if o == "fail"))
            elif final == "skip":
                why = next(t for o, t in results if o == "skip").strip()[:100]
            print(f"{final.upper():4} {name} {why}".rstrip(), flush=True)
    if RANK == 0:
        print(f"# {counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped "
              f"of {len(names)} on {WORLD} ranks", flush=True)
    # Every rank has read every result: the work directory can go.
    open(os.path.join(opts.workdir, f"done.{RANK}"), "w").close()
    if RANK == 0 and wait_for([os.path.join(opts.workdir, f"done.{r}") for r in range(WORLD)],
                              60):
        shutil.rmtree(opts.workdir, ignore_errors=True)
    status = 1 if counts["fail"] else 0
    if opts.expect:
        with open(opts.expect) as f:
            want = {line.split("#")[0].strip() for line in f} - {""}
        missing = sorted(want - passed)
        if missing:
            if RANK == 0:
                print("expected to pass, did not:", " ".join(missing), flush=True)
            status = 1
    sys.exit(status)


if __name__ == "__main__":
    main()
