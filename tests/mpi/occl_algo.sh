#!/bin/sh
# The planner and OCCL_ALGO/OCCL_DEBUG: which algorithm each call uses, as
# OCCL_DEBUG=INFO logs it, on one and on several virtual nodes; NCCL's
# OCCL_ALGO syntax (a list, ^ to exclude, per collective); an unknown name
# is an error; a collective the list leaves nothing for uses its own.
# Every run also checks its results (occl_perf -c 1: no wrong element).
set -eu
passed=0
failed=0
# expect LABEL WANT NOT PROCS DEVICES RANKS_PER_NODE OCCL_ALGO COLL BYTES
#   WANT: an algorithm every logged choice must be; NOT: one none may be ("-": no check)
expect() {
    label=$1 want=$2 not=$3 procs=$4 devs=$5 rpn=$6 algo=$7 coll=$8 bytes=$9
    out=$(timeout 120 mpiexec -n "$procs" env OPENREG_DEVICES="$devs" \
        OPENREG_RANKS_PER_NODE="$rpn" OCCL_ALGO="$algo" OCCL_DEBUG=INFO OCCL_TIMEOUT_MS=30000 \
        ./tests/perf/occl_perf --coll "$coll" -g "$devs" -b "$bytes" -e "$bytes" -n 2 -w 1 -c 1 \
        2>&1) || { echo "$out"; echo "FAIL $label: occl_perf failed"; failed=$((failed + 1)); return; }
    choices=$(echo "$out" | sed -n 's/.*virtual nodes: \([a-z]*\)$/\1/p' | sort -u | tr '\n' ' ')
    wrong=$(echo "$out" | awk '/^ *[0-9]/ { print $9 + $13 }' | sort -u | tr '\n' ' ')
    ok=true
    [ -n "$choices" ] || ok=false
    [ "$want" = - ] || [ "$choices" = "$want " ] || ok=false
    [ "$not" = - ] || ! echo " $choices" | grep -q " $not " || ok=false
    [ "$wrong" = "0 " ] || ok=false
    if $ok; then
        echo "ok   $label: $choices"; passed=$((passed + 1))
    else
        echo "$out" | tail -20
        echo "FAIL $label: logged '$choices' (want ${want}, never ${not}), #wrong '$wrong'"
        failed=$((failed + 1))
    fi
}
# Two virtual nodes of two devices: mid sizes go hierarchical by themselves.
expect "2 nodes x 2, 256 KiB" hierarchical - 2 2 1 "" allreduce 256K
expect "2 nodes x 2, 32 MiB" - hierarchical 2 2 1 "" allreduce 32M
# One node, or nodes of one rank: never by itself.
expect "1 node x 4, 256 KiB" - hierarchical 2 2 2 "" allreduce 256K
expect "4 nodes x 1, 256 KiB" - hierarchical 4 1 1 "" allreduce 256K
# One node: large all-reduces go nvls by themselves; never on two nodes,
# not even forced (it falls back to the cheapest of the others).
expect "1 node x 4, 16 MiB" nvls - 2 2 2 "" allreduce 16M
expect "2 nodes x 2, 16 MiB" - nvls 2 2 1 "" allreduce 16M
expect "forced nvls, 2 nodes" - nvls 2 2 1 nvls allreduce 16M
expect "forced nvls, 1 node" nvls - 4 1 4 NVLS allreduce 4K
# Forced, on any shape; excluded; per collective.
expect "forced, 1 node" hierarchical - 2 2 2 hierarchical allreduce 256K
expect "forced, 4 nodes x 1" hierarchical - 4 1 1 HIERARCHICAL allreduce 4K
expect "excluded" - hierarchical 2 2 1 "^hierarchical" allreduce 256K
expect "per collective: allreduce" tree - 2 2 1 "allreduce:tree;reduce:ring" allreduce 256K
expect "per collective: reduce" ring - 2 2 1 "allreduce:tree;reduce:ring" reduce 8
expect "reduce: tree" tree - 2 2 1 tree reduce 32M
# Broadcast has only the ring: it keeps it whatever the list says.
expect "fallback" ring - 2 2 1 hierarchical broadcast 64K
# An unknown name is an error (as NCCL >= 2.24): the communicators are not
# made. Each process writes its messages to a file of its own: a job that
# aborts may end before mpiexec has passed them on (and the first process
# to abort may stop the other before it says anything).
status=0
err=$(mktemp -d)
timeout 60 mpiexec -n 2 env OPENREG_DEVICES=1 OCCL_ALGO="ring,bogus" sh -c \
    'exec ./tests/perf/occl_perf --coll allreduce -b 4K -e 4K -n 1 -w 0 -c 1 2>"$0/$PMI_RANK"' \
    "$err" >/dev/null 2>&1 || status=$?
told=$(cat "$err"/* 2>/dev/null | grep -c "OCCL_ALGO: unknown algorithm 'bogus'") || true
if [ "$status" -ne 0 ] && [ "$status" -ne 124 ] && [ "$told" -ge 1 ]; then
    echo "ok   unknown name refused"; passed=$((passed + 1))
else
    tail -n 5 "$err"/* 2>/dev/null
    echo "FAIL unknown name: not refused (status $status, $told told)"; failed=$((failed + 1))
fi
rm -rf "$err"
echo "occl algo: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
