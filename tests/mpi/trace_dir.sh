#!/bin/sh
# OPENREG_TRACE naming a directory: every rank writes its trace inside it
# (DIR/trace.rankN.json), nothing beside it.
set -eu
dir=$(mktemp -d)
rc=0
timeout 60 mpiexec -n 2 env MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE OPENREG_TRACE="$dir" \
    ./tests/mpi/thread_level --expect-success || rc=$?
failed=0
[ "$rc" -eq 0 ] || { echo "FAIL: exit $rc"; failed=1; }
for r in 0 1; do
    grep -q traceEvents "$dir/trace.rank$r.json" 2>/dev/null ||
        { echo "FAIL: no trace $dir/trace.rank$r.json"; failed=1; }
    [ ! -e "$dir.rank$r" ] || { echo "FAIL: $dir.rank$r written beside the directory"; failed=1; }
done
ls -l "$dir"
rm -rf "$dir" "$dir.rank0" "$dir.rank1"
echo "trace directory: $((1 - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
