"""torch.autograd.profiler on openreg: device time per op from the runtime's
events (PyTorch's PrivateUse1 profiler stubs), deterministic in virtual time."""
import os
import subprocess
import sys

import torch

import torch_openreg  # noqa: F401

PROFILE = """
import torch
a = torch.randn(128, 128, device="openreg")
b = torch.randn(128, 128, device="openreg")
torch.openreg.synchronize()
with torch.autograd.profiler.profile(use_device="openreg", use_kineto=False) as prof:
    c = (a @ b).relu()
    c.cpu()
for e in prof.key_averages():
    if e.key in ("aten::mm", "aten::relu", "aten::_copy_from"):
        print(e.key, e.count, e.device_time_total)
"""


def _profile(**env):
    r = subprocess.run([sys.executable, "-c", PROFILE], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, **env))
    assert r.returncode == 0, r.stderr
    return {k: (int(n), float(t)) for k, n, t in (line.split() for line in r.stdout.splitlines())}


def test_ops_get_device_time(dev):
    a = torch.randn(64, 64, device=dev)
    with torch.autograd.profiler.profile(use_device="openreg", use_kineto=False) as prof:
        (a @ a).sum().item()
    events = {e.key: e for e in prof.key_averages()}
    assert events["aten::mm"].device_time_total > 0
    assert "OPENREG" in prof.key_averages().table(row_limit=3)  # the device's columns


def test_device_times_are_the_same_every_run_in_virtual_time():
    first = _profile(OPENREG_TIME="virtual")
    second = _profile(OPENREG_TIME="virtual")
    assert set(first) == {"aten::mm", "aten::relu", "aten::_copy_from"}
    assert first == second
    assert all(t > 0 for _, t in first.values())
