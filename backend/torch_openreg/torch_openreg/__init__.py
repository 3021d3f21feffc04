"""torch_openreg: the openreg runtime as a PyTorch device.

Installed with pip, the package is loaded by ``import torch`` itself (the
``torch.backends`` entry point names ``_autoload``), so that

    import torch
    torch.openreg.is_available()
    x = torch.ones(2, device="openreg")

need no ``import torch_openreg``; ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns
that off and ``import torch_openreg`` then does the same. It renames
PyTorch's PrivateUse1 device to ``openreg``, registers this package as the
device module ``torch.openreg``, generates the ``Tensor.openreg()`` and
``is_openreg`` methods, and registers the ``occl`` torch.distributed backend.
docs/torch.md is the user guide.
"""


import os  # noqa: E402

# Before the runtime starts: its device memory is then shared with the
# processes this one starts, so torch.multiprocessing can send them openreg
# tensors without a copy (torch_openreg.ipc). OPENREG_IPC_CHILDREN=0 opts out.
os.environ.setdefault("OPENREG_IPC_CHILDREN", "1")


def _autoload():
    """The ``torch.backends`` entry point: importing the package is the whole
    registration. Defined before ``import torch``: when the package is
    imported first, torch's autoload finds it half-initialized and calls
    this, and the import then goes on."""


import torch  # noqa: E402

from . import _torchrun  # noqa: E402

# Workers started by torchrun: one MPI job before the runtime starts.
_torchrun.bootstrap()

from . import _C  # noqa: E402

DEVICE_TYPE = "openreg"

torch.utils.rename_privateuse1_backend(DEVICE_TYPE)

from ._device import (  # noqa: E402
    current_device,
    device,
    device_count,
    get_device_capability,
    get_device_name,
    get_device_properties,
    is_available,
    is_initialized,
    init,
    set_device,
    synchronize,
)
from .streams import Event, Stream, current_stream, default_stream, set_stream, stream  # noqa: E402
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
    empty_cache,
    host_access,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from .amp import get_amp_supported_dtype, is_autocast_enabled  # noqa: E402

__all__ = [
    "DEVICE_TYPE", "device", "device_count", "is_available", "is_initialized", "init",
    "current_device", "set_device", "synchronize", "get_device_name", "get_device_properties",
    "get_device_capability",
    "Stream", "Event", "stream", "current_stream", "default_stream", "set_stream",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
    "set_rng_state", "get_rng_state_all", "set_rng_state_all", "default_generators",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "memory_stats", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
    "mem_get_info", "empty_cache", "host_access", "get_amp_supported_dtype",
    "is_autocast_enabled",
]

torch._register_device_module(DEVICE_TYPE, __import__(__name__))
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)

# torch.multiprocessing sends openreg tensors as IPC handles (torch_openreg.ipc).
from . import ipc  # noqa: E402

ipc.register_reductions()

# The "occl" torch.distributed backend (torch_openreg.distributed).
from . import distributed  # noqa: E402,F401

# torch.compile (torch_openreg._inductor): Dynamo's device interface is
# registered once torch._dynamo is imported, Inductor's code generators when
# Inductor first asks the device module for them (__getattr__ below).
from ._inductor import _install_import_hooks  # noqa: E402

_install_import_hooks()
del _install_import_hooks


def __getattr__(name):
    """``torch.openreg.Scheduling`` and ``PythonWrapperCodegen``: what
    Inductor asks a PrivateUse1 device module for when it starts. Answering
    registers the device with Inductor (torch_openreg._inductor)."""
    if name in ("Scheduling", "PythonWrapperCodegen"):
        from ._inductor import register_inductor

        scheduling, wrapper = register_inductor()
        return scheduling if name == "Scheduling" else wrapper
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _is_in_bad_fork():
    """torch.manual_seed asks this before seeding the device generators: the
    runtime's threads do not survive fork, but its generators are plain
    (seed, offset) states, safe to seed in any process."""
    return False

