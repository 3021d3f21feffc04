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
# Counted as occurrences, not lines: mpiexec forwards the two ranks' output
# through one stream, where one rank's line can land inside the other's.
count() { grep -o -- "$1" "$out" | wc -l; }
ok=$(count 'rank [01]: env:// ok')
timed=$(count 'rank 0: a missing peer fails the all_reduce')
gave_up=$(count 'rank 0: wait(timeout=1 s) gives up before OCCL does')
done=$(count 'rank [01]: done')
if [ "$rc" -ne 0 ] || [ "$ok" -ne 2 ] || [ "$timed" -ne 1 ] || [ "$gave_up" -ne 1 ] ||
    [ "$done" -ne 2 ]; then
    echo "dist launch: FAIL (exit status $rc; env:// ok on $ok ranks, timeout seen $timed, done $done)"
    exit 1
fi
echo "dist launch: orrun -n 2 with env://, gloo beside occl, timeout: ok"
