"""The caching device allocator (statistics, reuse, empty_cache, record_stream,
out of memory) and pinned host memory."""
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
    # Blocks are multiples of 512 bytes, as CUDA's; what was asked is kept too.
    assert s["allocated_bytes.all.allocated"] == 3072 and s["allocated_bytes.all.freed"] == 3072
    assert s["requested_bytes.all.allocated"] == 3000
    assert s["allocation.small_pool.allocated"] == 3 and s["allocation.large_pool.allocated"] == 0
    assert s["allocation.all.current"] == s0["allocation.all.current"]


def test_freed_blocks_are_cached_and_reused_on_their_stream(dev):
    torch_openreg.synchronize(dev)
    torch_openreg.empty_cache()
    free0, _ = torch_openreg.mem_get_info(dev)
    reserved0 = torch_openreg.memory_reserved(dev)
    x = torch.empty(4 * MiB, dtype=torch.uint8, device=dev)
    ptr = x.data_ptr()
    del x
    # Still held by the allocator, not by a tensor.
    assert torch_openreg.memory_reserved(dev) == reserved0 + 4 * MiB
    assert torch_openreg.mem_get_info(dev)[0] == free0 - 4 * MiB
    y = torch.empty(4 * MiB, dtype=torch.uint8, device=dev)
    assert y.data_ptr() == ptr  # the same block, no orMalloc
    side = torch_openreg.Stream(dev)
    with torch_openreg.stream(side):
        del y
        z = torch.empty(4 * MiB, dtype=torch.uint8, device=dev)  # another stream's pool
    assert z.data_ptr() != ptr
    del z
    stats = torch_openreg.memory_stats(dev)
    assert stats["segment.all.current"] >= 2
    torch_openreg.empty_cache()
    assert torch_openreg.memory_reserved(dev) == reserved0
    assert torch_openreg.mem_get_info(dev)[0] == free0


def test_record_stream_delays_reuse_until_the_other_stream_is_done(dev):
    side = torch_openreg.Stream(dev)
    x = torch.ones(MiB, device=dev)
    side.wait_stream(torch_openreg.current_stream(dev))
    with torch_openreg.stream(side):
        y = x * 2  # x used on side
    x.record_stream(side)
    ptr = x.data_ptr()
    del x
    side.synchronize()
    # The event recorded on side at free time is complete now: reusable.
    w = torch.empty(MiB, device=dev)
    assert w.data_ptr() == ptr
    assert y[0].item() == 2


def test_cache_is_released_before_running_out(dev):
    torch_openreg.synchronize(dev)
    torch_openreg.empty_cache()
    free, _ = torch_openreg.mem_get_info(dev)
    big = free // 2 + MiB
    x = torch.empty(big, dtype=torch.uint8, device=dev)
    del x  # cached: the arena now has less than `big` free
    retries = torch_openreg.memory_stats(dev)["num_alloc_retries"]
    y = torch.empty(big + 2 * MiB, dtype=torch.uint8, device=dev)  # fits once the cache is freed
    assert torch_openreg.memory_stats(dev)["num_alloc_retries"] == retries + 1
    del y
    torch_openreg.empty_cache()


def test_torch_accelerator_memory_api(dev):
    torch.accelerator.reset_peak_memory_stats(0)
    base = torch.accelerator.memory_allocated(0)
    x = torch.empty(MiB, dtype=torch.uint8, device=dev)
    assert torch.accelerator.memory_allocated(0) == base + MiB
    assert torch.accelerator.max_memory_allocated(0) == base + MiB
    assert torch.accelerator.memory_stats(0)["allocated_bytes.all.current"] == base + MiB
    assert torch.accelerator.memory_reserved(0) >= torch.accelerator.memory_allocated(0)
    del x
    torch.accelerator.empty_cache()


def test_out_of_memory_is_an_exception(dev):
    _, total = torch_openreg.mem_get_info(dev)
    before = torch_openreg.memory_allocated(dev)
    ooms = torch_openreg.memory_stats(dev)["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError, match="out of memory on device 0"):
        torch.empty(total + 1, dtype=torch.uint8, device=dev)
    assert torch_openreg.memory_allocated(dev) == before
    assert torch_openreg.memory_stats(dev)["num_ooms"] == ooms + 1
    x = torch.ones(10, device=dev)  # the device still works
    assert x.sum().item() == 10


def test_pin_memory(dev):
    t = torch.arange(1000, dtype=torch.float32)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu"
    assert p.data_ptr() != t.data_ptr() and torch.equal(p, t)
    assert p[10:20].is_pinned()  # views of pinned memory are pinned
    assert torch.empty(10, pin_memory=True).is_pinned()


def test_non_blocking_copies_through_pinned_memory(dev):
    src = torch.randn(1 << 16).pin_memory()
    d = src.to(dev, non_blocking=True)
    back = torch.empty(1 << 16).pin_memory()
    back.copy_(d, non_blocking=True)
    torch_openreg.synchronize(dev)
    assert torch.equal(back, src)


def _busy_stream(dev):
    """Queues enough work on the current stream that copies issued next wait."""
    a = torch.randn(512, 512, device=dev)
    for _ in range(20):
        a = a @ a / 512
    return a


def test_pinned_memory_outlives_the_async_copies_that_use_it(dev):
    # As DDP does: a pinned temporary is the source of a non-blocking copy
    # and dies at once; so does the pinned destination of another. The
    # memory must stay until the copies have run (CUDA's host allocator
    # records an event for it; so does ours).
    want = torch.arange(1 << 16, dtype=torch.float32)
    d = torch.empty(1 << 16, device=dev)
    busy = _busy_stream(dev)
    tmp = want.pin_memory()
    d.copy_(tmp, non_blocking=True)
    del tmp
    out = torch.empty(1 << 16, pin_memory=True)
    out.copy_(torch.full((1 << 16,), 7.0, device=dev), non_blocking=True)
    del out
    churn = [torch.empty(1 << 16, pin_memory=True) for _ in range(8)]  # reuse pressure
    del churn
    torch_openreg.synchronize(dev)
    assert torch.equal(d.cpu(), want)
    del busy


def test_pin_memory_of_device_tensor_fails(dev):
    with pytest.raises(RuntimeError, match="(?i)pin"):
        torch.ones(3, device=dev).pin_memory()


def test_storage_resize_keeps_bytes_and_frees(dev):
    # UntypedStorage.resize_ goes through the hooks (FSDP2 frees unsharded
    # parameters with resize_(0) and refills them).
    t = torch.arange(256, dtype=torch.float32, device=dev)
    s = t.untyped_storage()
    before = torch_openreg.memory_allocated(dev)
    s.resize_(0)
    assert s.nbytes() == 0 and torch_openreg.memory_allocated(dev) == before - 1024
    s.resize_(1024)
    assert s.nbytes() == 1024 and torch_openreg.memory_allocated(dev) == before
    t.copy_(torch.arange(256, dtype=torch.float32))
    s.resize_(2048)  # grows: the old bytes are kept
    assert torch.equal(t.cpu(), torch.arange(256, dtype=torch.float32))
    s.resize_(512)  # shrinks: the first 512 bytes are kept
    assert torch.equal(torch.empty(0, device=dev).set_(s, 0, (128,)).cpu(),
                       torch.arange(128, dtype=torch.float32))
