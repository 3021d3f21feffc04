#!/bin/sh
# occl_matrix.sh [occl_correct options] - OCCL's correctness over every job
# shape: 1, 2, 3, 4 and 8 processes x 1 and 2 devices each, on one virtual
# node and (several processes) on one node per process. `make check-occl-full`
# runs it with --full: the 1M+3 count for every collective, type and op.
# Run from the build directory; prints one line per shape, exits 1 if any fails.
set -u
passed=0
failed=0
for procs in 1 2 3 4 8; do
    for devs in 1 2; do
        for rpn in 0 1; do
            [ "$rpn" = 1 ] && [ "$procs" = 1 ] && continue
            nodes=$([ "$rpn" = 1 ] && echo "$procs nodes" || echo "1 node")
            label="$procs x $devs, $nodes"
            extra=$([ "$rpn" = 1 ] && echo OPENREG_RANKS_PER_NODE=1 || echo)
            start=$(date +%s)
            if out=$(timeout 7200 mpiexec -n "$procs" env OPENREG_DEVICES="$devs" $extra \
                OCCL_TIMEOUT_MS=120000 ./tests/mpi/occl_correct "$@" 2>&1); then
                echo "ok   $label: $(echo "$out" | tail -1) ($(($(date +%s) - start)) s)"
                passed=$((passed + 1))
            else
                echo "$out" | tail -20
                echo "FAIL $label"
                failed=$((failed + 1))
            fi
        done
    done
done
echo "occl matrix: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
