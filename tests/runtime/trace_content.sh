#!/bin/sh
# OPENREG_TRACE writes a valid Chrome trace holding every op of the workload
# with its name, size and track; in virtual time the slices last exactly
# their closed forms (docs/virtual-time.md).
set -eu
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OPENREG_DEVICE_PROFILE=a100 OPENREG_DEVICE_MEM=64M
checker="$(dirname "$0")/../tools/check_trace.py"
prog=./tests/runtime/vtime_workload
failed=0

# What every run must hold: 3 iterations of 1 MiB.
check() {
    "${PYTHON:-python3}" "$checker" "$@" --pids 0,1 --count saxpy=3 --count memset=3 \
        --count 'host function=3' --count 'memcpy HtoD=6' --count 'memcpy DtoH=3' \
        --count 'memcpy PtoP=3' --count 'event record=13' --count 'event wait=9' \
        --arg 'memcpy HtoD:bytes=1048576' --arg 'memcpy HtoD:path=PHB' \
        --arg 'memcpy PtoP:path=PIX' --arg 'memcpy PtoP:src=0' --arg 'memcpy PtoP:dst=1' \
        --arg 'memset:bytes=1048576' --arg 'saxpy:flops=524288' --arg 'saxpy:bytes=3145728'
}

OPENREG_TIME=virtual OPENREG_TRACE=$dir/v.json "$prog" 3 1048576 > /dev/null
# 1 MiB over the 25 GB/s host link: 5000 + 41944 ns; saxpy on an a100:
# 3000 + max(524288 / 19.5, 3145728 / 2039) ns; memset: 2000 + 1048576 / 2039.
check "$dir/v.json" --time virtual --min-dur 'memcpy HtoD=46944' --dur 'memcpy DtoH=46944' \
    --dur 'memcpy PtoP=46944' --dur saxpy=4543 --dur memset=2515 || failed=$((failed + 1))

OPENREG_TRACE=$dir/w.json "$prog" 3 1048576 > /dev/null
check "$dir/w.json" --time wall || failed=$((failed + 1))

# A thread's buffer is bounded: past OPENREG_TRACE_BUFFER records, later ones
# are dropped, counted in the file and reported on stderr.
OPENREG_DEVICE_THREADS=1 OPENREG_TRACE_BUFFER=1024 OPENREG_TRACE=$dir/small.json \
    "$prog" 200 4096 > /dev/null 2> "$dir/small.err"
dropped=$("${PYTHON:-python3}" -c 'import json, sys
print(json.load(open(sys.argv[1]))["otherData"]["openreg"]["dropped"])' "$dir/small.json")
if [ "$dropped" -le 0 ] || ! grep -q "records dropped" "$dir/small.err"; then
    echo "FAIL: a full trace buffer: $dropped dropped; stderr: $(cat "$dir/small.err")"
    failed=$((failed + 1))
fi
rm -f "$dir/small.json" "$dir/small.err"

# Without OPENREG_TRACE nothing is written.
(cd "$dir" && OPENREG_TIME=virtual "$OLDPWD/$prog" 1 4096 > /dev/null)
if ls "$dir" | grep -v -e '^v.json$' -e '^w.json$' | grep -q .; then
    echo "FAIL: a run without OPENREG_TRACE wrote a file"
    failed=$((failed + 1))
fi
echo "trace content: $((failed == 0 ? 1 : 0)) passed, $failed failed"
[ "$failed" -eq 0 ]
