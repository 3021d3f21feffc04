"""dist_perf.py - all_reduce through torch.distributed: occl on openreg devices
against gloo on CPU, measured in the same run.

    orrun -n 2 -d 1 -- backend/torch_openreg/tests/torch-python \\
        ../backend/torch_openreg/benchmarks/dist_perf.py [--max-mib 16] [--seconds 0.3]

Each size is a float32 tensor all-reduced (SUM) repeatedly for about
--seconds on each backend, after warm-up; a call counts as done when its
work is waited for, as a training step would. Rank 0 prints one row per
size: the mean time per call on each backend, gloo's time over occl's
(above 1: occl is faster), and occl's algorithm bandwidth (bytes / time).
The host's load average is printed before and after: figures only count
when it stays below ~1.5.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist

import torch_openreg


def timed(tensor, group, seconds):
    """Mean seconds per all_reduce of tensor on group, over about `seconds`."""
    for _ in range(3):
        dist.all_reduce(tensor, group=group)
    # Every rank runs the same number of calls: rank 0 decides from a probe.
    start = time.perf_counter()
    dist.all_reduce(tensor, group=group)
    probe = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.broadcast(probe, 0, group=GLOO)
    iters = max(3, min(10000, int(seconds / max(probe.item(), 1e-6))))
    dist.barrier(group=GLOO)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor, group=group)
    took = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
    dist.all_reduce(took, op=dist.ReduceOp.MAX, group=GLOO)  # the slowest rank's
    return took.item()


def main():
    global GLOO
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-mib", type=float, default=16)
    parser.add_argument("--seconds", type=float, default=0.3)
    args = parser.parse_args()
    dist.init_process_group("occl")
    GLOO = dist.new_group(backend="gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    dev = torch_openreg.device(0)
    if rank == 0:
        print(f"all_reduce SUM float32 on {size} ranks: occl (openreg device 0 of each rank) "
              f"vs gloo (CPU); load average {os.getloadavg()[0]:.2f}")
        print(f"{'bytes':>10} {'occl us':>10} {'gloo us':>10} {'gloo/occl':>10} "
              f"{'occl GB/s':>10}")
    nbytes = 4
    while nbytes <= args.max_mib * (1 << 20):
        n = nbytes // 4
        t_occl = timed(torch.ones(n, device=dev), None, args.seconds)
        t_gloo = timed(torch.ones(n), GLOO, args.seconds)
        if rank == 0:
            print(f"{nbytes:>10} {t_occl * 1e6:>10.1f} {t_gloo * 1e6:>10.1f} "
                  f"{t_gloo / t_occl:>10.2f} {nbytes / t_occl / 1e9:>10.3f}", flush=True)
        nbytes *= 16
    if rank == 0:
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
