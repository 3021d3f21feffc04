"""Device registration, the device module, and errors for bad devices."""
import pytest
import torch

import torch_openreg


def test_device_count_follows_runtime():
    assert torch_openreg.device_count() == 2  # OPENREG_DEVICES default
    assert torch_openreg.is_available()


def test_device_type_name():
    expected = "openreg"
    assert torch_openreg.DEVICE_TYPE == expected
    d = torch_openreg.device(1)
    assert d.type == expected and d.index == 1
    assert torch.device(expected, 1) == d


def test_device_module_registered():
    mod = getattr(torch, torch_openreg.DEVICE_TYPE)
    assert mod is torch_openreg
    for name in ("is_available", "device_count", "current_device", "set_device", "synchronize",
                 "Stream", "Event", "manual_seed", "memory_allocated", "max_memory_allocated",
                 "reset_peak_memory_stats"):
        assert callable(getattr(mod, name)), name


def test_set_device_changes_current_device_and_default_placement():
    assert torch_openreg.current_device() == 0
    torch_openreg.set_device(1)
    try:
        assert torch_openreg.current_device() == 1
        t = torch.empty(2, device=torch_openreg.DEVICE_TYPE)
        assert t.device.index == 1
    finally:
        torch_openreg.set_device(0)
    assert torch_openreg.current_device() == 0


def test_tensor_lands_on_requested_device():
    t = torch.ones(3, device=torch_openreg.device(1))
    assert t.device == torch_openreg.device(1)
    assert t.device.type == torch_openreg.DEVICE_TYPE
    assert torch_openreg.current_device() == 0  # the guard restored it
    assert t.cpu().tolist() == [1.0, 1.0, 1.0]


def test_properties_come_from_runtime():
    props = torch_openreg.get_device_properties(0)
    assert props["total_memory"] > 0
    assert props["multi_processor_count"] >= 1
    free, total = torch_openreg.mem_get_info(0)
    assert total == props["total_memory"] and 0 < free <= total


def test_synchronize_every_device():
    for i in range(torch_openreg.device_count()):
        x = torch.ones(10, device=torch_openreg.device(i))
        torch_openreg.synchronize(i)
        assert x.sum().item() == 10


@pytest.mark.parametrize("index", [2, 7, -1])
def test_bad_index_raises_for_tensor_creation(index):
    # -1 is rejected by torch.device itself; 2 and 7 by the runtime's count.
    with pytest.raises((RuntimeError, IndexError), match="(?i)device"):
        torch.empty(2, device=torch.device(torch_openreg.DEVICE_TYPE, index))


def test_bad_index_raises_for_copy_to_device():
    with pytest.raises(IndexError, match="invalid device index 5"):
        torch.ones(2).to(torch.device(torch_openreg.DEVICE_TYPE, 5))


@pytest.mark.parametrize("call", [
    lambda: torch_openreg.set_device(2),
    lambda: torch_openreg.synchronize(3),
    lambda: torch_openreg.memory_allocated(9),
    lambda: torch_openreg.manual_seed(1, device=4),
    lambda: torch_openreg.get_device_properties(2),
    lambda: torch_openreg.Stream(device=2),
    lambda: torch_openreg.current_stream(-3),
])
def test_bad_index_raises_in_device_module(call):
    with pytest.raises(IndexError):
        call()


def test_wrong_device_type_is_a_value_error():
    with pytest.raises(ValueError, match="expected a"):
        torch_openreg.synchronize(torch.device("cpu"))
    with pytest.raises(ValueError, match="invalid device 'zero'"):
        torch_openreg.set_device("zero")
    with pytest.raises(TypeError):
        torch_openreg.set_device(1.5)


def _in_fresh_interpreter(code, **env):
    import os
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_runtime_that_cannot_start_gives_errors_not_crashes():
    code = """
import torch, torch_openreg as t
print(t.is_available())
for call in (t.device_count, lambda: torch.ones(1, device=t.DEVICE_TYPE)):
    try:
        call()
        print("no-error")
    except RuntimeError as e:
        print("orErrorInitialization" in str(e))
"""
    assert _in_fresh_interpreter(code, OPENREG_DEVICES="abc") == ["False", "True", "True"]


def test_devices_and_memory_come_from_runtime_configuration():
    code = ("import torch_openreg as t; print(t.device_count(), "
            "t.get_device_properties(2)['total_memory'], t.mem_get_info(2)[1])")
    count, total, arena = _in_fresh_interpreter(code, OPENREG_DEVICES="3",
                                                 OPENREG_DEVICE_PROFILE="v100")
    assert count == "3"
    assert int(total) == int(arena) == 32 << 30  # the v100 profile's memory
    count, total, _ = _in_fresh_interpreter(code, OPENREG_DEVICES="3",
                                            OPENREG_DEVICE_MEM="64M")
    assert int(total) == 64 << 20
