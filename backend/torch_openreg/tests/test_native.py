"""The common ops as device kernels (csrc/aten/native.cpp): results equal the
CPU's for every overload kind, the work is a kernel of the current stream
charged on the device's roofline under OPENREG_TIME=virtual, and errors come
from the host check or, for data-dependent ones, from the next synchronization."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_openreg  # noqa: F401

DEV = "openreg"


def on_dev(*ts):
    return [t.to(DEV) for t in ts]


def same(dev_result, cpu_result, **tol):
    if isinstance(cpu_result, (tuple, list)):
        for d, c in zip(dev_result, cpu_result):
            same(d, c, **tol)
        return
    assert dev_result.device.type == DEV
    assert dev_result.dtype == cpu_result.dtype
    assert dev_result.shape == cpu_result.shape
    assert dev_result.stride() == cpu_result.stride()
    torch.testing.assert_close(dev_result.cpu(), cpu_result, **tol)


UNARY = ["neg", "exp", "log", "sqrt", "rsqrt", "abs", "sigmoid", "tanh", "reciprocal", "sin",
         "cos"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_all_overloads(name):
    x = torch.rand(33, 17) + 0.5
    (dx,) = on_dev(x)
    fn = getattr(torch, name)
    same(fn(dx), fn(x))
    out = torch.empty(0, device=DEV)
    fn(dx, out=out)  # resized from empty, as on the CPU
    same(out, fn(x))
    y, dy = x.clone(), dx.clone()
    getattr(y, name + "_")()
    getattr(dy, name + "_")()
    same(dy, y)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_broadcast_scalars_promotion(op):
    a, b = torch.randn(4, 1, 5), torch.randn(3, 1) + 3
    da, db = on_dev(a, b)
    fn = getattr(torch, op)
    same(fn(da, db), fn(a, b))
    same(fn(da, 2.5), fn(a, 2.5))  # a Python scalar (a CPU 0-dim tensor)
    same(fn(da, torch.tensor(1.5)), fn(a, torch.tensor(1.5)))
    ia = torch.arange(20).reshape(4, 5)
    same(fn(ia.to(DEV), da[:, 0]), fn(ia, a[:, 0]))  # int64 with float32: float32
    y, dy = a.clone(), da.clone()
    getattr(y, op + "_")(b[0])
    getattr(dy, op + "_")(db[0])
    same(dy, y)


def test_non_contiguous_inputs_and_outputs():
    a = torch.randn(8, 6)
    da = a.to(DEV)
    same(da.t() + 1, a.t() + 1)  # the output follows the input's layout
    same(da[:, ::2] * da[:, 1::2], a[:, ::2] * a[:, 1::2])
    out = torch.empty(6, 8, device=DEV).t()  # a transposed out=
    torch.add(da, da, out=out)
    torch.testing.assert_close(out.cpu(), a + a)
    same(torch.mm(da.t(), da), torch.mm(a.t(), a))


def test_reductions_softmax_matmul_indexing():
    x = torch.randn(6, 7, 5)
    (dx,) = on_dev(x)
    same(dx.sum(dim=1), x.sum(dim=1))
    same(dx.sum(dim=(0, 2), keepdim=True), x.sum(dim=(0, 2), keepdim=True))
    same(dx.mean(dim=-1), x.mean(dim=-1))
    same(dx.amax(dim=0), x.amax(dim=0))
    same(dx.amin(dim=2), x.amin(dim=2))
    same(dx.argmax(dim=1), x.argmax(dim=1))
    same(torch.softmax(dx, dim=-1), torch.softmax(x, dim=-1))
    same(torch.log_softmax(dx, dim=1), torch.log_softmax(x, dim=1))
    a, b, c = torch.randn(5, 3), torch.randn(3, 4), torch.randn(4)
    da, db, dc = on_dev(a, b, c)
    same(da @ db, a @ b, rtol=1e-5, atol=1e-5)
    same(torch.addmm(dc, da, db, beta=0.5, alpha=2), torch.addmm(c, a, b, beta=0.5, alpha=2),
         rtol=1e-5, atol=1e-5)
    p, q = torch.randn(2, 5, 3), torch.randn(2, 3, 4)
    dp, dq = on_dev(p, q)
    same(torch.bmm(dp, dq), torch.bmm(p, q), rtol=1e-5, atol=1e-5)
    same(torch.baddbmm(torch.zeros(2, 5, 4, device=DEV), dp, dq),
         torch.baddbmm(torch.zeros(2, 5, 4), p, q), rtol=1e-5, atol=1e-5)
    idx = torch.tensor([4, 0, 2, 2])
    same(dx.index_select(1, idx.to(DEV)), x.index_select(1, idx))
    g = torch.randint(0, 5, (6, 7, 3))
    same(torch.gather(dx, 2, g.to(DEV)), torch.gather(x, 2, g))
    same(torch.cat([dx, dx[:2]], dim=0), torch.cat([x, x[:2]], dim=0))
    same(torch.where(dx > 0, dx, 0.0 * dx), torch.where(x > 0, x, 0.0 * x))


def test_empty_tensors():
    e = torch.empty(0, 3, device=DEV)
    assert (e + 1).shape == (0, 3)
    assert e.sum(dim=0).cpu().tolist() == [0.0, 0.0, 0.0]  # a reduction of nothing writes zeros
    assert torch.mm(torch.empty(2, 0, device=DEV), torch.empty(0, 3, device=DEV)).cpu().eq(0).all()


def _train_like_cpu(optimizer, steps, clip=None, **dev_options):
    """A small MLP trained on the CPU and on the device from the same weights
    and batches (the device's optimizer with dev_options): the same weights."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    dmodel = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    dmodel.load_state_dict(model.state_dict())
    dmodel.to(DEV)
    cpu_options = {k: False for k in dev_options}  # the CPU's own loops
    runs = [(model, optimizer(model.parameters(), lr=1e-2, **cpu_options), False),
            (dmodel, optimizer(dmodel.parameters(), lr=1e-2, **dev_options), True)]
    x, y = torch.randn(16, 10), torch.randint(0, 4, (16,))
    dx, dy = on_dev(x, y)
    for _ in range(steps):
        for m, o, on_device in runs:
            o.zero_grad()
            inp, tgt = (dx, dy) if on_device else (x, y)
            torch.nn.functional.cross_entropy(m(inp), tgt).backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(m.parameters(), clip, foreach=on_device)
            o.step()
    for p, dp in zip(model.parameters(), dmodel.parameters()):
        torch.testing.assert_close(dp.cpu(), p, rtol=1e-5, atol=1e-6)


def test_training_step_matches_cpu():
    _train_like_cpu(torch.optim.Adam, steps=3)


def _lists(*shapes_per_list, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [[torch.rand(s, generator=g) + 0.5 for s in shapes] for shapes in shapes_per_list]


SHAPES = [(3,), (4, 5), (2, 3, 2)]


@pytest.mark.parametrize("call", [
    lambda a, b, c: torch._foreach_add(a, b, alpha=2),
    lambda a, b, c: torch._foreach_mul(a, 3.0),
    lambda a, b, c: torch._foreach_div(a, [1.0, 2.0, 4.0]),
    lambda a, b, c: torch._foreach_sqrt(a),
    lambda a, b, c: torch._foreach_addcdiv(a, b, c, [0.1, 0.2, 0.3]),
    lambda a, b, c: torch._foreach_lerp(a, b, 0.25),
    lambda a, b, c: torch._foreach_norm(a),
    lambda a, b, c: torch._foreach_maximum(a, b),
])
def test_foreach_functional(call):
    a, b, c = _lists(SHAPES, SHAPES, SHAPES)
    same(call(*[on_dev(*x) for x in (a, b, c)]), call(a, b, c))


@pytest.mark.parametrize("call", [
    lambda a, b, c: torch._foreach_add_(a, b, alpha=-1),
    lambda a, b, c: torch._foreach_mul_(a, 0.5),
    lambda a, b, c: torch._foreach_mul_(a, torch.tensor(3.0, device=a[0].device)),
    lambda a, b, c: torch._foreach_addcmul_(a, b, c, 0.1),
    lambda a, b, c: torch._foreach_addcdiv_(a, b, c, [1.0, -1.0, 0.5]),
    lambda a, b, c: torch._foreach_lerp_(a, b, 0.9),
    lambda a, b, c: torch._foreach_sqrt_(a),
    lambda a, b, c: torch._foreach_zero_(a),
])
def test_foreach_in_place(call):
    a, b, c = _lists(SHAPES, SHAPES, SHAPES)
    da, db, dc = (on_dev(*x) for x in (a, b, c))
    ptrs = [t.data_ptr() for t in da]
    call(a, b, c)
    call(da, db, dc)
    assert [t.data_ptr() for t in da] == ptrs  # in place, on the device
    same(da, a)


def test_foreach_ops_are_device_kernels():
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    a, b = (on_dev(*x) for x in _lists(SHAPES, SHAPES))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch._foreach_lerp_(a, b, 0.5)
        torch._foreach_sqrt(a)
    kernels = [e.name for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    # One kernel per call over the whole lists (the fallback would copy each
    # tensor to the host and back).
    assert kernels == ["_foreach_lerp_.Scalar", "_foreach_sqrt"], kernels


def test_foreach_mixed_devices_are_refused():
    a = [torch.ones(3, device=DEV), torch.ones(3, device="openreg:1")]
    with pytest.raises(RuntimeError, match="same device|openreg:1"):
        torch._foreach_add_(a, 1.0)


def test_adam_foreach_matches_cpu():
    _train_like_cpu(torch.optim.AdamW, steps=4, clip=0.5, foreach=True)


CONVS = {
    "conv1d": (lambda: torch.nn.Conv1d(4, 6, 3, stride=2, padding=1), (2, 4, 17)),
    "conv2d": (lambda: torch.nn.Conv2d(4, 8, 3, padding=1, dilation=1), (2, 4, 9, 9)),
    "conv2d groups, dilation": (lambda: torch.nn.Conv2d(4, 8, 3, padding=2, dilation=2,
                                                        groups=2), (2, 4, 9, 9)),
    "conv2d no bias": (lambda: torch.nn.Conv2d(4, 8, 1, bias=False), (2, 4, 5, 5)),
    "conv3d": (lambda: torch.nn.Conv3d(2, 3, 3, padding=1), (1, 2, 5, 5, 5)),
    "conv_transpose2d": (lambda: torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1,
                                                          output_padding=1, groups=2),
                         (2, 4, 6, 6)),
}


@pytest.mark.parametrize("name", CONVS)
def test_convolutions_and_their_gradients_match_cpu(name):
    make, shape = CONVS[name]
    torch.manual_seed(0)
    conv = make()
    dconv = make().to(DEV)
    dconv.load_state_dict(conv.state_dict())
    x = torch.randn(shape, requires_grad=True)
    dx = x.detach().to(DEV).requires_grad_()
    y, dy = conv(x), dconv(dx)
    same(dy, y, rtol=1e-4, atol=1e-5)
    y.square().sum().backward()
    dy.square().sum().backward()
    torch.testing.assert_close(dx.grad.cpu(), x.grad, rtol=1e-4, atol=1e-4)
    for p, dp in zip(conv.parameters(), dconv.parameters()):
        torch.testing.assert_close(dp.grad.cpu(), p.grad, rtol=1e-4, atol=1e-4)


def test_convolution_errors():
    conv = torch.nn.Conv2d(4, 8, 3).to(DEV)
    with pytest.raises(RuntimeError, match="same device.*openreg:1"):
        conv(torch.randn(1, 4, 5, 5, device="openreg:1"))  # input on another device
    with pytest.raises(RuntimeError, match="channels|4"):
        conv(torch.randn(1, 3, 5, 5, device=DEV))  # the Meta kernel's shape check
    assert conv(torch.randn(1, 4, 5, 5, device=DEV)).shape == (1, 8, 3, 3)


CONV_VIRTUAL = r"""
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
x = torch.randn(8, 16, 32, 32, device="openreg")
w = torch.randn(32, 16, 3, 3, device="openreg")
torch.openreg.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    torch.nn.functional.conv2d(x, w, padding=1)
rate = torch.openreg.get_device_properties(0)["compute_rate_gflops"] * 1e9
print(repr(([(e.name, e.time_range.elapsed_us()) for e in prof.events()
             if e.device_type == DeviceType.PrivateUse1],
            3 + 2 * (8 * 32 * 32 * 32) * (16 * 9) / rate * 1e6)))
"""


@pytest.mark.parametrize("native", ["1", "0"])
def test_virtual_time_of_a_convolution_is_its_flops(native):
    # Convolutions are device kernels also with TORCH_OPENREG_NATIVE_OPS=0:
    # the fallback cannot run PyTorch's convolution_overrideable.
    r = subprocess.run([sys.executable, "-c", CONV_VIRTUAL], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, OPENREG_TIME="virtual",
                                             OPENREG_DEVICE_PROFILE="a100",
                                             TORCH_OPENREG_NATIVE_OPS=native))
    assert r.returncode == 0, r.stderr
    kernels, want = eval(r.stdout)
    assert [name for name, _ in kernels] == ["convolution"]
    assert kernels[0][1] == pytest.approx(want, abs=0.002)  # 2 FLOPs per multiply-add


def test_ordered_on_the_current_stream():
    s = torch.Stream(DEV)
    a = torch.ones(1 << 20, device=DEV)
    with s:
        b = a * 3
        c = b + b
    s.synchronize()
    assert c.cpu().eq(6).all()


def test_host_errors_are_synchronous():
    a, b = torch.ones(3, 4, device=DEV), torch.ones(5, device=DEV)
    with pytest.raises(RuntimeError, match="broadcast|size of tensor a"):
        a + b
    with pytest.raises(RuntimeError, match="cannot be multiplied|same reduction dim"):
        torch.mm(a, a)
    with pytest.raises(RuntimeError, match="same device|openreg:1"):
        a + torch.ones(3, 4, device="openreg:1")
    with pytest.raises(RuntimeError, match="same device|cpu"):
        a + torch.ones(3, 4)
    assert (a + 1).cpu().eq(2).all()  # and the device keeps working


def test_data_dependent_error_at_synchronization():
    x = torch.arange(10.0, device=DEV)
    bad = torch.tensor([1, 42], device=DEV)
    y = x.index_select(0, bad)  # returns: the kernel runs on the device
    with pytest.raises(RuntimeError, match="device-side error in index_select.*out of range"):
        torch.openreg.synchronize()
    torch.openreg.synchronize()  # reported once
    assert x.index_select(0, torch.tensor([3], device=DEV)).item() == 3.0
    del y


VIRTUAL = r"""
import torch
props = torch.openreg.get_device_properties(0)
rate, bw = props["compute_rate_gflops"] * 1e9, props["memory_bandwidth_gbs"] * 1e9

def timed(fn):
    start, end = torch.Event("openreg", enable_timing=True), torch.Event("openreg", enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e-3  # seconds

a = torch.randn(512, 512, device="openreg")
v = torch.randn(1 << 22, device="openreg")
tiny = torch.randn(1, 1, device="openreg")
timed(lambda: a @ a)  # first use (allocations) out of the picture
latency = timed(lambda: tiny @ tiny)
mm = timed(lambda: a @ a) - latency
add = timed(lambda: v + v) - latency
# atan is not a device kernel: the fallback runs it on the host, and the clock
# charges the op (bytes / bandwidth), not the fallback's copies to the host and back.
fallback = timed(lambda: v.atan()) - latency
print(repr((mm, 2 * 512 ** 3 / rate, add, 3 * 4 * (1 << 22) / bw, fallback, 2 * 4 * (1 << 22) / bw)))
"""


def _virtual(**env):
    env = dict(os.environ, OPENREG_TIME="virtual", OPENREG_DEVICE_PROFILE="a100", **env)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(VIRTUAL)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_virtual_time_is_the_roofline():
    one, two = _virtual(OPENREG_DEVICE_THREADS="1"), _virtual(OPENREG_DEVICE_THREADS="2")
    mm, mm_want, add, add_want, fallback, fallback_want = eval(one)
    assert mm == pytest.approx(mm_want, rel=0.01)  # compute-bound: FLOPs / rate
    assert add == pytest.approx(add_want, rel=0.01)  # memory-bound: bytes / bandwidth
    assert fallback == pytest.approx(fallback_want, rel=0.01)
    assert one == two  # deterministic, whatever the thread count


def test_virtual_time_of_the_fallback_is_the_same_roofline():
    mm, mm_want, add, add_want, _, _ = eval(_virtual(TORCH_OPENREG_NATIVE_OPS="0"))
    assert mm == pytest.approx(mm_want, rel=0.01)
    assert add == pytest.approx(add_want, rel=0.01)


FOREACH_VIRTUAL = r"""
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
a = [torch.randn(1 << 16, device="openreg") for _ in range(16)]
b = [torch.randn(1 << 16, device="openreg") for _ in range(16)]
torch.openreg.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    torch._foreach_lerp_(a, b, 0.1)
bw = torch.openreg.get_device_properties(0)["memory_bandwidth_gbs"] * 1e9
print(repr(([(e.name, e.time_range.elapsed_us()) for e in prof.events()
             if e.device_type == DeviceType.PrivateUse1], 3 + 3 * 16 * (1 << 16) * 4 / bw * 1e6)))
"""


def test_virtual_time_of_a_foreach_op_is_one_launch_over_its_lists():
    r = subprocess.run([sys.executable, "-c", FOREACH_VIRTUAL], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, OPENREG_TIME="virtual",
                                             OPENREG_DEVICE_PROFILE="a100"))
    assert r.returncode == 0, r.stderr
    kernels, want = eval(r.stdout)
    # One launch (3 us on the a100) and the bytes of self (read and written)
    # and end (read), at the memory bandwidth.
    assert [name for name, _ in kernels] == ["_foreach_lerp_.Scalar"]
    assert kernels[0][1] == pytest.approx(want, abs=0.002)


def test_benchmark_prints_every_row():
    bench = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "ops_perf.py")
    r = subprocess.run([sys.executable, bench, "--seconds", "0.002"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("# torch") and "load average" in lines[0]
    rows = [line.split() for line in lines[2:]]
    assert len(rows) == 13
    for row in rows:  # three times, then two ratios (printed with 2 decimals: maybe 0.00)
        assert all(float(x) > 0 for x in row[-5:-2]) and all(float(x) >= 0 for x in row[-2:])


def test_convolution_under_autocast_matches_cpu_autocast():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    dconv = torch.nn.Conv2d(3, 4, 3, padding=1).to(DEV)
    dconv.load_state_dict(conv.state_dict())
    x = torch.randn(2, 3, 8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = conv(x)
    with torch.autocast("openreg", dtype=torch.bfloat16):
        dy = dconv(x.to(DEV))
    assert dy.dtype == y.dtype == torch.bfloat16  # on autocast's lower-precision list
    torch.testing.assert_close(dy.cpu(), y)
