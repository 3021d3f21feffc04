"""PyTorch's device-generic test framework on the openreg device: test
classes instantiated for privateuse1 by instantiate_device_type_tests, and
the OpInfo database's samples of the ops the device implements natively (not
through the CPU fallback) checked against the CPU."""
import torch
from torch.testing._internal.common_device_type import (
    dtypes,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase, run_tests

import torch_openreg  # noqa: F401  (autoload does it too)

# OpInfos whose device kernels are the extension's own (csrc/aten,
# csrc/runtime): views, copies, fills, attention, dropout's entry, and the
# common ops of the device-kernel table (csrc/aten/native.cpp), convolutions
# included. (An OpInfo's sample may also reach an overload outside the table,
# which the fallback runs: the results are checked all the same.)
NATIVE_OPS = {
    "view", "view_as", "reshape", "as_strided", "view_as_real", "view_as_complex", "unfold",
    "contiguous", "clone", "fill", "zero_", "nn.functional.scaled_dot_product_attention",
    "T", "transpose", "narrow", "select", "expand", "squeeze", "unsqueeze", "flatten",
    # native.cpp
    "add", "sub", "mul", "div", "neg", "exp", "log", "sqrt", "rsqrt", "abs", "sigmoid", "tanh",
    "reciprocal", "sin", "cos", "nn.functional.gelu", "nn.functional.silu", "clamp_min",
    "maximum", "minimum", "where", "pow", "addcmul", "addcdiv", "lerp", "sum", "mean", "amax",
    "amin", "argmax", "softmax", "log_softmax", "mm", "addmm", "bmm", "baddbmm",
    "index_select", "gather", "cat", "nn.functional.conv1d", "nn.functional.conv2d",
    "nn.functional.conv3d", "nn.functional.conv_transpose2d",
}
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.uint8, torch.bool, torch.complex64)


HALF_IN_FLOAT32 = {"nn.functional.scaled_dot_product_attention"}
# The device's attention is the two-pass softmax, the CPU's a blockwise one:
# in float32 they differ by a few ulps more than assertEqual's default.
TOLERANCES = {("nn.functional.scaled_dot_product_attention", torch.float32): (1e-5, 5e-5)}


def _cpu(x):
    return x.cpu() if isinstance(x, torch.Tensor) else x


def _cpu_float64(x):
    return x.cpu().double() if isinstance(x, torch.Tensor) and x.is_floating_point() else _cpu(x)


# as_strided's "partial_views" samples read storage outside the view, which
# a copy of the view to the CPU does not carry: no CPU reference exists.
NATIVE_OPINFOS = [op for op in op_db
                  if op.name in NATIVE_OPS and op.variant_test_name != "partial_views"]


class TestNativeOps(TestCase):
    @ops(NATIVE_OPINFOS, allowed_dtypes=DTYPES)
    def test_samples_match_cpu(self, device, dtype, op):
        self.assertEqual(torch.device(device).type, "openreg")
        checked = 0
        for sample in op.sample_inputs(device, dtype, requires_grad=False):
            # Attention in half precision: the reference is computed in float64
            # and rounded once (the device's kernel computes in float32; the
            # CPU's in half precision rounds at every step).
            low = dtype in (torch.float16, torch.bfloat16) and op.name in HALF_IN_FLOAT32
            cpu = sample.transform(_cpu_float64 if low else _cpu)
            expected = op(cpu.input, *cpu.args, **cpu.kwargs)
            if low and isinstance(expected, torch.Tensor):
                expected = expected.to(dtype)
            actual = op(sample.input, *sample.args, **sample.kwargs)
            for a in (actual if isinstance(actual, (tuple, list)) else [actual]):
                if isinstance(a, torch.Tensor):
                    self.assertEqual(a.device.type, "openreg")
            if sample.kwargs.get("dropout_p", 0.0) > 0.0:
                # Random: the device's generator is not the CPU's.
                self.assertEqual(actual.shape, expected.shape)
                continue
            rtol, atol = TOLERANCES.get((op.name, dtype), (None, None))
            self.assertEqual(actual, expected, exact_device=False, rtol=rtol, atol=atol)
            checked += 1
        self.assertGreater(checked, 0)


class TestDeviceGeneric(TestCase):
    @dtypes(*DTYPES)
    def test_empty_fill_copy_round_trip(self, device, dtype):
        x = torch.empty(3, 5, device=device, dtype=dtype)
        x.fill_(1)
        self.assertEqual(x.cpu(), torch.ones(3, 5, dtype=dtype))
        x.zero_()
        self.assertEqual(x.cpu(), torch.zeros(3, 5, dtype=dtype))
        src = torch.arange(15).reshape(3, 5).to(dtype)
        y = src.to(device).t().contiguous()
        self.assertEqual(y.cpu(), src.t())

    def test_across_devices(self, device):
        devices = self.get_all_devices()
        self.assertEqual(len(devices), torch.openreg.device_count())
        x = torch.arange(8.0, device=devices[0])
        for d in devices[1:]:
            self.assertEqual(x.to(d).device, torch.device(d))
            self.assertEqual(x.to(d).cpu(), x.cpu())


instantiate_device_type_tests(TestNativeOps, globals(), only_for="privateuse1")
instantiate_device_type_tests(TestDeviceGeneric, globals(), only_for="privateuse1")

if __name__ == "__main__":
    run_tests()
