"""Strict mode (OPENREG_STRICT=1): device memory is unreadable by host code,
and everything, the CPU fallback included, still works through runtime
copies and kernels. Each case runs in a fresh interpreter, since the mode is
read when the runtime starts."""
import os
import subprocess
import sys
import textwrap

WORKLOAD = """
import torch, torch_openreg
dev = torch_openreg.device(0)
x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=dev)
y = x + 2                                  # CPU fallback
assert torch.equal(y.cpu(), torch.tensor([[3.0, 4.0], [5.0, 6.0]]))
assert (x @ x.t()).sum().item() == 52.0    # fallback + scalar read
x.t().fill_(1); x.zero_(); x[0].fill_(5)   # native ops on views
assert x.cpu().tolist() == [[5.0, 5.0], [0.0, 0.0]]
torch.manual_seed(0)
m = torch.nn.Linear(4, 2).to(dev)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
loss = m(torch.randn(8, 4, device=dev)).pow(2).mean()
loss.backward(); opt.step()
assert m.weight.grad.device == dev
z = torch.rand(100, device=dev).to(torch_openreg.device(1)).cpu()
assert 0 <= z.min().item() and z.max().item() < 1
print("strict workload ok")
"""

PEEK = """
import ctypes, torch, torch_openreg
x = torch.ones(1024, device=torch_openreg.device(0))
torch_openreg.synchronize()
print("peek", ctypes.c_float.from_address(x.data_ptr()).value, flush=True)
"""


def run(code):
    env = dict(os.environ, OPENREG_STRICT="1")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=300)


def test_workload_runs_in_strict_mode():
    r = run(WORKLOAD)
    assert r.returncode == 0, r.stderr
    assert "strict workload ok" in r.stdout


def test_strict_mode_is_really_on():
    # A host read of device memory must fault: otherwise the test above
    # proves nothing.
    r = run(PEEK)
    assert r.returncode != 0 and "peek" not in r.stdout
