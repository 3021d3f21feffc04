"""Streams and events of the openreg devices (the orStream_t/orEvent_t of the
runtime), shaped like torch.cuda's. ``Stream`` and ``Event`` are
``torch.Stream`` and ``torch.Event`` of the openreg device, so they mix with
what ``torch.accelerator`` and PyTorch's device-generic code hand out."""
import contextlib

import torch

from . import _C
from ._device import _index


class Stream(torch.Stream):
    """An in-order queue of a device. ``Stream(device, priority)`` takes one
    of the device's pool streams (priority 0: normal, < 0: high)."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs:  # (stream_id, device_index, device_type): an existing stream
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device("openreg", _index(device)),
                               priority=priority)

    @property
    def priority(self):
        return _C._stream_priority(self.stream_id, self.device_index)

    def __repr__(self):
        return "<torch_openreg.Stream device=%d id=%d>" % (self.device_index, self.stream_id)


# c10::DeviceType::PrivateUse1, as torch.Stream(device_type=...) takes it.
_PRIVATEUSE1 = 20


def _wrap(s):
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


def current_stream(device=None):
    """The calling thread's current stream of ``device``."""
    return _wrap(torch.accelerator.current_stream(_index(device)))


def default_stream(device=None):
    """The device's default stream (orStream_t NULL)."""
    index = _index(device)
    return Stream(stream_id=0, device_index=index, device_type=_PRIVATEUSE1)


def set_stream(s):
    """Makes ``s`` the current stream of its device (and its device the
    current device)."""
    torch.accelerator.set_stream(s)


@contextlib.contextmanager
def stream(s):
    """Makes ``s`` the current stream of its device, and its device the
    current device, inside the ``with`` block."""
    if s is None:
        yield
        return
    from ._device import current_device, set_device

    prev_device = current_device()
    prev_stream = current_stream(s.device_index)
    torch.accelerator.set_stream(s)
    try:
        yield s
    finally:
        torch.accelerator.set_stream(prev_stream)
        set_device(prev_device)


class _EventType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, torch.Event) and obj.device.type == "openreg"


class Event(metaclass=_EventType):
    """A marker in a stream: ``Event(enable_timing=False)`` is a ``torch.Event``
    of the current openreg device (PyTorch's event methods take only that
    exact type). ``enable_timing=True`` makes ``elapsed_time`` available (in
    ms, virtual time under OPENREG_TIME=virtual)."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return torch.Event("openreg", enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)
