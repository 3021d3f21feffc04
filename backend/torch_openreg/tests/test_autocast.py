"""torch.autocast("openreg"): the autocast op lists as on CUDA, float16 and
bfloat16, GradScaler, and a training step that matches CPU autocast."""
import warnings

import pytest
import torch

import torch_openreg


def test_supported_dtypes_and_default():
    assert torch.openreg.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.get_autocast_dtype("openreg") == torch.float16
    assert torch.amp.is_autocast_available("openreg")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_lower_precision_fp32_and_promote_policies(dev, dtype):
    a = torch.randn(8, 8, device=dev)
    b = torch.randn(8, 8, device=dev)
    with torch.autocast("openreg", dtype=dtype):
        assert torch.openreg.is_autocast_enabled()
        mm = a @ b  # lower_precision_fp
        lin = torch.nn.functional.linear(a, b)
        soft = torch.softmax(mm, dim=1)  # fp32
        mixed = torch.addcmul(a, mm, b)  # promote: the widest input type
    assert mm.dtype == dtype and lin.dtype == dtype
    assert soft.dtype == torch.float32
    assert mixed.dtype == torch.float32
    assert not torch.openreg.is_autocast_enabled()
    tol = 1e-2 if dtype == torch.float16 else 5e-2
    torch.testing.assert_close(mm.float().cpu(), a.cpu() @ b.cpu(), rtol=tol, atol=tol)


def test_outside_autocast_nothing_is_cast(dev):
    a = torch.randn(4, 4, device=dev)
    assert (a @ a).dtype == torch.float32


def test_binary_cross_entropy_is_refused_as_on_cuda(dev):
    p = torch.rand(4, device=dev)
    t = torch.rand(4, device=dev)
    with torch.autocast("openreg"):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            torch.nn.functional.binary_cross_entropy(p, t)
        safe = torch.nn.functional.binary_cross_entropy_with_logits(p, t)
    assert safe.dtype == torch.float32


def test_unsupported_dtype_warns_and_disables(dev):
    # PyTorch's own rule for every backend: a warning naming the dtypes, and
    # autocast off inside the block.
    a = torch.randn(4, 4, device=dev)
    with pytest.warns(UserWarning, match="openreg Autocast only supports dtypes of torch.float16, torch.bfloat16"):
        with torch.autocast("openreg", dtype=torch.float64):
            out = a @ a
    assert out.dtype == torch.float32


def _train(device, steps=5):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler(device.type)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 16, generator=g).to(device)
    y = torch.randn(64, 4, generator=g).to(device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast(device.type, dtype=torch.bfloat16):
            out = model(x)
            assert out.dtype == torch.bfloat16
            loss = torch.nn.functional.mse_loss(out, y)
            assert loss.dtype == torch.float32
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()], scaler.get_scale()


def test_autocast_training_step_with_grad_scaler_matches_cpu(dev):
    ours, params, scale = _train(dev)
    ref, ref_params, ref_scale = _train(torch.device("cpu"))
    assert ours[-1] < ours[0]
    torch.testing.assert_close(ours, ref, rtol=2e-2, atol=2e-2)
    for p, q in zip(params, ref_params):
        torch.testing.assert_close(p, q, rtol=5e-2, atol=5e-2)
    assert scale == ref_scale  # no inf/nan steps skipped on either side
