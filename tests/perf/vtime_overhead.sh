#!/bin/sh
# vtime_overhead.sh - what virtual time and tracing add to the runtime's
# fastest paths: the median latency of an empty kernel launch + stream
# synchronize, and of an event record + event synchronize (runtime_perf's
# first table), in wall time without a trace (the baseline, measured in the
# same run), in virtual time, and with OPENREG_TRACE in each clock.
#
# usage: tests/perf/vtime_overhead.sh [ITERATIONS]    (from the build directory)
set -eu
iters=${1:-20000}
perf=./tests/perf/runtime_perf
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
[ -x "$perf" ] || { echo "vtime_overhead.sh: build $perf first" >&2; exit 1; }

# median of a latency row of runtime_perf's output
measure() {
    env "$@" OPENREG_DEVICES=1 "$perf" -i "$iters" -s 4096 -m 1M -r 1 > "$dir/out"
    launch=$(awk '/launch \(1 block\) \+ stream sync/ { print $(NF-1) }' "$dir/out")
    event=$(awk '/event record \+ event sync/ { print $(NF-1) }' "$dir/out")
}

echo "median latency, microseconds, $iters iterations; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '  %-28s %14s %8s %14s %8s\n' case "launch+sync" x "record+sync" x
measure OPENREG_TIME=wall
base_l=$launch base_e=$event
for case in "wall" "virtual" "wall, traced" "virtual, traced"; do
    case $case in
    wall) measure OPENREG_TIME=wall ;;
    virtual) measure OPENREG_TIME=virtual ;;
    "wall, traced") measure OPENREG_TIME=wall OPENREG_TRACE="$dir/t.json" ;;
    "virtual, traced") measure OPENREG_TIME=virtual OPENREG_TRACE="$dir/t.json" ;;
    esac
    awk -v c="$case" -v l="$launch" -v e="$event" -v bl="$base_l" -v be="$base_e" \
        'BEGIN { printf "  %-28s %14s %8.2f %14s %8.2f\n", c, l, l / bl, e, e / be }'
done
echo "(x = case / first wall run; load after: $(cut -d' ' -f1-3 /proc/loadavg))"
