#!/bin/sh
# OCCL's tree all-reduce follows a declared topology's double binary tree
# (docs/occl.md#trees-on-a-topology): 4 processes x 2 devices placed spread
# over 2 nodes of 4 devices log (OCCL_DEBUG=INFO) the trees of
# tests/collectives/golden/2x4-spread-2dev.txt, whose parents keep each node's
# ranks in one chain; the packed job's tree all-reduce costs the same virtual
# time; without a topology the trees come from the virtual nodes.
set -eu
srcdir=${srcdir:-$(dirname "$0")/../..}
golden=$srcdir/tests/collectives/golden/2x4-spread-2dev.txt
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
topo="nodes:2 devices:4 intra:300GB/s,1us inter:25GB/s,5us"
fail() { echo "FAIL: $*"; exit 1; }
perf() { # OUT ENV...: a 16 MiB tree all-reduce in virtual time, 4 processes x 2 devices
    out=$1
    shift
    timeout --kill-after=10 300 mpiexec -n 4 env OPENREG_DEVICES=2 OCCL_ALGO=tree \
        OCCL_DEBUG=INFO OCCL_TIMEOUT_MS=120000 OPENREG_TIME=virtual \
        MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE "$@" ./tests/perf/occl_perf \
        --coll allreduce -g 2 -b 16M -e 16M -n 2 -w 1 > "$out" 2>&1 ||
        { cat "$out"; fail "occl_perf $*"; }
    grep -Eq 'AllReduce of 4194304 x float32 on 8 ranks, 2 virtual nodes.*: tree(/(LL|LL128|Simple))?$' "$out" ||
        fail "$*: the tree algorithm was not used"
}
# The parents the golden file gives, as the log prints them.
want=$(awk '$1 == "tree0" || $1 == "tree1" { p[$1] = p[$1] " " $4 }
            END { printf "tree 0 parents:%s; tree 1 parents:%s", p["tree0"], p["tree1"] }' "$golden")
for p in packed spread; do
    perf "$dir/$p.out" OPENREG_TOPO="$topo" OPENREG_PLACEMENT=$p
    grep 'trees from the topology' "$dir/$p.out" || fail "$p: no trees from the topology logged"
    # size count type redop root vtime ...: the out-of-place and in-place times
    awk '$1 == 16777216 { print $6, $10 }' "$dir/$p.out" > "$dir/$p.t"
    [ -s "$dir/$p.t" ] || { cat "$dir/$p.out"; fail "$p: no 16 MiB row"; }
    awk '$1 == 16777216 && ($9 != 0 || $13 != 0) { exit 1 }' "$dir/$p.out" || fail "$p: wrong results"
done
grep -qF "trees from the topology: $want" "$dir/spread.out" ||
    fail "spread: the logged trees are not the golden file's ($want)"
echo "tree allreduce 16 MiB virtual time (us): packed $(cat "$dir/packed.t"), spread $(cat "$dir/spread.t")"
cmp -s "$dir/packed.t" "$dir/spread.t" || fail "spread costs another time than packed"
# No topology: 2 virtual nodes of 2 processes each, laid out as the packed
# job on the topology, get the same trees from the same construction.
perf "$dir/vnodes.out" OPENREG_RANKS_PER_NODE=2
packed=$(sed -n 's/.*trees from the topology: //p' "$dir/packed.out")
grep -qF "trees from 2 virtual nodes: $packed" "$dir/vnodes.out" ||
    { grep 'trees from' "$dir/vnodes.out"; fail "no topology: not the packed job's trees ($packed)"; }
echo "occl_topo_tree: trees follow the topology and the virtual nodes"
