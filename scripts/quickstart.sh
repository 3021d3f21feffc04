#!/bin/bash
# quickstart.sh - from a fresh clone on Debian 12 (as root): install the
# dependencies, build, and run the demo as a job of 2 ranks, each its own
# virtual node with 2 devices, so its ring of devices crosses nodes.
set -euo pipefail

cd "$(dirname "$0")/.."
./scripts/setup.sh
echo
./launch/orrun -n 2 -d 2 --ranks-per-node 1 -- ./examples/demo
