#!/bin/sh
# NCCL's "one device per process" example under orrun, which launches it as
# users do: rank 0's occlGetUniqueId is its first runtime call.
set -eu
out=$(mktemp)
rc=0
timeout 120 ./launch/orrun -n 2 -- ./tests/mpi/nccl_example2 > "$out" 2>&1 || rc=$?
cat "$out"
failed=0
[ "$rc" -eq 0 ] || { echo "FAIL: exit $rc"; failed=1; }
[ "$(grep -c "Success" "$out")" -eq 2 ] || { echo "FAIL: not every rank succeeded"; failed=1; }
rm -f "$out"
echo "nccl examples under orrun: $((1 - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
