"""torch_openreg: the openreg runtime as a PyTorch device.

``import torch_openreg`` registers the runtime's devices as PyTorch's
PrivateUse1 device and this package as its device module. On PyTorch >= 2.0
the device is renamed ``openreg`` (``torch.device("openreg")``,
``torch.openreg``); on PyTorch 1.13 its name is ``privateuseone``
(``torch.privateuseone``) and ``torch_openreg.device(i)`` gives device ``i``
either way. docs/torch.md is the user guide.
"""
import torch

from . import _C

if hasattr(torch.utils, "rename_privateuse1_backend"):
    torch.utils.rename_privateuse1_backend("openreg")
    DEVICE_TYPE = "openreg"
else:
    DEVICE_TYPE = "privateuseone"

from ._device import (  # noqa: E402
    current_device,
    device,
    device_count,
    get_device_name,
    get_device_properties,
    is_available,
    set_device,
    synchronize,
)
from .streams import Event, Stream, current_stream, default_stream, stream  # noqa: E402
from .random import (  # noqa: E402
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .memory import (  # noqa: E402
    max_memory_allocated,
    mem_get_info,
    memory_allocated,
    memory_stats,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from . import _patches  # noqa: E402,F401  (torch.manual_seed, pin_memory on 1.13)

__all__ = [
    "DEVICE_TYPE", "device", "device_count", "is_available", "current_device", "set_device",
    "synchronize", "get_device_name", "get_device_properties",
    "Stream", "Event", "stream", "current_stream", "default_stream",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
    "set_rng_state", "get_rng_state_all", "set_rng_state_all", "default_generators",
    "memory_allocated", "max_memory_allocated", "memory_stats", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats", "mem_get_info",
]

torch._register_device_module(DEVICE_TYPE, __import__(__name__))

# The "occl" torch.distributed backend (torch_openreg.distributed).
from . import distributed  # noqa: E402,F401
