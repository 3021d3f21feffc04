#!/bin/sh
# ortopo_smoke.sh - end-to-end checks of launch/ortopo: the matrix of a
# preset, XML that round-trips through --xml and --check, line-precise
# errors, rings and trees, placement files, and the exit status of bad topologies and options.
#
# 'make check' runs it from the build directory. ORTOPO names the program
# (default ./launch/ortopo); srcdir, exported by Automake, locates the test
# files. The last line reads
#   ortopo smoke: P passed, F failed
# and the exit status is 1 when F > 0.

ORTOPO=${ORTOPO:-./launch/ortopo}
srcdir=${srcdir:-$(dirname "$0")/../..}
data=$srcdir/tests/topology/data
bad=$srcdir/tests/topology/bad
unset OPENREG_TOPO

if [ ! -x "$ORTOPO" ]; then
    echo "ortopo_smoke.sh: no program at $ORTOPO (build it, or set ORTOPO)" >&2
    echo "ortopo smoke: 0 passed, 1 failed"
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ortopo_smoke.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
ko() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# expect STATUS PATTERN -- command...: exit status and a line of output
# (stdout and stderr together) matching an extended regular expression.
expect() {
    want=$1 pattern=$2
    shift 3
    "$@" >"$tmp/out" 2>&1
    got=$?
    if [ "$got" -ne "$want" ]; then
        ko "$* exited $got, expected $want"; sed 's/^/  | /' "$tmp/out" >&2
    elif ! grep -Eq -- "$pattern" "$tmp/out"; then
        ko "$*: no line matches '$pattern'"; sed 's/^/  | /' "$tmp/out" >&2
    else
        ok
    fi
}

# The matrix: a row per device, like nvidia-smi topo -m.
expect 0 '^D0 +X +NVL 300 +NVL 300' -- "$ORTOPO" dgx-a100
expect 0 '^D0 .*NET 25 +NET 25 +0 +PHB' -- "$ORTOPO" dgx-a100x2
expect 0 '^D0 +X +PIX 31.5 +SYS 16' -- "$ORTOPO" "$data/azure-ndv4-topo.xml"
expect 0 'topology nodes:2 devices:4: 2 nodes, 8 devices' -- "$ORTOPO" "nodes:2 devices:4"
expect 0 '^D0 +X +NVL 300 +NVB 300 +NVL 300' -- env OPENREG_TOPO=ring4 "$ORTOPO"
"$ORTOPO" dgx-a100 >"$tmp/m" 2>&1 && [ "$(grep -c '^D[0-9]' "$tmp/m")" -eq 8 ] && ok ||
    ko "dgx-a100 matrix does not have 8 rows"

# --xml round-trips: written, checked, read back and written again identically.
for spec in dgx-h100x2 torus4x4 "nodes:3 devices:2 shape:ring inter:100Gb/s,2us" \
    "$data/nccl-dgx-a100-dump.xml" "$data/fat-tree.xml"; do
    if "$ORTOPO" --xml "$spec" >"$tmp/a.xml" 2>"$tmp/err" &&
        "$ORTOPO" --check "$tmp/a.xml" >"$tmp/check" 2>&1 &&
        "$ORTOPO" --xml "$tmp/a.xml" >"$tmp/b.xml" 2>&1 &&
        cmp -s "$tmp/a.xml" "$tmp/b.xml" && grep -q ': valid: ' "$tmp/check"; then
        ok
    else
        ko "--xml of '$spec' does not round-trip"
    fi
done
expect 0 'valid: 2 nodes, 4 devices' -- "$ORTOPO" --check "$data/nccl-two-hosts.xml"
expect 0 'D0 -> D3: NVB 25 GB/s' -- "$ORTOPO" --paths "$data/nccl-v100-p2p.xml"

# --check names the file and line of the first problem.
expect 1 "^ortopo: $bad/malformed.xml:5:[0-9]+: malformed XML" -- "$ORTOPO" --check "$bad/malformed.xml"
expect 1 "link-unknown-device.xml:6: link to unknown 'd7'" -- "$ORTOPO" --check "$bad/link-unknown-device.xml"
expect 1 "zero-bandwidth.xml:5: .*must be greater than zero" -- "$ORTOPO" --check "$bad/zero-bandwidth.xml"
expect 1 "duplicate-id.xml:5: id 'd0' is already used" -- "$ORTOPO" --check "$bad/duplicate-id.xml"
expect 1 "nccl-unknown-nvlink-target.xml:6: nvlink target" -- "$ORTOPO" --check "$bad/nccl-unknown-nvlink-target.xml"
expect 1 "cannot open" -- "$ORTOPO" --check "$tmp/none.xml"

# Bad topologies given as the argument or OPENREG_TOPO.
expect 1 "unknown preset 'dgx-a300'" -- "$ORTOPO" dgx-a300
expect 1 "^ortopo: topology:1:25: intra: unknown unit 'GHz'" -- "$ORTOPO" "nodes:2 devices:4 intra:300GHz"
expect 1 "^ortopo: OPENREG_TOPO:1:11: unknown key 'nodez'" -- env OPENREG_TOPO="devices:4 nodez:2" "$ORTOPO"

# Rings and trees for a job; a job that does not fit is refused.
expect 0 '^ring: 2 network crossings, bottleneck 25 GB/s' -- "$ORTOPO" --rings dgx-a100x2
expect 0 '^ring: 0 network crossings, bottleneck 300 GB/s' -- "$ORTOPO" --rings dgx-a100
expect 0 'rank 1: D8\(node 1\) D9\(node 1\)' -- "$ORTOPO" --rings --ranks 4 --devices-per-rank 2 --placement spread dgx-a100x2
expect 0 '^tree 1:' -- "$ORTOPO" --trees dgx-a100x2
expect 1 '9 ranks x 1 devices need 9 devices' -- "$ORTOPO" --rings --ranks 9 dgx-a100
expect 1 "a rank's devices are in one node" -- "$ORTOPO" --trees --ranks 3 --devices-per-rank 2 "nodes:2 devices:3"

# Placement files: --print-placement writes packed and spread as a file,
# which --placement reads back to the same job; a file places ranks where it
# says, and a bad one is refused with its line and column.
pl=$srcdir/tests/topology/placement
expect 0 '^1: n1.gpu0 n1.gpu1$' -- "$ORTOPO" --print-placement --placement spread -n 4 -d 2 dgx-a100x2
"$ORTOPO" --print-placement --placement spread -n 4 -d 2 dgx-a100x2 >"$tmp/spread.txt" 2>&1
"$ORTOPO" --rings --placement spread -n 4 -d 2 dgx-a100x2 >"$tmp/a" 2>&1
"$ORTOPO" --rings --placement "$tmp/spread.txt" -n 4 -d 2 dgx-a100x2 >"$tmp/b" 2>&1
if grep -q '^ring: r0.0(D0) r0.1(D1) r2.0(D2)' "$tmp/a" &&
    [ "$(grep -v '^job:' "$tmp/a")" = "$(grep -v '^job:' "$tmp/b")" ]; then
    ok
else
    ko "the spread job read back from its placement file differs"; cat "$tmp/a" "$tmp/b" >&2
fi
expect 0 'job: 4 ranks x 2 devices, placement file .*nodes2x4-4x2.txt' -- "$ORTOPO" --rings --placement "$pl/good/nodes2x4-4x2.txt" -n 4 -d 2 "nodes:2 devices:4"
expect 0 '^  rank 1: D4\(node 1\) D5\(node 1\)$' -- "$ORTOPO" --rings --placement "$pl/good/nodes2x4-4x2.txt" -n 4 -d 2 "nodes:2 devices:4"
expect 0 '^3: n1.dev2 n1.dev3$' -- "$ORTOPO" --print-placement --placement "$pl/good/nodes2x4-4x2.txt" -n 4 -d 2 "nodes:2 devices:4"
expect 1 "^ortopo: .*device-twice.txt:4:12: device n0.dev1 \(D1\) is used twice" -- "$ORTOPO" --trees --placement "$pl/bad/device-twice.txt" -n 4 -d 2 "nodes:2 devices:4"
expect 1 "across-nodes.txt:3:12: rank 1's devices are on different nodes" -- "$ORTOPO" --print-placement --placement "$pl/bad/across-nodes.txt" -n 4 -d 2 "nodes:2 devices:4"

# Usage errors exit 2.
expect 2 'no topology' -- "$ORTOPO"
expect 2 "packed, spread or a placement file; 'diagonal': No such file" -- "$ORTOPO" --rings --placement diagonal full4
expect 2 'whole number' -- "$ORTOPO" --rings --ranks 0 full4
expect 2 'one topology at a time' -- "$ORTOPO" nodes:2 devices:4
expect 2 'usage' -- "$ORTOPO" --bogus
expect 0 'dgx-h100x2' -- "$ORTOPO" --presets
expect 0 'usage: ortopo' -- "$ORTOPO" --help

echo "ortopo smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
