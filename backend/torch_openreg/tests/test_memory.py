"""Memory statistics of the device allocator, and pinned host memory."""
import pytest
import torch

import torch_openreg

MiB = 1 << 20


def test_allocated_and_peak(dev):
    torch_openreg.reset_peak_memory_stats(dev)
    base = torch_openreg.memory_allocated(dev)
    x = torch.empty(MiB, dtype=torch.uint8, device=dev)
    assert torch_openreg.memory_allocated(dev) == base + MiB
    y = torch.empty(2 * MiB, dtype=torch.uint8, device=dev)
    assert torch_openreg.max_memory_allocated(dev) == base + 3 * MiB
    del x, y
    assert torch_openreg.memory_allocated(dev) == base
    assert torch_openreg.max_memory_allocated(dev) == base + 3 * MiB
    torch_openreg.reset_peak_memory_stats(dev)
    assert torch_openreg.max_memory_allocated(dev) == base


def test_stats_are_per_device():
    d0, d1 = torch_openreg.device(0), torch_openreg.device(1)
    before = torch_openreg.memory_allocated(d0)
    x = torch.empty(MiB, dtype=torch.uint8, device=d1)
    assert torch_openreg.memory_allocated(d0) == before
    assert torch_openreg.memory_allocated(1) >= MiB
    del x


def test_memory_stats_counters(dev):
    torch_openreg.reset_accumulated_memory_stats(dev)
    s0 = torch_openreg.memory_stats(dev)
    assert s0["allocated_bytes.all.allocated"] == 0 and s0["allocation.all.freed"] == 0
    for _ in range(3):
        t = torch.empty(1000, dtype=torch.uint8, device=dev)
        del t
    s = torch_openreg.memory_stats(dev)
    assert s["allocation.all.allocated"] == 3 and s["allocation.all.freed"] == 3
    assert s["allocated_bytes.all.allocated"] == 3000 and s["allocated_bytes.all.freed"] == 3000
    assert s["allocation.all.current"] == s0["allocation.all.current"]


def test_out_of_memory_is_an_exception(dev):
    _, total = torch_openreg.mem_get_info(dev)
    before = torch_openreg.memory_allocated(dev)
    with pytest.raises(RuntimeError, match="out of memory on device 0"):
        torch.empty(total + 1, dtype=torch.uint8, device=dev)
    assert torch_openreg.memory_allocated(dev) == before
    x = torch.ones(10, device=dev)  # the device still works
    assert x.sum().item() == 10


def test_pin_memory(dev):
    t = torch.arange(1000, dtype=torch.float32)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu"
    assert p.data_ptr() != t.data_ptr() and torch.equal(p, t)
    assert p[10:20].is_pinned()  # views of pinned memory are pinned
    assert t.pin_memory(dev).is_pinned(dev)


def test_non_blocking_copies_through_pinned_memory(dev):
    src = torch.randn(1 << 16).pin_memory()
    d = src.to(dev, non_blocking=True)
    back = torch.empty(1 << 16).pin_memory()
    back.copy_(d, non_blocking=True)
    torch_openreg.synchronize(dev)
    assert torch.equal(back, src)


def test_pin_memory_of_device_tensor_fails(dev):
    with pytest.raises(RuntimeError, match="(?i)pin"):
        torch.ones(3, device=dev).pin_memory()
