#!/bin/sh
# occl-sim's host cost against device count and message size
# (docs/occl-sim.md#cost): all-reduce on N/8 nodes of 8 a100-class devices,
# with the planner's choice (every candidate replayed) and with the ring
# forced (one replay). Prints one line per case: devices, size, mode, the
# pick, CPU seconds (user + system), wall seconds and peak memory (MiB). Run from the
# build directory: sh ../scripts/occl_sim_scale.sh [DEVICES...]
set -eu
sim=${SIM:-./launch/occl-sim}
printf '%-8s %-6s %-8s %-26s %9s %9s %9s\n' devices size mode pick cpu_s wall_s peak_MiB
for n in ${*:-64 128 256 512 1024}; do
    topo="nodes:$((n / 8)) devices:8 intra:300GB/s,1us inter:25GB/s,5us"
    for size in 1M 32M 1G; do
        for mode in planner ring; do
            algo=
            [ "$mode" = ring ] && algo="--algo ring --proto Simple"
            # shellcheck disable=SC2086
            out=$( { /usr/bin/time -f 'TIME %U %S %e %M' "$sim" --profile a100 $algo -b "$size" "$topo"; } 2>&1)
            pick=$(printf '%s\n' "$out" | awk '$1 ~ /^[0-9]+$/ { print $NF "," $6 "us" }')
            printf '%s\n' "$out" | awk -v n="$n" -v s="$size" -v m="$mode" -v p="$pick" \
                '$1 == "TIME" { printf "%-8s %-6s %-8s %-26s %9.2f %9.2f %9.0f\n", n, s, m, p, $2 + $3, $4, $5 / 1024 }'
        done
    done
done
