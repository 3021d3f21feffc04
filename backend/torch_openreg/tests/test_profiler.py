"""torch.autograd.profiler and torch.profiler on openreg: device time per op
from the runtime (the PrivateUse1 profiler stubs' events without Kineto, the
runtime's activity records through the Kineto plugin with it), deterministic in
virtual time."""
import os
import subprocess
import sys

import pytest
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


# ---- torch.profiler (Kineto) with ProfilerActivity.PrivateUse1 ---------------

from torch.autograd import DeviceType  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

DEVICE_ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _device_events(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def test_kineto_lists_the_devices_kernels_and_copies(dev):
    a = torch.randn(64, 64, device=dev)
    b = torch.randn(64, 64, device=dev)
    torch.openreg.synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        c = (a @ b).relu()
        host = c.cpu()
    assert torch.equal(host, (a.cpu() @ b.cpu()).relu())
    names = {e.name for e in _device_events(prof)}
    # A device kernel is named by its op's overload, a fallback op's charge
    # (relu runs on the host) by the op.
    assert {"mm", "aten::relu", "memcpy DtoH"} <= names, names
    # Under each op, the runtime call that issued its work, as cudaLaunchKernel.
    calls = {e.name for e in prof.events() if e.name.startswith("or")}
    assert {"orLaunchKernel", "orMemcpyAsync"} <= calls, calls
    # Each op's device time is that of the work it issued.
    ops = {e.key: e for e in prof.key_averages()}
    assert ops["aten::mm"].self_device_time_total > 0
    assert ops["aten::relu"].self_device_time_total > 0
    assert ops["aten::_copy_from"].device_time_total > 0
    assert "Self OPENREG" in prof.key_averages().table(sort_by="self_device_time_total",
                                                       row_limit=5)


def test_kineto_links_device_work_to_the_op_that_issued_it(dev):
    x = torch.randn(1000, device=dev)
    torch.openreg.synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        torch.exp(x)
        torch.neg(x)
    by_op = {}
    for e in prof.events():
        for k in e.kernels:
            by_op.setdefault(e.name, []).append(k.name)
    assert by_op.get("aten::exp") == ["exp"], by_op
    assert by_op.get("aten::neg") == ["neg"], by_op


def test_kineto_trace_has_device_tracks_and_flows(dev, tmp_path):
    x = torch.randn(256, device=dev)
    torch.openreg.synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        (x * 2).sum().item()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    import json
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("name") == "mul.Tensor"]
    assert kernels, [e.get("name") for e in events if e.get("cat") == "kernel"]
    k = kernels[0]
    assert k["args"]["device_type"] == "openreg" and k["args"]["device"] == 0
    assert k["args"]["flops"] == 256 and k["args"]["bytes"] > 0
    # A flow from the op that launched it (Kineto's "ac2g" arrows).
    flows = [e for e in events if e.get("cat") == "ac2g" and e.get("id") == k["args"]["correlation"]]
    assert {f["ph"] for f in flows} >= {"s", "f"}, flows


def test_kineto_mode_does_not_double_count_with_the_event_stubs(dev):
    a = torch.randn(64, 64, device=dev)
    torch.openreg.synchronize()
    with profile(activities=DEVICE_ACTIVITIES) as prof:
        a @ a
        torch.openreg.synchronize()
    mm = [e for e in _device_events(prof) if e.name == "mm"]
    assert len(mm) == 1, mm


KINETO_PROFILE = """
import torch
from torch.profiler import ProfilerActivity, profile
a = torch.randn(128, 128, device="openreg")
b = torch.randn(128, 128, device="openreg")
torch.openreg.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    c = (a @ b).relu()
    c.cpu()
for e in prof.events():
    if e.device_type == torch.autograd.DeviceType.PrivateUse1:
        print(e.name, e.device_index, round(e.time_range.elapsed_us() * 1000))
rate = torch.openreg.get_device_properties(0)["compute_rate_gflops"]
print("want", 0, 2 * 128 ** 3 / rate)  # ns of the mm's FLOPs at the device's rate
"""


def test_kineto_device_times_are_the_virtual_clocks_in_virtual_time():
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", KINETO_PROFILE], capture_output=True,
                           text=True, timeout=300,
                           env=dict(os.environ, OPENREG_TIME="virtual",
                                    OPENREG_DEVICE_PROFILE="a100"))
        assert r.returncode == 0, r.stderr
        runs.append(sorted(line.split() for line in r.stdout.splitlines()))
    assert runs[0] == runs[1]
    ns = {" ".join(f[:-2]): float(f[-1]) for f in runs[0]}
    # The roofline: the a100's 3 us launch latency + the FLOPs at its rate.
    assert ns["mm"] == pytest.approx(3000 + ns["want"], abs=2), ns


def test_a_cpu_only_profile_has_no_device_activities(dev):
    x = torch.randn(100, device=dev)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.exp(x)
        torch.openreg.synchronize()
    assert "aten::exp" in {e.name for e in prof.events()}
    assert _device_events(prof) == []


JOINED = """
import json, os, sys
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile
dist.init_process_group("occl", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=0, world_size=1)
x = torch.ones(1000, device="openreg")
a = torch.randn(64, 64, device="openreg")
torch.openreg.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    dist.all_reduce(x)
    a @ a
    torch.openreg.synchronize()
prof.export_chrome_trace(sys.argv[1])
ops = {e.key: e for e in prof.key_averages()}
print(ops["c10d::allreduce_"].device_time_total > 0, x[0].item())
dist.destroy_process_group()
"""


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_kineto_and_the_runtimes_trace_share_correlation_ids(tmp_path):
    import json
    kineto, runtime = tmp_path / "kineto.json", tmp_path / "runtime.json"
    r = subprocess.run([sys.executable, "-c", JOINED, str(kineto), str(_free_port())],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OPENREG_TRACE=str(runtime)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "1.0"]  # the collective has device time
    k_events = json.loads(kineto.read_text())["traceEvents"]
    r_events = json.loads(runtime.read_text())["traceEvents"]

    def by_name(events, name):
        found = [e for e in events if e.get("name") == name and e.get("ph") == "X"]
        assert len(found) == 1, (name, found)
        return found[0]["args"]

    for name in ("occl AllReduce", "mm"):
        # The same id in both traces, and it is the id of the op that issued it.
        assert by_name(k_events, name)["correlation"] == by_name(r_events, name)["correlation"]
    allreduce = by_name(k_events, "occl AllReduce")
    assert allreduce["args"]["nranks"] == 1 and allreduce["args"]["op"] == "sum"
    issued = [e for e in k_events if e.get("cat") == "privateuse1_runtime"]
    assert {"occlAllReduce", "orLaunchKernel"} <= {e["name"] for e in issued}
