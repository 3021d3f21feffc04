"""all_reduce in a loop over the "occl" backend across test hosts, for
dist_hosts_fault.sh, which takes a host's link down meanwhile.

Each rank initializes the default group through env:// (orrun's MASTER_ADDR,
the first host) with the group's timeout TIMEOUT seconds (OCCL_TIMEOUT_MS),
then all-reduces a 1 MiB float32 tensor on its openreg device in a loop,
checking the sum. After its first all_reduce it writes DIR/running.RANK;
when one raises, DIR/rank.RANK, one line:

    rank R host H: RuntimeError at T after N all_reduces: MESSAGE

(T: time.time(), to compare with when the link went down). It then waits
(at most 30 s) for every rank's line and leaves with os._exit: MPI cannot
finalize with a peer unreachable.

    dist_link_down.py DIR TIMEOUT
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_openreg  # noqa: F401 (the openreg device and the occl backend)

from dist_common import RANK, SIZE, fail

DEV = torch.device("openreg", 0)


def write(directory, name, text):
    path = os.path.join(directory, f"{name}.{RANK}")
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


def main():
    if len(sys.argv) != 3:
        fail("usage: dist_link_down.py DIR TIMEOUT")
    directory, timeout = sys.argv[1], float(sys.argv[2])
    dist.init_process_group("occl", timeout=datetime.timedelta(seconds=timeout))
    x = torch.empty(1 << 18, device=DEV)
    want = SIZE * (SIZE + 1) / 2
    done = 0
    try:
        while True:
            x.fill_(RANK + 1)
            dist.all_reduce(x)
            got = x[-1].item()  # waits for the all_reduce
            if got != want:
                fail(f"all_reduce {done}: {got}, expected {want}")
            done += 1
            if done == 1:
                write(directory, "running", "running\n")
    except RuntimeError as e:
        at = time.time()
        write(directory, "rank",
              f"rank {RANK} host {os.uname().nodename}: {type(e).__name__} at {at:.3f} after "
              f"{done} all_reduces: {str(e).splitlines()[0]}\n")
    for _ in range(3000):
        if all(os.path.exists(os.path.join(directory, f"rank.{r}")) for r in range(SIZE)):
            break
        time.sleep(0.01)
    sys.stdout.flush()
    os._exit(3)


main()
