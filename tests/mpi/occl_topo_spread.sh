#!/bin/sh
# OCCL's ring follows a declared topology (docs/occl.md#rings-on-a-topology):
# 4 processes x 2 devices placed spread over 2 nodes of 4 devices (rank r on
# node r mod 2) get a ring that leaves each node once (OCCL_DEBUG=INFO prints
# it with its network crossings), whose all-reduce costs the same virtual
# time as the packed job's, and whose collectives give the right results.
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
topo="nodes:2 devices:4 intra:300GB/s,1us inter:25GB/s,5us"
job() { # PLACEMENT OUT PROGRAM ARGS...
    placement=$1 out=$2
    shift 2
    timeout --kill-after=10 300 mpiexec -n 4 env OPENREG_DEVICES=2 OPENREG_TOPO="$topo" \
        OPENREG_PLACEMENT="$placement" OCCL_DEBUG=INFO OCCL_TIMEOUT_MS=120000 \
        MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE "$@" > "$out" 2>&1
}
fail() { echo "FAIL: $*"; exit 1; }
for p in packed spread; do
    # The ring's time: forced, as the planner follows the virtual-time model.
    job "$p" "$dir/$p.out" env OPENREG_TIME=virtual OCCL_ALGO=ring ./tests/perf/occl_perf --coll allreduce \
        -g 2 -b 16M -e 16M -n 3 -w 1 || { cat "$dir/$p.out"; fail "occl_perf under $p placement"; }
    grep 'ring from the topology' "$dir/$p.out" || fail "$p: no ring from the topology logged"
    grep -q 'ring from the topology (2 network crossings)' "$dir/$p.out" ||
        fail "$p: the ring does not cross the network exactly twice"
    # size count type redop root vtime ...: the out-of-place and in-place times
    awk '$1 == 16777216 { print $6, $10 }' "$dir/$p.out" > "$dir/$p.t"
    [ -s "$dir/$p.t" ] || { cat "$dir/$p.out"; fail "$p: no 16 MiB row"; }
done
echo "allreduce 16 MiB virtual time (us): packed $(cat "$dir/packed.t"), spread $(cat "$dir/spread.t")"
cmp -s "$dir/packed.t" "$dir/spread.t" || fail "spread costs another time than packed"
# Under spread, rank order would leave a node at every step: the ring must not.
grep 'ring from the topology' "$dir/spread.out" | grep -q ': 0 1 2 3 4 5 6 7$' &&
    fail "spread: the ring is rank order"
job spread "$dir/correct.out" ./tests/mpi/occl_correct --coll=AllReduce,Broadcast ||
    { tail -20 "$dir/correct.out"; fail "occl_correct under spread placement"; }
grep '^occl_correct:' "$dir/correct.out"
