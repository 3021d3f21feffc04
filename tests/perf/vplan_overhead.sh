#!/bin/sh
# vplan_overhead.sh [ITERS] - host time the planner (occl_plan) spends per
# call: in virtual time the first call of a shape replays every candidate
# (vcost.c), later ones read the decision cached on the communicator; the
# baseline is wall mode's cost formulas, measured in the same run. 8 ranks of
# 1 device on the study's topology, all-reduce of 4 KiB, 256 KiB and 16 MiB;
# OCCL_DEBUG=TRACE logs each plan's host time. The last column puts the first
# plan next to the wall time of the all-reduce itself (occl_perf, wall mode).
# Run from the build directory; figures count only with a load below ~1.5.
iters=${1:-20}
topo="nodes:2 devices:4 intra:300GB/s,1us inter:25GB/s,5us"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vplan_overhead.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ ! -x ./tests/perf/occl_perf ]; then
    echo "vplan_overhead.sh: ./tests/perf/occl_perf not found: run from the build directory after 'make'" >&2
    exit 2
fi
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for mode in wall virtual; do
    timeout --kill-after=10 600 mpiexec -n 8 env OPENREG_DEVICES=1 OPENREG_TOPO="$topo" \
        OPENREG_PLACEMENT=packed OPENREG_TIME=$mode OPENREG_DEVICE_PROFILE=a100 \
        OPENREG_DEVICE_MEM=256M OCCL_DEBUG=TRACE OCCL_TIMEOUT_MS=120000 \
        ./tests/perf/occl_perf --coll allreduce -b 4K -e 16M -f 64 -n "$iters" -w 2 -c 0 \
        > "$tmp/$mode.out" 2>&1 || { tail -20 "$tmp/$mode.out"; echo "vplan_overhead.sh: the $mode run failed" >&2; exit 1; }
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
# plans KIND COUNT: the host times (us) of the plans of COUNT elements of KIND
plans() {
    grep "of $2 x float32 planned in .* ($1)" "$tmp"/*.out | sed 's/.*planned in \([0-9.]*\) us.*/\1/'
}
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; else printf "-" }'; }
count() { wc -l | tr -d ' '; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.1f", a / b }'; }
echo "occl_plan host time, median us per plan, 8 ranks, $iters iterations; load before: $load0, after: $load1"
printf '%10s %9s %7s %9s %7s %7s %9s %7s %11s\n' size formulas plans replayed x plans cached x "call (wall)"
for count in 1024 65536 4194304; do
    f=$(plans "cost formulas" $count | median) nf=$(plans "cost formulas" $count | count)
    r=$(plans "virtual-time model, replayed" $count | median)
    nr=$(plans "virtual-time model, replayed" $count | count)
    c=$(plans "virtual-time model, cached" $count | median)
    bytes=$((count * 4))
    call=$(awk -v b=$bytes '$1 == b && NF >= 9 { print $6; exit }' "$tmp/wall.out")
    printf '%10s %9s %7s %9s %7s %7s %9s %7s %11s\n' "$bytes" "$f" "$nf" "$r" "$nr" "$(ratio "$r" "$f")" "$c" \
        "$(ratio "$c" "$f")" "$call"
done
echo "formulas: wall mode's planner (the baseline); replayed: the first call of a shape in virtual time"
echo "(one per rank); cached: the later ones; x: ratio to the baseline; call: the all-reduce's wall time (us)."
