"""Groups of the occl backend: eager init, new_group and split_group, the
coalescing manager with a device, sequence numbers, the monitored barrier.

Run by mpiexec as one process per rank (dist-groups-*.mpi):
    dist_groups.py STORE_FILE
Each rank uses openreg device 0 of its own (OPENREG_DEVICES=1).
init_process_group("occl", device_id=...) binds the default group to the
device and makes its communicator at once. Every group made from it
(new_group, split_group into halves and singletons, split_group of the
whole) is checked against a gloo group of the same ranks on CPU. Then the
coalescing manager with a device (torch calls startCoalescing/endCoalescing:
the calls inside are launched as one OCCL group), batch_isend_irecv (which
coalesces), the sequence numbers and the monitored barrier, whose timeout
names the rank that did not come.
Prints one line per check group and "dist groups: N checks passed".
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_openreg

from dist_common import RANK, SIZE, fail

DEV = torch.device("openreg", 0)
# The reference groups for CPU tensors. With the default group bound to a
# device, torch gives every new group that device (new_group(backend="gloo")
# fails: "No backend type associated with device type openreg").
GLOO = "cpu:gloo,openreg:occl"
TIMEOUT = datetime.timedelta(seconds=60)
checks = 0


def same(got, want, what):
    global checks
    got = got.cpu()
    if got.dtype != want.dtype or got.shape != want.shape or not torch.allclose(got, want):
        fail(f"{what}: got {got.tolist()}, want {want.tolist()}")
    checks += 1


def check(cond, what):
    global checks
    if not cond:
        fail(what)
    checks += 1


def expect_error(f, *parts):
    global checks
    try:
        f()
    except (RuntimeError, ValueError) as e:
        for p in parts:
            if p not in str(e):
                fail(f"the error does not say {p!r}: {e}")
        checks += 1
        return
    fail(f"no error (expected one saying {parts})")


def occl_of(group):
    b = group._get_backend(DEV)
    if not isinstance(b, torch_openreg.distributed.ProcessGroupOCCL):
        fail(f"the group's openreg backend is {type(b).__name__}")
    return b


def data(n=7, salt=0):
    return (torch.arange(n, dtype=torch.float32) * (salt + 1) + 10 * RANK + salt) % 13


def compare(group, gloo, what):
    """all_reduce, all_gather_into_tensor and broadcast on group (openreg)
    against gloo (CPU), the two groups of the same ranks."""
    n = dist.get_world_size(group)
    x = data(5, salt=n)
    d = x.to(DEV)
    dist.all_reduce(d, group=group)
    c = x.clone()
    dist.all_reduce(c, group=gloo)
    same(d, c, f"{what}: all_reduce")
    out = torch.empty(5 * n, device=DEV)
    dist.all_gather_into_tensor(out, x.to(DEV), group=group)
    parts = [torch.empty(5) for _ in range(n)]
    dist.all_gather(parts, x, group=gloo)
    same(out, torch.cat(parts), f"{what}: all_gather_into_tensor")
    src = dist.get_global_rank(group, n - 1)
    d = x.to(DEV)
    dist.broadcast(d, src, group=group)
    c = x.clone()
    dist.broadcast(c, src, group=gloo)
    same(d, c, f"{what}: broadcast from rank {src}")


def check_eager():
    pg = dist.group.WORLD
    check(pg.bound_device_id == DEV, f"bound_device_id is {pg.bound_device_id}")
    b = occl_of(pg)
    check(b.supports_splitting and b.supports_coalescing, "occl supports splitting and coalescing")
    print(f"rank {RANK}: eager init on {DEV} ok", flush=True)


def check_new_group(gloo_world):
    # Every rank, then the first half only (the others get NON_GROUP_MEMBER).
    compare(dist.new_group(list(range(SIZE)), timeout=TIMEOUT), gloo_world, "new_group(all)")
    half = list(range(max(1, SIZE // 2)))
    g = dist.new_group(half, timeout=TIMEOUT)
    gg = dist.new_group(half, backend=GLOO, timeout=TIMEOUT)
    if RANK in half:
        compare(g, gg, f"new_group({half})")
        check(occl_of(g).size() == len(half), "new_group size")
    else:
        check(g == dist.GroupMember.NON_GROUP_MEMBER, "a non-member gets NON_GROUP_MEMBER")
    # use_local_synchronization: nothing is asked of the ranks outside.
    g = dist.new_group(half, timeout=TIMEOUT, use_local_synchronization=True)
    if RANK in half:
        compare(g, gg, f"new_group({half}, use_local_synchronization=True)")
    print(f"rank {RANK}: new_group on a bound default group ok", flush=True)


def check_split(gloo_world):
    # Halves (by parity), singletons, and the whole group.
    halves = [list(range(0, SIZE, 2)), list(range(1, SIZE, 2))]
    halves = [h for h in halves if h]
    layouts = [("halves", halves), ("singletons", [[r] for r in range(SIZE)]),
               ("whole", [list(range(SIZE))])]
    for name, layout in layouts:
        glooes = [dist.new_group(r, backend=GLOO, timeout=TIMEOUT) for r in layout]
        g = dist.split_group(split_ranks=layout, timeout=TIMEOUT)
        mine = [i for i, r in enumerate(layout) if RANK in r][0]
        check(g is not None, f"split_group {name}: no group for rank {RANK}")
        b = occl_of(g)
        check(b.size() == len(layout[mine]) and b.rank() == layout[mine].index(RANK),
              f"split_group {name}: rank {b.rank()} of {b.size()}")
        check(b._get_sequence_number_for_group() == 0, "a split group starts at sequence 0")
        compare(g, glooes[mine], f"split_group {name} {layout[mine]}")
    # A split of a split: the halves' halves (singletons) from the halves.
    if SIZE >= 2:
        parent = dist.split_group(split_ranks=halves, timeout=TIMEOUT)
        mine = [r for r in halves if RANK in r][0]
        sub = dist.split_group(parent_pg=parent, split_ranks=[[i] for i in range(len(mine))], timeout=TIMEOUT)
        check(sub is not None and dist.get_world_size(sub) == 1, "split of a split")
        d = data(3).to(DEV)
        dist.all_reduce(d, group=sub)
        same(d, data(3), "all_reduce on a singleton split of a split")
    # A rank outside every group gets None (when the layout leaves one out).
    if SIZE >= 2:
        g = dist.split_group(split_ranks=[[0]], timeout=TIMEOUT)
        check((g is None) == (RANK != 0), "split_group: ranks outside every group get None")
        if g is not None:
            d = data(3).to(DEV)
            dist.all_reduce(d, group=g)
            same(d, data(3), "all_reduce on [[0]]")
    print(f"rank {RANK}: split_group (occlCommSplit) ok", flush=True)


def check_coalescing(gloo):
    pg = dist.group.WORLD
    # With a device: torch calls startCoalescing/endCoalescing around direct
    # calls (broadcast, all_gather's list form, which copies out at the end).
    a, b = data(4, 1).to(DEV), data(6, 2).to(DEV)
    outs = [torch.empty(3, device=DEV) for _ in range(SIZE)]
    # The calls inside return no work (None, as NCCL's): the manager's is the one.
    with dist._coalescing_manager(device=DEV, async_ops=True) as cm:
        wa = dist.broadcast(a, 0, async_op=True)
        dist.broadcast(b, SIZE - 1)  # synchronous: does not wait inside
        dist.all_gather(outs, data(3, 3).to(DEV))
        check(wa is None, "a coalesced call returns no work")
    cm.wait()
    check(all(w.is_completed() for w in cm.works), "the coalescing's work")
    ca, cb = data(4, 1), data(6, 2)
    dist.broadcast(ca, 0, group=gloo)
    dist.broadcast(cb, SIZE - 1, group=gloo)
    cparts = [torch.empty(3) for _ in range(SIZE)]
    dist.all_gather(cparts, data(3, 3), group=gloo)
    same(a, ca, "coalesced broadcast from 0")
    same(b, cb, f"coalesced broadcast from {SIZE - 1}")
    for r in range(SIZE):
        same(outs[r], cparts[r], f"coalesced all_gather part {r}")
    # The fast path inside a device coalescing: all_reduce calls are captured
    # and made as one allreduce_coalesced, itself within the group; sync mode.
    xs = [data(n, n) for n in (2, 5, 9)]
    ds = [x.to(DEV) for x in xs]
    with dist._coalescing_manager(device=DEV):
        for d in ds:
            dist.all_reduce(d)
    for i, (d, x) in enumerate(zip(ds, xs)):
        c = x.clone()
        dist.all_reduce(c, group=gloo)
        same(d, c, f"coalesced all_reduce {i} (device, sync)")
    # batch_isend_irecv coalesces (supports_coalescing): a ring.
    send = data(8, 5).to(DEV)
    recv = torch.empty(8, device=DEV)
    ops = [dist.P2POp(dist.isend, send, (RANK + 1) % SIZE),
           dist.P2POp(dist.irecv, recv, (RANK - 1) % SIZE)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    prev = (RANK - 1) % SIZE
    want = (torch.arange(8, dtype=torch.float32) * 6 + 10 * prev + 5) % 13
    same(recv, want, "batch_isend_irecv ring")
    # An empty coalescing gives a completed work.
    with dist._coalescing_manager(device=DEV, async_ops=True) as cm:
        pass
    cm.wait()
    # The backend's own checks.
    occl = occl_of(pg)
    expect_error(lambda: pg._end_coalescing(DEV), "occl endCoalescing", "not coalescing")
    pg._start_coalescing(DEV)
    expect_error(lambda: pg._start_coalescing(DEV), "occl startCoalescing", "does not nest")
    pg._end_coalescing(DEV).wait()
    # A call that fails its checks inside the manager leaves the coalescing
    # open; _end_coalescing launches what it holds.
    c = data(4, 7).to(DEV)
    bad = torch.zeros(4, 2, device=DEV).t()  # not contiguous
    try:
        with dist._coalescing_manager(device=DEV):
            dist.broadcast(c, 0)
            dist.broadcast(bad, 0)
        fail("a non-contiguous broadcast inside a coalescing succeeded")
    except RuntimeError as e:
        check("not contiguous" in str(e), f"the error: {e}")
    dist.distributed_c10d._world.pg_coalesce_state.pop(pg, None)  # torch's side, left open too
    pg._end_coalescing(DEV).wait()
    same(c, data(4, 7).clone().fill_(0) + (torch.arange(4, dtype=torch.float32) * 8 + 7) % 13,
         "the coalesced broadcast before the failed call, launched by _end_coalescing")
    del occl
    print(f"rank {RANK}: coalescing (startCoalescing/endCoalescing, batch_isend_irecv) ok",
          flush=True)


def check_sequence(gloo):
    occl = occl_of(dist.group.WORLD)
    occl._set_sequence_number_for_group()
    check(occl._get_sequence_number_for_group() == 0, "set starts the sequence at 0")
    d = data(3).to(DEV)
    dist.all_reduce(d)
    dist.broadcast(d, 0)
    dist.barrier()
    with dist._coalescing_manager(device=DEV):
        dist.broadcast(d, 0)
        dist.broadcast(d, 0)
    seq = occl._get_sequence_number_for_group()
    check(seq == 5, f"sequence {seq} after 5 calls")
    everyone = [None] * SIZE
    dist.all_gather_object(everyone, seq, group=gloo)
    check(len(set(everyone)) == 1, f"the ranks' sequence numbers differ: {everyone}")
    print(f"rank {RANK}: sequence numbers ok", flush=True)


def check_monitored_barrier(gloo):
    occl = occl_of(dist.group.WORLD)
    for _ in range(2):
        occl.monitored_barrier(datetime.timedelta(seconds=30))
    check(True, "monitored barriers pass")
    if SIZE < 2:
        return
    # The last rank stays away: rank 0 names it within the timeout.
    late = SIZE - 1
    if RANK == 0:
        start = time.monotonic()
        expect_error(lambda: occl.monitored_barrier(datetime.timedelta(seconds=1),
                                                    wait_all_ranks=True),
                     "occl monitored_barrier", f"rank {late} failed to pass")
        took = time.monotonic() - start
        check(took < 10, f"the monitored barrier's timeout took {took:.1f} s")
    elif RANK != late:
        # The others are released by nobody: they time out too.
        expect_error(lambda: occl.monitored_barrier(datetime.timedelta(seconds=2)),
                     "occl monitored_barrier", "not released by rank 0")
    dist.barrier(group=gloo)
    print(f"rank {RANK}: monitored barrier ok", flush=True)


def main():
    store = sys.argv[1]
    start = time.monotonic()
    dist.init_process_group("occl", init_method="file://" + store, rank=RANK, world_size=SIZE,
                            timeout=TIMEOUT, device_id=DEV)
    gloo = dist.new_group(backend=GLOO, timeout=TIMEOUT)
    check_eager()
    check_new_group(gloo)
    check_split(gloo)
    check_coalescing(gloo)
    check_sequence(gloo)
    check_monitored_barrier(gloo)
    dist.destroy_process_group()
    print(f"rank {RANK}: dist groups: {checks} checks passed in {time.monotonic() - start:.1f} s",
          flush=True)
    if RANK == 0 and os.path.exists(store):
        os.unlink(store)


if __name__ == "__main__":
    main()
