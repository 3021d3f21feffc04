#!/usr/bin/python3
"""PyTorch's OpenReg example on OpenReg Cluster: a tensor on an openreg
device, an op, the result back on the CPU; then a small model trained there.

From a build tree (docs/torch.md):
    PYTHONPATH=_b/backend/torch_openreg /usr/bin/python3 examples/torch_seed.py
OPENREG_DEVICES, OPENREG_DEVICE_PROFILE and OPENREG_STRICT=1 apply as to any
program of the runtime.
"""
import torch

import torch_openreg

# torch.device("openreg", 0) on PyTorch >= 2.0; "privateuseone" on 1.13.
dev = torch_openreg.device(0)

x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=dev)
y = x + 2
print("x + 2 =", y.cpu().tolist(), "computed on", y.device)

# A small regression trained on the device: parameters, gradients and the
# optimizer state all live in the device's memory.
torch.manual_seed(0)  # also seeds the device generators
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
inputs = torch.randn(64, 8, device=dev)
targets = inputs.sum(dim=1, keepdim=True)
for step in range(50):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    opt.step()
    if step % 10 == 0 or step == 49:
        print("step %2d  loss %.4f" % (step, loss.item()))
print("device memory in use: %d bytes (peak %d) on %d device(s)" % (
    torch_openreg.memory_allocated(dev), torch_openreg.max_memory_allocated(dev),
    torch_openreg.device_count()))
