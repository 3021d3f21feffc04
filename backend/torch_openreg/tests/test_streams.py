"""Streams and events on orStream_t/orEvent_t."""
import pytest
import torch

import torch_openreg
from torch_openreg import Event, Stream


def test_default_and_current_stream(dev):
    cur = torch_openreg.current_stream()
    assert cur == torch_openreg.default_stream() and cur.stream_id == 0
    assert cur.device == dev


def test_stream_context_sets_and_restores(dev):
    s = Stream(torch_openreg.device(1))
    assert s.stream_id != 0 and s.device_index == 1
    with torch_openreg.stream(s):
        assert torch_openreg.current_device() == 1
        assert torch_openreg.current_stream() == s
        assert torch_openreg.current_stream(0).stream_id == 0  # per device
    assert torch_openreg.current_device() == 0
    assert torch_openreg.current_stream(1).stream_id == 0


def test_pool_streams_are_distinct_and_prioritized(dev):
    a, b = Stream(dev), Stream(dev)
    assert a != b and len({a, b, torch_openreg.default_stream()}) == 3
    high = Stream(dev, priority=-1)
    assert high.priority < a.priority


def test_work_on_side_stream_and_wait_stream(dev):
    s = Stream(dev)
    x = torch.arange(100000, dtype=torch.float32, device=dev)
    s.wait_stream(torch_openreg.current_stream())  # x is ready before s uses it
    with torch_openreg.stream(s):
        y = x * 2
        z = y.to(torch_openreg.device(0))  # copy enqueued on s
        done = s.record_event()
    torch_openreg.current_stream().wait_event(done)
    s.synchronize()
    assert s.query() and done.query()
    assert torch.equal(z.cpu(), torch.arange(100000, dtype=torch.float32) * 2)


def test_event_timing(dev):
    start, end = Event(enable_timing=True), Event(enable_timing=True)
    start.record()
    x = torch.ones(1 << 20, device=dev)
    for _ in range(5):
        x = x + 1
    end.record()
    end.synchronize()
    assert end.query()
    assert start.elapsed_time(end) >= 0.0


def test_event_errors(dev):
    unrecorded = Event(enable_timing=True)
    assert unrecorded.query()  # nothing to wait for, as in CUDA
    with pytest.raises(ValueError, match="Both events must be recorded"):
        unrecorded.elapsed_time(Event(enable_timing=True))
    no_timing = [Event(), Event()]
    for e in no_timing:
        e.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        no_timing[0].elapsed_time(no_timing[1])
    e = Event()  # of the current device, 0
    e.record(torch_openreg.default_stream(0))
    with pytest.raises(RuntimeError, match="does not match"):
        e.record(torch_openreg.default_stream(1))


def test_cross_device_event_wait(dev):
    e = Event()
    x = torch.ones(1000, device=dev) * 5
    e.record(torch_openreg.current_stream(0))
    s1 = Stream(torch_openreg.device(1))
    s1.wait_event(e)
    with torch_openreg.stream(s1):
        y = x.to(torch_openreg.device(1))
    s1.synchronize()
    assert y.sum().item() == 5000


def test_streams_and_events_are_torch_stream_and_event(dev):
    s = Stream(dev)
    assert isinstance(s, torch.Stream) and s.device_type == torch.Stream(device=dev).device_type
    e = Event(enable_timing=True)
    assert type(e) is torch.Event and isinstance(e, Event)
    assert not isinstance(torch.Event("cpu"), Event)
    with s:  # torch.Stream's own context manager
        assert torch.accelerator.current_stream() == s
    assert torch.accelerator.current_stream().stream_id == 0


def test_torch_accelerator_api(dev):
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("openreg")
    assert torch.accelerator.device_count() == torch_openreg.device_count() == 2
    torch.accelerator.set_device_index(1)
    try:
        assert torch.accelerator.current_device_index() == 1
        assert torch_openreg.current_device() == 1
        assert torch.accelerator.current_stream().device_index == 1
    finally:
        torch.accelerator.set_device_index(0)
    x = torch.ones(1 << 20, device=dev) * 3
    torch.accelerator.synchronize()
    assert x.sum().item() == 3 << 20
    with pytest.raises((IndexError, RuntimeError)):
        torch.accelerator.set_device_index(5)
