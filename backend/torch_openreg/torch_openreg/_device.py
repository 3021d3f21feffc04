"""Devices: count, selection, synchronization, properties."""
import torch

from . import _C
# Set by the package before it imports this module; read here once, not on
# every call (a per-call import costs a few us, as much as a small collective's
# synchronize).
from . import DEVICE_TYPE


def _index(dev, optional=True):
    """The device index named by ``dev``: None (current device when optional),
    an int, a string such as "openreg:1", or a torch.device of this backend."""
    if dev is None:
        if optional:
            return _C.current_device()
        raise ValueError("torch_openreg: a device is required")
    if isinstance(dev, str):
        try:
            dev = torch.device(dev)
        except RuntimeError as e:
            raise ValueError("torch_openreg: invalid device %r: %s" % (dev, e)) from None
    if isinstance(dev, torch.device):
        if dev.type != DEVICE_TYPE:
            raise ValueError(
                "torch_openreg: expected a %s device, got %s" % (DEVICE_TYPE, dev))
        return _C.current_device() if dev.index is None else dev.index
    if isinstance(dev, bool) or not isinstance(dev, int):
        raise TypeError("torch_openreg: invalid device %r" % (dev,))
    count = _C.device_count()
    if not 0 <= dev < count:
        raise IndexError("openreg: invalid device index %d: this process has %d openreg "
                         "device(s) (OPENREG_DEVICES)" % (dev, count))
    return dev


def device(index=None):
    """The torch.device of openreg device ``index`` (default: the current one)."""
    return torch.device(DEVICE_TYPE, _index(index))


def is_available():
    """True when the runtime has at least one device for this process."""
    try:
        return _C.device_count() > 0
    except RuntimeError:
        return False


def is_initialized():
    """True once the runtime has started (it starts on first use)."""
    return _C.is_initialized()


def init():
    """Starts the runtime now (it otherwise starts on first use); raises the
    runtime's error for a bad OPENREG_* setting."""
    _C.device_count()


def device_count():
    """Number of openreg devices of this process (OPENREG_DEVICES, default 2)."""
    return _C.device_count()


def current_device():
    """Index of the calling thread's current device."""
    return _C.current_device()


def set_device(dev):
    """Makes ``dev`` the calling thread's current device."""
    _C.set_device(_index(dev, optional=False))


def synchronize(dev=None):
    """Waits for all work queued on every stream of ``dev``."""
    _C.synchronize(_index(dev))


def get_device_properties(dev=None):
    """The runtime's description of ``dev``: name, total_memory,
    multi_processor_count, numa_node, cpu_list."""
    return _C.get_device_properties(_index(dev))


def get_device_name(dev=None):
    return get_device_properties(dev)["name"]


def get_device_capability(dev=None):
    """What torch.accelerator and Inductor ask of a device: the dtypes its
    native kernels take (an openreg device computes in every CPU dtype)."""
    _index(dev)
    return {"supported_dtypes": [
        torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
        torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128]}
