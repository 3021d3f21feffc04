"""dist_perf.py - collectives and an FSDP2 step through torch.distributed:
occl on openreg devices against gloo on CPU, measured in the same run.

    orrun -n 4 -d 1 -- backend/torch_openreg/tests/torch-python \\
        ../backend/torch_openreg/benchmarks/dist_perf.py [--max-mib 64] [--seconds 0.3]
        [--ops all_reduce,all_gather_into_tensor,reduce_scatter_tensor] [--fsdp-steps 10]
        [--rusage]

For each collective and size, a float32 tensor goes through the call
repeatedly for about --seconds on each backend, after warm-up; a call counts
as done when its work is waited for, as a training step would. Sizes are
nccl-tests': the all-reduce's tensor, the all-gather's output and the
reduce-scatter's input (a multiple of the rank count, so 4 B becomes 4 B
per rank). Rank 0 prints one row per size: the mean time per call of the
slowest rank on each backend, gloo's time over occl's (above 1: occl is
faster), and occl's algorithm bandwidth (bytes / time). With --rusage, a
line after each row gives, for each backend, the CPU time and the voluntary
and involuntary context switches per call of a process (all its threads,
getrusage), the mean over the ranks: on an oversubscribed host the switches,
not the instructions, are what a small call's time follows.

Then one FSDP2 training step (fully_shard on each block of an MLP and on the
whole, forward, backward, SGD) on a 1-D mesh: openreg over occl against CPU
over gloo, the same model and batch, the mean of --fsdp-steps steps.

The host's load average is printed before and after: figures only count when
it stays below ~1.5 (the host's 2 cores are shared with other jobs).
"""
import argparse
import os
import resource
import time

import torch
import torch.distributed as dist

import torch_openreg

OPS = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor")
# torch 2.13 names the last two all_gather_single and reduce_scatter_single
# (the old names warn that they are deprecated); the same calls underneath.
ALL_GATHER = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)


def agreed_iters(call, seconds, gloo):
    """How many calls make about `seconds`: rank 0 decides from a probe, so
    every rank runs the same number."""
    start = time.perf_counter()
    call()
    probe = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.broadcast(probe, 0, group=gloo)
    return max(3, min(10000, int(seconds / max(probe.item(), 1e-6))))


def slowest(seconds, gloo):
    took = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(took, op=dist.ReduceOp.MAX, group=gloo)
    return took.item()


def usage():
    """CPU seconds and voluntary and involuntary context switches of this
    process so far, all threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return torch.tensor([r.ru_utime + r.ru_stime, r.ru_nvcsw, r.ru_nivcsw], dtype=torch.float64)


def mean_over_ranks(t, gloo):
    dist.all_reduce(t, group=gloo)
    return t / dist.get_world_size()


def timed(call, seconds, gloo):
    """Mean seconds per call (the slowest rank's), over about `seconds`, and
    usage() per call of a process (the mean over the ranks)."""
    for _ in range(3):
        call()
    iters = agreed_iters(call, seconds, gloo)
    dist.barrier(group=gloo)
    before = usage()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    took = time.perf_counter() - start
    per_call = (usage() - before) / iters
    return slowest(took / iters, gloo), mean_over_ranks(per_call, gloo)


def collective(op, nbytes, size, device, group):
    """A closure running `op` once on tensors of `nbytes` (nccl-tests' size),
    and the size actually used."""
    per_rank = max(1, nbytes // 4 // size)
    if op == "all_reduce":
        t = torch.ones(max(1, nbytes // 4), device=device)
        return (lambda: dist.all_reduce(t, group=group)), t.numel() * 4
    if op == "all_gather_into_tensor":
        inp = torch.ones(per_rank, device=device)
        out = torch.empty(per_rank * size, device=device)
        return (lambda: ALL_GATHER(out, inp, group=group)), out.numel() * 4
    inp = torch.ones(per_rank * size, device=device)
    out = torch.empty(per_rank, device=device)
    return (lambda: REDUCE_SCATTER(out, inp, group=group)), inp.numel() * 4


def bench_collectives(args, rank, size, dev, gloo):
    for op in filter(None, args.ops.split(",")):
        if op not in OPS:
            raise SystemExit(f"dist_perf: unknown op {op!r} (known: {', '.join(OPS)})")
        if rank == 0:
            print(f"\n{op} SUM float32 on {size} ranks: occl (openreg device 0 of each rank) "
                  f"vs gloo (CPU); load average {os.getloadavg()[0]:.2f}")
            print(f"{'bytes':>10} {'occl us':>10} {'gloo us':>10} {'gloo/occl':>10} "
                  f"{'occl GB/s':>10}")
        nbytes = 4
        while nbytes <= args.max_mib * (1 << 20):
            call, used = collective(op, nbytes, size, dev, None)
            t_occl, u_occl = timed(call, args.seconds, gloo)
            call, _ = collective(op, nbytes, size, torch.device("cpu"), gloo)
            t_gloo, u_gloo = timed(call, args.seconds, gloo)
            if rank == 0:
                print(f"{used:>10} {t_occl * 1e6:>10.1f} {t_gloo * 1e6:>10.1f} "
                      f"{t_gloo / t_occl:>10.2f} {used / t_occl / 1e9:>10.3f}", flush=True)
                if args.rusage:
                    print(f"{'':>10} per call and process: " +
                          "; ".join(f"{name} cpu {u[0] * 1e6:.1f} us, vcsw {u[1]:.3f}, "
                                    f"ivcsw {u[2]:.3f}"
                                    for name, u in (("occl", u_occl), ("gloo", u_gloo))),
                          flush=True)
            nbytes *= 16


def fsdp_step_time(device_type, device, steps, gloo):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    width, depth = 512, 4
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(width, width),
                                                      torch.nn.GELU()) for _ in range(depth)])
    mesh = init_device_mesh(device_type, (dist.get_world_size(),))
    for block in model:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(32, width, device=device)

    def step():
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        torch_openreg.synchronize() if device_type == "openreg" else None

    for _ in range(2):
        step()
    dist.barrier(group=gloo)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return slowest((time.perf_counter() - start) / steps, gloo), \
        sum(p.numel() for p in model.parameters()) * dist.get_world_size()


def bench_fsdp(args, rank, size, gloo):
    t_occl, params = fsdp_step_time("openreg", torch_openreg.device(0), args.fsdp_steps, gloo)
    t_gloo, _ = fsdp_step_time("cpu", torch.device("cpu"), args.fsdp_steps, gloo)
    if rank == 0:
        wait = os.environ.get("TORCH_OCCL_BLOCKING_WAIT") == "0"
        print(f"\nFSDP2 step (MLP of 4 x Linear(512, 512), {params / 1e6:.2f} M parameters, "
              f"batch 32, SGD) on {size} ranks, occl's wait() "
              f"{'on the stream (TORCH_OCCL_BLOCKING_WAIT=0)' if wait else 'blocking'}; "
              f"load average {os.getloadavg()[0]:.2f}")
        print(f"{'occl ms':>10} {'gloo ms':>10} {'gloo/occl':>10}")
        print(f"{t_occl * 1e3:>10.2f} {t_gloo * 1e3:>10.2f} {t_gloo / t_occl:>10.2f}",
              flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-mib", type=float, default=64)
    parser.add_argument("--seconds", type=float, default=0.3)
    parser.add_argument("--ops", default=",".join(OPS), help="'' for none")
    parser.add_argument("--fsdp-steps", type=int, default=10,
                        help="FSDP2 steps to time (0: no FSDP2 step)")
    parser.add_argument("--rusage", action="store_true",
                        help="also print CPU time and context switches per call")
    args = parser.parse_args()
    # The default group carries both: FSDP2 on CPU takes the default group's
    # gloo, on openreg its occl.
    dist.init_process_group("cpu:gloo,openreg:occl")
    gloo = dist.new_group(backend="gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    bench_collectives(args, rank, size, torch_openreg.device(0), gloo)
    if args.fsdp_steps > 0:
        bench_fsdp(args, rank, size, gloo)
    if rank == 0:
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
