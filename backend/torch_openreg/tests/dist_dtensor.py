"""The layers above the occl backend: functional collectives (eager and under
torch.compile), DeviceMesh, DTensor, tensor parallelism and FSDP2 on openreg
devices, each against the same computation on CPU (over gloo, or in this
process).

Run by mpiexec as one process per rank (dist-dtensor-*.mpi):
    dist_dtensor.py STORE_FILE [PART ...]
PARTs (by default all): funcol, compile, mesh, dtensor, tp, fsdp. Each rank uses
openreg device 0 of its own (OPENREG_DEVICES=1); the default group is bound
to it (init_process_group(device_id=...)), so a 2-D mesh (4 ranks) makes its
dimension groups with split_group. Sizes are small: the point is that every
call reaches occl and gives the CPU result.
Prints one line per part and "dist dtensor: N checks passed".
"""
import datetime
import logging
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor._dtensor_spec import DTensorSpec
from torch.distributed.tensor._redistribute import redistribute_local_tensor

import torch_openreg

from dist_common import RANK, SIZE, fail

# all_gather_tensor and reduce_scatter_tensor are deprecated in torch 2.13
# (for *_single), and said so at every call and trace: they are still tested.
warnings.filterwarnings("ignore", r".*_functional_collectives\.\w+` is deprecated",
                        FutureWarning)
DEV = torch.device("openreg", 0)
# The reference groups for CPU tensors. With the default group bound to a
# device, torch gives every new group that device (new_group(backend="gloo")
# fails: "No backend type associated with device type openreg").
GLOO = "cpu:gloo,openreg:occl"
TIMEOUT = datetime.timedelta(seconds=60)
checks = 0


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


# ---- functional collectives under torch.compile -------------------------------------


def funcol_step(x, big, group):
    """Functional collectives between device ops, as a compiled model has
    them: an all_reduce, an all_gather_tensor and a reduce_scatter_tensor."""
    s = funcol.all_reduce(x * 2 + 1, "sum", group)
    g = funcol.all_gather_tensor(torch.relu(x), 0, group)
    r = funcol.reduce_scatter_tensor(big.sin(), "sum", 0, group)
    return s.tanh() + 1, g * 3, r + s.sum()


def part_compile(gloo):
    """funcol_step compiled with torch.compile(fullgraph=True), backends
    aot_eager and Inductor (its C++ kernels for openreg, the collectives
    called from its wrapper): the eager call's and gloo's results, twice."""
    import shutil

    import torch._inductor.config
    from torch._inductor.utils import run_and_get_code

    from torch_openreg import _inductor as openreg_inductor
    # Inductor's cache of this job only, next to its store file (another
    # one's may hold code of another torch_openreg), shared by its ranks:
    # their kernels are the same code, compiled once under Inductor's file
    # locks. No compile workers, and scalar C++ kernels: Inductor's probe of
    # the host's vector ISAs compiles and loads a library per ISA, 25 s of
    # this part's 40 on the 2-core host.
    cache = sys.argv[1] + ".inductor"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    torch._inductor.config.compile_threads = 1
    torch._inductor.config.cpp.vec_isa_ok = False
    group = dist.group.WORLD
    x, big = rank_data(4, 3, salt=40), rank_data(2 * SIZE, 3, salt=41)
    want = funcol_step(x, big, gloo)  # on CPU over gloo
    eager = funcol_step(x.to(DEV), big.to(DEV), group)
    names = ("all_reduce", "all_gather_tensor", "reduce_scatter_tensor")
    for name, got, ref in zip(names, eager, want):
        close(got, ref, f"eager funcol step: {name} as over gloo")
    for backend in ("aot_eager", "inductor"):
        t0 = time.monotonic()
        torch._dynamo.reset()
        fn = torch.compile(funcol_step, backend=backend, fullgraph=True)
        before = openreg_inductor.host_kernel_count(0)
        if backend == "inductor":
            outs, codes = run_and_get_code(fn, x.to(DEV), big.to(DEV), group)
            code = "\n".join(codes)
            # The collectives are in Inductor's wrapper, its kernels host
            # kernels of the openreg device.
            for op in ("all_reduce_", "all_gather_into_tensor", "reduce_scatter_tensor"):
                check(f"torch.ops._c10d_functional.{op}" in code,
                      f"inductor: _c10d_functional.{op} in the generated code")
            check("with openreg_host_kernel(0): cpp_fused_" in code,
                  "inductor: the generated kernels run as openreg host kernels")
            check(openreg_inductor.host_kernel_count(0) > before, "inductor: host kernels ran")
        else:
            outs = fn(x.to(DEV), big.to(DEV), group)
        for name, got, e, ref in zip(names, outs, eager, want):
            check(got.device == DEV, f"{backend}: {name} result on {got.device}")
            close(got, e, f"{backend}: {name} as eager")
            close(got, ref, f"{backend}: {name} as over gloo")
        # A second call, other data: the compiled code again (a recompile raises).
        y = rank_data(4, 3, salt=42)
        with torch._dynamo.config.patch(error_on_recompile=True):
            again = fn(y.to(DEV), big.to(DEV), group)
        for name, got, ref in zip(names, again, funcol_step(y, big, gloo)):
            close(got, ref, f"{backend}: a second call: {name} as over gloo")
        if RANK == 0:
            print(f"rank 0: torch.compile backend {backend}: compile and 2 calls "
                  f"{time.monotonic() - t0:.1f} s", flush=True)
    torch._dynamo.reset()
    dist.barrier(group=gloo)
    if RANK == 0:
        shutil.rmtree(cache, ignore_errors=True)
    print(f"rank {RANK}: functional collectives under torch.compile (aot_eager, inductor) ok",
          flush=True)


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

PLACEMENTS = (Shard(0), Shard(1), Replicate())


def chunk_local(full, placements, coord, sizes):
    """The local part of ``full`` that torch's placements define at mesh
    coordinate ``coord``: mesh dims left to right, each Shard(d) cuts the part
    so far with torch.chunk along d (uneven: the last ranks get less, or
    nothing when chunk gives fewer pieces than ranks)."""
    t = full
    for pl, c, n in zip(placements, coord, sizes):
        if isinstance(pl, Shard):
            pieces = t.chunk(n, pl.dim)
            t = pieces[c] if c < len(pieces) else t.narrow(pl.dim, 0, 0)
    return t


def to_partial(d, op):
    """Replicate -> Partial(op) of a 1-D DTensor ``d``, as torch's ops do it:
    DTensor.redistribute refuses a Partial target ("for internal use only")."""
    target = DTensorSpec(d.device_mesh, (Partial(op),), tensor_meta=d._spec.tensor_meta)
    local = redistribute_local_tensor(d.to_local(), d._spec, target)
    return DTensor.from_local(local, d.device_mesh, [Partial(op)], run_check=False)


def redistribute_matrix(mesh, cpu_mesh, shape, salt, what):
    """Every source in Shard(0), Shard(1), Replicate(), Partial() and
    Partial("avg") (from_local of per-rank shares; the value their sum, or
    mean) redistributed to every target in Shard(0), Shard(1), Replicate(),
    and Replicate() to Partial() and Partial("avg") (to_partial), on a 1-D
    mesh: the full tensor, and each rank's local part by torch.chunk of the
    CPU reference (for a Partial target, as the same redistribute on a gloo
    CPU mesh)."""
    n, me = mesh.size(0), mesh.get_local_rank(0)
    ranks = mesh.mesh.tolist()
    full = rank_data(*shape, salt=salt, rank=0)  # the same on every rank
    shares = [rank_data(*shape, salt=salt + 1, rank=r) for r in ranks]
    total = sum(shares)
    sources = [(pl, full, lambda m, t, pl=pl: distribute_tensor(t, m, [pl])) for pl in PLACEMENTS]
    for op, value in (("sum", total), ("avg", total / n)):
        sources.append((Partial(op), value,
                        lambda m, t, op=op: DTensor.from_local(shares[me].to(t.device), m,
                                                               [Partial(op)])))
    tag = f"{what} {tuple(shape)}"
    for src, value, make in sources:
        d = make(mesh, full.to(DEV))
        check(d.to_local().device.type == "openreg", f"{tag}: {src} local part on openreg")
        close(d.full_tensor(), value, f"{tag}: {src} full_tensor")
        if not isinstance(src, Partial):
            close(d.to_local(), chunk_local(full, [src], [me], [n]),
                  f"{tag}: distribute_tensor {src} local part")
        for to in PLACEMENTS:
            r = d.redistribute(mesh, [to])
            close(r.full_tensor(), value, f"{tag}: redistribute {src} -> {to} full_tensor")
            close(r.to_local(), chunk_local(value, [to], [me], [n]),
                  f"{tag}: local part after {src} -> {to}")
    for op in ("sum", "avg"):
        r = to_partial(distribute_tensor(full.to(DEV), mesh, [Replicate()]), op)
        ref = to_partial(distribute_tensor(full, cpu_mesh, [Replicate()]), op)
        close(r.full_tensor(), full, f"{tag}: redistribute Replicate -> Partial({op}) full_tensor")
        close(r.to_local(), ref.to_local(),
              f"{tag}: local part after Replicate -> Partial({op}), as on a gloo CPU mesh")


def dtensor_ops(mesh, what):
    """Ops on DTensors of a 1-D mesh: matmul of Shard(0) by Replicate and of
    Shard(1) by Shard(0) (a Partial), a sum, an add, against CPU."""
    n = mesh.size(0)
    full = rank_data(4 * n, 2 * n, salt=7, rank=0)
    other = rank_data(2 * n, 3, salt=8, rank=0)
    a = distribute_tensor(full, mesh, [Shard(0)])
    b = distribute_tensor(other, mesh, [Replicate()])
    close((a @ b).full_tensor(), full @ other, f"{what}: Shard(0) @ Replicate")
    a1 = distribute_tensor(full, mesh, [Shard(1)])
    b0 = distribute_tensor(other, mesh, [Shard(0)])
    close((a1 @ b0).full_tensor(), full @ other, f"{what}: Shard(1) @ Shard(0) (a Partial)",
          tol=1e-4)
    close(a.sum().full_tensor(), full.sum(), f"{what}: sum of a Shard(0)", tol=1e-4)
    close((a + a).full_tensor(), full + full, f"{what}: Shard(0) + Shard(0)")


def dtensor_1d(mesh, cpu_mesh, what):
    n = mesh.size(0)
    redistribute_matrix(mesh, cpu_mesh, (4 * n, 2 * n), 30, what)
    # Uneven: torch.chunk of 2n+1 rows and n-1 columns leaves the last rank
    # nothing (4 ranks: 3, 3, 3, 0 rows; 2 ranks: 1, 0 columns).
    redistribute_matrix(mesh, cpu_mesh, (2 * n + 1, n - 1), 32, what)
    dtensor_ops(mesh, what)


def dtensor_2d(mesh2):
    """On the 2 x 2 mesh, every pair of Shard(0), Shard(1), Replicate() per
    mesh dim, and [Partial, Partial] (from_local), to every pair: the full
    tensor and each rank's local part (nested torch.chunk, mesh dim 0 first)
    of an uneven 7 x 5 tensor."""
    sizes = tuple(mesh2.mesh.shape)
    coord = mesh2.get_coordinate()
    full = rank_data(7, 5, salt=10, rank=0)
    total = sum(rank_data(7, 5, salt=11, rank=r) for r in range(SIZE))
    pairs = [[a, b] for a in PLACEMENTS for b in PLACEMENTS]
    sources = [(pls, full, lambda pls=pls: distribute_tensor(full, mesh2, pls)) for pls in pairs]
    sources.append(([Partial(), Partial()], total,
                    lambda: DTensor.from_local(rank_data(7, 5, salt=11).to(DEV), mesh2,
                                               [Partial(), Partial()])))
    for src, value, make in sources:
        d = make()
        close(d.full_tensor(), value, f"2-D mesh: {src} full_tensor")
        if not isinstance(src[0], Partial):
            close(d.to_local(), chunk_local(full, src, coord, sizes),
                  f"2-D mesh: distribute_tensor {src} local part")
        for to in pairs:
            r = d.redistribute(mesh2, to)
            close(r.full_tensor(), value, f"2-D mesh: redistribute {src} -> {to} full_tensor")
            close(r.to_local(), chunk_local(value, to, coord, sizes),
                  f"2-D mesh: local part after {src} -> {to}")


def part_dtensor(gloo):
    # torch warns at every redistribute of a 2-D mesh that needs two
    # collectives (it could use one over a flattened mesh): not our concern.
    logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)
    mesh = init_device_mesh("openreg", (SIZE,))
    dtensor_1d(mesh, DeviceMesh.from_group(gloo, "cpu"), "1-D mesh")
    if SIZE == 4:
        mesh2 = init_device_mesh("openreg", (2, 2), mesh_dim_names=("dp", "tp"))
        dtensor_2d(mesh2)
        # The tp dim's sub-mesh, and its CPU twin over gloo groups of the same ranks.
        rows = [dist.new_group(r, backend=GLOO, timeout=TIMEOUT) for r in ([0, 1], [2, 3])]
        tp = mesh2["tp"]
        dtensor_1d(tp, DeviceMesh.from_group(rows[RANK // 2], "cpu"), "2-D mesh tp dim")
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


PARTS = {"funcol": part_funcol, "compile": part_compile, "mesh": part_mesh,
         "dtensor": part_dtensor, "tp": part_tp, "fsdp": part_fsdp}


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
