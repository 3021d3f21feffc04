"""Streams and events of the openreg devices (the orStream_t/orEvent_t of the
runtime), shaped like torch.cuda's."""
import contextlib

from . import _C
from ._device import _index


class Stream:
    """An in-order queue of a device. ``Stream(device, priority)`` takes one
    of the device's pool streams (priority 0: normal, < 0: high)."""

    def __init__(self, device=None, priority=0, _stream_id=None):
        self.device_index = _index(device)
        if _stream_id is None:
            _stream_id = _C._stream_from_pool(self.device_index, priority < 0)
        self.stream_id = _stream_id

    @property
    def device(self):
        from ._device import device

        return device(self.device_index)

    @property
    def priority(self):
        return _C._stream_priority(self.stream_id, self.device_index)

    def synchronize(self):
        """Waits until all work queued on the stream has completed."""
        _C._stream_synchronize(self.stream_id, self.device_index)

    def query(self):
        """True when all work queued on the stream has completed."""
        return _C._stream_query(self.stream_id, self.device_index)

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event):
        """Work queued on this stream later waits for ``event``."""
        event.wait(self)

    def wait_stream(self, other):
        """Work queued on this stream later waits for ``other``'s work so far."""
        self.wait_event(other.record_event())

    def __eq__(self, other):
        return (isinstance(other, Stream) and self.stream_id == other.stream_id
                and self.device_index == other.device_index)

    def __hash__(self):
        return hash((self.stream_id, self.device_index))

    def __repr__(self):
        return "<torch_openreg.Stream device=%d id=%d>" % (self.device_index, self.stream_id)


def current_stream(device=None):
    """The calling thread's current stream of ``device``."""
    index = _index(device)
    return Stream(index, _stream_id=_C._stream_current(index))


def default_stream(device=None):
    """The device's default stream (orStream_t NULL)."""
    return Stream(_index(device), _stream_id=0)


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
    set_device(s.device_index)
    _C._stream_set_current(s.stream_id, s.device_index)
    try:
        yield s
    finally:
        _C._stream_set_current(prev_stream.stream_id, prev_stream.device_index)
        set_device(prev_device)


class Event:
    """A marker in a stream. ``enable_timing=True`` makes ``elapsed_time``
    available (in ms, virtual time under OPENREG_TIME=virtual)."""

    def __init__(self, enable_timing=False):
        self._event = _C._Event(enable_timing)

    def record(self, stream=None):
        stream = current_stream() if stream is None else stream
        self._event.record(stream.stream_id, stream.device_index)

    def wait(self, stream=None):
        stream = current_stream() if stream is None else stream
        self._event.wait(stream.stream_id, stream.device_index)

    def query(self):
        return self._event.query()

    def synchronize(self):
        self._event.synchronize()

    def elapsed_time(self, end_event):
        return self._event.elapsed_time(end_event._event)

    def __repr__(self):
        return "<torch_openreg.Event device=%d>" % self._event.device_index
