#!/bin/sh
# The planner in virtual time (docs/occl.md#the-planner): on the study's
# topology (2 nodes x 4 devices, 8 ranks of 1 device), each call's algorithm
# is the one whose replay completes first. For each case, occl_perf runs once
# with the planner's choice and once forced to each candidate (OCCL_ALGO):
# the choice must be the fastest forced one and its virtual time equal to
# theirs; every rank logs the same choice, from the model, with the
# protocol it picked (the least predicted time over algorithm x protocol;
# OCCL_PROTO restricts the protocols as NCCL_PROTO does). At 16 MiB the
# model picks hierarchical where this host's cost formulas (wall mode, still
# checked) pick ring. OCCL_DEBUG=TRACE shows the replay runs once per call
# shape and later calls reuse the decision. Run from the build directory.
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
topo="nodes:2 devices:4 intra:300GB/s,1us inter:25GB/s,5us"
passed=0
failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
# run OUT TIME PLACEMENT OCCL_ALGO COLL BYTES [DEBUG] [ITERS]: one occl_perf job of 8 ranks
run() {
    out=$1 time=$2 placement=$3 algo=$4 coll=$5 bytes=$6 debug=${7:-INFO} iters=${8:-1}
    timeout --kill-after=10 300 mpiexec -n 8 env OPENREG_DEVICES=1 OPENREG_TOPO="${TOPO:-$topo}" \
        OPENREG_PLACEMENT="$placement" OPENREG_TIME="$time" OPENREG_DEVICE_PROFILE=a100 \
        OPENREG_DEVICE_MEM=256M OCCL_ALGO="$algo" OCCL_PROTO="${PROTO:-}" OCCL_DEBUG="$debug" \
        OCCL_TIMEOUT_MS=120000 \
        ./tests/perf/occl_perf --coll "$coll" -b "$bytes" -e "$bytes" -n "$iters" -w 0 -c 1 \
        > "$out" 2>&1 || { tail -20 "$out"; echo "occl_perf failed ($out)"; return 1; }
}
# The first (out-of-place) call's virtual time: every rank enters it at the
# same clock, as the planner's replay assumes. Columns: size count type
# redop root vtime algbw busbw #wrong.
vtime() { awk '$1 ~ /^[0-9]+$/ && NF >= 9 { print $6; exit }' "$1"; }
wrong() { awk '$1 ~ /^[0-9]+$/ && NF >= 9 { w += $9 + $13 } END { print w + 0 }' "$1"; }
# The algorithms the ranks logged ("ring/Simple" in virtual time, "ring" in
# wall time), one line each; protos: the protocols.
choices() { sed -n 's/.*occl INFO: rank [0-9]*: [A-Za-z]* of .* on .*: \([a-z]*\)\(\/[A-Za-z0-9]*\)\{0,1\}$/\1/p' "$1" | sort -u; }
protos() { sed -n 's/.*occl INFO: rank [0-9]*: [A-Za-z]* of .* on .*: [a-z]*\/\([A-Za-z0-9]*\)$/\1/p' "$1" | sort -u; }
# The pair of least estimate in a model line "(virtual-time model: ring/LL
# 12 ns, ..., tree/Simple 15 ns): tree/Simple", the first on a tie; a pair
# not replayed ("ring/LL > 40 ns": its floor is above the pick) is skipped.
least() {
    printf '%s\n' "$1" | sed -n 's/.*(virtual-time model: \(.*\)): .*/\1/p' | tr ',' '\n' |
        awk 'NF >= 2 && $2 != ">" && (best == "" || $2 + 0 < t) { best = $1; t = $2 + 0 } END { print best }'
}

# expect_min LABEL PLACEMENT COLL BYTES CANDIDATES...
expect_min() {
    label=$1 placement=$2 coll=$3 bytes=$4
    shift 4
    f=$dir/auto.out
    run "$f" virtual "$placement" "" "$coll" "$bytes" || { fail "$label: auto run"; return; }
    pick=$(choices "$f")
    t_auto=$(vtime "$f")
    models=$(grep -c 'virtual-time model: ' "$f" || true)
    best= t_best=
    for a in "$@"; do
        run "$dir/$a.out" virtual "$placement" "$a" "$coll" "$bytes" || { fail "$label: $a run"; return; }
        t=$(vtime "$dir/$a.out")
        echo "     $label: $a $t us"
        if [ -z "$best" ] || awk -v t="$t" -v b="$t_best" 'BEGIN { exit !(t < b) }'; then
            best=$a t_best=$t
        fi
        [ "$(wrong "$dir/$a.out")" = 0 ] || fail "$label: $a gave wrong results"
    done
    echo "     $label: auto picked '$pick' $t_auto us; fastest forced: $best $t_best us"
    if [ "$pick" = "$best" ] && [ "$t_auto" = "$t_best" ] && [ "$models" -ge 8 ] &&
        [ "$(wrong "$f")" = 0 ]; then
        ok "$label: $pick, $t_auto us"
    else
        grep 'occl INFO: rank 0:' "$f" | head -3
        fail "$label: auto picked '$pick' ($t_auto us, $models model lines), fastest is $best ($t_best us)"
    fi
}

# 16 MiB, packed: hierarchical crosses the network with S/2 per leader where
# the ring crosses it with 2 x 7/8 S; direct is not eligible (8 x 16 MiB).
expect_min "allreduce 16 MiB, packed" packed allreduce 16M ring tree hierarchical
[ "$pick" != ring ] || fail "allreduce 16 MiB: the model should not pick ring"
# 4 KiB, spread: latency-bound, every algorithm a candidate.
expect_min "allreduce 4 KiB, spread" spread allreduce 4K ring tree direct hierarchical
# One node of 8 (TOPO replaces the study's topology): nvls is a candidate.
TOPO="nodes:1 devices:8 intra:300GB/s,1us"
expect_min "allreduce 16 MiB, one node" packed allreduce 16M ring tree nvls
unset TOPO
# Reduce, rooted: the chain and the tree.
expect_min "reduce 1 MiB, packed" packed reduce 1M ring tree

# Wall mode is planned as before: ring at 16 MiB on this shape, no model.
if run "$dir/wall.out" wall packed "" allreduce 16M; then
    if [ "$(choices "$dir/wall.out")" = ring ] && ! grep -q 'virtual-time model' "$dir/wall.out"; then
        ok "wall mode: ring at 16 MiB from the cost formulas"
    else
        grep 'occl INFO: rank 0:' "$dir/wall.out" | head -3
        fail "wall mode: logged '$(choices "$dir/wall.out")'"
    fi
else
    fail "wall mode run"
fi

# OCCL_ALGO restricts the candidates: the model chooses among ring and tree
# only (each with every protocol), and takes the pair it timed fastest.
if run "$dir/some.out" virtual packed "ring,tree" allreduce 16M; then
    line=$(grep -m1 'occl INFO: rank 0: AllReduce' "$dir/some.out")
    want=$(least "$line")
    case $want in
    ring/* | tree/*)
        case $line in
        *"hierarchical"* | *"direct"*) fail "OCCL_ALGO=ring,tree: '$line' timed another algorithm" ;;
        *": $want") ok "OCCL_ALGO=ring,tree: $line" ;;
        *) fail "OCCL_ALGO=ring,tree: '$line' is not the fastest ($want)" ;;
        esac
        ;;
    *) fail "OCCL_ALGO=ring,tree: logged '$line'" ;;
    esac
else
    fail "OCCL_ALGO=ring,tree run"
fi

# OCCL_PROTO restricts the protocols the same way: LL128 alone is timed
# and used, though Simple is faster at 16 MiB.
if PROTO=LL128 run "$dir/proto.out" virtual packed "ring,tree" allreduce 16M; then
    line=$(grep -m1 'occl INFO: rank 0: AllReduce' "$dir/proto.out")
    if [ "$(protos "$dir/proto.out")" = LL128 ] && ! printf '%s' "$line" | grep -q '/Simple\|/LL '; then
        ok "OCCL_PROTO=LL128: $line"
    else
        fail "OCCL_PROTO=LL128: logged '$line'"
    fi
else
    fail "OCCL_PROTO=LL128 run"
fi

# The replay runs once per call shape on each rank; the 3 timed calls, the
# in-place ones and the check reuse it (logged at TRACE).
if run "$dir/trace.out" virtual packed "" allreduce 16M TRACE 3; then
    replayed=$(grep -c 'planned in .* (virtual-time model, replayed)' "$dir/trace.out" || true)
    cached=$(grep -c 'planned in .* (virtual-time model, cached)' "$dir/trace.out" || true)
    if [ "$replayed" -eq 8 ] && [ "$cached" -ge 8 ]; then
        ok "decisions cached: $replayed replays, $cached cached plans"
    else
        fail "decisions cached: $replayed replays (want 8, one per rank), $cached cached plans"
    fi
else
    fail "TRACE run"
fi

echo "occl vplan: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
