"""torch.compile for the openreg device: Dynamo's device interface and
Inductor's code generation.

Nothing here is imported by ``import torch``: the package registers the
device interface right after ``torch._dynamo.device_interface`` is imported
(see ``_install_import_hooks``), and Inductor asks for its code generators
through the device module (``torch.openreg.Scheduling`` and
``torch.openreg.PythonWrapperCodegen``, answered by the package's
``__getattr__``) the first time it compiles.

Inductor generates CPU C++ kernels (its ``CppScheduling``) for openreg
tensors: device memory is host memory of this process. The wrapper runs each
generated kernel inside a host access (``torch_openreg.host_access``): the
device's current stream is synchronized first, so the kernel sees the work
queued before it, and in strict mode the memory is unprotected while it
runs. Everything else of the graph (extern kernels such as ``mm``, fallback
ops, allocations) is ordinary openreg work on the current stream, queued
after the host kernels that precede it.
"""
import collections
import functools
import sys

import torch

from . import _C

DEVICE_TYPE = "openreg"


# -- host access --------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def host_kernel(index):
    """The reusable context manager generated code runs a kernel of device
    ``index`` in: synchronizes the current stream, opens a window."""
    return _C._HostAccess(index)


def host_kernel_count(index=0):
    """How many host accesses (generated kernels included) were entered for
    device ``index`` since the process started."""
    return _C._host_access_count(index)


def get_raw_stream(index):
    """Generated code's ``get_raw_stream``: the id of the current stream."""
    return torch.accelerator.current_stream(index).stream_id


# -- Dynamo ------------------------------------------------------------------

_Properties = collections.namedtuple(
    "_Properties", ["name", "total_memory", "multi_processor_count", "numa_node", "cpu_list",
                    "type", "index"])


def _properties(device=None):
    from ._device import _index

    index = _index(device)
    p = _C.get_device_properties(index)
    return _Properties(p["name"], p["total_memory"], p["multi_processor_count"],
                       p["numa_node"], p["cpu_list"], DEVICE_TYPE, index)


def _device_interface():
    from torch._dynamo.device_interface import DeviceInterface

    import torch_openreg as mod

    class OpenRegInterface(DeviceInterface):
        """Dynamo's and Inductor's view of the openreg runtime."""

        device = torch.accelerator.device_index
        Event = mod.Event
        Stream = mod.Stream

        class Worker:
            @staticmethod
            def set_device(device):
                mod.set_device(device)

            @staticmethod
            def current_device():
                return mod.current_device()

            @staticmethod
            def get_device_properties(device=None):
                return _properties(device)

        current_device = staticmethod(mod.current_device)
        set_device = staticmethod(mod.set_device)
        device_count = staticmethod(mod.device_count)
        is_available = staticmethod(mod.is_available)
        stream = staticmethod(mod.stream)
        current_stream = staticmethod(mod.current_stream)
        set_stream = staticmethod(mod.set_stream)
        synchronize = staticmethod(mod.synchronize)
        memory_allocated = staticmethod(mod.memory_allocated)
        get_raw_stream = staticmethod(get_raw_stream)

        @staticmethod
        def exchange_device(device):
            previous = mod.current_device()
            if device != previous:
                mod.set_device(device)
            return previous

        maybe_exchange_device = exchange_device

        @staticmethod
        def _set_stream_by_id(stream_id, device_index, device_type):
            mod.set_stream(mod.Stream(stream_id=stream_id, device_index=device_index,
                                      device_type=device_type))

        @staticmethod
        def get_compute_capability(device=None):
            return ""

        @staticmethod
        def is_bf16_supported(including_emulation=False):
            return True

        @classmethod
        def is_dtype_supported(cls, dtype, including_emulation=False):
            return True

    return OpenRegInterface


_dynamo_registered = False


def register_dynamo():
    """Registers the device interface of "openreg" with Dynamo (once)."""
    global _dynamo_registered
    if _dynamo_registered:
        return
    from torch._dynamo.device_interface import register_interface_for_device

    interface = _device_interface()
    register_interface_for_device(DEVICE_TYPE, interface)
    for i in range(_C.device_count()):
        register_interface_for_device("%s:%d" % (DEVICE_TYPE, i), interface)
    _dynamo_registered = True


# -- Inductor ------------------------------------------------------------------

def _codegen_classes():
    from torch._inductor.codegen.common import DeviceOpOverrides
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.codegen.wrapper import (
        PythonWrapperCodegen,
        SubgraphPythonWrapperCodegen,
    )

    class OpenRegDeviceOpOverrides(DeviceOpOverrides):
        """The lines of Python the wrapper writes for device operations."""

        def import_get_raw_stream_as(self, name):
            return "from torch_openreg._inductor import get_raw_stream as %s" % name

        def set_device(self, device_idx):
            return "torch.openreg.set_device(%d)" % device_idx

        def synchronize(self):
            return "torch.openreg.synchronize()"

        def device_guard(self, device_idx):
            return "torch.accelerator.device_index(%d)" % device_idx

        def cpp_kernel_type(self):
            return "void*"

    class _HostKernelCalls:
        """Runs the C++ kernels of openreg buffers in a host access."""

        def write_header(self):
            super().write_header()
            self.imports.writeline(
                "from torch_openreg._inductor import host_kernel as openreg_host_kernel")

        def make_allocation(self, name, device, dtype, shape, stride, *args, **kwargs):
            # Inductor names other devices by type only, relying on a device
            # guard it writes for GPUs alone: name the index.
            line = super().make_allocation(name, device, dtype, shape, stride, *args, **kwargs)
            if device.type == DEVICE_TYPE and device.index is not None:
                line = line.replace("device='%s'" % DEVICE_TYPE, "device='%s'" % device)
            return line

        def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None,
                                         triton=True, **kwargs):
            from torch._inductor.virtualized import V

            device = device or V.graph.get_current_device_or_throw()
            if device.type == DEVICE_TYPE and not triton:
                index = 0 if device.index is None else device.index
                self.writeline("with openreg_host_kernel(%d): %s"
                               % (index, self.wrap_kernel_call(kernel_name, call_args)))
                return
            super()._generate_kernel_call_helper(kernel_name, call_args, device=device,
                                                 triton=triton, **kwargs)

    class OpenRegSubgraphWrapperCodegen(_HostKernelCalls, SubgraphPythonWrapperCodegen):
        def write_header(self):
            SubgraphPythonWrapperCodegen.write_header(self)

    class OpenRegWrapperCodegen(_HostKernelCalls, PythonWrapperCodegen):
        """Inductor's Python wrapper, with openreg kernels in host accesses."""

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            if is_subgraph:
                return OpenRegSubgraphWrapperCodegen(subgraph_name, parent_wrapper,
                                                     partition_signatures)
            return OpenRegWrapperCodegen()

    return CppScheduling, OpenRegWrapperCodegen, OpenRegDeviceOpOverrides


def _scheduler_nodes_as_cpu():
    """The scheduler keeps some of its fusion rules apart for CPU nodes (the
    loops of CppScheduling, not the SIMD groups of Triton): openreg nodes are
    scheduled by CppScheduling, so they follow the CPU rules."""
    from torch._inductor.scheduler import BaseSchedulerNode

    is_cpu = BaseSchedulerNode.is_cpu
    if getattr(is_cpu, "_openreg", False):
        return

    def is_cpu_or_openreg(self):
        device = self.get_device()
        return device is not None and device.type in ("cpu", DEVICE_TYPE)

    is_cpu_or_openreg._openreg = True
    BaseSchedulerNode.is_cpu = is_cpu_or_openreg


_inductor_registered = None


def register_inductor():
    """Registers the openreg device with Inductor (once): its C++ scheduling,
    the wrapper and the device op overrides. Returns (scheduling, wrapper)."""
    global _inductor_registered
    if _inductor_registered is None:
        from torch._inductor.codegen.common import (
            register_backend_for_device,
            register_device_op_overrides,
        )

        scheduling, wrapper, overrides = _codegen_classes()
        _scheduler_nodes_as_cpu()
        register_device_op_overrides(DEVICE_TYPE, overrides())
        register_backend_for_device(DEVICE_TYPE, scheduling, wrapper)
        _inductor_registered = (scheduling, wrapper)
        register_dynamo()
    return _inductor_registered


# -- lazy registration ----------------------------------------------------------

class _AfterImport:
    """A meta path finder that runs a function right after a module's code
    has run (the module is then complete): here, the registration of the
    device interface once Dynamo's device_interface module exists."""

    def __init__(self, hooks):
        self.hooks = hooks

    def find_spec(self, name, path, target=None):
        if name not in self.hooks:
            return None
        hook = self.hooks.pop(name)
        if not self.hooks and self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _HookedLoader(spec.loader, hook)
        return spec


class _HookedLoader:
    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._hook()
        except Exception as e:  # never break the import of torch._dynamo
            import warnings

            warnings.warn("torch_openreg: torch.compile support not registered: %s" % e)

    def __getattr__(self, name):  # get_source, get_code, ... for tracebacks
        return getattr(self._loader, name)


def _install_import_hooks():
    """Called at package import: cheap (no torch._dynamo, no torch._inductor)."""
    if "torch._dynamo.device_interface" in sys.modules:
        register_dynamo()
    else:
        sys.meta_path.insert(0, _AfterImport({"torch._dynamo.device_interface": register_dynamo}))
    if "torch._inductor.codegen.common" in sys.modules:
        # Inductor was imported before this package: register now, since its
        # one-time backend registration may already have run.
        register_inductor()
