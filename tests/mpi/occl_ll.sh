#!/bin/sh
# The low-latency path (collectives/ll.c): which calls take it, as
# OCCL_DEBUG=INFO logs them; on which thread; OCCL_LL_MAX_BYTES,
# OCCL_CALLER_WAIT_US and OCCL_LL_NAP_US, and their bad values. Every run
# checks its results (occl_perf -c 1: no wrong element).
set -eu
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "$out" | tail -15; echo "FAIL $1"; failed=$((failed + 1)); }
# run PROCS COLL BYTES [VAR=VALUE...]: occl_perf on PROCS ranks of one node
run() {
    procs=$1 coll=$2 bytes=$3
    shift 3
    out=$(timeout 120 mpiexec -n "$procs" env OPENREG_DEVICES=1 OCCL_DEBUG=INFO OCCL_TIMEOUT_MS=30000 "$@" \
        ./tests/perf/occl_perf --coll "$coll" -b "$bytes" -e "$bytes" -n 3 -w 1 -c 1 2>&1) && rc=0 || rc=$?
}
right() { [ "$rc" -eq 0 ] && [ "$(echo "$out" | awk '/^ *[0-9]/ { print $9 + $13 }' | sort -u)" = 0 ]; }
# Every collective, 24 B or 3 KiB (the larger buffer of a rank), 3 ranks:
# the path, right results.
bytes=24
for coll in allreduce broadcast reduce allgather reducescatter alltoall gather scatter; do
    run 3 "$coll" "$bytes"
    if right && echo "$out" | grep -q "low-latency path"; then ok "$coll $bytes: low-latency path"
    else bad "$coll $bytes: no low-latency path or wrong results"; fi
    bytes=$([ "$bytes" = 24 ] && echo 3K || echo 24)
done
# Larger calls and a chosen algorithm keep the planner's algorithms.
run 3 allreduce 64K
if right && ! echo "$out" | grep -q "low-latency path" && echo "$out" | grep -q "virtual nodes: "; then
    ok "64 KiB: the planner's algorithm"
else bad "64 KiB took the low-latency path"; fi
run 3 allreduce 8 OCCL_ALGO=ring
if right && ! echo "$out" | grep -q "low-latency path" && echo "$out" | grep -q "virtual nodes: ring"; then
    ok "OCCL_ALGO=ring: the ring"
else bad "OCCL_ALGO=ring: not the ring"; fi
run 3 allreduce 8 OCCL_LL_MAX_BYTES=0
if right && ! echo "$out" | grep -q "low-latency path"; then ok "OCCL_LL_MAX_BYTES=0: off"
else bad "OCCL_LL_MAX_BYTES=0: still on"; fi
run 3 allreduce 4K OCCL_LL_MAX_BYTES=16384
if right && echo "$out" | grep -q "low-latency path"; then ok "OCCL_LL_MAX_BYTES=16384: 4 KiB on it"
else bad "OCCL_LL_MAX_BYTES=16384: 4 KiB not on it"; fi
# Two virtual nodes: the network path.
run 2 allreduce 8 OPENREG_RANKS_PER_NODE=1
if right && ! echo "$out" | grep -q "low-latency path"; then ok "two nodes: not on it"
else bad "two nodes: on the low-latency path"; fi
# The thread: the caller's on an idle stream, the communicator's with OCCL_CALLER_WAIT_US=0.
run 2 allreduce 8
if right && echo "$out" | grep -q "low-latency path, on the calling thread"; then ok "the calling thread"
else bad "never on the calling thread"; fi
run 2 allreduce 8 OCCL_CALLER_WAIT_US=0
if right && echo "$out" | grep -q "low-latency path, on the communicator's thread" &&
    ! echo "$out" | grep -q "on the calling thread"; then ok "OCCL_CALLER_WAIT_US=0: the communicator's thread"
else bad "OCCL_CALLER_WAIT_US=0: on the calling thread"; fi
# Bad values: the call fails with the reason (one process, without mpiexec:
# a job that aborts may lose the failing rank's last lines).
for setting in OCCL_LL_MAX_BYTES=16385 OCCL_LL_MAX_BYTES=4k OCCL_LL_MAX_BYTES=-1 OCCL_CALLER_WAIT_US=1000001 \
    OCCL_CALLER_WAIT_US=x OCCL_LL_NAP_US=1001 OCCL_LL_NAP_US=20us; do
    out=$(timeout 60 env OPENREG_DEVICES=1 "$setting" ./tests/perf/occl_perf --coll allreduce -b 8 -e 8 \
        -n 1 -w 0 2>&1) && rc=0 || rc=$?
    if [ "$rc" -ne 0 ] && echo "$out" | grep -q "${setting%%=*}='${setting#*=}' is not valid"; then
        ok "$setting refused"
    else bad "$setting not refused"; fi
done
echo "occl ll: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
