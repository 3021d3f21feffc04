#!/bin/sh
# occl-sim against real jobs (docs/occl-sim.md#agreement): for several
# shapes - 2, 4 and 8 ranks, 1 or 2 devices per process, one or two virtual
# nodes, packed and spread, the planner's choice and forced algorithms and
# protocols - tests/mpi/occl_sim_probe runs a sequence of collectives under
# OPENREG_TIME=virtual and prints every rank's entry and end of every call
# in ns; occl-sim --per-rank replays the same calls on the same topology and
# placement, and the two must be identical, line for line. Then occl_perf
# -c 0 (warm-up, timed iterations, both placements) and occl-sim's sweep
# must print the same rows. Run from the build directory.
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0
failed=0
ok() { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
sim=./launch/occl-sim

# case LABEL TOPO PROCS DEVICES PLACEMENT PROFILE CALL...: CALL is
# COLL:COUNT[:ROOT], the count the call is given (float, sum).
case_() {
    label=$1 topo=$2 procs=$3 g=$4 placement=$5 profile=$6
    shift 6
    n=$((procs * g))
    : > "$dir/calls"
    for c in "$@"; do
        coll=${c%%:*} rest=${c#*:}
        count=${rest%%:*} root=0
        [ "$rest" != "$count" ] && root=${rest#*:}
        case $coll in
        allgather|reducescatter|alltoall|gather|scatter) size=$((count * n * 4)) ;;
        *) size=$((count * 4)) ;;
        esac
        echo "$coll $size root=$root" >> "$dir/calls"
    done
    if ! timeout --kill-after=10 120 mpiexec -n "$procs" env OPENREG_DEVICES="$g" OPENREG_TOPO="$topo" \
        OPENREG_PLACEMENT="$placement" OPENREG_TIME=virtual OPENREG_DEVICE_PROFILE="$profile" \
        OPENREG_DEVICE_MEM=512M OCCL_TIMEOUT_MS=60000 \
        ./tests/mpi/occl_sim_probe "$g" "$@" > "$dir/real.raw" 2> "$dir/real.err"; then
        tail -5 "$dir/real.err"
        fail "$label: the real job failed"
        return
    fi
    grep '^call ' "$dir/real.raw" | sort > "$dir/real"
    if ! "$sim" -n "$procs" -d "$g" --placement "$placement" --profile "$profile" --file "$dir/calls" \
        --per-rank "$topo" > "$dir/sim.raw" 2> "$dir/sim.err"; then
        cat "$dir/sim.err"
        fail "$label: occl-sim failed"
        return
    fi
    grep '^call ' "$dir/sim.raw" | sort > "$dir/sim"
    lines=$(wc -l < "$dir/real")
    if [ "$lines" -eq $(($# * n)) ] && cmp -s "$dir/real" "$dir/sim"; then
        ok "$label: $n ranks, $# calls, every entry and end identical ($(awk '$1 ~ /^[0-9]+$/ { print $NF }' "$dir/sim.raw" |
            sort -u | tr '\n' ' '))"
    else
        diff "$dir/real" "$dir/sim" | head -10
        fail "$label: $lines lines from the job, the times differ"
    fi
}

two="nodes:2 devices:2 intra:100GB/s,2us host:20GB/s,1us inter:25GB/s,4us"
eight="nodes:2 devices:4 intra:300GB/s,1us inter:25GB/s,5us"
case_ "2 ranks on 2 nodes" "$two" 2 1 spread a100 \
    allreduce:16 allreduce:1048576 reduce:262144:1 broadcast:1500000:1
case_ "4 ranks on one switch" "devices:4 shape:switch intra:100GB/s,2us" 4 1 packed cpu \
    allreduce:1024 allreduce:4194304 reducescatter:65536 alltoall:1000 gather:4096:3 scatter:70000:2
case_ "2 processes x 2 devices, 2 nodes" "$two" 2 2 packed a100 \
    allreduce:4194304 allgather:100000 broadcast:2000000:3 reduce:1048576:2
case_ "4 processes x 2 devices, spread" "$eight" 4 2 spread a100 \
    allreduce:4194304 allreduce:1024 reduce:1048576:5 scatter:4096:7 allgather:300000 \
    broadcast:65536:0 broadcast:65536:5
OCCL_ALGO=ring OCCL_PROTO=LL128 case_ "8 ranks, ring/LL128 forced" "$eight" 8 1 packed h100 \
    allreduce:1048576 reduce:65536:4
OCCL_ALGO=hierarchical,tree case_ "8 ranks, hierarchical or tree" "$eight" 8 1 spread a100 \
    allreduce:2097152 allreduce:64
# NVLS in an NVLink SHARP switch: NCCL's pipeline of loops (1 KiB and 1 MiB
# within one loop, 16 MiB in eight).
OCCL_ALGO=nvls case_ "4 ranks of dgx-h100, nvls in the switch" dgx-h100 4 1 packed h100 \
    allreduce:256 allreduce:262144 allreduce:4194304

# Boxes of 8 NICs, 2 ranks in each: a real run spreads the traffic between
# the nodes over 2 rails (vcost.c's occl_vsystem_rails), and so must occl-sim.
case_ "4 ranks spread over 2 boxes of dgx-h100x2, 2 rails" dgx-h100x2 4 1 spread h100 \
    allreduce:16777216 allreduce:1024 allgather:1048576 reduce:4194304:1 broadcast:4194304:2

# occl_perf's rows: 4 processes x 2 devices, warm-up and timed calls, out of
# place then in place, sizes 4 KiB to 4 MiB.
if timeout --kill-after=10 300 mpiexec -n 4 env OPENREG_DEVICES=2 OPENREG_TOPO="$eight" \
    OPENREG_PLACEMENT=spread OPENREG_TIME=virtual OPENREG_DEVICE_PROFILE=a100 OPENREG_DEVICE_MEM=256M \
    OCCL_TIMEOUT_MS=60000 ./tests/perf/occl_perf --coll allreduce -g 2 -b 4K -e 4M -f 32 -w 2 -n 3 -c 0 \
    > "$dir/perf.raw" 2>&1; then
    awk '$1 ~ /^[0-9]+$/ { print $1, $2, $3, $4, $5, $6, $7, $8, $10, $11, $12 }' "$dir/perf.raw" > "$dir/perf"
    "$sim" -n 4 -d 2 --placement spread --profile a100 -b 4K -e 4M -f 32 -w 2 --iters 3 --place both "$eight" |
        awk '$1 ~ /^[0-9]+$/ { print $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 }' > "$dir/simperf"
    if [ "$(wc -l < "$dir/perf")" -eq 3 ] && cmp -s "$dir/perf" "$dir/simperf"; then
        ok "occl_perf -w 2 -n 3 rows, 8 ranks: $(awk '{ printf "%s ", $6 }' "$dir/perf")us"
    else
        diff "$dir/perf" "$dir/simperf" || true
        fail "occl_perf's rows and occl-sim's differ"
    fi
else
    tail -5 "$dir/perf.raw"
    fail "occl_perf failed"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
