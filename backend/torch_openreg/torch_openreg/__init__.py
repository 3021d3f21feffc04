"""torch_openreg: the openreg runtime as a PyTorch device.

``import torch_openreg`` registers the runtime's devices as PyTorch's
PrivateUse1 device. On PyTorch >= 2.0 the device is renamed ``openreg``
(``torch.device("openreg")``, ``torch.openreg``); on PyTorch 1.13 its name is
``privateuseone`` and ``torch_openreg.device(i)`` gives device ``i``.
"""
import torch

from . import _C

if hasattr(torch.utils, "rename_privateuse1_backend"):
    torch.utils.rename_privateuse1_backend("openreg")
    DEVICE_TYPE = "openreg"
else:
    DEVICE_TYPE = "privateuseone"


def device_count():
    """Number of openreg devices of this process (OPENREG_DEVICES)."""
    return _C.device_count()


def device(index=0):
    """The torch.device of openreg device ``index``."""
    return torch.device(DEVICE_TYPE, index)
