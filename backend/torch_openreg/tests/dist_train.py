"""Training equivalence: a small transformer block trained on openreg devices
over occl with DDP, FSDP2, FSDP2 with bf16 mixed precision and a 2-D mesh
(FSDP x tensor parallelism) gives the losses and the final weights of the
same training on CPU in one process.

Run by mpiexec as one process per rank (dist-train-*.mpi):
    dist_train.py STORE_FILE [CONFIG ...]
CONFIGs (by default all): ddp, fsdp, fsdp_bf16, fsdp_tp. With one device per
rank every rank trains on its device 0; with two, rank r trains on device
(r + 1) % 2, so no rank uses the default device 0 by accident. fsdp_tp's mesh
is (ranks / 2) x 2: data parallel over the first dimension, tensor parallel
over the second.

Every config starts from the same weights and trains STEPS steps of SGD with
momentum; step s's global batch is split over the data-parallel ranks. The
reference trains the same model on the whole batch in this process on CPU;
its loss on each data-parallel rank's share must be that rank's loss, and its
weights the trained ones gathered (full_tensor), within fp32 tolerance (bf16:
within bf16's, and the forward is checked to run in bf16).
Prints one line per config and "dist train: N checks passed".
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

import torch_openreg

from dist_common import RANK, SIZE, fail

STEPS = 20
BATCH, SEQ, DIM, HEADS, HIDDEN = 4, 8, 32, 4, 64
LR, MOMENTUM = 0.05, 0.9
# fp32: the reductions run in another order than in one process. bf16: the
# forward and backward round to 8 bits of mantissa.
TOL = {"fp32": (1e-4, 1e-5), "bf16": (3e-2, 3e-3)}  # (rtol, atol)
checks = 0


def close(got, want, what, tol):
    global checks
    rtol, atol = tol
    got = got.detach().float().cpu()
    want = want.detach().float().cpu()
    if got.shape != want.shape:
        fail(f"{what}: shape {tuple(got.shape)}, want {tuple(want.shape)}")
    if not torch.allclose(got, want, rtol=rtol, atol=atol):
        err = (got - want).abs().max().item()
        fail(f"{what}: differs by {err:g} (rtol {rtol:g}, atol {atol:g})")
    checks += 1


class Block(torch.nn.Module):
    """Pre-norm transformer block: causal self-attention and an MLP, each
    behind a LayerNorm and a residual. The head count of a projection's output
    is taken from its width, so a column-wise shard holds whole heads."""

    def __init__(self):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(DIM)
        self.q = torch.nn.Linear(DIM, DIM)
        self.k = torch.nn.Linear(DIM, DIM)
        self.v = torch.nn.Linear(DIM, DIM)
        self.o = torch.nn.Linear(DIM, DIM)
        self.norm2 = torch.nn.LayerNorm(DIM)
        self.fc1 = torch.nn.Linear(DIM, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        b, t, _ = x.shape
        h = self.norm1(x)
        heads = [p(h).view(b, t, -1, DIM // HEADS).transpose(1, 2)
                 for p in (self.q, self.k, self.v)]
        a = F.scaled_dot_product_attention(*heads, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.head = torch.nn.Linear(DIM, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def make_model():
    torch.manual_seed(1234)  # the same start everywhere
    return Model()


def global_batch(step, dp):
    g = torch.Generator().manual_seed(7000 + step)
    x = torch.randn(dp * BATCH, SEQ, DIM, generator=g)
    return x, x.sum(dim=2, keepdim=True).sin()


class Reference:
    """The same training in this process on CPU, whole batches."""

    def __init__(self, dp):
        self.dp = dp
        self.model = make_model()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=LR, momentum=MOMENTUM)

    def step(self, step):
        x, y = global_batch(step, self.dp)
        self.opt.zero_grad()
        out = self.model(x)
        # Each data-parallel rank's loss is the mean over its share; the
        # ranks' gradients are averaged, so the whole loss is their mean.
        shares = [F.mse_loss(o, t) for o, t in zip(out.chunk(self.dp), y.chunk(self.dp))]
        (sum(shares) / self.dp).backward()
        self.opt.step()
        return [s.item() for s in shares]


def full(p):
    return p.full_tensor() if isinstance(p, DTensor) else p


def train(config, device, model, dp_rank, dp, tol):
    ref = Reference(dp)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    losses = []
    for step in range(STEPS):
        x, y = global_batch(step, dp)
        x, y = x.chunk(dp)[dp_rank].to(device), y.chunk(dp)[dp_rank].to(device)
        opt.zero_grad()
        loss = F.mse_loss(model(x).float(), y)
        loss.backward()
        opt.step()
        want = ref.step(step)[dp_rank]
        close(loss, torch.tensor(want), f"{config} step {step}: loss", tol)
        losses.append(loss.item())
    if not losses[-1] < losses[0]:
        fail(f"{config}: the loss did not decrease: {losses[0]} -> {losses[-1]}")
    got = dict(model.named_parameters())
    for name, p in ref.model.named_parameters():
        name = name if name in got else "module." + name  # DDP's wrapper
        close(full(got[name]), p, f"{config} after {STEPS} steps: {name}", tol)
    return losses


def run_ddp(device):
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(make_model().to(device), bucket_cap_mb=0.01)  # several buckets
    return train("ddp", device, model, RANK, SIZE, TOL["fp32"])


def shard(model, mesh, **kw):
    from torch.distributed.fsdp import fully_shard
    for block in model.blocks:
        fully_shard(block, mesh=mesh, **kw)
    fully_shard(model, mesh=mesh, **kw)
    return model


def run_fsdp(device):
    mesh = init_device_mesh("openreg", (SIZE,))
    model = shard(make_model(), mesh)
    if not isinstance(model.head.weight, DTensor):
        fail("fsdp: fully_shard left plain parameters")
    return train("fsdp", device, model, RANK, SIZE, TOL["fp32"])


def run_fsdp_bf16(device):
    from torch.distributed.fsdp import MixedPrecisionPolicy
    mesh = init_device_mesh("openreg", (SIZE,))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    model = shard(make_model(), mesh, mp_policy=policy)
    seen = set()
    model.blocks[0].fc1.register_forward_hook(
        lambda mod, inp, out: seen.add((mod.weight.dtype, out.dtype)))
    losses = train("fsdp_bf16", device, model, RANK, SIZE, TOL["bf16"])
    if seen != {(torch.bfloat16, torch.bfloat16)}:
        fail(f"fsdp_bf16: the forward ran with (weight, output) dtypes {seen}, not bf16")
    if model.head.weight.dtype != torch.float32:
        fail(f"fsdp_bf16: the sharded parameters are {model.head.weight.dtype}, not fp32")
    return losses


def run_fsdp_tp(device):
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    mesh = init_device_mesh("openreg", (SIZE // 2, 2), mesh_dim_names=("dp", "tp"))
    model = make_model()
    for block in model.blocks:
        parallelize_module(block, mesh["tp"], {"q": ColwiseParallel(), "k": ColwiseParallel(),
                                               "v": ColwiseParallel(), "o": RowwiseParallel(),
                                               "fc1": ColwiseParallel(),
                                               "fc2": RowwiseParallel()})
    model = shard(model, mesh["dp"])
    w = model.blocks[0].q.weight
    if tuple(w.device_mesh.mesh_dim_names or ()) != ("dp", "tp"):
        fail(f"fsdp_tp: q.weight is on mesh {w.device_mesh}, not the 2-D one")
    return train("fsdp_tp", device, model, mesh.get_local_rank("dp"), SIZE // 2,
                 TOL["fp32"])


CONFIGS = {"ddp": run_ddp, "fsdp": run_fsdp, "fsdp_bf16": run_fsdp_bf16,
           "fsdp_tp": run_fsdp_tp}


def main():
    store = sys.argv[1]
    configs = sys.argv[2:] or list(CONFIGS)
    count = torch_openreg.device_count()
    device = torch_openreg.device((RANK + 1) % 2 if count >= 2 else 0)
    torch_openreg.set_device(device.index)  # the meshes take the current device
    start = time.monotonic()
    dist.init_process_group("occl", init_method="file://" + store, rank=RANK, world_size=SIZE,
                            timeout=datetime.timedelta(seconds=120), device_id=device)
    for config in configs:
        if config == "fsdp_tp" and SIZE % 2:
            fail("fsdp_tp needs an even number of ranks")
        t = time.monotonic()
        losses = CONFIGS[config](device)
        print(f"rank {RANK}: {config} on {device}: {STEPS} steps as on CPU, loss "
              f"{losses[0]:.5f} -> {losses[-1]:.5f} ({time.monotonic() - t:.1f} s)", flush=True)
    dist.destroy_process_group()
    print(f"rank {RANK}: dist train: {checks} checks passed in {time.monotonic() - start:.1f} s",
          flush=True)
    if RANK == 0 and os.path.exists(store):
        os.unlink(store)


if __name__ == "__main__":
    main()
