#!/bin/bash
# setup.sh - install what the build needs (Debian 12 or 13), make the Python
# venv .venv with PyTorch, then configure and build everything, the PyTorch
# extension torch_openreg included (installed into the venv, editable).
#
# Usage: scripts/setup.sh [--deps-only]
#   --deps-only   install the Debian packages and make the venv, then stop
#
# Debian packages are installed only when some are missing, so a second run
# goes straight to the build. Installing needs root (or sudo). The venv's
# Python is PYTHON (default python3; python3.11 where python3 is another
# version: the torch 2.13.0 CPU build on these machines is for Python 3.11).
set -euo pipefail

cd "$(dirname "$0")/.."

PACKAGES=(
    build-essential autoconf automake libtool pkg-config
    mpich libmpich-dev
    # Open MPI: the baseline of occl_perf --ompi only. Installing it points
    # Debian's mpicc/mpiexec alternatives at it; configure and the tests use
    # MPICH by its own names (mpicc.mpich, mpiexec.mpich) all the same.
    openmpi-bin libopenmpi-dev
    libhwloc-dev hwloc
    libcriterion-dev
    libxml2-dev
    valgrind
    gdb # backtraces of a test job that hangs (tests/mpi/run-mpi.sh)
    iproute2 # test hosts in network namespaces (tests/hosts/or-hosts)
    slurmctld slurmd slurm-client # Slurm on the test hosts (tests/hosts/hosts_srun.sh)
    ninja-build
)
VENV=.venv
REQUIREMENTS=backend/torch_openreg/requirements.txt

deps_only=no
case "${1:-}" in
"") ;;
--deps-only) deps_only=yes ;;
-h | --help)
    sed -n '2,12s/^# \{0,1\}//p' "$0"
    exit 0
    ;;
*)
    echo "setup.sh: unknown option '$1' (try --help)" >&2
    exit 2
    ;;
esac

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup.sh: installing ${missing[*]}"
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo=(sudo)
        else
            echo "setup.sh: missing packages (${missing[*]}) and not root; run as root" >&2
            exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update
    "${sudo[@]}" apt-get install -y "${missing[@]}"
fi

# The venv: torch from pip, pinned (requirements.txt says why).
if [ ! -x "$VENV/bin/python" ]; then
    python=${PYTHON:-python3}
    if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null &&
        command -v python3.11 >/dev/null 2>&1; then
        python=python3.11
    fi
    echo "setup.sh: making the venv $VENV with $("$python" --version 2>&1) ($(command -v "$python"))"
    "$python" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet -r "$REQUIREMENTS"
echo "setup.sh: $VENV has torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"

[ "$deps_only" = yes ] && exit 0

autoreconf -fi
./configure --with-torch="$PWD/$VENV/bin/python"
# The C libraries first: the extension builds against them. pip then
# installs torch_openreg into the venv (editable: this source tree), which
# builds torch_openreg/_C.so in place; make finds it up to date.
make -j2 libopenreg.la liboccl.la
PKG_CONFIG_PATH=$PWD "$VENV/bin/python" -m pip install --quiet --no-build-isolation --no-deps \
    -e backend/torch_openreg
make -j2
