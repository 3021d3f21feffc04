"""Openreg tensors shared between processes with torch.multiprocessing: the
same memory through the runtime's IPC handles, not a copy.

One spawned child serves every test (starting a Python with torch takes
seconds): it gets commands and tensors on one queue and answers on another.
"""
import pickle

import pytest
import torch
import torch.multiprocessing as mp
from multiprocessing.reduction import ForkingPickler

import torch_openreg
from torch_openreg import _C

TIMEOUT = 60


def _child(commands, answers):
    """The child's loop: (name, payload) commands until None."""
    import torch_openreg  # noqa: F401  (the rebuild functions live there)

    while True:
        try:
            msg = commands.get(timeout=TIMEOUT)
        except Exception as e:  # the tensor could not be rebuilt here
            answers.put(("error", type(e).__name__, str(e)))
            continue
        if msg is None:
            return
        name, payload = msg
        try:
            if name == "add_one":  # in place, seen by the parent
                payload.add_(1)
                torch_openreg.synchronize(payload.device)
                answers.put(("ok", None))
            elif name == "read":  # a copy back on the CPU, as a list
                answers.put(("ok", payload.cpu().tolist()))
            elif name == "fill":
                t, value = payload
                t.fill_(value)
                torch_openreg.synchronize(t.device)
                answers.put(("ok", (str(t.dtype), t.device.index, t.is_contiguous())))
            elif name == "loads":  # bytes pickled by the parent
                t = ForkingPickler.loads(payload)
                answers.put(("ok", t.cpu().tolist()))
            elif name == "open":  # a hand-made (handle, offset, size, device)
                handle, off, nbytes, device = payload
                t = _C._ipc_open(handle, off, nbytes, device, torch.uint8, [nbytes], [1], 0)
                answers.put(("ok", t.cpu().tolist()))
            elif name == "make":  # a tensor of the child's own, sent to the parent
                answers.put(("ok", torch.arange(4.0, device="openreg")))
            elif name == "storage":
                payload.fill_(7)
                torch_openreg.synchronize(0)
                answers.put(("ok", payload.nbytes()))
            else:
                answers.put(("error", "KeyError", name))
        except Exception as e:
            answers.put(("error", type(e).__name__, str(e)))


@pytest.fixture(scope="module")
def child():
    ctx = mp.get_context("spawn")
    commands, answers = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_child, args=(commands, answers), daemon=True)
    p.start()

    def ask(name, payload=None):
        commands.put((name, payload))
        return answers.get(timeout=TIMEOUT)

    ask.answers = answers
    ask.commands = commands
    yield ask
    commands.put(None)
    p.join(TIMEOUT)
    if p.is_alive():
        p.kill()
    assert p.exitcode == 0


def test_child_writes_parent_sees(child, dev):
    t = torch.zeros(16, device=dev)
    assert child("add_one", t) == ("ok", None)
    assert t.cpu().tolist() == [1.0] * 16
    # Again: the same tensor, the same memory, opened a second time.
    assert child("add_one", t) == ("ok", None)
    assert t.cpu().tolist() == [2.0] * 16


def test_child_reads_what_parent_wrote(child, dev):
    t = torch.arange(10, dtype=torch.float32, device=dev) * 3
    assert child("read", t) == ("ok", [float(3 * i) for i in range(10)])
    t.fill_(-1)
    assert child("read", t) == ("ok", [-1.0] * 10)


def test_second_device(child):
    t = torch.zeros(4, device=torch_openreg.device(1))
    assert child("fill", (t, 5.0)) == ("ok", ("torch.float32", 1, True))
    assert t.cpu().tolist() == [5.0] * 4


def test_views_and_offsets(child, dev):
    base = torch.zeros(4, 6, device=dev)
    view = base[1:3, 2:5]  # storage offset 8, strides (6, 1), not contiguous
    assert child("fill", (view, 9.0)) == ("ok", ("torch.float32", 0, False))
    expected = torch.zeros(4, 6)
    expected[1:3, 2:5] = 9
    assert torch.equal(base.cpu(), expected)
    column = base[:, 0]
    assert child("read", column) == ("ok", [0.0] * 4)
    tr = base.t()
    assert child("read", tr) == ("ok", expected.t().tolist())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64,
                                   torch.uint8, torch.bool, torch.float16, torch.bfloat16])
def test_dtypes(child, dev, dtype):
    t = torch.zeros(5, dtype=dtype, device=dev)
    assert child("fill", (t, 1)) == ("ok", (str(dtype), 0, True))
    assert t.cpu().tolist() == torch.ones(5, dtype=dtype).tolist()


def test_untyped_storage(child, dev):
    t = torch.zeros(8, dtype=torch.uint8, device=dev)
    assert child("storage", t.untyped_storage()) == ("ok", 8)
    assert t.cpu().tolist() == [7] * 8


def test_empty_tensor(child, dev):
    t = torch.empty(0, 3, device=dev)
    assert child("read", t) == ("ok", [])


def test_same_process_round_trip(dev):
    # Unpickled in the producer itself: still the same memory.
    t = torch.zeros(3, device=dev)
    u = ForkingPickler.loads(ForkingPickler.dumps(t))
    u.fill_(4)
    assert t.cpu().tolist() == [4.0] * 3
    assert u.data_ptr() == t.data_ptr()


def test_freed_tensor(child, dev):
    t = torch.ones(32, device=dev)
    data = bytes(ForkingPickler.dumps(t))
    del t  # shared blocks are not cached: the allocation is freed now
    kind, name, message = child("loads", data)
    assert (kind, name) == ("error", "RuntimeError")
    assert "orErrorInvalidDevicePointer" in message and "keep a shared tensor alive" in message
    # The child still works.
    assert child("read", torch.ones(2, device=dev)) == ("ok", [1.0, 1.0])


def test_forged_handle(child, dev):
    t = torch.ones(8, dtype=torch.uint8, device=dev)
    device, handle, off, nbytes = _C._ipc_share(t)
    forged = bytearray(handle)
    forged[40] ^= 1  # a bit of the allocation id: the MAC no longer matches
    kind, name, message = child("open", (bytes(forged), off, nbytes, device))
    assert (kind, name) == ("error", "RuntimeError")
    assert "orErrorInvalidResourceHandle" in message
    kind, name, message = child("open", (b"\0" * 64, 0, 8, 0))
    assert "orErrorInvalidResourceHandle" in message
    kind, name, message = child("open", (b"short", 0, 8, 0))
    assert kind == "error" and "64 bytes" in message
    # The genuine handle still opens, and the child still works.
    assert child("open", (handle, off, nbytes, device)) == ("ok", [1] * 8)
    # In the producer too: a clear error, and the process goes on.
    with pytest.raises(RuntimeError, match="orErrorInvalidResourceHandle"):
        _C._ipc_open(bytes(forged), off, nbytes, device, torch.uint8, [nbytes], [1], 0)
    assert t.sum().item() == 8


def test_child_tensor_not_opened_by_parent(child):
    # Only a parent's memory is shared: a child's handle is not for its parent.
    child.commands.put(("make", None))
    with pytest.raises(RuntimeError, match="orErrorInvalidResourceHandle"):
        child.answers.get(timeout=TIMEOUT)


def test_received_tensor_is_not_shared_again(dev):
    t = torch.zeros(3, device=dev)
    u = ForkingPickler.loads(ForkingPickler.dumps(t))
    with pytest.raises(RuntimeError, match="received from another process"):
        ForkingPickler.dumps(u)


def test_other_tensors_unchanged():
    # CPU tensors still go through torch's own reducer.
    t = torch.arange(3)
    assert torch.equal(pickle.loads(ForkingPickler.dumps(t)), t)
