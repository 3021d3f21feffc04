"""Device registration: the package registers the runtime's devices."""
import torch

import torch_openreg


def test_device_count_follows_runtime():
    assert torch_openreg.device_count() == 2  # OPENREG_DEVICES default


def test_device_type_name():
    assert torch_openreg.device(1).type == torch_openreg.DEVICE_TYPE
    assert torch_openreg.device(1).index == 1
