#!/bin/sh
# occl-sim's host cost against device count and message size
# (docs/occl-sim.md#cost): one all-reduce on N/8 DGX-H100-class boxes on a
# rail-optimized fabric ("box:dgx-h100 nodes:N/8 fabric:rails"), h100
# profile, for each mode: the planner's choice (candidates replayed but
# those whose floor is above the best replay)
# and ring, tree and hierarchical forced (--algo, each with its protocols).
# Prints one line per case: devices, size, mode, the pick and its virtual
# time, CPU seconds (user + system), wall seconds and peak resident memory
# (MiB); a case that runs past LIMIT seconds (default 600) prints
# "timeout". A benchmark, not a test. Run from the build directory:
#   sh ../scripts/occl_sim_scale.sh [DEVICES...]
# environment: SIZES (default "1M 32M 1G"), MODES (default "planner ring
# tree hierarchical"), TOPO (a format with %d for the boxes), LIMIT.
set -eu
sim=${SIM:-./launch/occl-sim}
limit=${LIMIT:-600}
topo_fmt=${TOPO:-"box:dgx-h100 nodes:%d fabric:rails"}
printf '%-8s %-6s %-13s %-26s %9s %9s %9s\n' devices size mode pick cpu_s wall_s peak_MiB
for n in ${*:-64 128 256 512 1024 2048 4096 8192}; do
    # shellcheck disable=SC2059
    topo=$(printf "$topo_fmt" $((n / 8)))
    for size in ${SIZES:-1M 32M 1G}; do
        for mode in ${MODES:-planner ring tree hierarchical}; do
            algo=
            [ "$mode" = planner ] || algo="--algo $mode"
            # shellcheck disable=SC2086
            out=$( { timeout "$limit" /usr/bin/time -f 'TIME %U %S %e %M' "$sim" --profile h100 $algo -b "$size" "$topo"; } 2>&1) || true
            if ! printf '%s\n' "$out" | grep -q '^TIME'; then
                printf '%-8s %-6s %-13s %-26s %9s\n' "$n" "$size" "$mode" - "timeout"
                continue
            fi
            pick=$(printf '%s\n' "$out" | awk '$1 ~ /^[0-9]+$/ { print $NF "," $6 "us" }')
            printf '%s\n' "$out" | awk -v n="$n" -v s="$size" -v m="$mode" -v p="$pick" \
                '$1 == "TIME" { printf "%-8s %-6s %-13s %-26s %9.2f %9.2f %9.0f\n", n, s, m, p, $2 + $3, $4, $5 / 1024 }'
        done
    done
done
