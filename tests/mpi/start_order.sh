#!/bin/sh
# A rank that calls the runtime first while its peer waits for it: the
# start-up's wait for the peer ends at OPENREG_TIMEOUT_MS with a message.
set -eu
out=$(mktemp)
rc=0
start=$(date +%s)
timeout 60 mpiexec -n 2 env OPENREG_TIMEOUT_MS=1500 ./tests/mpi/start_order > "$out" 2>&1 || rc=$?
took=$(($(date +%s) - start))
cat "$out"
failed=0
# The ranks leave with _exit, without MPI_Finalize (rank 1's start-up request
# is still pending): Hydra may take the first exit without finalize for a
# failure and end the job with status 1 as the other rank exits too. Both
# ranks must have finished (below); a timeout (124) or a signal is a failure.
case $rc in
0 | 1) ;;
*) echo "FAIL: exit $rc after $took s"; failed=1 ;;
esac
grep -q "openreg: rank 1: start-up waited 1500 ms (OPENREG_TIMEOUT_MS) for the other ranks while waiting for their first runtime call" "$out" ||
    { echo "FAIL: no message naming the wait and OPENREG_TIMEOUT_MS"; failed=1; }
[ "$(grep -c ": done" "$out")" -eq 2 ] || { echo "FAIL: a rank did not finish"; failed=1; }
rm -f "$out"
echo "start order: $((1 - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
