"""wait() with NCCL's semantics (TORCH_OCCL_BLOCKING_WAIT=0), run by mpiexec
on 2 ranks (dist-stream-wait-2x1.mpi):
    dist_stream_wait.py STORE_FILE
Rank 1 joins an all_reduce 1.5 s late. Rank 0's wait() returns at once, the
work not yet complete, and the tensor read after it (a synchronization of
the current stream) holds the sum: the stream waited, not the host. A wait
with a timeout, a barrier and the future still block the host. Then rank 1
skips an all_reduce: rank 0's wait() returns, and its next call on the group
raises OCCL's timeout naming the failed all-reduce, within the group's
timeout.
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_openreg

from dist_common import RANK, SIZE, fail

LATE = 1.5
TIMEOUT = 4


def main():
    if os.environ.get("TORCH_OCCL_BLOCKING_WAIT") != "0" or SIZE != 2:
        fail("run with TORCH_OCCL_BLOCKING_WAIT=0 on 2 ranks")
    dist.init_process_group("occl", init_method="file://" + sys.argv[1], rank=RANK,
                            world_size=SIZE, timeout=datetime.timedelta(seconds=TIMEOUT))
    dev = torch_openreg.device(0)
    x = torch.full((4,), float(RANK + 1), device=dev)
    dist.all_reduce(x)  # connected, both ranks here
    if RANK == 1:
        time.sleep(LATE)
    x = torch.full((4,), float(RANK + 1), device=dev)
    start = time.monotonic()
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    waited = time.monotonic() - start
    if RANK == 0:
        if waited > LATE / 3:
            fail(f"wait() blocked the host for {waited:.2f} s")
        if work.is_completed():
            fail("the work is complete though the peer is late")
    if x.cpu().tolist() != [3.0] * 4:  # the current stream waited for the work
        fail(f"all_reduce then wait() gave {x.cpu().tolist()}")
    if RANK == 0 and time.monotonic() - start < LATE * 0.8:
        fail("the result was read before the late peer joined")
    print(f"rank {RANK}: wait() waits on the stream: {waited:.3f} s on the host", flush=True)

    # A timeout, a barrier and the future block the host.
    for how in ("timeout", "barrier", "future"):
        if RANK == 1:
            time.sleep(LATE)
        start = time.monotonic()
        if how == "barrier":
            dist.barrier()
        else:
            work = dist.all_reduce(torch.ones(2, device=dev), async_op=True)
            if how == "timeout":
                work.wait(timeout=datetime.timedelta(seconds=30))
            else:
                work.get_future().wait()
        took = time.monotonic() - start
        if RANK == 0 and took < LATE * 0.8:
            fail(f"the {how} wait returned after {took:.2f} s, before the late peer")
    print(f"rank {RANK}: a timeout, a barrier and the future block the host", flush=True)

    # Rank 1 skips an all_reduce: rank 0's failure comes with its next call.
    if RANK == 0:
        start = time.monotonic()
        work = dist.all_reduce(torch.ones(3, device=dev), async_op=True)
        work.wait()
        try:
            while time.monotonic() - start < TIMEOUT + 10:
                dist.all_reduce(torch.ones(1, device=dev))
                time.sleep(0.2)
            fail("the group still works after its peer skipped an all_reduce")
        except RuntimeError as e:
            took = time.monotonic() - start
            msg = str(e)
            if "occl allreduce" not in msg or "timed out" not in msg:
                fail(f"the next call raised {msg!r}, not OCCL's timeout of the all-reduce")
            if took > TIMEOUT + 5:
                fail(f"the failure came after {took:.1f} s (timeout {TIMEOUT} s)")
        print(f"rank 0: the next call raises the skipped all-reduce's timeout after "
              f"{took:.1f} s", flush=True)
    dist.destroy_process_group()
    print(f"rank {RANK}: dist stream wait: done", flush=True)
    if RANK == 0 and os.path.exists(sys.argv[1]):
        os.unlink(sys.argv[1])


if __name__ == "__main__":
    main()
