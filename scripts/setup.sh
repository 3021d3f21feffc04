#!/bin/bash
# setup.sh - install what the build needs (Debian 12), then configure and build.
#
# Usage: scripts/setup.sh [--deps-only]
#   --deps-only   install the packages and stop (no autoreconf/configure/make)
#
# Packages are installed only when some are missing, so a second run goes
# straight to the build. Installing needs root (or sudo).
set -euo pipefail

cd "$(dirname "$0")/.."

PACKAGES=(
    build-essential autoconf automake libtool pkg-config
    mpich libmpich-dev
    libhwloc-dev hwloc
    libcriterion-dev
    libxml2-dev
    valgrind
    python3-torch libtorch-dev python3-pytest
)

deps_only=no
case "${1:-}" in
"") ;;
--deps-only) deps_only=yes ;;
-h | --help)
    sed -n '2,8s/^# \{0,1\}//p' "$0"
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

[ "$deps_only" = yes ] && exit 0

autoreconf -fi
./configure
make -j2
