"""A small model trained on two openreg devices, checked against the CPU.

The MLP is split across openreg:0 and openreg:1 (its activations and their
gradients cross between the devices), trained with Adam under
torch.autocast (bfloat16) with a GradScaler, and the same training is run on
the CPU with CPU autocast: the losses agree within bfloat16's tolerance.
Timing events around each step give the step time: wall time by default,
and under OPENREG_TIME=virtual the modelled time of the declared devices,
the same on every run.

    .venv/bin/python examples/torch_train.py
    OPENREG_TIME=virtual OPENREG_DEVICE_PROFILE=a100 .venv/bin/python examples/torch_train.py
"""
import torch

STEPS = 20


class TwoDeviceMLP(torch.nn.Module):
    def __init__(self, first, second):
        super().__init__()
        self.first, self.second = first, second
        self.inner = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU()).to(first)
        self.outer = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                         torch.nn.Linear(64, 1)).to(second)

    def forward(self, x):
        return self.outer(self.inner(x.to(self.first)).to(self.second))


def train(first, second):
    torch.manual_seed(0)  # the same initial weights on every device
    model = TwoDeviceMLP(first, second)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler(first.type)
    g = torch.Generator().manual_seed(1)
    inputs = torch.randn(256, 32, generator=g)
    targets = (inputs[:, :8].sum(dim=1, keepdim=True) - inputs[:, 8:].mean(dim=1, keepdim=True))
    targets = targets.to(second)
    losses, step_ms = [], []
    timed = first.type == "openreg"
    for _ in range(STEPS):
        if timed:
            start = torch.Event(first, enable_timing=True)
            start.record()
        opt.zero_grad()
        with torch.autocast(first.type, dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if timed:
            end = torch.Event(second, enable_timing=True)
            end.record()
            end.synchronize()
            step_ms.append(start.elapsed_time(end))
        losses.append(loss.item())
    return losses, step_ms


def main():
    if not torch.openreg.is_available() or torch.openreg.device_count() < 2:
        raise SystemExit("this example needs 2 openreg devices (OPENREG_DEVICES=2, the default)")
    ours, step_ms = train(torch.device("openreg", 0), torch.device("openreg", 1))
    ref, _ = train(torch.device("cpu"), torch.device("cpu"))
    for step in range(0, STEPS, 5):
        print("step %2d  loss %.4f  (cpu %.4f)  step time %.3f ms"
              % (step, ours[step], ref[step], step_ms[step]))
    worst = max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(ours, ref))
    print("loss %.4f -> %.4f on openreg:0 + openreg:1; largest difference from the CPU %.2g"
          % (ours[0], ours[-1], worst))
    print("mean step time %.3f ms" % (sum(step_ms[1:]) / (STEPS - 1)))
    ok = ours[-1] < ours[0] / 2 and worst < 5e-2
    print("result:", "OK" if ok else "FAILED")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
