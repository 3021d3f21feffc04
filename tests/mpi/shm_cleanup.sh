#!/bin/sh
# Nothing of a job stays in /dev/shm: not after a normal exit, not after one
# of its ranks is killed. Device arenas are named only until every rank of
# the node has mapped them; the names carry the job's id, which the test
# program prints.
set -eu
prog=./tests/mpi/shm_job
passed=0
failed=0
check_clean() { # label job-output
    job=$(sed -n 's/^job \([0-9a-f]*\)$/\1/p' "$2" | head -n 1)
    if [ -z "$job" ]; then
        echo "FAIL $1: the job did not report its id"; failed=$((failed + 1)); return
    fi
    left=$(ls /dev/shm 2>/dev/null | grep -c "openreg-$job" || true)
    if [ "$left" -eq 0 ]; then
        echo "ok   $1: nothing of job $job in /dev/shm"; passed=$((passed + 1))
    else
        echo "FAIL $1: $left segment(s) of job $job left in /dev/shm"; failed=$((failed + 1))
    fi
}
out=$(mktemp)
timeout 60 mpiexec -n 4 "$prog" > "$out" 2>&1 || { cat "$out"; echo "FAIL normal run exited non-zero"; failed=$((failed + 1)); }
check_clean "normal exit" "$out"
# Rank 2 kills itself while the others wait: mpiexec tears the job down.
if timeout 60 mpiexec -n 4 "$prog" --kill-rank 2 > "$out" 2>&1; then
    echo "FAIL killed run exited zero"; failed=$((failed + 1))
fi
check_clean "rank killed" "$out"
rm -f "$out"
echo "shm cleanup: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
