"""torch_openreg.distributed: the "occl" torch.distributed backend.

``import torch_openreg`` registers it, so that

    dist.init_process_group("occl")                # under orrun: env:// has all it needs
    dist.new_group(ranks, backend="occl")
    torch.nn.parallel.DistributedDataParallel(model)   # model on torch_openreg.device(i)

run their collectives with OCCL on openreg device tensors. Groups of other
backends (``dist.new_group(backend="gloo")`` for CPU tensors) work beside it.
docs/torch-distributed.md is the guide.
"""
import datetime

import torch.distributed as dist

from . import _C

BACKEND = "occl"

ProcessGroupOCCL = _C.ProcessGroupOCCL


def _create_process_group(store, rank, world_size, timeout):
    # torch.distributed calls this for every group of backend "occl".
    if isinstance(timeout, (int, float)):
        timeout = datetime.timedelta(seconds=timeout)
    return ProcessGroupOCCL(store, rank, world_size, timeout)


def _register():
    if dist.is_available() and not hasattr(dist.Backend, BACKEND.upper()):
        dist.Backend.register_backend(BACKEND, _create_process_group)


_register()
