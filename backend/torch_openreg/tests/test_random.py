"""The device generators: Philox on the runtime's RNG, seeds and states."""
import pytest
import torch

import torch_openreg


def philox4x32_10(counter, key):
    """Reference Philox4x32-10 (Salmon et al., SC'11), as the runtime uses it."""
    m0, m1, w0, w1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
    c, k = list(counter), list(key)
    for _ in range(10):
        p0, p1 = m0 * c[0], m1 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k[1], p0 & 0xFFFFFFFF]
        k = [(k[0] + w0) & 0xFFFFFFFF, (k[1] + w1) & 0xFFFFFFFF]
    return c


def test_rand_is_the_runtime_philox_stream(dev):
    seed = 0x1234567890
    torch_openreg.manual_seed(seed)
    got = torch.rand(8, device=dev).cpu()
    key = [seed & 0xFFFFFFFF, seed >> 32]
    words = philox4x32_10([0, 0, 0, 0], key) + philox4x32_10([1, 0, 0, 0], key)
    # uniform u = ((x >> 8) + 1) * 2^-24 in (0, 1]; torch.rand gives 1 - u in [0, 1)
    expected = torch.tensor([1.0 - ((w >> 8) + 1) * 2.0 ** -24 for w in words])
    assert torch.equal(got, expected)


def test_torch_manual_seed_reseeds_devices(dev):
    torch.manual_seed(123)
    a = [torch.rand(100, device=torch_openreg.device(i)).cpu() for i in range(2)]
    assert torch_openreg.initial_seed(0) == torch_openreg.initial_seed(1) == 123
    torch.manual_seed(123)
    b = [torch.rand(100, device=torch_openreg.device(i)).cpu() for i in range(2)]
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    torch.manual_seed(124)
    assert not torch.equal(torch.rand(100, device=dev).cpu(), a[0])


def test_successive_draws_differ_and_continue_the_stream(dev):
    torch_openreg.manual_seed(7)
    first, second = torch.rand(6, device=dev).cpu(), torch.rand(6, device=dev).cpu()
    assert not torch.equal(first, second)
    torch_openreg.manual_seed(7)
    both = torch.rand(16, device=dev).cpu()
    # calls start on 4-number Philox blocks: 6 numbers use two blocks (8)
    assert torch.equal(both[:6], first) and torch.equal(both[8:14], second)


def test_per_device_seed(dev):
    torch_openreg.manual_seed(5, device=1)
    torch_openreg.manual_seed(6, device=0)
    assert torch_openreg.initial_seed(1) == 5 and torch_openreg.initial_seed(0) == 6


def test_rng_state_round_trip(dev):
    torch_openreg.manual_seed(99)
    torch.randn(10, device=dev)
    state = torch_openreg.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16 and state.device.type == "cpu"
    a = torch.randn(50, device=dev).cpu()
    torch_openreg.set_rng_state(state)
    b = torch.randn(50, device=dev).cpu()
    assert torch.equal(a, b)
    states = torch_openreg.get_rng_state_all()
    assert len(states) == 2


def test_rng_state_errors(dev):
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch_openreg.set_rng_state(torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(TypeError):
        torch_openreg.set_rng_state(torch.zeros(16))


def test_generator_objects(dev):
    g = torch_openreg.default_generators[0]
    assert g.device == dev
    g.manual_seed(11)
    a = torch.rand(5, device=dev, generator=g).cpu()
    g.manual_seed(11)
    b = torch.rand(5, device=dev).cpu()  # the same default generator
    assert torch.equal(a, b)
    with pytest.raises(RuntimeError, match="generator"):
        torch.rand(5, device=dev, generator=torch.Generator())


def test_distributions(dev):
    torch.manual_seed(0)
    u = torch.rand(200000, device=dev).cpu()
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01
    n = torch.randn(200000, device=dev).cpu()
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1.0) < 0.01
    x = torch.empty(1000, device=dev).uniform_(-3, 5).cpu()
    assert x.min() >= -3 and x.max() < 5
    y = torch.empty(100000, device=dev).normal_(10, 2).cpu()
    assert abs(y.mean() - 10) < 0.05 and abs(y.std() - 2) < 0.05


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_other_float_dtypes(dev, dtype):
    torch.manual_seed(1)
    a = torch.rand(1000, device=dev, dtype=dtype)
    assert a.dtype == dtype
    a = a.cpu().float()
    assert a.min() >= 0 and a.max() <= 1 and a.std() > 0.2
    torch.manual_seed(1)
    assert torch.equal(torch.rand(1000, device=dev, dtype=dtype).cpu().float(), a)


def test_non_contiguous_and_errors(dev):
    x = torch.zeros(30, 40, device=dev).t()
    x.uniform_()
    assert (x.cpu() > 0).float().mean() > 0.99
    with pytest.raises(RuntimeError, match="from <= to"):
        torch.empty(3, device=dev).uniform_(2, 1)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch.empty(3, device=dev).normal_(0, -1)
    with pytest.raises(RuntimeError, match="floating point"):
        torch.empty(3, device=dev, dtype=torch.int32).uniform_()


def test_nn_init_uses_device_generator(dev):
    torch.manual_seed(3)
    w1 = torch.nn.Linear(20, 20, device=dev).weight.detach().cpu()
    torch.manual_seed(3)
    w2 = torch.nn.Linear(20, 20, device=dev).weight.detach().cpu()
    assert torch.equal(w1, w2)
    cpu = torch.nn.Linear(20, 20).weight.detach()
    assert not torch.equal(w1, cpu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_bernoulli(dev, dtype):
    torch.manual_seed(2)
    m = torch.empty(200000, device=dev, dtype=dtype).bernoulli_(0.3).cpu()
    assert m.dtype == dtype and set(m.float().unique().tolist()) == {0.0, 1.0}
    assert abs(m.float().mean().item() - 0.3) < 0.01
    assert torch.empty(100, device=dev, dtype=dtype).bernoulli_(0.0).cpu().sum() == 0
    assert torch.empty(100, device=dev, dtype=dtype).bernoulli_(1.0).cpu().float().sum() == 100
    with pytest.raises(RuntimeError, match="0 <= p <= 1"):
        torch.empty(3, device=dev, dtype=dtype).bernoulli_(1.5)


def test_dropout_draws_from_the_device_generator(dev):
    x = torch.ones(10000, device=dev)
    masks = []
    for cpu_seed in (1, 2):
        torch_openreg.manual_seed_all(42)
        torch.random.default_generator.manual_seed(cpu_seed)  # the CPU's must not matter
        masks.append(torch.nn.functional.dropout(x, 0.25).cpu())
    assert torch.equal(masks[0], masks[1])
    assert torch.equal(masks[0].unique(), torch.tensor([0.0, 1.0 / 0.75]))
    assert abs((masks[0] == 0).float().mean().item() - 0.25) < 0.02
