#!/bin/sh
# A torch.distributed script started as users start it:
#   orrun -n 2 -d 1 -- python dist_env.py
# with a plain dist.init_process_group("occl") (env:// from orrun), a gloo
# group beside it, and the group's timeout reaching OCCL. Runs from the build
# directory ('make check'); prints the script's output and exits non-zero on
# failure.
set -eu
here=$(dirname "$0")
python=./backend/torch_openreg/tests/torch-python
if [ ! -x "$python" ] || [ ! -x ./launch/orrun ]; then
    echo "dist_launch.sh: $python or ./launch/orrun is missing ('make check' builds them)" >&2
    exit 99
fi
out=$(mktemp "${TMPDIR:-/tmp}/dist_launch.XXXXXX")
trap 'rm -f "$out"' EXIT
rc=0
timeout --kill-after=10 200 ./launch/orrun -n 2 -d 1 -- "$python" "$here/dist_env.py" \
    >"$out" 2>&1 || rc=$?
cat "$out"
. "$here/dist_env_expect.sh"
if ! dist_env_expect "$rc" "$out"; then
    echo "dist launch: FAIL"
    exit 1
fi
echo "dist launch: orrun -n 2 with env://, gloo beside occl, timeout: ok"
