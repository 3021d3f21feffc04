"""DistributedDataParallel over occl on openreg devices against gloo on CPU.

Run by mpiexec as one process per rank (dist-ddp-2x1.mpi):
    dist_ddp.py STORE_FILE
The same small MLP, from the same initial weights, is trained for 20 steps
of SGD on each rank's own batches twice: on an openreg device of each rank
with DDP over the occl default group, and on CPU with DDP over a gloo group.
Every step's loss must agree within 1e-5, the trained weights too, and the
occl replicas must be identical across ranks (gradients were averaged).
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_openreg

from dist_common import RANK, SIZE, fail

STEPS = 20
TOL = 1e-5


def make_model():
    torch.manual_seed(1234)  # the same start on every rank and both runs
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 1))


def batches():
    g = torch.Generator().manual_seed(100 + RANK)  # each rank its own data
    for _ in range(STEPS):
        x = torch.randn(16, 8, generator=g)
        yield x, x.sum(dim=1, keepdim=True).sin()


def train(device, group):
    model = DDP(make_model().to(device), process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in batches():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.module.parameters()]


def main():
    dist.init_process_group("occl", init_method="file://" + sys.argv[1], rank=RANK,
                            world_size=SIZE, timeout=datetime.timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo")
    # With several devices per rank, rank r trains on device r % count: not
    # always device 0, nor the current one.
    device = torch_openreg.device(RANK % torch_openreg.device_count())
    occl_losses, occl_params = train(device, None)
    gloo_losses, gloo_params = train(torch.device("cpu"), gloo)
    for step, (a, b) in enumerate(zip(occl_losses, gloo_losses)):
        print(f"rank {RANK} step {step:2d}: loss occl {a:.8f} gloo {b:.8f}", flush=True)
        if abs(a - b) > TOL:
            fail(f"step {step}: occl loss {a} differs from gloo's {b} by more than {TOL}")
    if not occl_losses[-1] < occl_losses[0]:
        fail(f"the loss did not decrease: {occl_losses[0]} -> {occl_losses[-1]}")
    for p, q in zip(occl_params, gloo_params):
        if not torch.allclose(p, q, rtol=0, atol=TOL):
            fail(f"trained weights differ by {(p - q).abs().max().item()}")
    # The replicas agree: gather every rank's weights through gloo.
    mine = torch.cat([p.reshape(-1) for p in occl_params])
    parts = [torch.empty_like(mine) for _ in range(SIZE)]
    dist.all_gather(parts, mine, group=gloo)
    if any(not torch.equal(parts[0], p) for p in parts):
        fail("the occl replicas differ between ranks")
    dist.destroy_process_group()
    print(f"rank {RANK}: DDP over occl matches gloo: {STEPS} losses within {TOL}", flush=True)
    if RANK == 0 and os.path.exists(sys.argv[1]):
        os.unlink(sys.argv[1])


if __name__ == "__main__":
    main()
