"""Tensors on the device: factories, copies both ways, views, in-place ops,
dtypes, the CPU fallback, autograd, nn modules and optimizers."""
import pytest
import torch

import torch_openreg

ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
              torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool,
              torch.complex64]


def test_seed_example(dev):
    # The example of PyTorch's OpenReg, on this backend.
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=dev)
    y = x + 2
    assert y.device == dev
    assert torch.equal(y.cpu(), torch.tensor([[3.0, 4.0], [5.0, 6.0]]))


def test_factories(dev):
    assert torch.equal(torch.zeros(2, 3, device=dev).cpu(), torch.zeros(2, 3))
    assert torch.equal(torch.ones(4, device=dev, dtype=torch.int32).cpu(),
                       torch.ones(4, dtype=torch.int32))
    assert torch.equal(torch.full((2, 2), 7.5, device=dev).cpu(), torch.full((2, 2), 7.5))
    assert torch.equal(torch.arange(10, device=dev).cpu(), torch.arange(10))
    assert torch.equal(torch.eye(3, device=dev).cpu(), torch.eye(3))
    assert torch.equal(torch.linspace(0, 1, 5, device=dev).cpu(), torch.linspace(0, 1, 5))
    e = torch.empty_strided((2, 3), (1, 2), device=dev)
    assert e.stride() == (1, 2) and e.device == dev
    assert torch.empty(0, device=dev).numel() == 0
    assert torch.zeros_like(torch.ones(3, device=dev)).device == dev


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_copy_round_trip_every_dtype(dev, dtype):
    src = (torch.arange(-6, 6) * 3).reshape(3, 4).to(dtype)
    on_dev = src.to(dev)
    assert on_dev.dtype == dtype and on_dev.device == dev
    assert torch.equal(on_dev.cpu(), src)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16, torch.bool])
def test_fill_and_zero_every_dtype(dev, dtype):
    t = torch.empty(5, 3, device=dev, dtype=dtype)
    t.fill_(1)
    assert torch.equal(t.cpu(), torch.ones(5, 3, dtype=dtype))
    t.zero_()
    assert torch.equal(t.cpu(), torch.zeros(5, 3, dtype=dtype))


def test_copies_both_ways_with_strides_and_conversion(dev):
    host = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    d = host.to(dev)
    # device -> host into a non-contiguous destination
    out = torch.zeros(6, 4).t()
    out.copy_(d)
    assert torch.equal(out, host)
    # non-contiguous device source -> host
    assert torch.equal(d.t().cpu(), host.t())
    assert torch.equal(d[:, ::2].cpu(), host[:, ::2])
    # host -> non-contiguous device destination
    dst = torch.zeros(6, 4, device=dev).t()
    dst.copy_(host)
    assert torch.equal(dst.cpu(), host)
    # conversions on the way in and out
    assert torch.equal(host.to(dev, torch.int64).cpu(), host.to(torch.int64))
    assert torch.equal(d.to(torch.float64).cpu(), host.to(torch.float64))
    ints = torch.zeros(4, 6, dtype=torch.int32)
    ints.copy_(d)
    assert torch.equal(ints, host.to(torch.int32))


def test_device_to_device_copies(dev):
    host = torch.randn(5, 7)
    a = host.to(dev)
    b = a.clone()
    assert torch.equal(b.cpu(), host)
    assert b.data_ptr() != a.data_ptr()
    other = torch_openreg.device(1)
    c = a.to(other)
    assert c.device == other and torch.equal(c.cpu(), host)
    back = c.t().to(dev)  # strided source on another device
    assert back.device == dev and torch.equal(back.cpu(), host.t())
    dst = torch.zeros(7, 5, device=other).t()
    dst.copy_(a)
    assert torch.equal(dst.cpu(), host)


def test_views_share_storage(dev):
    d = torch.arange(12, dtype=torch.float32, device=dev)
    v = d.view(3, 4)
    t = v.t()
    s = v[1]
    r = d.reshape(2, 6)
    assert v.data_ptr() == d.data_ptr() == r.data_ptr()
    assert t.stride() == (1, 4)
    assert s.storage_offset() == 4
    s.fill_(-1)  # writes through the view
    assert d.cpu().tolist()[4:8] == [-1.0] * 4
    assert torch.equal(t.contiguous().cpu(), torch.arange(12.0).view(3, 4).index_fill(0, torch.tensor([1]), -1).t())
    a = d.as_strided((2, 2), (1, 2), 1)
    assert a.cpu().tolist() == [[1.0, 3.0], [2.0, -1.0]]
    assert d.unsqueeze(0).shape == (1, 12) and d.view(3, 4).narrow(1, 1, 2).shape == (3, 2)


def test_in_place_ops(dev):
    x = torch.ones(3, 4, device=dev)
    x.add_(2)
    x.mul_(torch.full((3, 4), 2.0, device=dev))
    x[0].sub_(1)
    x.t()[1].fill_(0)  # strided in-place write
    expected = torch.full((3, 4), 6.0)
    expected[0] -= 1
    expected[:, 1] = 0
    assert torch.equal(x.cpu(), expected)
    y = torch.zeros(2, device=dev)
    y.resize_(5)
    assert y.shape == (5,) and y.device == dev
    y.zero_()
    assert y.cpu().tolist() == [0.0] * 5


def test_resize_keeps_content(dev):
    x = torch.arange(4.0, device=dev)
    x.resize_(2, 8)
    assert x.flatten()[:4].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_item_and_scalars(dev):
    x = torch.tensor([2.5, 3.5], device=dev)
    assert x[1].item() == 3.5
    assert x.sum().item() == 6.0
    assert int(torch.tensor(7, device=dev)) == 7
    assert bool((x > 3).any())


def test_cpu_fallback_ops_match_cpu(dev):
    torch.manual_seed(3)
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    da, db = a.to(dev), b.to(dev)
    for f in (lambda x, y: x @ y, lambda x, y: torch.maximum(x, y),
              lambda x, y: (x.exp() + y.sin()).sum(dim=0),
              lambda x, y: torch.cat([x, y], 1), lambda x, y: x.sort(dim=1).values,
              lambda x, y: torch.where(x > 0, x, y)):
        got = f(da, db)
        assert got.device == dev
        assert torch.allclose(got.cpu(), f(a, b))


def test_fallback_out_and_inplace_variants(dev):
    a = torch.randn(4, 4)
    out = torch.empty(0, device=dev)
    torch.mm(a.to(dev), a.to(dev), out=out)
    assert out.shape == (4, 4) and torch.allclose(out.cpu(), a @ a)
    d = a.to(dev)
    d.exp_()
    assert torch.allclose(d.cpu(), a.exp())


def test_autograd(dev):
    x = torch.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    assert x.grad.device == dev
    assert x.grad.cpu().tolist() == [2.0, 4.0, 6.0]


@pytest.mark.filterwarnings("error")
def test_nn_module_and_optimizer_match_cpu(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    ref.load_state_dict(model.state_dict())
    model = model.to(dev)
    assert all(p.device == dev for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    x, target = torch.randn(16, 4), torch.randn(16, 1)
    for _ in range(5):
        for m, o, xx, tt in ((model, opt, x.to(dev), target.to(dev)), (ref, ref_opt, x, target)):
            o.zero_grad()
            loss = torch.nn.functional.mse_loss(m(xx), tt)
            loss.backward()
            o.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(p.cpu(), q, atol=1e-6)


def test_adam_optimizer_runs(dev):
    w = torch.zeros(3, device=dev, requires_grad=True)
    opt = torch.optim.Adam([w], lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        ((w - 1.0) ** 2).sum().backward()
        opt.step()
    assert w.device == dev and (w.detach().cpu() > 0.2).all()


def test_module_state_dict_round_trip(dev):
    m = torch.nn.Linear(3, 2).to(dev)
    sd = {k: v.cpu() for k, v in m.state_dict().items()}
    m2 = torch.nn.Linear(3, 2).to(dev)
    m2.load_state_dict(sd)
    assert torch.equal(m2.weight.cpu(), sd["weight"])


def test_broadcasting_copies(dev):
    x = torch.zeros(3, 4, device=dev)
    x.copy_(torch.tensor(2.0))  # host scalar into the device
    assert torch.equal(x.cpu(), torch.full((3, 4), 2.0))
    x.copy_(torch.arange(4.0, device=dev))  # device row broadcast on the device
    assert torch.equal(x.cpu(), torch.arange(4.0).expand(3, 4))
    h = torch.zeros(2, 3, 4)
    h.copy_(x)  # device into a larger host tensor
    assert torch.equal(h, torch.arange(4.0).expand(2, 3, 4))
    with pytest.raises(RuntimeError):
        x.copy_(torch.ones(5))


def test_cross_device_copy_is_ordered_after_source_stream(dev):
    other = torch_openreg.device(1)
    s = torch_openreg.Stream(dev)
    with torch_openreg.stream(s):  # producer on a side stream of device 0
        src = torch.zeros(1 << 20, device=dev)
        src.fill_(3.0)
        y = src.to(other)  # current stream of device 1 waits for s
    assert y.sum().item() == 3.0 * (1 << 20)


def test_backend_views_share_memory(dev):
    # Views whose kernel is per backend are views on the device too.
    c = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64, device=dev)
    r = torch.view_as_real(c)
    assert r.data_ptr() == c.data_ptr() and r.shape == (2, 2)
    r[0, 1] = 5.0
    assert c.cpu().tolist() == [1 + 5j, 3 - 1j]
    back = torch.view_as_complex(r)
    assert back.data_ptr() == c.data_ptr()
    x = torch.arange(10.0, device=dev)
    u = x.unfold(0, 4, 2)
    assert u.data_ptr() == x.data_ptr() and u.shape == (4, 4)
    u[1, 0] = -1.0
    assert x[2].item() == -1.0


def test_conjugate_and_negative_views_copy_both_ways():
    # PyTorch resolves such views with a copy, which for a device is its
    # _copy_from: handled there (it used to recurse without end).
    a = torch.randn(3, 4, dtype=torch.complex64)
    d = a.to("openreg")
    assert torch.equal(d.t().conj().cpu().resolve_conj(), a.t().conj().resolve_conj())
    assert torch.equal(d.conj().imag.cpu().resolve_neg(), a.conj().imag.resolve_neg())
    x = torch.empty(3, 4, dtype=torch.complex64, device="openreg")
    x.copy_(a.conj())  # host to device
    assert torch.equal(x.cpu(), a.conj().resolve_conj())
    x.copy_(d.conj())  # device to device
    assert torch.equal(x.cpu(), a.conj().resolve_conj())
    v = torch.empty(3, 4, dtype=torch.complex64, device="openreg").conj()
    v.copy_(a)  # into a conjugate view
    assert torch.equal(v.cpu().resolve_conj(), a)


def test_parameter_data_moves_between_cpu_and_device(dev):
    # `p.data = p.to(device)`, as FSDP2's fully_shard moves parameters: the
    # Parameter keeps its identity and autograd state, its data changes device.
    p = torch.nn.Parameter(torch.arange(4.0))
    p.data = p.to(dev)
    assert type(p) is torch.nn.Parameter and p.requires_grad and p.device == dev
    (p * 2).sum().backward()
    assert p.grad.device == dev and torch.equal(p.grad.cpu(), torch.full((4,), 2.0))
    p.data = p.data.cpu()
    assert p.device.type == "cpu" and torch.equal(p.detach(), torch.arange(4.0))
    # Only dense tensors: a sparse one may not take a dense device tensor's place.
    s = torch.arange(4.0).to_sparse()
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        s.data = torch.zeros(4, device=dev)
