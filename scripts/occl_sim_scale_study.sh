#!/bin/sh
# The scale study of docs/study.md#6-scale-study: ring, tree and
# hierarchical all-reduce on DGX-H100-class boxes on a rail-optimized
# fabric (fabric:rails), h100 profile, N devices (one per rank), packed
# (N/8 full boxes) or spread (round robin over a cluster twice the job:
# N/4 boxes, 4 ranks on each), in occl-sim's virtual time. One occl-sim
# run per job and placement: a call file of the sizes, --algo restricted to
# the algorithms studied, --replay-all -v printing the planner's replay of every
# algorithm and protocol (every rank entering at 0). Writes OUT/raw/N-P.txt
# (occl-sim's output, its --stats line and /usr/bin/time's), then
# scripts/occl_sim_scale_report.py writes OUT/scale.csv and OUT/scale.svg.
# Run from the build directory:
#   sh ../scripts/occl_sim_scale_study.sh [OUT] [DEVICES...]
# environment: SIZES (default "1M 64M 1G"), PLACEMENTS (default "packed
# spread"), RING_MAX (default 2048: the ring is replayed only up to this
# many devices, its host cost growing as n^2), LIMIT (seconds per run,
# default 3600), SIM (default ./launch/occl-sim). Runs one occl-sim at a
# time under nice -n 19; a run whose raw file already ends with its time
# line is kept (rerun after an interruption resumes).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
sim=${SIM:-./launch/occl-sim}
out=${1:-scale-study}
[ $# -gt 0 ] && shift
limit=${LIMIT:-3600}
ring_max=${RING_MAX:-2048}
if [ ! -x "$sim" ]; then
    echo "occl_sim_scale_study.sh: $sim not found: run from the build directory after 'make'" >&2
    exit 2
fi
mkdir -p "$out/raw"
: > "$out/calls.txt"
for size in ${SIZES:-1M 64M 1G}; do
    echo "allreduce $size" >> "$out/calls.txt"
done
for n in ${*:-64 128 256 512 1024 2048 4096 8192}; do
    for place in ${PLACEMENTS:-packed spread}; do
        case $place in
        packed) nodes=$((n / 8)) ;;
        spread) nodes=$((n / 4)) ;;
        *) echo "occl_sim_scale_study.sh: placement '$place' is not packed or spread" >&2; exit 2 ;;
        esac
        algos=tree,hierarchical
        [ "$n" -le "$ring_max" ] && algos=ring,$algos
        raw=$out/raw/$n-$place.txt
        if [ -f "$raw" ] && tail -n 1 "$raw" | grep -q "^TIME .* algos=$algos\$"; then
            echo "$raw: kept"
            continue
        fi
        topo="box:dgx-h100 nodes:$nodes fabric:rails"
        echo "$n devices, $place, '$topo', $algos"
        # shellcheck disable=SC2086
        { timeout "$limit" /usr/bin/time -f "TIME %U %S %e %M nodes=$nodes algos=$algos" \
              nice -n 19 "$sim" --profile h100 -n "$n" --placement "$place" --algo "$algos" --replay-all -v --stats \
              --file "$out/calls.txt" "$topo"; } > "$raw" 2>&1 || {
            echo "occl_sim_scale_study.sh: $raw: the run failed or passed ${limit}s" >&2
            tail -n 3 "$raw" >&2
        }
    done
done
python3 "$here/occl_sim_scale_report.py" "$out"
