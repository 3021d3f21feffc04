"""What PyTorch 1.13 does for CUDA but not for PrivateUse1, done here.

- torch.manual_seed and torch.seed reseed the device generators too, as
  they do CUDA's.
- Tensor.pin_memory() and Tensor.is_pinned() without a device mean CUDA on
  1.13; on a machine without CUDA they mean the openreg device.
"""
import functools

import torch

from . import random as _random

_torch_manual_seed = torch.random.manual_seed
_torch_seed = torch.random.seed


@functools.wraps(_torch_manual_seed)
def manual_seed(seed):
    generator = _torch_manual_seed(seed)
    _random.manual_seed_all(int(seed))
    return generator


@functools.wraps(_torch_seed)
def seed():
    s = _torch_seed()
    _random.manual_seed_all(s)
    return s


torch.manual_seed = torch.random.manual_seed = manual_seed
torch.seed = torch.random.seed = seed


def _default_pin_device():
    from ._device import device

    return None if torch.cuda.is_available() else device()


if not hasattr(torch.utils, "rename_privateuse1_backend"):
    _pin_memory = torch.Tensor.pin_memory
    _is_pinned = torch.Tensor.is_pinned

    @functools.wraps(_pin_memory)
    def pin_memory(self, device=None):
        return _pin_memory(self, device if device is not None else _default_pin_device())

    @functools.wraps(_is_pinned)
    def is_pinned(self, device=None):
        return _is_pinned(self, device if device is not None else _default_pin_device())

    torch.Tensor.pin_memory = pin_memory
    torch.Tensor.is_pinned = is_pinned
