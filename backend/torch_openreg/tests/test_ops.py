"""Operators beyond the native set: scaled_dot_product_attention through the
overrideable fused entry, a custom operator (torch.library), DLPack, the
generated methods, serialization, and errors for tensors of two devices."""
import io

import pytest
import torch
import torch.nn.functional as F

import torch_openreg


def _qkv(device, dtype=torch.float32, l=5, s=7):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, l, 8, generator=g, dtype=dtype)
    k = torch.randn(2, 3, s, 8, generator=g, dtype=dtype)
    v = torch.randn(2, 3, s, 8, generator=g, dtype=dtype)
    return [t.to(device).requires_grad_() for t in (q, k, v)]


@pytest.mark.parametrize("causal,mask", [(False, None), (True, None), (False, "bool"),
                                         (False, "float")])
def test_sdpa_fused_entry_matches_cpu_forward_and_backward(dev, causal, mask):
    ours, ref = _qkv(dev), _qkv("cpu")
    g = torch.Generator().manual_seed(1)
    m = None
    if mask == "bool":
        m = torch.rand(5, 7, generator=g) > 0.3
        m[:, 0] = True  # no row fully masked
    elif mask == "float":
        m = torch.randn(5, 7, generator=g)
    q, k, v = ours
    assert torch._fused_sdp_choice(q, k, v, is_causal=causal) == 4  # SDPBackend.overrideable
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=None if m is None else m.to(dev),
                                         is_causal=causal)
    expected = F.scaled_dot_product_attention(*ref, attn_mask=m, is_causal=causal)
    assert out.device == dev
    assert "Overrideable" in out.grad_fn.name()
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    expected.sum().backward()
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-5)


def test_sdpa_with_dropout_takes_the_math_path(dev):
    q, k, v = _qkv(dev)
    assert torch._fused_sdp_choice(q, k, v, dropout_p=0.5) == 0  # SDPBackend.math
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert out.shape == (2, 3, 5, 8) and out.device == dev


def test_custom_operator_with_autograd_and_meta(dev):
    x = torch.tensor([-2.0, 0.5, 3.0], device=dev, requires_grad=True)
    y = torch.ops.openreg.scaled_abs(x, 2.0)
    assert y.device == dev and y.cpu().tolist() == [4.0, 1.0, 6.0]
    y.sum().backward()
    assert x.grad.cpu().tolist() == [-2.0, 2.0, 2.0]
    meta = torch.ops.openreg.scaled_abs(torch.empty(4, 2, device="meta"), 1.0)
    assert meta.device.type == "meta" and meta.shape == (4, 2)
    assert torch.ops.openreg.scaled_abs(torch.tensor([-1.0]), 3.0).tolist() == [3.0]


def test_dlpack_both_ways_shares_memory(dev):
    # DLPack capsules (kDLExtDev, the device index): out of a tensor and back.
    # (torch.from_dlpack(tensor) goes through Tensor.__dlpack_device__, which
    # PyTorch 2.13 maps for the device type name "privateuse1" only.)
    x = torch.arange(6, dtype=torch.float32, device=torch_openreg.device(1))
    capsule = torch.utils.dlpack.to_dlpack(x)
    y = torch.utils.dlpack.from_dlpack(capsule)
    assert y.device == x.device and y.data_ptr() == x.data_ptr()
    y.add_(1)  # the same memory
    assert x.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    z = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(y[2:]))
    assert z.data_ptr() == x.data_ptr() + 8 and z.device == x.device


def test_generated_methods(dev):
    x = torch.ones(2)
    assert not x.is_openreg
    y = x.openreg()
    assert y.is_openreg and y.device == dev
    assert x.openreg(1).device == torch_openreg.device(1)
    m = torch.nn.Linear(2, 2).openreg()
    assert all(p.is_openreg for p in m.parameters())
    s = torch.ones(3).untyped_storage().openreg()
    assert s.device.type == "openreg" and s.is_openreg


def test_save_and_load_with_map_location(dev):
    model = torch.nn.Linear(3, 2).to(torch_openreg.device(1))
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "x": torch.arange(4.0, device=dev)}, buf)
    for where, expected in [(None, ["openreg:1", "openreg:0"]),
                            ("cpu", ["cpu", "cpu"]),
                            ("openreg:0", ["openreg:0", "openreg:0"]),
                            ({"openreg:1": "cpu"}, ["cpu", "openreg:0"])]:
        buf.seek(0)
        ckpt = torch.load(buf, map_location=where)
        assert [str(ckpt["model"]["weight"].device), str(ckpt["x"].device)] == expected, where
        torch.testing.assert_close(ckpt["model"]["weight"].cpu(), model.weight.detach().cpu())
    cpu_buf = io.BytesIO()
    torch.save(torch.arange(3.0), cpu_buf)
    cpu_buf.seek(0)
    assert torch.load(cpu_buf, map_location="openreg:1").device == torch_openreg.device(1)


def test_loading_onto_a_missing_device_is_an_error(dev):
    buf = io.BytesIO()
    torch.save(torch.arange(3.0, device=dev), buf)
    buf.seek(0)
    with pytest.raises((RuntimeError, IndexError), match="(?i)device"):
        torch.load(buf, map_location="openreg:7")
    assert torch.ones(2, device=dev).sum().item() == 2  # the process keeps working


def test_tensors_of_two_devices_in_one_op_is_an_error(dev):
    a = torch.ones(3, device=dev)
    b = torch.ones(3, device=torch_openreg.device(1))
    with pytest.raises(RuntimeError, match="(?i)device"):
        a + b
    with pytest.raises(RuntimeError, match="(?i)device"):
        a + torch.ones(3)
    assert (a + b.to(dev)).sum().item() == 6
