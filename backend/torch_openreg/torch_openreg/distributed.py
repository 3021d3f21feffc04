"""torch_openreg.distributed: the "occl" torch.distributed backend.

``import torch_openreg`` registers it for the openreg device type, so that

    dist.init_process_group("occl")                # under orrun: env:// has all it needs
    dist.init_process_group("cpu:gloo,openreg:occl")   # CPU tensors over gloo, device ones over occl
    dist.new_group(ranks, backend="occl")
    torch.nn.parallel.DistributedDataParallel(model)   # model on torch_openreg.device(i)

run their collectives with OCCL on openreg device tensors. Groups of other
backends (``dist.new_group(backend="gloo")`` for CPU tensors) work beside it.
docs/torch-distributed.md is the guide.
"""
import atexit
import datetime

import torch.distributed as dist

from . import _C

BACKEND = "occl"
DEVICE_TYPE = "openreg"

ProcessGroupOCCL = _C.ProcessGroupOCCL


def _create_backend(dist_backend_opts, backend_options):
    """torch.distributed calls this (extended API) for the openreg part of every
    group whose backend is "occl": a ProcessGroupOCCL over the group's store."""
    if backend_options is not None:
        raise ValueError(
            f"occl takes no backend options (pg_options), got {type(backend_options).__name__}")
    timeout = dist_backend_opts.timeout
    if isinstance(timeout, (int, float)):
        timeout = datetime.timedelta(seconds=timeout)
    return ProcessGroupOCCL(dist_backend_opts.store, dist_backend_opts.group_rank,
                            dist_backend_opts.group_size, timeout)


def _registered():
    return BACKEND.upper() in getattr(dist.Backend, "_plugins", {})


def _register():
    # Once per process, however often this runs (autoload, then an explicit
    # import, or a reload).
    if not dist.is_available() or _registered():
        return
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True,
                                  devices=[DEVICE_TYPE])
    # The groups still alive at exit shut down while the openreg runtime runs
    # (torch would release them later, after it has stopped).
    atexit.register(_C._occl_shutdown_all)


_register()
