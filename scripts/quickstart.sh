#!/bin/bash
# quickstart.sh - from a fresh clone on Debian 12 (as root): install the
# dependencies, build, and run the demo.
set -euo pipefail

cd "$(dirname "$0")/.."
./scripts/setup.sh
echo
./examples/demo
