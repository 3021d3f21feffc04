#!/bin/sh
# Virtual time does not depend on the host: the same program, run with one
# compute thread per device and then with four while a CPU hog competes for
# the cores, prints the same virtual times and writes the same trace, byte
# for byte. A wall-clock run computes the same results.
set -eu
# $dir, removed at exit, and under_load: the shared harness.
. "$(dirname "$0")/vtime_harness.sh"
prog=./tests/runtime/vtime_workload
export OPENREG_DEVICE_PROFILE=a100 OPENREG_DEVICE_MEM=64M
failed=0

OPENREG_TIME=virtual OPENREG_DEVICE_THREADS=1 OPENREG_TRACE=$dir/a.json "$prog" 6 > "$dir/a.out"
under_load env OPENREG_TIME=virtual OPENREG_DEVICE_THREADS=4 OPENREG_TRACE="$dir/b.json" \
    "$prog" 6 > "$dir/b.out"
OPENREG_TIME=wall OPENREG_DEVICE_THREADS=2 "$prog" 6 > "$dir/c.out"

# The cpu profile is rated the same whatever share of the host a device
# gets: a fake host of 16 cores (8 per device) against this one.
env -u OPENREG_DEVICE_PROFILE OPENREG_TIME=virtual "$prog" 3 > "$dir/cpu1.out"
env -u OPENREG_DEVICE_PROFILE OPENREG_TIME=virtual HWLOC_SYNTHETIC="pack:1 core:16 pu:1" \
    "$prog" 3 > "$dir/cpu2.out"
if ! cmp -s "$dir/cpu1.out" "$dir/cpu2.out"; then
    echo "FAIL: cpu-profile virtual times depend on the host's cores:"
    diff "$dir/cpu1.out" "$dir/cpu2.out" || true
    failed=1
fi

cat "$dir/a.out"
if ! cmp -s "$dir/a.out" "$dir/b.out"; then
    echo "FAIL: virtual times differ between runs:"
    diff "$dir/a.out" "$dir/b.out" || true
    failed=1
fi
if ! cmp -s "$dir/a.json" "$dir/b.json"; then
    echo "FAIL: virtual traces differ between runs"
    diff "$dir/a.json" "$dir/b.json" | head -20 || true
    failed=1
fi
# Every iteration's times are charged, not measured: they are not all zero
# and grow from one iteration to the next.
if ! awk '/^iteration/ { if ($10 <= prev) bad = 1; prev = $10 } END { exit bad || prev == 0 }' "$dir/a.out"; then
    echo "FAIL: iteration times do not grow"
    failed=1
fi
if [ "$(grep checksum "$dir/a.out")" != "$(grep checksum "$dir/c.out")" ] ||
   [ "$(grep 'host functions' "$dir/a.out")" != "$(grep 'host functions' "$dir/c.out")" ]; then
    echo "FAIL: results differ between virtual and wall time:"
    grep -e checksum -e 'host functions' "$dir/a.out" "$dir/c.out"
    failed=1
fi
echo "virtual time determinism: $((failed == 0 ? 1 : 0)) passed, $failed failed"
[ "$failed" -eq 0 ]
