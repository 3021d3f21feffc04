"""Openreg tensors shared between processes by torch.multiprocessing.

torch.multiprocessing pickles tensors with the reducers registered on its
ForkingPickler. This module wraps the reducers of ``torch.Tensor``,
``torch.nn.Parameter`` and ``torch.UntypedStorage``: an openreg tensor or
storage is sent as the runtime's IPC handle of the allocation behind its
storage, with the storage's offset in that allocation and its size, and the
tensor's dtype, sizes, strides and storage offset. The receiving process opens
the handle and builds its tensor over the opened memory: both processes use the
same bytes, no copy is made. Any other tensor goes to torch's own reducer.

Rules (docs/torch.md, "Sharing tensors between processes"):

* The consumer must be a process started by the producer (a
  ``torch.multiprocessing`` spawn or forkserver child, or any process it
  starts that inherits its environment) while ``OPENREG_IPC_CHILDREN=1``,
  which this package sets by default. Fork does not work: the runtime's
  threads do not survive it.
* The producer keeps a shared tensor alive as long as consumers use it, as
  with CUDA. No reference counting across processes is done: when the
  producer's tensor dies its memory goes back to the device (it is not cached
  for reuse), and opening its handle afterwards raises ``RuntimeError``;
  a consumer that had opened it before must not use it any more.
* Only the process that allocated a tensor can share it again.
"""

import multiprocessing.reduction

import torch
from torch.multiprocessing import reductions as _torch_reductions  # registers torch's reducers

from . import _C

_ForkingPickler = multiprocessing.reduction.ForkingPickler


def _rebuild_tensor(cls, handle, storage_offset_bytes, storage_nbytes, device, dtype, size,
                    stride, offset, requires_grad):
    t = _C._ipc_open(handle, storage_offset_bytes, storage_nbytes, device, dtype, list(size),
                     list(stride), offset)
    if cls is torch.nn.parameter.Parameter:
        return torch.nn.parameter.Parameter(t, requires_grad=requires_grad)
    t.requires_grad_(requires_grad)
    return t


def _rebuild_storage(handle, storage_offset_bytes, storage_nbytes, device):
    t = _C._ipc_open(handle, storage_offset_bytes, storage_nbytes, device, torch.uint8,
                     [storage_nbytes], [1], 0)
    return t.untyped_storage()


def _rebuild_empty(cls, device, dtype, size, stride, requires_grad):
    t = torch.empty_strided(size, stride, dtype=dtype, device=torch.device("openreg", device))
    if cls is torch.nn.parameter.Parameter:
        return torch.nn.parameter.Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(requires_grad)


def _reduce_tensor(tensor):
    if tensor.requires_grad and not tensor.is_leaf:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since "
            "autograd does not support crossing process boundaries. If you just want to "
            "transfer the data, call detach() on the tensor before serializing.")
    if tensor.layout != torch.strided:
        raise RuntimeError(f"openreg: cannot share a {tensor.layout} tensor between processes")
    cls = type(tensor)
    if tensor.untyped_storage().nbytes() == 0:
        return (_rebuild_empty, (cls, tensor.device.index, tensor.dtype, tuple(tensor.size()),
                                 tuple(tensor.stride()), tensor.requires_grad))
    device, handle, storage_offset_bytes, storage_nbytes = _C._ipc_share(tensor)
    return (_rebuild_tensor, (cls, handle, storage_offset_bytes, storage_nbytes, device,
                              tensor.dtype, tuple(tensor.size()), tuple(tensor.stride()),
                              tensor.storage_offset(), tensor.requires_grad))


def _reduce_storage(storage):
    if storage.nbytes() == 0:
        return (_rebuild_empty_storage, (storage.device.index,))
    t = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
    device, handle, storage_offset_bytes, storage_nbytes = _C._ipc_share(t)
    return (_rebuild_storage, (handle, storage_offset_bytes, storage_nbytes, device))


def _rebuild_empty_storage(device):
    return torch.UntypedStorage(0, device=torch.device("openreg", device))


def _dispatching(original, ours, is_openreg):
    def reduce(obj):
        if is_openreg(obj):
            return ours(obj)
        return original(obj)

    reduce.__name__ = f"openreg_or_{getattr(original, '__name__', 'reduce')}"
    return reduce


def _tensor_is_openreg(t):
    return t.device.type == "openreg"


def _storage_is_openreg(s):
    return s.device.type == "openreg"


_registered = False


def register_reductions():
    """Registers the openreg reducers on torch.multiprocessing's pickler
    (done on ``import torch_openreg``; calling it again does nothing)."""
    global _registered
    if _registered:
        return
    reducers = _ForkingPickler._extra_reducers
    for cls in (torch.Tensor, torch.nn.parameter.Parameter):
        original = reducers.get(cls, _torch_reductions.reduce_tensor)
        _ForkingPickler.register(cls, _dispatching(original, _reduce_tensor, _tensor_is_openreg))
    original = reducers.get(torch.UntypedStorage, _torch_reductions.reduce_storage)
    _ForkingPickler.register(torch.UntypedStorage,
                             _dispatching(original, _reduce_storage, _storage_is_openreg))
    _registered = True
