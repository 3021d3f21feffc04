#!/bin/sh
# A rank stuck mid-collective: the survivors report an error within
# OCCL_TIMEOUT_MS + 1 s and abort the communicator; on one node (shared
# memory) and across nodes (MPI). See tests/mpi/occl_kill.c for why the
# victim stops rather than dies.
set -eu
passed=0
failed=0
run() { # label, extra environment
    dir=$(mktemp -d)
    timeout 60 mpiexec -n 3 env OCCL_TIMEOUT_MS=3000 $2 ./tests/mpi/occl_kill 1 "$dir" \
        > "$dir/out" 2>&1 || true
    good=$(cat "$dir"/rank.* 2>/dev/null | grep -c '^ok' || true)
    cat "$dir"/rank.* 2>/dev/null | sed "s/^/  $1: /"
    if [ "$good" -eq 2 ]; then
        echo "ok   $1: both survivors reported the failure in time and aborted"; passed=$((passed + 1))
    else
        cat "$dir/out"; echo "FAIL $1: $good of 2 survivors did"; failed=$((failed + 1))
    fi
    rm -rf "$dir"
}
run "one node" ""
run "three nodes" "OPENREG_RANKS_PER_NODE=1"
echo "occl kill: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
