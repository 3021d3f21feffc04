#!/bin/bash
# quickstart.sh - from a fresh clone on Debian 12 or 13 (as root): install
# the dependencies and the venv .venv with PyTorch, build, run the demo as a
# job of 2 ranks, each its own virtual node with 2 devices, so its ring of
# devices crosses nodes; then PyTorch's OpenReg example with the venv's
# Python, which finds the openreg device without an import.
set -euo pipefail

cd "$(dirname "$0")/.."
./scripts/setup.sh
echo
./launch/orrun -n 2 -d 2 --ranks-per-node 1 -- ./examples/demo
echo
echo "$ .venv/bin/python examples/torch_seed.py"
.venv/bin/python examples/torch_seed.py
