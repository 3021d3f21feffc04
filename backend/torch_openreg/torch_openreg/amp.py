"""Automatic mixed precision on openreg: torch.autocast("openreg") casts as on
CUDA (the op lists of csrc/amp/autocast.cpp), in float16 (the default) or
bfloat16."""
import torch


def get_amp_supported_dtype():
    """The dtypes torch.autocast(device_type="openreg", dtype=...) accepts."""
    return [torch.float16, torch.bfloat16]


def is_autocast_enabled():
    return torch.is_autocast_enabled("openreg")
