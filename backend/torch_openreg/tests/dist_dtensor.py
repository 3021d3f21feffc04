"""The layers above the occl backend: functional collectives, DeviceMesh,
DTensor, tensor parallelism and FSDP2 on openreg devices, each against the
same computation on CPU (over gloo, or in this process).

Run by mpiexec as one process per rank (dist-dtensor-*.mpi):
    dist_dtensor.py STORE_FILE [PART ...]
PARTs (by default all): funcol, mesh, dtensor, tp, fsdp. Each rank uses
openreg device 0 of its own (OPENREG_DEVICES=1); the default group is bound
to it (init_process_group(device_id=...)), so a 2-D mesh (4 ranks) makes its
dimension groups with split_group. Sizes are small: the point is that every
call reaches occl and gives the CPU result.
Prints one line per part and "dist dtensor: N checks passed".
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

import torch_openreg

RANK = int(os.environ.get("RANK", os.environ.get("PMI_RANK", "0")))
SIZE = int(os.environ.get("WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
DEV = torch.device("openreg", 0)
# The reference groups for CPU tensors. With the default group bound to a
# device, torch gives every new group that device (new_group(backend="gloo")
# fails: "No backend type associated with device type openreg").
GLOO = "cpu:gloo,openreg:occl"
TIMEOUT = datetime.timedelta(seconds=60)
checks = 0


def fail(msg):
    print(f"rank {RANK}: FAIL: {msg}", flush=True)
    sys.exit(1)


def close(got, want, what, tol=1e-5):
    global checks
    got = got.detach().cpu()
    want = want.detach().cpu()
    if got.shape != want.shape or got.dtype != want.dtype:
        fail(f"{what}: got {got.dtype} {tuple(got.shape)}, want {want.dtype} {tuple(want.shape)}")
    if not torch.allclose(got, want, rtol=tol, atol=tol):
        err = (got - want).abs().max().item()
        fail(f"{what}: differs by {err:g} (tolerance {tol:g})")
    checks += 1


def check(cond, what):
    global checks
    if not cond:
        fail(what)
    checks += 1


def rank_data(*shape, salt=0, rank=RANK):
    g = torch.Generator().manual_seed(1000 * salt + rank)
    return torch.randn(*shape, generator=g)


def everyone(*shape, salt=0):
    return [rank_data(*shape, salt=salt, rank=r) for r in range(SIZE)]


# ---- functional collectives ----------------------------------------------------------


def part_funcol(gloo):
    group = dist.group.WORLD
    x = rank_data(4, 3, salt=1)
    xs = everyone(4, 3, salt=1)
    # all_reduce: sum and avg, through wait_tensor explicitly and implicitly.
    y = funcol.all_reduce(x.to(DEV), "sum", group)
    close(y, sum(xs), "funcol.all_reduce sum")
    y = funcol.all_reduce(x.to(DEV), "avg", group)
    close(y, sum(xs) / SIZE, "funcol.all_reduce avg")
    raw = torch.ops._c10d_functional.all_reduce(x.to(DEV), "sum", group.group_name)
    raw = torch.ops._c10d_functional.wait_tensor(raw)
    close(raw, sum(xs), "_c10d_functional.all_reduce + wait_tensor")
    # all_gather_tensor along dims 0 and 1.
    close(funcol.all_gather_tensor(x.to(DEV), 0, group), torch.cat(xs, 0),
          "funcol.all_gather_tensor dim 0")
    close(funcol.all_gather_tensor(x.to(DEV), 1, group), torch.cat(xs, 1),
          "funcol.all_gather_tensor dim 1")
    # reduce_scatter_tensor along dim 0.
    big = rank_data(2 * SIZE, 3, salt=2)
    total = sum(everyone(2 * SIZE, 3, salt=2))
    close(funcol.reduce_scatter_tensor(big.to(DEV), "sum", 0, group),
          total.chunk(SIZE, 0)[RANK], "funcol.reduce_scatter_tensor sum")
    # all_to_all_single, equal and uneven splits.
    a = rank_data(SIZE * 2, 2, salt=3)
    got = funcol.all_to_all_single(a.to(DEV), None, None, group)
    want = torch.cat([t.chunk(SIZE, 0)[RANK] for t in everyone(SIZE * 2, 2, salt=3)])
    close(got, want, "funcol.all_to_all_single equal splits")
    # rank r sends r + p + 1 rows to peer p.
    ins = [r + p + 1 for p in range(SIZE) for r in [RANK]]
    outs = [p + RANK + 1 for p in range(SIZE)]
    src = rank_data(sum(ins), 2, salt=4)
    got = funcol.all_to_all_single(src.to(DEV), outs, ins, group)
    want = []
    for p in range(SIZE):
        theirs = rank_data(sum(p + q + 1 for q in range(SIZE)), 2, salt=4, rank=p)
        start = sum(p + q + 1 for q in range(RANK))
        want.append(theirs[start:start + p + RANK + 1])
    close(got, torch.cat(want), "funcol.all_to_all_single uneven splits")
    # Gradients through the functional collectives, as on CPU over gloo.
    for name, f in (("all_reduce", lambda t, g: funcol.all_reduce(t, "sum", g)),
                    ("all_gather_tensor", lambda t, g: funcol.all_gather_tensor(t, 0, g)),
                    ("reduce_scatter_tensor",
                     lambda t, g: funcol.reduce_scatter_tensor(t, "sum", 0, g))):
        grads = []
        for dev, g in ((DEV, group), (torch.device("cpu"), gloo)):
            t = big.detach().clone().to(dev).requires_grad_()
            out = f(t * 2, g)
            (out * out).sum().backward()
            grads.append(t.grad)
        close(grads[0], grads[1], f"backward through funcol.{name}, as over gloo")
    print(f"rank {RANK}: functional collectives ok", flush=True)


# ---- DeviceMesh ----------------------------------------------------------------------


def part_mesh(gloo):
    mesh = init_device_mesh("openreg", (SIZE,))
    check(mesh.device_type == "openreg", f"mesh device type {mesh.device_type}")
    g = mesh.get_group()
    check(g.size() == SIZE, "1-D mesh group size")
    t = rank_data(3, salt=5).to(DEV)
    dist.all_reduce(t, group=g)
    close(t, sum(everyone(3, salt=5)), "all_reduce on the 1-D mesh's group")
    if SIZE == 4:
        mesh2 = init_device_mesh("openreg", (2, 2), mesh_dim_names=("dp", "tp"))
        for dim in ("dp", "tp"):
            sub = mesh2[dim]
            grp = sub.get_group()
            check(grp.size() == 2, f"2-D mesh dim {dim}: group size {grp.size()}")
            ranks = sub.mesh.tolist()
            t = rank_data(3, salt=6).to(DEV)
            dist.all_reduce(t, group=grp)
            close(t, sum(rank_data(3, salt=6, rank=r) for r in ranks),
                  f"all_reduce on 2-D mesh dim {dim} {ranks}")
    print(f"rank {RANK}: DeviceMesh ok", flush=True)


# ---- DTensor -------------------------------------------------------------------------


def dtensor_checks(mesh, what):
    """distribute_tensor and redistribute over every pair of placements of a
    1-D mesh (or of its first dim), full_tensor and ops, against CPU."""
    n = mesh.size(0)
    full = rank_data(4 * n, 2 * n, salt=7, rank=0)  # the same on every rank
    other = rank_data(2 * n, 3, salt=8, rank=0)
    rest = [Replicate()] * (mesh.ndim - 1)
    for pl in (Shard(0), Shard(1), Replicate()):
        d = distribute_tensor(full, mesh, [pl] + rest)
        check(d.to_local().device.type == "openreg", f"{what}: local shard on openreg")
        close(d.full_tensor(), full, f"{what}: distribute_tensor {pl} full_tensor")
        for to in (Shard(0), Shard(1), Replicate()):
            r = d.redistribute(mesh, [to] + rest)
            close(r.full_tensor(), full, f"{what}: redistribute {pl} -> {to}")
            want_local = full if isinstance(to, Replicate) else full.chunk(n, to.dim)[
                mesh.get_local_rank(0)]
            close(r.to_local(), want_local, f"{what}: local part after {pl} -> {to}")
    # Partial: every rank holds a share; the sum is the value.
    share = rank_data(4 * n, 2, salt=9)
    part = DTensor.from_local(share.to(DEV), mesh, [Partial()] + rest)
    ranks = mesh.mesh.tolist() if mesh.ndim == 1 else None
    if mesh.ndim == 1:
        total = sum(rank_data(4 * n, 2, salt=9, rank=r) for r in ranks)
        close(part.redistribute(mesh, [Replicate()]).to_local(), total,
              f"{what}: Partial -> Replicate")
        close(part.redistribute(mesh, [Shard(0)]).to_local(),
              total.chunk(n, 0)[mesh.get_local_rank(0)], f"{what}: Partial -> Shard(0)")
        close(part.full_tensor(), total, f"{what}: Partial full_tensor")
    # Ops on DTensors: matmul of Shard(0) by Replicate, a sum, an add.
    a = distribute_tensor(full, mesh, [Shard(0)] + rest)
    b = distribute_tensor(other, mesh, [Replicate()] + rest)
    close((a @ b).full_tensor(), full @ other, f"{what}: Shard(0) @ Replicate")
    a1 = distribute_tensor(full, mesh, [Shard(1)] + rest)
    b0 = distribute_tensor(other, mesh, [Shard(0)] + rest)
    close((a1 @ b0).full_tensor(), full @ other, f"{what}: Shard(1) @ Shard(0) (a Partial)",
          tol=1e-4)
    close(a.sum().full_tensor(), full.sum(), f"{what}: sum of a Shard(0)", tol=1e-4)
    close((a + a).full_tensor(), full + full, f"{what}: Shard(0) + Shard(0)")


def part_dtensor(gloo):
    mesh = init_device_mesh("openreg", (SIZE,))
    dtensor_checks(mesh, "1-D mesh")
    if SIZE == 4:
        mesh2 = init_device_mesh("openreg", (2, 2), mesh_dim_names=("dp", "tp"))
        full = rank_data(8, 4, salt=10, rank=0)
        for pls in ([Shard(0), Shard(1)], [Replicate(), Shard(0)], [Shard(1), Replicate()],
                    [Shard(0), Shard(0)]):
            d = distribute_tensor(full, mesh2, pls)
            close(d.full_tensor(), full, f"2-D mesh: distribute_tensor {pls}")
            for to in ([Replicate(), Replicate()], [Shard(1), Shard(0)]):
                close(d.redistribute(mesh2, to).full_tensor(), full,
                      f"2-D mesh: redistribute {pls} -> {to}")
        share = rank_data(4, 4, salt=11)
        p = DTensor.from_local(share.to(DEV), mesh2, [Partial(), Partial()])
        close(p.full_tensor(), sum(rank_data(4, 4, salt=11, rank=r) for r in range(4)),
              "2-D mesh: [Partial, Partial] full_tensor")
        dtensor_checks(mesh2["tp"], "2-D mesh tp dim")
    print(f"rank {RANK}: DTensor ok", flush=True)


# ---- tensor parallelism ----------------------------------------------------------------


class MLP(torch.nn.Module):
    def __init__(self, d=8, h=16):
        super().__init__()
        self.fc1 = torch.nn.Linear(d, h)
        self.fc2 = torch.nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def mlp():
    torch.manual_seed(4321)  # the same weights on every rank
    return MLP()


def part_tp(gloo):
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    mesh = init_device_mesh("openreg", (SIZE,))
    ref = mlp()
    tp = parallelize_module(mlp().to(DEV), mesh, {"fc1": ColwiseParallel(),
                                                    "fc2": RowwiseParallel()})
    check(isinstance(tp.fc1.weight, DTensor) and tp.fc1.weight.placements == (Shard(0),),
          "fc1.weight is Shard(0)")
    check(tp.fc2.weight.placements == (Shard(1),), "fc2.weight is Shard(1)")
    x = rank_data(5, 8, salt=12, rank=0)  # the same input on every rank
    out = tp(x.to(DEV))
    want = ref(x)
    close(out, want, "TP forward")
    out.square().sum().backward()
    want.square().sum().backward()
    for name, p in ref.named_parameters():
        g = dict(tp.named_parameters())[name].grad
        g = g.full_tensor() if isinstance(g, DTensor) else g
        close(g, p.grad, f"TP gradient of {name}", tol=1e-4)
    print(f"rank {RANK}: tensor parallelism (ColwiseParallel, RowwiseParallel) ok", flush=True)


# ---- FSDP2 ----------------------------------------------------------------------------


def part_fsdp(gloo):
    from torch.distributed.fsdp import fully_shard
    steps = 3
    mesh = init_device_mesh("openreg", (SIZE,))
    ref = torch.nn.Sequential(mlp(), torch.nn.Tanh(), mlp())
    model = torch.nn.Sequential(mlp(), torch.nn.Tanh(), mlp()).to(DEV)
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    check(isinstance(model[0].fc1.weight, DTensor), "fully_shard made DTensor parameters")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(steps):
        xs = [rank_data(4, 8, salt=20 + step, rank=r) for r in range(SIZE)]
        opt.zero_grad()
        loss = model(xs[RANK].to(DEV)).square().mean()
        loss.backward()
        opt.step()
        # The reference: every rank's batch in one process; FSDP averages
        # the ranks' gradients, so the mean of their losses.
        ref_opt.zero_grad()
        losses = [ref(x).square().mean() for x in xs]
        (sum(losses) / SIZE).backward()
        ref_opt.step()
        close(loss, losses[RANK], f"FSDP2 step {step}: loss", tol=1e-5)
    for (name, p), (_, q) in zip(ref.named_parameters(), model.named_parameters()):
        close(q.full_tensor(), p, f"FSDP2 after {steps} steps: {name}", tol=1e-5)
    print(f"rank {RANK}: FSDP2 fully_shard ({steps} steps) ok", flush=True)


PARTS = {"funcol": part_funcol, "mesh": part_mesh, "dtensor": part_dtensor, "tp": part_tp,
         "fsdp": part_fsdp}


def main():
    store = sys.argv[1]
    parts = sys.argv[2:] or list(PARTS)
    start = time.monotonic()
    dist.init_process_group("occl", init_method="file://" + store, rank=RANK, world_size=SIZE,
                            timeout=TIMEOUT, device_id=DEV)
    gloo = dist.new_group(backend=GLOO, timeout=TIMEOUT)
    for p in parts:
        t = time.monotonic()
        PARTS[p](gloo)
        if RANK == 0:
            print(f"rank 0: part {p}: {time.monotonic() - t:.1f} s", flush=True)
    dist.destroy_process_group()
    print(f"rank {RANK}: dist dtensor: {checks} checks passed in {time.monotonic() - start:.1f} s",
          flush=True)
    if RANK == 0 and os.path.exists(store):
        os.unlink(store)


if __name__ == "__main__":
    main()
