"""A script as users write it, started by orrun (dist_launch.sh):
    orrun -n 2 -d 1 -- python dist_env.py
dist.init_process_group("occl") with no arguments but the timeout: env://
takes MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE from orrun. A gloo group
works beside it. Then the group's timeout (3 s) reaches OCCL: rank 1 skips an
all_reduce; rank 0's wait with a 1 s timeout gives up first, then its plain
wait fails with OCCL's timeout message in time.
"""
import ctypes
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_openreg


def fail(rank, msg):
    print(f"rank {rank}: FAIL: {msg}", flush=True)
    sys.exit(1)


def main():
    timeout = 3
    dist.init_process_group("occl", timeout=datetime.timedelta(seconds=timeout))
    rank, size = dist.get_rank(), dist.get_world_size()
    if rank != int(os.environ["RANK"]) or size != int(os.environ["WORLD_SIZE"]) or size != 2:
        fail(rank, f"rank {rank} of {size}; RANK={os.environ['RANK']}")
    # The process's environment as OCCL reads it (os.environ is Python's copy).
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    occl_timeout = libc.getenv(b"OCCL_TIMEOUT_MS")
    if occl_timeout != str(timeout * 1000).encode():
        fail(rank, f"OCCL_TIMEOUT_MS={occl_timeout}, not the group's timeout")
    dev = torch_openreg.device(0)
    x = torch.full((5,), float(rank + 1), device=dev)
    dist.all_reduce(x)
    if x.cpu().tolist() != [3.0] * 5:
        fail(rank, f"all_reduce gave {x.cpu().tolist()}")
    gloo = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=60))
    y = torch.full((5,), float(rank + 1))
    dist.all_reduce(y, group=gloo)
    if y.tolist() != [3.0] * 5:
        fail(rank, f"gloo all_reduce beside occl gave {y.tolist()}")
    print(f"rank {rank}: env:// ok, occl and gloo groups side by side", flush=True)

    # Rank 1 never joins: rank 0's all_reduce must fail with OCCL's reason
    # within the timeout (plus scheduling slack), not hang.
    done = torch.zeros(1)
    if rank == 0:
        start = time.monotonic()
        work = dist.all_reduce(torch.ones(3, device=dev), async_op=True)
        # A wait with a timeout of its own gives up first, the work still pending.
        try:
            work.wait(timeout=datetime.timedelta(seconds=1))
            fail(rank, "a wait for an all_reduce without its peer succeeded")
        except RuntimeError as e:
            if "occl allreduce: not complete after 1000 ms" not in str(e):
                fail(rank, f"the wait's timeout gave: {e}")
        if work.is_completed():
            fail(rank, "the work of an all_reduce without its peer is completed after 1 s")
        print("rank 0: wait(timeout=1 s) gives up before OCCL does", flush=True)
        try:
            work.wait()
            fail(rank, "an all_reduce without its peer succeeded")
        except RuntimeError as e:
            took = time.monotonic() - start
            if "timed out waiting for peers (OCCL_TIMEOUT_MS)" not in str(e):
                fail(rank, f"the error does not give OCCL's reason: {e}")
            if took > timeout + 5:
                fail(rank, f"the timeout took {took:.1f} s, the group's is {timeout} s")
            print(f"rank 0: a missing peer fails the all_reduce in {took:.1f} s "
                  f"(timeout {timeout} s): {e}", flush=True)
        dist.send(done, 1, group=gloo)
    else:
        dist.recv(done, 0, group=gloo)
    dist.destroy_process_group()
    print(f"rank {rank}: done", flush=True)


if __name__ == "__main__":
    main()
