"""examples/torch_seed.py runs and does what it says."""
import os
import re
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples",
                       "torch_seed.py")


def test_seed_example_runs():
    r = subprocess.run([sys.executable, EXAMPLE], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "x + 2 = [[3.0, 4.0], [5.0, 6.0]]" in r.stdout
    losses = [float(v) for v in re.findall(r"loss (\d+\.\d+)", r.stdout)]
    assert len(losses) == 6 and losses[-1] < losses[0] / 10  # it learns
