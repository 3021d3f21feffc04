"""The examples run: PyTorch's OpenReg example exactly as its README gives
it (no import of torch_openreg: autoload), and the two-device training."""
import os
import re
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples")


def run(script, **env):
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, script)], capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, **env))


def test_seed_example_runs_without_an_import():
    with open(os.path.join(EXAMPLES, "torch_seed.py")) as f:
        assert "torch_openreg" not in f.read()
    r = run("torch_seed.py")
    assert r.returncode == 0, r.stderr
    assert "OpenReg backend is available!" in r.stdout
    assert "tensor([[3., 4.],\n        [5., 6.]], device='openreg:0')" in r.stdout
    assert "Device of y: openreg:0" in r.stdout and "Device of z: cpu" in r.stdout


def test_autoload_can_be_turned_off():
    code = ("import torch; print(hasattr(torch, 'openreg')); import torch_openreg; "
            "print(torch.openreg.is_available(), torch.ones(1, device='openreg').device)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True", "openreg:0"]
    # Autoload on, and an explicit import beside it is harmless.
    r = subprocess.run([sys.executable, "-c", "import torch, torch_openreg; import torch_openreg;"
                        "print(torch.openreg is torch_openreg)"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.split() == ["True"], r.stderr


def test_two_device_training_matches_cpu():
    r = run("torch_train.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "result: OK" in r.stdout
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+) +\(cpu", r.stdout)]
    assert len(losses) == 4 and losses[-1] < losses[0]
