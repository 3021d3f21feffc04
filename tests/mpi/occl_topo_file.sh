#!/bin/sh
# OCCL on a placement file (docs/topology.md#placement-files): 4 processes x
# 2 devices placed by tests/topology/placement/good/mixed-4x2.txt on two
# nodes of four devices in a ring. The communicator's ring must be the one
# 'ortopo --rings' gives for that file (rank 3's devices sit against the
# ring's order, so a ring of any other placement differs), and all-reduce
# and broadcast must give the right data on it.
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
srcdir=${srcdir:-$(dirname "$0")/../..}
file=$srcdir/tests/topology/placement/good/mixed-4x2.txt
topo="nodes:2 devices:4 shape:ring"
fail() { echo "FAIL: $*"; exit 1; }
job() { # OUT PROGRAM ARGS...
    out=$1
    shift
    timeout --kill-after=10 300 mpiexec -n 4 env OPENREG_DEVICES=2 OPENREG_TOPO="$topo" \
        OPENREG_PLACEMENT="$file" OCCL_DEBUG=INFO OCCL_TIMEOUT_MS=120000 \
        MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE "$@" > "$out" 2>&1
}
# ortopo's ring as comm ranks: occl_perf's comm rank of rank r's device d is 2r + d.
./launch/ortopo --rings --placement "$file" -n 4 -d 2 "$topo" > "$dir/ortopo.out" ||
    { cat "$dir/ortopo.out"; fail "ortopo --rings on the placement file"; }
want=$(sed -n 's/^ring: r/r/p' "$dir/ortopo.out" | tr ' ' '\n' |
    sed -n 's/^r\([0-9]*\)\.\([0-9]*\)(D[0-9]*)$/\1 \2/p' | while read -r r d; do
        printf ' %d' $((2 * r + d))
    done)
[ -n "$want" ] || { cat "$dir/ortopo.out"; fail "no ring in ortopo's output"; }
job "$dir/perf.out" env OPENREG_TIME=virtual ./tests/perf/occl_perf --coll allreduce \
    -g 2 -b 1M -e 1M -n 2 -w 1 || { cat "$dir/perf.out"; fail "occl_perf on the placement file"; }
got=$(sed -n 's/.*ring from the topology ([0-9]* network crossings)://p' "$dir/perf.out" | head -1)
echo "ring of the placement file: ortopo$want, OCCL$got"
[ "$got" = "$want" ] || { cat "$dir/perf.out"; fail "OCCL's ring is not the placement file's"; }
job "$dir/correct.out" ./tests/mpi/occl_correct --coll=AllReduce,Broadcast ||
    { tail -20 "$dir/correct.out"; fail "occl_correct on the placement file"; }
grep '^occl_correct:' "$dir/correct.out"
