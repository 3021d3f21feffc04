"""Memory of the openreg devices, shaped like torch.cuda's: the caching
allocator's statistics (csrc/runtime/allocator.cpp), empty_cache, and the
arena's free and total bytes. "allocated" is what tensors hold; "reserved"
is what the allocator holds from the device's arena, cached blocks included."""
from . import _C
from ._device import _index


def memory_stats(device=None):
    """Counters of ``device``, with torch.cuda.memory_stats' keys:
    ``allocated_bytes.all.current``, ``reserved_bytes.large_pool.peak``,
    ``num_ooms``, ..."""
    return dict(_C.memory_stats(_index(device)))


def memory_allocated(device=None):
    """Bytes currently held by tensors on ``device``."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    """Peak of memory_allocated since the start or the last reset."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    """Bytes the caching allocator holds from the device's arena."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device=None):
    _C.reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device=None):
    _C.reset_accumulated_memory_stats(_index(device))


def empty_cache():
    """Gives every cached block of every device back to its arena."""
    for i in range(_C.device_count()):
        _C.empty_cache(i)


def mem_get_info(device=None):
    """(free, total) bytes of the device's arena, from orMemGetInfo."""
    return tuple(_C.mem_get_info(_index(device)))


def host_access(device=None, sync=True):
    """A context manager in which host code may read and write the memory of
    the openreg devices directly (it is host memory of this process)::

        with torch_openreg.host_access():
            host_function(x.data_ptr())

    Entering it synchronizes the current stream of ``device`` (unless
    ``sync=False``), so the host sees the work queued there so far; work
    queued after the block runs after it. In strict mode
    (``OPENREG_STRICT=1``) it opens an ``orMemoryUnprotect`` window for the
    block: the memory of every device is readable until the block ends.
    Blocks nest and may overlap between threads. The C++ kernels
    ``torch.compile`` generates run in one."""
    return _C._HostAccess(_index(device), sync)
