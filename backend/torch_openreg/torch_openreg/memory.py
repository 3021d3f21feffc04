"""Memory statistics of the device allocator (orMalloc), shaped like
torch.cuda's. Allocations are not cached, so "allocated" is also what the
process holds from the device's arena."""
from . import _C
from ._device import _index


def memory_stats(device=None):
    """Counters of ``device``: allocated_bytes.all.{current,peak,allocated,freed}
    and allocation.all.{current,peak,allocated,freed}."""
    return dict(_C.memory_stats(_index(device)))


def memory_allocated(device=None):
    """Bytes currently allocated by tensors on ``device``."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    """Peak of memory_allocated since the start or the last reset."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None):
    _C.reset_accumulated_memory_stats(_index(device))


def mem_get_info(device=None):
    """(free, total) bytes of the device's arena, from orMemGetInfo."""
    return tuple(_C.mem_get_info(_index(device)))
