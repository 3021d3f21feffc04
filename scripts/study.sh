#!/bin/sh
# study.sh - the allreduce placement and algorithm study (docs/study.md).
# Runs occl_perf in virtual time on a 2-node x 4-device topology, once per
# rank placement (packed, spread) and algorithm (OCCL_ALGO ring, tree,
# hierarchical, and the planner's own choice), in place only (one buffer per
# rank, so 1 GiB fits), then writes a CSV, a markdown table and an SVG plot
# of the virtual timings with scripts/study_report.py.
# Run it from the build directory (it finds ./launch/orrun there) or name the
# build directory with --build.
usage() {
    cat <<USAGE
usage: study.sh [--build DIR] [--out DIR] [--min SIZE] [--max SIZE] [--factor N]
                [--topo TOPOLOGY] [--profile NAME] [--algos "ring tree hierarchical auto"]
                [--placements "packed spread"] [--ranks N]
  --build DIR    build directory holding launch/orrun and tests/perf/occl_perf (default .)
  --out DIR      where the raw logs, study.csv, study.md and study.svg go (default study-allreduce)
  --min, --max   allreduce sizes, occl_perf's syntax (default 1K and 1G)
  --factor N     size step factor (default 4)
  --topo T       topology (default "nodes:2 devices:4 intra:300GB/s,1us inter:25GB/s,5us")
  --profile P    device profile (default a100)
  --algos L      OCCL_ALGO values; "auto" leaves OCCL_ALGO unset (default "ring tree hierarchical auto")
  --placements L orrun placements (default "packed spread")
  --ranks N      ranks of 1 device (default 8)
USAGE
}
src=$(cd "$(dirname "$0")/.." && pwd)
build=.
out=study-allreduce
min=1K
max=1G
factor=4
topo="nodes:2 devices:4 intra:300GB/s,1us inter:25GB/s,5us"
profile=a100
algos="ring tree hierarchical auto"
placements="packed spread"
ranks=8
while [ $# -gt 0 ]; do
    case $1 in
    -h|--help) usage; exit 0 ;;
    --build|--out|--min|--max|--factor|--topo|--profile|--algos|--placements|--ranks)
        if [ $# -lt 2 ]; then
            echo "study.sh: $1 needs a value" >&2; usage >&2; exit 2
        fi
        v=$2
        case $1 in
        --build) build=$v ;; --out) out=$v ;; --min) min=$v ;; --max) max=$v ;;
        --factor) factor=$v ;; --topo) topo=$v ;; --profile) profile=$v ;;
        --algos) algos=$v ;; --placements) placements=$v ;; --ranks) ranks=$v ;;
        esac
        shift 2 ;;
    *) echo "study.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
orrun=$build/launch/orrun
perf=$build/tests/perf/occl_perf
for p in "$orrun" "$perf"; do
    if [ ! -x "$p" ]; then
        echo "study.sh: $p not found: run from the build directory after 'make', or give --build" >&2
        exit 2
    fi
done
for a in $algos; do
    case $a in
    ring|tree|hierarchical|direct|auto) ;;
    *) echo "study.sh: unknown algorithm '$a' (ring, tree, hierarchical, direct or auto)" >&2; exit 2 ;;
    esac
done
for p in $placements; do
    case $p in
    packed|spread) ;;
    *) echo "study.sh: unknown placement '$p' (packed or spread)" >&2; exit 2 ;;
    esac
done
mkdir -p "$out/raw" || exit 1
# One run per (placement, algorithm). Virtual times are the same for every
# call, so one timed call and no warm-up suffice; -c 0 because checking the
# results costs host time and says nothing about the model. In place only:
# the model times in-place and out-of-place calls alike, and one buffer per
# rank instead of two halves the buffers (8 GiB instead of 16 at 1 GiB).
for p in $placements; do
    for a in $algos; do
        # The table (rank 0's stdout) and OCCL's INFO lines (every rank's
        # stderr) in two files: one stream cannot break the other's lines.
        log=$out/raw/$p-$a.txt
        echo "study.sh: $p $a -> $log" >&2
        if [ "$a" = auto ]; then algo_env="-u OCCL_ALGO"; else algo_env="OCCL_ALGO=$a"; fi
        if ! "$orrun" -n "$ranks" -d 1 --topo "$topo" --placement "$p" --time virtual \
                --profile "$profile" -- env $algo_env OCCL_DEBUG=INFO \
                "$perf" --coll allreduce -b "$min" -e "$max" -f "$factor" -n 1 -w 0 -c 0 \
                --place in \
                >"$log" 2>"$log.err"; then
            echo "study.sh: the $p $a run failed; its output:" >&2
            cat "$log" "$log.err" | sed 's/^/  | /' | grep -v 'occl INFO' >&2
            exit 1
        fi
    done
done
python3 "$src/scripts/study_report.py" --title "allreduce, $ranks ranks, $topo, $profile" \
    "$out" || exit 1
echo "study.sh: wrote $out/study.csv, $out/study.md, $out/study.svg" >&2
