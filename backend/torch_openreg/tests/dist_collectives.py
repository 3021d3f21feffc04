"""Every collective of the occl backend against the same call on gloo/CPU.

Run by mpiexec as one process per rank (dist-collectives-*.mpi):
    dist_collectives.py STORE_FILE [BACKEND]
BACKEND is the default group's: "occl" (the default) or
"cpu:gloo,openreg:occl" (CPU tensors then go to gloo within the same group).
Each rank uses openreg device 0 of its own (OPENREG_DEVICES=1). The same
script makes a gloo group beside the occl one: for every collective, dtype
and reduction (PREMUL_SUM too), the occl result on the device must equal
gloo's on CPU (or, where gloo lacks the call or the dtype, the result
computed here from every rank's input gathered through gloo); then the
coalesced calls torch's coalescing manager makes, and receives from any
source. Then the errors: wrong
device, bad dtypes and reductions, bad ranks and sizes, each a RuntimeError
with a message naming the problem, and the group still works afterwards;
and after destroy_process_group the backend refuses calls.
Prints one line per check group and "dist collectives: N checks passed".
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_openreg

from dist_common import RANK, SIZE, fail

DEV = torch_openreg.device(0)
BACKEND = sys.argv[2] if len(sys.argv) > 2 else "occl"
MIXED = BACKEND != "occl"  # CPU tensors of the default group go to gloo
OPS = {
    "SUM": dist.ReduceOp.SUM,
    "PRODUCT": dist.ReduceOp.PRODUCT,
    "MIN": dist.ReduceOp.MIN,
    "MAX": dist.ReduceOp.MAX,
    "AVG": dist.ReduceOp.AVG,
}
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.int64, torch.bool]
checks = 0


def same(got, want, what):
    global checks
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape:
        fail(f"{what}: got {got.dtype} {tuple(got.shape)}, want {want.dtype} {tuple(want.shape)}")
    if want.is_floating_point():
        # Rounding differs with the order of the additions (AVG divides too).
        tol = {torch.float16: 1e-2, torch.bfloat16: 2e-2}.get(want.dtype, 1e-6)
        ok = torch.allclose(got.double(), want.double(), rtol=tol, atol=tol)
    else:
        ok = torch.equal(got, want)
    if not ok:
        fail(f"{what}: got {got.tolist()[:8]}..., want {want.tolist()[:8]}...")
    checks += 1


def data(dtype, n=11, rank=RANK, salt=0):
    """Rank-dependent values that every dtype holds exactly: 1 to 9, or 0/1."""
    v = (torch.arange(n) * (3 + salt) + 2 * rank + salt) % 9 + 1
    if dtype == torch.bool:
        return (v % 2 == 0)
    return v.to(dtype)


def everyone(t, gloo):
    """Every rank's t (CPU), gathered through gloo in a dtype gloo carries."""
    wide = torch.float64 if t.is_floating_point() else torch.int64
    parts = [torch.empty(t.shape, dtype=wide) for _ in range(SIZE)]
    dist.all_gather(parts, t.to(wide), group=gloo)
    return [p.to(t.dtype) for p in parts]


def reduce_local(parts, op):
    """What a reduction of parts gives, computed here (gloo lacks some)."""
    acc = parts[0].clone()
    if acc.dtype == torch.bool:
        # occl reduces bool as NCCL does: SUM is or, PRODUCT is and.
        for p in parts[1:]:
            acc = {"SUM": acc | p, "MAX": acc | p, "PRODUCT": acc & p, "MIN": acc & p}[op]
        return acc
    wide = acc.double() if acc.is_floating_point() else acc.long()
    for p in parts[1:]:
        q = p.double() if p.is_floating_point() else p.long()
        wide = {"SUM": wide + q, "AVG": wide + q, "PRODUCT": wide * q,
                "MIN": torch.minimum(wide, q), "MAX": torch.maximum(wide, q)}[op]
    if op == "AVG":
        wide = wide / SIZE if acc.is_floating_point() else torch.div(wide, SIZE,
                                                                      rounding_mode="trunc")
    if not acc.is_floating_point():
        # Integer wrap-around, as the device computes it in the narrow type.
        bits = torch.iinfo(acc.dtype).bits
        lo = torch.iinfo(acc.dtype).min
        wide = ((wide - lo) % (1 << bits)) + lo if bits < 64 else wide
    return wide.to(acc.dtype)


# What gloo carries; for the other dtypes (and calls gloo lacks) the
# reference is computed here from every rank's input.
GLOO_DTYPES = {torch.float32, torch.float64, torch.float16, torch.int8, torch.uint8,
               torch.int32, torch.int64}


def gloo_can(dtype, fn):
    """Runs the gloo call fn if gloo carries dtype (the same on every rank)."""
    if dtype not in GLOO_DTYPES:
        return False
    fn()
    return True


def check_reductions(gloo):
    for dtype in DTYPES:
        for name, op in OPS.items():
            if dtype == torch.bool and name == "AVG":
                continue
            x = data(dtype)
            # all_reduce
            d = x.to(DEV)
            dist.all_reduce(d, op=op)
            ref = x.clone()
            if name == "AVG" or not gloo_can(dtype, lambda: dist.all_reduce(ref, op=op, group=gloo)):
                ref = reduce_local(everyone(x, gloo), name)
            same(d, ref, f"all_reduce {name} {dtype}")
            # reduce to the last rank
            root = SIZE - 1
            d = x.to(DEV)
            dist.reduce(d, dst=root, op=op)
            if RANK == root:
                same(d, reduce_local(everyone(x, gloo), name), f"reduce {name} {dtype}")
            else:
                everyone(x, gloo)  # the root's reference needs everyone's input
            # reduce_scatter (list) and reduce_scatter_tensor
            ins = [data(dtype, 5, RANK, salt=r) for r in range(SIZE)]
            out = torch.empty(5, dtype=dtype, device=DEV)
            dist.reduce_scatter(out, [t.to(DEV) for t in ins], op=op)
            parts = [everyone(t, gloo) for t in ins]  # parts[r][s]: rank s's input r
            want = reduce_local(parts[RANK], name)
            same(out, want, f"reduce_scatter {name} {dtype}")
            flat = torch.cat(ins).to(DEV)
            out = torch.empty(5, dtype=dtype, device=DEV)
            dist.reduce_scatter_single(out, flat, op=op)
            same(out, want, f"reduce_scatter_single {name} {dtype}")
        # all_reduce_coalesced: several tensors, one call
        if dtype != torch.bool:
            xs = [data(dtype, n, salt=n) for n in (3, 8, 1)]
            ds = [x.to(DEV) for x in xs]
            dist.all_reduce_coalesced(ds, op=dist.ReduceOp.SUM)
            for x, d in zip(xs, ds):
                same(d, reduce_local(everyone(x, gloo), "SUM"), f"all_reduce_coalesced {dtype}")
    # The bitwise ops (all_reduce only; OCCL gathers, the device reduces),
    # against gloo's, which has them.
    for dtype in (torch.uint8, torch.int32, torch.int64, torch.bool):
        for op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR):
            x = data(dtype, 13, salt=7)
            d = x.to(DEV)
            dist.all_reduce(d, op=op)
            ref = x.clone()
            dist.all_reduce(ref, op=op, group=gloo)
            same(d, ref, f"all_reduce {op} {dtype}")
    print(f"rank {RANK}: reductions ok", flush=True)


def carried(dtype):
    """The dtype gloo moves dtype's values in: itself, or int64 (1 to 9 survive)."""
    return dtype if dtype in GLOO_DTYPES else torch.int64


def check_movement(gloo):
    for dtype in DTYPES:
        c = carried(dtype)
        x = data(dtype, 7)
        # broadcast from every root
        for root in range(SIZE):
            d = x.to(DEV)
            dist.broadcast(d, src=root)
            ref = x.to(c)
            dist.broadcast(ref, src=root, group=gloo)
            same(d, ref.to(dtype), f"broadcast from {root} {dtype}")
        # all_gather (list) and all_gather_into_tensor
        outs = [torch.empty(7, dtype=dtype, device=DEV) for _ in range(SIZE)]
        dist.all_gather(outs, x.to(DEV))
        refs = [torch.empty(7, dtype=c) for _ in range(SIZE)]
        dist.all_gather(refs, x.to(c), group=gloo)
        refs = [r.to(dtype) for r in refs]
        for r in range(SIZE):
            same(outs[r], refs[r], f"all_gather part {r} {dtype}")
        flat = torch.empty(7 * SIZE, dtype=dtype, device=DEV)
        dist.all_gather_single(flat, x.to(DEV))
        same(flat, torch.cat(refs), f"all_gather_single {dtype}")
        # gather to rank 0, scatter from the last rank
        glist = [torch.empty(7, dtype=dtype, device=DEV) for _ in range(SIZE)] if RANK == 0 else None
        dist.gather(x.to(DEV), glist, dst=0)
        grefs = [torch.empty(7, dtype=c) for _ in range(SIZE)] if RANK == 0 else None
        dist.gather(x.to(c), grefs, dst=0, group=gloo)
        if RANK == 0:
            for r in range(SIZE):
                same(glist[r], grefs[r].to(dtype), f"gather part {r} {dtype}")
        src = SIZE - 1
        pieces = [data(dtype, 6, salt=r) for r in range(SIZE)]
        out = torch.empty(6, dtype=dtype, device=DEV)
        dist.scatter(out, [p.to(DEV) for p in pieces] if RANK == src else None, src=src)
        ref = torch.empty(6, dtype=c)
        dist.scatter(ref, [p.to(c) for p in pieces] if RANK == src else None, src=src, group=gloo)
        same(out, ref.to(dtype), f"scatter from {src} {dtype}")
        # all_to_all_single, equal splits, then uneven splits given by sizes
        a = data(dtype, 4 * SIZE)
        d_out = torch.empty(4 * SIZE, dtype=dtype, device=DEV)
        dist.all_to_all_single(d_out, a.to(DEV))
        ref = torch.empty(4 * SIZE, dtype=c)
        dist.all_to_all_single(ref, a.to(c), group=gloo)
        same(d_out, ref.to(dtype), f"all_to_all_single {dtype}")
        # rank s sends (s + r) % 3 rows of 2 to rank r (some none at all)
        send_rows = [(RANK + r) % 3 for r in range(SIZE)]
        recv_rows = [(s + RANK) % 3 for s in range(SIZE)]
        a = data(dtype, 2 * sum(send_rows)).reshape(-1, 2)
        d_out = torch.empty(sum(recv_rows), 2, dtype=dtype, device=DEV)
        dist.all_to_all_single(d_out, a.to(DEV), recv_rows, send_rows)
        ref = torch.empty(sum(recv_rows), 2, dtype=c)
        dist.all_to_all_single(ref, a.to(c), recv_rows, send_rows, group=gloo)
        same(d_out, ref.to(dtype), f"all_to_all_single with split sizes {dtype}")
        # all_to_all with tensor lists: rank i sends rank j 1 + (i + 2j) % 3
        # elements (gloo has no such call; the values are known everywhere)
        ins = [data(dtype, 1 + (RANK + 2 * j) % 3, salt=j).to(DEV) for j in range(SIZE)]
        outs = [torch.empty(1 + (j + 2 * RANK) % 3, dtype=dtype, device=DEV) for j in range(SIZE)]
        dist.all_to_all(outs, ins)
        for j in range(SIZE):
            same(outs[j], data(dtype, 1 + (j + 2 * RANK) % 3, rank=j, salt=RANK),
                 f"all_to_all part from {j} {dtype}")
        # send and recv around a ring
        if SIZE > 1:
            nxt, prv = (RANK + 1) % SIZE, (RANK - 1) % SIZE
            got = torch.empty(7, dtype=dtype, device=DEV)
            if RANK % 2 == 0:
                dist.send(x.to(DEV), dst=nxt)
                dist.recv(got, src=prv)
            else:
                dist.recv(got, src=prv)
                dist.send(x.to(DEV), dst=nxt)
            same(got, everyone(x, gloo)[prv], f"send/recv {dtype}")
    print(f"rank {RANK}: broadcast, gathers, scatter, all-to-all, send/recv ok", flush=True)


def check_any_source(gloo):
    """recv without src: rank 0 takes every other rank's message as it comes,
    through dist.recv (which returns the sender) and dist.irecv (the work's
    source rank); its source rank is asked for too early, then in time."""
    if SIZE < 2:
        return
    for dtype in (torch.float32, torch.int64):
        if RANK == 0:
            got = {}
            for _ in range(SIZE - 1):
                t = torch.empty(5, dtype=dtype, device=DEV)
                src = dist.recv(t)
                if src in got or not 0 < src < SIZE:
                    fail(f"recv from any source returned {src} (had {sorted(got)})")
                got[src] = t
            for src, t in got.items():
                same(t, data(dtype, 5, rank=src), f"recv from any source, {dtype}, from {src}")
        else:
            dist.send(data(dtype, 5).to(DEV), dst=0)
        # A sender done with this round would otherwise send the next one's
        # (a send across nodes completes as soon as MPI has buffered it)
        # while rank 0 still takes this round's, and either may come first.
        dist.barrier(group=gloo)
    # irecv: nobody sends before the gloo barrier, so the receive is pending.
    if RANK == 0:
        t = torch.empty(3, device=DEV)
        work = dist.irecv(t)
        expect_error(work._source_rank, "occl recvAnysource",
                     "known once the receive has completed: wait() for it first")
        dist.barrier(group=gloo)
        work.wait()
        src = work._source_rank()
        if src != SIZE - 1:
            fail(f"irecv from any source: source rank {src}, only rank {SIZE - 1} sent")
        same(t, data(torch.float32, 3, rank=src), "irecv from any source")
    else:
        dist.barrier(group=gloo)
        if RANK == SIZE - 1:
            dist.send(data(torch.float32, 3).to(DEV), dst=0)
    print(f"rank {RANK}: recv from any source ok", flush=True)


FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def premul_local(parts, factor):
    """Every rank's part times factor, summed (the factors are exact in every dtype)."""
    return sum(p.double() * factor for p in parts).to(parts[0].dtype)


def check_premul(gloo):
    """ReduceOp.PREMUL_SUM: a float factor, one on the device, one on the CPU."""
    for dtype in FLOATS:
        for how, factor in (("float", 0.5), ("device tensor", 0.25), ("CPU tensor", 2.0)):
            def op():
                if how == "float":
                    return dist._make_nccl_premul_sum(factor)
                dev = DEV if how == "device tensor" else "cpu"
                return dist._make_nccl_premul_sum(torch.tensor(factor, device=dev))
            x = data(dtype, 9)
            parts = everyone(x, gloo)
            d = x.to(DEV)
            dist.all_reduce(d, op=op())
            same(d, premul_local(parts, factor), f"all_reduce PREMUL_SUM ({how}) {dtype}")
            root = SIZE - 1
            d = x.to(DEV)
            dist.reduce(d, dst=root, op=op())
            if RANK == root:
                same(d, premul_local(parts, factor), f"reduce PREMUL_SUM ({how}) {dtype}")
            ins = [data(dtype, 4, RANK, salt=r) for r in range(SIZE)]
            out = torch.empty(4, dtype=dtype, device=DEV)
            dist.reduce_scatter_single(out, torch.cat(ins).to(DEV), op=op())
            parts = [everyone(t, gloo) for t in ins]  # parts[r][s]: rank s's input r
            same(out, premul_local(parts[RANK], factor),
                 f"reduce_scatter_single PREMUL_SUM ({how}) {dtype}")
    print(f"rank {RANK}: PREMUL_SUM ok", flush=True)


def check_coalesced(gloo):
    """What torch's coalescing manager makes of several calls of one kind:
    allgather_into_tensor_coalesced, reduce_scatter_tensor_coalesced and
    allreduce_coalesced, each launched as one OCCL group."""
    xs = [data(torch.float32, 3), data(torch.int32, 5, salt=1), data(torch.bfloat16, 1, salt=2)]
    outs = [torch.empty(x.numel() * SIZE, dtype=x.dtype, device=DEV) for x in xs]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, x in zip(outs, xs):
            dist.all_gather_single(o, x.to(DEV))
    cm.wait()
    for i, (o, x) in enumerate(zip(outs, xs)):
        same(o, torch.cat(everyone(x, gloo)), f"coalesced all_gather_single {i} {x.dtype}")
    for name, op in (("SUM", dist.ReduceOp.SUM), ("MAX", dist.ReduceOp.MAX)):
        ins = [[data(dt, n, RANK, salt=r + n) for r in range(SIZE)]
               for dt, n in ((torch.float32, 4), (torch.int64, 2), (torch.float16, 7))]
        outs = [torch.empty(parts[0].numel(), dtype=parts[0].dtype, device=DEV) for parts in ins]
        with dist._coalescing_manager(async_ops=True) as cm:
            for o, parts in zip(outs, ins):
                dist.reduce_scatter_single(o, torch.cat(parts).to(DEV), op=op)
        cm.wait()
        for i, (o, parts) in enumerate(zip(outs, ins)):
            want = reduce_local([everyone(t, gloo) for t in parts][RANK], name)
            same(o, want, f"coalesced reduce_scatter_single {name} {i} {o.dtype}")
    xs = [data(torch.float32, n, salt=n) for n in (2, 6)]
    ds = [x.to(DEV) for x in xs]
    with dist._coalescing_manager(async_ops=True) as cm:
        for d in ds:
            dist.all_reduce(d, op=dist._make_nccl_premul_sum(0.5))
    cm.wait()
    for i, (d, x) in enumerate(zip(ds, xs)):
        same(d, premul_local(everyone(x, gloo), 0.5), f"coalesced all_reduce PREMUL_SUM {i}")
    print(f"rank {RANK}: coalesced calls ok", flush=True)


def check_works(gloo):
    """Asynchronous calls: is_completed polls, wait blocks, get_future completes."""
    d = data(torch.float32, 1 << 16).to(DEV)
    work = dist.all_reduce(d, async_op=True)
    work.wait()
    if not work.is_completed() or not work.is_success():
        fail("a waited work is not completed and successful")
    x = data(torch.float32, 1 << 16)
    same(d, reduce_local(everyone(x, gloo), "SUM"), "async all_reduce")
    d = x.to(DEV)
    work = dist.all_reduce(d, async_op=True)
    fut = work.get_future()
    result = fut.wait()
    same(result[0], reduce_local(everyone(x, gloo), "SUM"), "future of an all_reduce")
    if not work.is_completed():
        fail("the work of a completed future is not completed")
    # is_completed polls: loop until done (it must become true without wait)
    d = x.to(DEV)
    work = dist.all_reduce(d, async_op=True)
    deadline = time.monotonic() + 30
    while not work.is_completed():
        if time.monotonic() > deadline:
            fail("is_completed never became true")
        time.sleep(0.001)
    same(d, reduce_local(everyone(x, gloo), "SUM"), "polled all_reduce")
    dist.barrier()
    checks_done = checks
    print(f"rank {RANK}: works ok ({checks_done} checks so far)", flush=True)


def check_subgroup(gloo):
    """A second occl group of ranks 0 and the last, beside the default one."""
    members = sorted({0, SIZE - 1})
    sub = dist.new_group(ranks=members, backend="occl")
    sub_gloo = dist.new_group(ranks=members, backend="gloo")
    x = data(torch.float32, 9, salt=5)
    if RANK in members:
        d = x.to(DEV)
        dist.all_reduce(d, group=sub)
        ref = x.clone()
        dist.all_reduce(ref, group=sub_gloo)
        same(d, ref, "all_reduce on an occl subgroup")
        d = x.to(DEV)
        dist.broadcast(d, src=SIZE - 1, group=sub)  # a global rank, as torch takes it
        ref = x.clone()
        dist.broadcast(ref, src=SIZE - 1, group=sub_gloo)
        same(d, ref, "broadcast on an occl subgroup")
    d = x.to(DEV)
    dist.all_reduce(d)  # the default group is unaffected
    same(d, reduce_local(everyone(x, gloo), "SUM"), "all_reduce beside a subgroup")
    print(f"rank {RANK}: subgroup ok", flush=True)


def expect_error(fn, *needles):
    global checks
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        text = str(e)
        for n in needles:
            if n not in text:
                fail(f"error message {text!r} lacks {n!r}")
        checks += 1
        return
    fail(f"no error; expected one naming {needles}")


def occl_backend(group=None):
    """The occl Backend of a group (torch's ProcessGroup holds it for openreg)."""
    b = (group or dist.group.WORLD)._get_backend(torch.device("openreg"))
    if not isinstance(b, torch_openreg.distributed.ProcessGroupOCCL):
        fail(f"the group's openreg backend is {type(b).__name__}")
    return b


def check_errors(gloo):
    cpu = data(torch.float32)
    if MIXED:
        # The same group carries CPU tensors over gloo.
        c = cpu.clone()
        dist.all_reduce(c)
        same(c, reduce_local(everyone(cpu, gloo), "SUM"), f"CPU all_reduce on {BACKEND}")
    else:
        # occl serves openreg tensors only: torch finds no backend for CPU.
        expect_error(lambda: dist.all_reduce(cpu), "No backend type associated with device type cpu")
    # The backend itself, handed a CPU tensor, says what is wrong.
    expect_error(lambda: occl_backend().allreduce([cpu]), "occl allreduce", "is on device 'cpu'",
                 "openreg devices")
    # torch.distributed hands complex tensors over as real pairs
    # (view_as_real); handed one itself, the backend refuses it.
    expect_error(lambda: occl_backend().broadcast([torch.zeros(3, dtype=torch.complex64,
                                                               device=DEV)]),
                 "occl broadcast", "torch.complex64 is not supported")
    expect_error(lambda: dist.broadcast(torch.zeros(3, dtype=torch.int16, device=DEV), 0),
                 "occl broadcast", "torch.int16 is not supported")
    expect_error(lambda: dist.all_reduce(torch.zeros(3, dtype=torch.int16, device=DEV)),
                 "torch.int16 is not supported")
    expect_error(lambda: dist.all_reduce(torch.zeros(3, device=DEV), op=dist.ReduceOp.BAND),
                 "ReduceOp.BAND takes integer or bool tensors, not torch.float32")
    expect_error(lambda: dist.reduce(torch.zeros(3, dtype=torch.int32, device=DEV), dst=0,
                                     op=dist.ReduceOp.BOR), "ReduceOp.BOR is not supported")
    expect_error(lambda: dist.all_reduce(torch.zeros(3, dtype=torch.bool, device=DEV),
                                         op=dist.ReduceOp.AVG), "AVG of torch.bool")
    if SIZE > 1:  # around the ring, even ranks sending first (as in check_movement)
        t = torch.zeros(3, device=DEV)
        if RANK % 2:
            dist.recv(t, src=(RANK - 1) % SIZE)
        work = dist.isend(t, dst=(RANK + 1) % SIZE)
        expect_error(work._source_rank,
                     "occl send: only a receive from any source has a source rank")
        work.wait()
        if RANK % 2 == 0:
            dist.recv(t, src=(RANK - 1) % SIZE)
    # A rank outside the group: OCCL's own check, with its message.
    expect_error(lambda: dist.broadcast(torch.zeros(3, device=DEV), src=SIZE),
                 "occl broadcast failed", "invalid argument", f"root {SIZE} is not in [0, {SIZE})")
    expect_error(lambda: dist.reduce(torch.zeros(3, device=DEV), dst=-1 - SIZE),
                 "occl reduce failed", "is not in [0,")
    expect_error(lambda: dist.send(torch.zeros(3, device=DEV), dst=SIZE + 3).wait(),
                 "occl send failed", f"peer {SIZE + 3} is not in [0, {SIZE})")
    expect_error(lambda: dist.all_gather([torch.zeros(3, device=DEV)] * (SIZE + 1),
                                         torch.zeros(3, device=DEV)),
                 f"the output list has {SIZE + 1} tensors, the group {SIZE} ranks")
    expect_error(lambda: dist.all_gather_single(torch.zeros(3 * SIZE + 1, device=DEV),
                                                torch.zeros(3, device=DEV)),
                 "occl _allgather_base", "elements")
    expect_error(lambda: dist.all_to_all_single(torch.zeros(SIZE, device=DEV),
                                                torch.zeros(SIZE, device=DEV),
                                                [1] * SIZE, [2] * SIZE),
                 "split sizes add up to")
    expect_error(lambda: dist.all_gather_single(
        torch.zeros(3 * SIZE, dtype=torch.float64, device=DEV), torch.zeros(3, device=DEV)),
        "the output is torch.float64, the input torch.float32")
    expect_error(lambda: dist.all_reduce(torch.zeros(4, 4, device=DEV).t()), "not contiguous")
    expect_error(lambda: dist.all_reduce(torch.zeros(3, dtype=torch.int32, device=DEV),
                                         op=dist._make_nccl_premul_sum(2.0)),
                 "occl allreduce", "PREMUL_SUM takes floating-point tensors", "torch.int32")
    def bad_coalesced():
        with dist._coalescing_manager(async_ops=True) as cm:
            dist.all_gather_single(torch.zeros(2 * SIZE, device=DEV), torch.zeros(2, device=DEV))
            dist.all_gather_single(torch.zeros(2 * SIZE, device=DEV), torch.zeros(3, device=DEV))
        cm.wait()
    expect_error(bad_coalesced, "occl allgather_into_tensor_coalesced", "output 1 has")
    # The group still works after all those refusals.
    x = data(torch.float32)
    d = x.to(DEV)
    dist.all_reduce(d)
    same(d, reduce_local(everyone(x, gloo), "SUM"), "all_reduce after the errors")
    print(f"rank {RANK}: errors ok", flush=True)


def check_mismatch(gloo):
    """Calls that differ across ranks fail on every rank, each naming both sides
    (OCCL's fingerprints): rank 0 all-reduces while the others broadcast, then
    float32 against int32. Each on a group of its own, which stays failed."""
    if SIZE < 2:
        return
    f32 = "rank 0 AllReduce float32 sum count 8 #1"
    cases = [
        (lambda g: dist.all_reduce(torch.ones(8, device=DEV), group=g) if RANK == 0 else
         dist.broadcast(torch.ones(8, device=DEV), src=0, group=g),
         ["occl broadcast failed" if RANK else "occl allreduce failed", "mismatched calls", f32,
          "Broadcast float32 root 0 count 8 #1", "unusable from now on"]),
        (lambda g: dist.all_reduce(torch.ones(8, device=DEV,
                                              dtype=torch.float32 if RANK == 0 else torch.int32),
                                   group=g),
         ["mismatched calls", f32, "AllReduce int32 sum count 8 #1"]),
    ]
    for call, needles in cases:
        g = dist.new_group(backend="occl")
        expect_error(lambda: call(g), *needles)
        try:  # the failed call's stream reports it once more, at its next synchronization
            torch.openreg.synchronize()
        except RuntimeError as e:
            if "orErrorUnknown" not in str(e):
                raise
        dist.destroy_process_group(g)
    x = data(torch.float32)
    d = x.to(DEV)
    dist.all_reduce(d)
    same(d, reduce_local(everyone(x, gloo), "SUM"), "all_reduce after mismatched groups")
    print(f"rank {RANK}: mismatch ok", flush=True)


def main():
    store = sys.argv[1]
    dist.init_process_group(BACKEND, init_method="file://" + store, rank=RANK, world_size=SIZE,
                            timeout=datetime.timedelta(seconds=120))
    if dist.get_backend() != BACKEND:
        fail(f"backend is {dist.get_backend()}, not {BACKEND}")
    gloo = dist.new_group(backend="gloo")
    check_reductions(gloo)
    check_premul(gloo)
    check_movement(gloo)
    check_any_source(gloo)
    check_coalesced(gloo)
    check_works(gloo)
    check_subgroup(gloo)
    check_errors(gloo)
    check_mismatch(gloo)
    dist.barrier()
    occl = occl_backend()
    dist.destroy_process_group()
    # destroy_process_group shut the backend down: it refuses further calls.
    expect_error(lambda: occl.allreduce([torch.zeros(3, device=DEV)]), "occl allreduce",
                 "the process group is shut down")
    print(f"rank {RANK}: dist collectives: {checks} checks passed", flush=True)
    if RANK == 0 and os.path.exists(store):
        os.unlink(store)


if __name__ == "__main__":
    main()
