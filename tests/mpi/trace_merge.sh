#!/bin/sh
# A 2-rank job (two virtual nodes, 2 devices each) traced in virtual time:
# each rank writes NAME.rankN.json from MPI_Finalize (the program then skips
# its exit handlers), with its remote copies costed over the network path;
# ortrace-merge joins them into one valid file with all four devices. The
# same in wall time, the same through orrun --time/--trace, and the merge
# tool's refusals.
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
src=$(dirname "$0")/../..
checker="${PYTHON:-python3} $src/tests/tools/check_trace.py"
merge="${PYTHON:-python3} $src/launch/ortrace-merge"
failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
job() {
    timeout --kill-after=10 120 mpiexec -n 2 env MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE \
        OPENREG_DEVICES=2 OPENREG_RANKS_PER_NODE=1 OPENREG_DEVICE_MEM=64M "$@"
}

job OPENREG_TIME=virtual OPENREG_TRACE="$dir/v.json" ./tests/mpi/vtime_remote 1048576 --skip-atexit
[ -f "$dir/v.rank0.json" ] && [ -f "$dir/v.rank1.json" ] || fail "no per-rank files: $(ls "$dir")"
[ ! -e "$dir/v.json" ] || fail "a job of 2 ranks wrote the unsuffixed name"
# Network path: 10 us + 1 MiB at 12.5 GB/s = 10000 + 83887 ns, a put and a get per rank.
for r in 0 1; do
    $checker "$dir/v.rank$r.json" --time virtual --ranks $r --pids $((2 * r)),$((2 * r + 1)) \
        --count 'remote memcpy PtoP=2' --arg 'remote memcpy PtoP:path=NET' \
        --arg 'remote memcpy PtoP:bytes=1048576' --dur 'remote memcpy PtoP=93887' ||
        fail "rank $r's trace"
done
$merge "$dir/v.json" || fail "merge exited with $?"
$checker "$dir/v.json" --time virtual --ranks 0,1 --pids 0,1,2,3 \
    --count 'remote memcpy PtoP=4' --dur 'remote memcpy PtoP=93887' || fail "merged trace"

job OPENREG_TRACE="$dir/w.json" ./tests/mpi/vtime_remote 65536
$merge -o "$dir/wall.json" "$dir/w.rank0.json" "$dir/w.rank1.json" || fail "wall merge"
$checker "$dir/wall.json" --time wall --ranks 0,1 --pids 0,1,2,3 --count 'remote memcpy PtoP=4' ||
    fail "merged wall trace"

# The same through orrun's options, as a user runs it.
timeout --kill-after=10 120 ./launch/orrun -n 2 -d 1 --ranks-per-node 1 --time virtual \
    --trace "$dir/o.json" -- ./tests/mpi/vtime_remote 4096 || fail "orrun --trace exited with $?"
$merge "$dir/o.json" && $checker "$dir/o.json" --time virtual --ranks 0,1 --pids 0,1 \
    --count 'remote memcpy PtoP=4' || fail "orrun --time virtual --trace: merged trace"

# Refusals: each with status 1 and a message naming the problem.
refuse() {
    want=$1
    shift
    if out=$($merge "$@" 2>&1); then
        fail "ortrace-merge $* succeeded"
    elif ! echo "$out" | grep -q "$want"; then
        fail "ortrace-merge $*: no '$want' in: $out"
    fi
}
refuse "mix wall and virtual" -o "$dir/x.json" "$dir/v.rank0.json" "$dir/w.rank1.json"
refuse "rank 0 is in both" -o "$dir/x.json" "$dir/v.rank0.json" "$dir/v.rank0.json"
echo '{"traceEvents": []}' > "$dir/other.json"
refuse "not an OpenReg trace" -o "$dir/x.json" "$dir/other.json"
echo '{"traceEvents": [' > "$dir/broken.json"
refuse "not valid JSON" -o "$dir/x.json" "$dir/broken.json"
refuse "cannot read" -o "$dir/x.json" "$dir/v.rank0.json" "$dir/missing.json"
refuse "no per-rank files" "$dir/nothing.json"
echo "trace merge: $((failed == 0 ? 1 : 0)) passed, $failed failed"
[ "$failed" -eq 0 ]
