#!/bin/sh
# A placement and algorithm study with occl-sim (docs/study.md#5-scale-with-occl-sim):
# jobs of N ranks on a 128-node cluster of 8 devices each, packed (N/8
# full nodes) or spread (round robin over all 128 nodes), all-reduce of
# SIZE, each algorithm forced with its best protocol, and the planner's
# pick. Prints one row per job: the virtual time (us) of ring, tree,
# hierarchical and the pick. Run from the build directory:
#   sh ../scripts/occl_sim_study.sh [SIZE] [RANKS...]
set -eu
sim=${SIM:-./launch/occl-sim}
size=${1:-64M}
[ $# -gt 0 ] && shift
topo="nodes:128 devices:8 intra:300GB/s,1us inter:25GB/s,5us"
vt() { "$sim" --profile a100 "$@" -b "$size" "$topo" | awk '$1 ~ /^[0-9]+$/ { print $6, $NF }'; }
printf '%-6s %-7s %6s %12s %12s %12s %12s  %s\n' ranks place nodes ring_us tree_us hier_us pick_us pick
for n in ${*:-64 128 256 512}; do
    for place in packed spread; do
        nodes=$((n / 8))
        [ "$place" = spread ] && nodes=$((n < 128 ? n : 128))
        ring=$(vt -n "$n" --placement "$place" --algo ring | cut -d' ' -f1)
        tree=$(vt -n "$n" --placement "$place" --algo tree | cut -d' ' -f1)
        hier=$(vt -n "$n" --placement "$place" --algo hierarchical | cut -d' ' -f1)
        pick=$(vt -n "$n" --placement "$place")
        printf '%-6s %-7s %6s %12s %12s %12s %12s  %s\n' "$n" "$place" "$nodes" "$ring" "$tree" "$hier" \
            "${pick% *}" "${pick#* }"
    done
done
