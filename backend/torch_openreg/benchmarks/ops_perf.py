"""ops_perf.py - the common ops on an openreg device, as device kernels and
through the CPU fallback, against the same ops on CPU tensors, in one run.

    .venv/bin/python backend/torch_openreg/benchmarks/ops_perf.py [--seconds 0.3]

Each row is one op and size, timed back to back for about --seconds after
warm-up, then synchronized: the mean time per call on CPU tensors (PyTorch's
own CPU kernels, all of the host's cores), on openreg with the native device
kernels (csrc/aten/native.cpp: one device thread), and on openreg with
TORCH_OPENREG_NATIVE_OPS=0 (every op through the boxed CPU fallback: copies to
the host and back), measured in a child process of the same run. The ratios:
fallback over native (above 1: native is faster) and native over CPU. The
host's load average is printed before and after: figures only count when it
stays below ~1.5.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch

CASES = [
    ("add 16", lambda d: (torch.randn(16, device=d),) * 2, lambda a, b: a + b),
    ("add 64K", lambda d: (torch.randn(1 << 16, device=d),) * 2, lambda a, b: a + b),
    ("add 4M", lambda d: (torch.randn(1 << 22, device=d),) * 2, lambda a, b: a + b),
    ("mul_ 1M", lambda d: (torch.randn(1 << 20, device=d),), lambda a: a.mul_(1.0)),
    ("gelu 1M", lambda d: (torch.randn(1 << 20, device=d),), torch.nn.functional.gelu),
    ("sum dim 1Kx1K", lambda d: (torch.randn(1024, 1024, device=d),), lambda a: a.sum(dim=1)),
    ("softmax 1Kx1K", lambda d: (torch.randn(1024, 1024, device=d),),
     lambda a: torch.softmax(a, dim=-1)),
    ("mm 64", lambda d: (torch.randn(64, 64, device=d),) * 2, torch.mm),
    ("mm 512", lambda d: (torch.randn(512, 512, device=d),) * 2, torch.mm),
    ("addmm 256x1024x256", lambda d: (torch.randn(256, device=d), torch.randn(256, 1024, device=d),
                                      torch.randn(1024, 256, device=d)), torch.addmm),
    ("index_select 64K of 1M", lambda d: (torch.randn(1 << 20, device=d),
                                          torch.randint(0, 1 << 20, (1 << 16,), device=d)),
     lambda a, i: a.index_select(0, i)),
    # Adam's moment update on 16 parameters of 64K each (foreach=True).
    ("_foreach_lerp_ 16x64K", lambda d: ([torch.randn(1 << 16, device=d) for _ in range(16)],
                                         [torch.randn(1 << 16, device=d) for _ in range(16)]),
     lambda a, b: torch._foreach_lerp_(a, b, 0.1)),
    ("_foreach_addcdiv_ 16x64K", lambda d: ([torch.randn(1 << 16, device=d) for _ in range(16)],
                                            [torch.randn(1 << 16, device=d) for _ in range(16)],
                                            [torch.rand(1 << 16, device=d) + 1 for _ in range(16)]),
     lambda p, m, v: torch._foreach_addcdiv_(p, m, v, [-1e-3] * 16)),
]


def sync(device):
    if device != "cpu":
        torch.openreg.synchronize()


def mean_time(device, make, fn, seconds):
    args = make(device)
    for _ in range(3):
        fn(*args)
    sync(device)
    start = time.perf_counter()
    fn(*args)
    sync(device)
    iters = max(3, min(20000, int(seconds / max(time.perf_counter() - start, 1e-7))))
    start = time.perf_counter()
    for _ in range(iters):
        fn(*args)
    sync(device)
    return (time.perf_counter() - start) / iters


def measure(device, seconds):
    return [mean_time(device, make, fn, seconds) for _, make, fn in CASES]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=0.3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:  # the fallback's figures, for the parent
        print(json.dumps(measure("openreg", opts.seconds)))
        return
    load = os.getloadavg()[0]
    cpu = measure("cpu", opts.seconds)
    native = measure("openreg", opts.seconds)
    env = dict(os.environ, TORCH_OPENREG_NATIVE_OPS="0")
    out = subprocess.run([sys.executable, __file__, "--child", "--seconds", str(opts.seconds)],
                         env=env, capture_output=True, text=True, check=True)
    fallback = json.loads(out.stdout.splitlines()[-1])
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} CPU threads; "
          f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"{'op':<24}{'cpu us':>10}{'native us':>12}{'fallback us':>13}"
          f"{'fallback/native':>17}{'native/cpu':>12}")
    for (name, _, _), c, n, f in zip(CASES, cpu, native, fallback):
        print(f"{name:<24}{c * 1e6:>10.1f}{n * 1e6:>12.1f}{f * 1e6:>13.1f}{f / n:>17.2f}"
              f"{n / c:>12.2f}")


if __name__ == "__main__":
    main()
