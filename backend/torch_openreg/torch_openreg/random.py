"""Random numbers: one Philox generator per device, on the runtime's RNG.
torch.rand/randn/uniform_/normal_ on a device draw from it; the state is
(seed, offset) as a 16-byte ByteTensor."""
import torch

from . import _C
from ._device import _index



def _device_count_or_zero():
    # A runtime that cannot start (bad OPENREG_* settings) leaves the package
    # importable: is_available() is then False and device calls raise.
    try:
        return _C.device_count()
    except RuntimeError:
        return 0


# torch.Generator objects over each device's default generator.
default_generators = tuple(_C._default_generator(i) for i in range(_device_count_or_zero()))


def _generator(device):
    return default_generators[_index(device)]


def manual_seed(seed, device=None):
    """Seeds the generator of ``device`` (default: the current device)."""
    _generator(device).manual_seed(int(seed))


def manual_seed_all(seed):
    for g in default_generators:
        g.manual_seed(int(seed))


def seed(device=None):
    """Seeds the generator of ``device`` with a non-deterministic number."""
    return _generator(device).seed()


def seed_all():
    s = seed(0) if default_generators else None
    for g in default_generators[1:]:
        g.manual_seed(s)
    return s


def initial_seed(device=None):
    return _generator(device).initial_seed()


def get_rng_state(device=None):
    """The generator state of ``device``: a ByteTensor on the CPU."""
    return _generator(device).get_state()


def set_rng_state(new_state, device=None):
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
        raise TypeError("torch_openreg: an RNG state is a torch.uint8 tensor")
    _generator(device).set_state(new_state.cpu())


def get_rng_state_all():
    return [g.get_state() for g in default_generators]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)
