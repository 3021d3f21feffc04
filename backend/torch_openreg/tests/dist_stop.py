"""A rank that stops mid-step. The default group is "occl" with a 3 s timeout;
the ranks train a small MLP with DistributedDataParallel on their openreg
device 0, each step's loss checked against the same step on CPU in this
process. At step STOP the last rank leaves the loop and its script ends
(at once, or with "sleep" after sleeping past the timeout). Every other rank:

- its step STOP fails with a RuntimeError that names the allreduce and
  OCCL's timeout, within the timeout + 5 s;
- a later all_reduce on the group fails at once, with the same reason;
- destroy_process_group returns;

then rank 0 finalizes MPI (the ranks' exits wait for each other: the
runtime's proxies stop together, docs/cluster.md) and checks that no other
process of the job is left. Each rank prints one line, "rank R: ..."; a
failed check exits non-zero, and so does mpiexec.

A rank that ends with os._exit, without finalizing MPI, is not tried here:
mpiexec (MPICH's hydra) then kills every process of the job (SIGKILL, exit
status 9) before the others can see anything.

Run by mpiexec as 3 processes of 1 device (dist-stop-3x1.mpi):
    dist_stop.py STORE_FILE [exit|sleep]
"""
import ctypes
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_openreg

from dist_common import RANK, SIZE, fail

DEV = torch.device("openreg", 0)
TIMEOUT = 3  # seconds: the group's, hence OCCL_TIMEOUT_MS
SLACK = 5
STOP = 3  # the step the last rank does not take
STEPS = 6
TOL = 1e-5


def make_model():
    torch.manual_seed(1234)  # the same start on every rank and on CPU
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def batch(step, rank):
    g = torch.Generator().manual_seed(100 * step + rank)  # each rank its own data
    x = torch.randn(8, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def job_processes(store):
    """The pids of the processes of this job: our interpreter with our
    script and store file among its arguments (not mpiexec, whose arguments
    hold them too)."""
    me = open("/proc/self/cmdline", "rb").read().split(b"\0")
    found = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile
        if state != "Z" and args[0] == me[0] and store.encode() in args and \
                os.path.basename(__file__).encode() in b" ".join(args):
            found.add(int(pid))
    return found


def finalize_mpi():
    """MPI_Finalize of the openreg library (it stops the runtime's proxy, then
    PMPI_Finalize), which the process has loaded with the extension."""
    paths = {line.split()[-1] for line in open("/proc/self/maps") if "/libopenreg.so" in line}
    if len(paths) != 1:
        fail(f"cannot find the loaded libopenreg: {paths}")
    lib = ctypes.CDLL(paths.pop())
    if lib.MPI_Finalize() != 0:
        fail("MPI_Finalize failed")


def main():
    store = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "exit"
    if mode not in ("exit", "sleep") or SIZE < 2:
        fail(f"usage: dist_stop.py STORE_FILE [exit|sleep], on 2 ranks or more (mode {mode})")
    dist.init_process_group("occl", init_method="file://" + store, rank=RANK, world_size=SIZE,
                            timeout=datetime.timedelta(seconds=TIMEOUT))
    pids = torch.zeros(SIZE, dtype=torch.int64)
    pids[RANK] = os.getpid()
    pids = pids.to(DEV)
    dist.all_reduce(pids)  # every rank's pid
    pids = set(pids.cpu().tolist())
    if RANK == 0 and job_processes(store) != pids:
        fail(f"the job's processes are {sorted(job_processes(store))}, its ranks' {sorted(pids)}")

    model = DDP(make_model().to(DEV))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref = make_model()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    last = RANK == SIZE - 1
    start = None
    try:
        for step in range(STEPS):
            if step == STOP:
                start = time.monotonic()
                if last:
                    if mode == "sleep":
                        time.sleep(TIMEOUT + 2)
                    print(f"rank {RANK}: leaves the loop at step {step} ({mode}) after "
                          f"{STOP} steps as on CPU", flush=True)
                    sys.exit(0)  # its exit waits in the runtime for the other ranks'
            x, y = batch(step, RANK)
            opt.zero_grad()
            phase = "forward"
            loss = torch.nn.functional.mse_loss(model(x.to(DEV)), y.to(DEV))
            phase = "backward"  # DDP's gradient all-reduce
            loss.backward()
            phase = "optimizer step"
            opt.step()
            # The reference: every rank's batch on CPU, the mean of the losses
            # (DDP averages the gradients).
            ref_opt.zero_grad()
            losses = [torch.nn.functional.mse_loss(ref(bx), by)
                      for bx, by in (batch(step, r) for r in range(SIZE))]
            (sum(losses) / SIZE).backward()
            ref_opt.step()
            if abs(loss.item() - losses[RANK].item()) > TOL:
                fail(f"step {step}: loss {loss.item()}, on CPU {losses[RANK].item()}")
        fail(f"all {STEPS} steps ran, though rank {SIZE - 1} left at step {STOP}")
    except RuntimeError as e:
        took = time.monotonic() - start if start is not None else None
        if took is None:
            fail(f"a step before {STOP} failed: {e}")
        error = e
    msg = str(error)
    if "occl allreduce failed" not in msg or \
            "timed out waiting for peers (OCCL_TIMEOUT_MS)" not in msg:
        fail(f"step {STOP} failed with {type(error).__name__}, not OCCL's allreduce timeout: "
             f"{msg}")
    if took > TIMEOUT + SLACK:
        fail(f"step {STOP} failed after {took:.1f} s, the group's timeout is {TIMEOUT} s")
    # The communicator is failed: the next call fails at once, with the
    # reason of the first failure. (A wait with a timeout blocks the host
    # also under TORCH_OCCL_BLOCKING_WAIT=0.)
    again = time.monotonic()
    try:
        work = dist.all_reduce(torch.ones(2, device=DEV), async_op=True)
        work.wait(timeout=datetime.timedelta(seconds=TIMEOUT))
        fail("an all_reduce on the failed group succeeded")
    except RuntimeError as e:
        if "occl allreduce failed: timed out waiting for peers" not in str(e) or \
                "no progress with its peers" not in str(e):
            fail(f"an all_reduce on the failed group: {e}")
    again = time.monotonic() - again
    if again > TIMEOUT:
        fail(f"an all_reduce on the failed group waited {again:.1f} s")
    t = time.monotonic()
    dist.destroy_process_group()
    destroy = time.monotonic() - t
    if destroy > TIMEOUT:
        fail(f"destroy_process_group took {destroy:.1f} s")
    line = (f"rank {RANK}: step {STOP} failed in its {phase} after {took:.1f} s (timeout "
            f"{TIMEOUT} s) with {type(error).__name__}: {msg.splitlines()[0]}; the next "
            f"all_reduce failed in {again:.2f} s; destroy_process_group {destroy:.2f} s")
    if RANK != 0:
        print(line, flush=True)
        return
    # Rank 0 is the last to go: MPI_Finalize completes the others' exits.
    finalize_mpi()
    deadline = time.monotonic() + 30
    while (left := job_processes(store) - {os.getpid()}) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        fail(f"processes of the job still there 30 s after MPI_Finalize: {sorted(left)}")
    if os.path.exists(store):
        os.unlink(store)
    print(f"{line}; no other process of the job is left", flush=True)


if __name__ == "__main__":
    main()
