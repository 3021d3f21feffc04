#!/bin/sh
# orrun_topo_smoke.sh - orrun with a topology: --topo and --placement reach
# every rank, the dry run shows the virtual nodes and topology devices, and a
# job that does not fit or a bad topology stops orrun before mpiexec starts.
# Run from the build directory ('make check'); ORRUN names the program.
ORRUN=${ORRUN:-./launch/orrun}
srcdir=${srcdir:-$(dirname "$0")/../..}
unset OPENREG_TOPO OPENREG_PLACEMENT OPENREG_RANKS_PER_NODE OPENREG_DEVICES
tmp=$(mktemp -d "${TMPDIR:-/tmp}/orrun_topo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$srcdir/tests/expect.sh"
# A stand-in mpiexec that shows what reached it: the launch itself works.
cat > "$tmp/mpiexec" <<'SH'
#!/bin/sh
echo "mpiexec $* OPENREG_TOPO=$OPENREG_TOPO OPENREG_PLACEMENT=$OPENREG_PLACEMENT"
SH
chmod +x "$tmp/mpiexec"
export ORRUN_MPIEXEC="$tmp/mpiexec"

expect 0 '^rank 1 \(node 1\):' -- "$ORRUN" -n 4 -d 2 --topo dgx-a100x2 --placement spread --dry-run -- ./prog
expect 0 'device 1 \(global 7, topology n1.gpu3\)' -- "$ORRUN" -n 4 -d 2 --topo dgx-a100x2 --placement spread --dry-run -- ./prog
expect 0 '^nodes: +1 virtual node: the nodes of topology dgx-a100x2 \(--topo\)' -- "$ORRUN" -n 4 -d 2 --topo dgx-a100x2 --dry-run -- ./prog
expect 0 'OPENREG_TOPO' -- env OPENREG_TOPO=full4 "$ORRUN" -n 4 -d 1 --dry-run -- ./prog
expect 0 '^  OPENREG_TOPO=nodes:2 devices:4$' -- "$ORRUN" -n 2 -d 4 --topo "nodes:2 devices:4" --dry-run -- ./prog
expect 0 'mpiexec -n 2 .*orrun --exec-rank -- ./prog OPENREG_TOPO=nodes:2 devices:4 OPENREG_PLACEMENT=spread' -- "$ORRUN" -n 2 -d 4 --topo "nodes:2 devices:4" --placement spread -- ./prog
# Refused before mpiexec runs (no "mpiexec" line in the output).
expect 1 'the job does not fit: 9 ranks x 1 devices need 9 devices' -- "$ORRUN" -n 9 -d 1 --topo dgx-a100 -- ./prog
expect 1 "a rank's devices are in one node" -- env OPENREG_TOPO="nodes:2 devices:3" "$ORRUN" -n 3 -d 2 -- ./prog
expect 2 "^orrun: --topo:1:17: intra: unknown unit 'GHz'" -- "$ORRUN" -n 2 --topo "devices:2 intra:3GHz" -- ./prog
expect 2 "unknown preset 'dgx-a300'" -- "$ORRUN" -n 2 --topo dgx-a300 -- ./prog
expect 2 'the topology decides the virtual nodes' -- "$ORRUN" -n 2 --topo full2 --ranks-per-node 1 -- ./prog
expect 2 'give --topo' -- "$ORRUN" -n 2 --placement spread -- ./prog
expect 2 "--placement 'diag' is not valid: expected packed, spread or a placement file" -- "$ORRUN" -n 2 --topo full2 --placement diag -- ./prog
expect 1 "OPENREG_PLACEMENT='bad' is not valid" -- env OPENREG_TOPO=full2 OPENREG_PLACEMENT=bad "$ORRUN" -n 2 -d 1 -- ./prog
if grep -q '^mpiexec' "$tmp/out"; then failed=$((failed + 1)); echo "FAIL: mpiexec ran" >&2; fi

# --placement FILE: the dry run shows the file's mapping, the ranks get its
# absolute name, and every problem in it stops orrun before mpiexec (exit 1,
# with the file, line and column), as a job that does not fit does.
pl=$srcdir/tests/topology/placement
good=$pl/good/nodes2x4-4x2.txt
expect 0 'placement file .*nodes2x4-4x2.txt' -- "$ORRUN" -n 4 -d 2 --topo "nodes:2 devices:4" --placement "$good" --dry-run -- ./prog
expect 0 '^rank 1 \(node 1\):' -- "$ORRUN" -n 4 -d 2 --topo "nodes:2 devices:4" --placement "$good" --dry-run -- ./prog
expect 0 'device 1 \(global 3, topology n1.dev1\)' -- "$ORRUN" -n 4 -d 2 --topo "nodes:2 devices:4" --placement "$good" --dry-run -- ./prog
expect 0 'device 0 \(global 6, topology n1.dev2\)' -- env OPENREG_PLACEMENT="$good" "$ORRUN" -n 4 -d 2 --topo "nodes:2 devices:4" --dry-run -- ./prog
expect 0 "OPENREG_PLACEMENT=/.*/tests/topology/placement/good/nodes2x4-4x2.txt\$" -- "$ORRUN" -n 4 -d 2 --topo "nodes:2 devices:4" --placement "$good" -- ./prog
# A file named like a keyword is given with a directory.
cp "$good" "$tmp/packed"
expect 0 'placement file .*/packed$' -- sh -c "cd '$tmp' && '$(cd "$(dirname "$ORRUN")" && pwd)/$(basename "$ORRUN")' -n 4 -d 2 --topo 'nodes:2 devices:4' --placement ./packed --dry-run -- ./prog"
expect 0 'packed placement$' -- sh -c "cd '$tmp' && '$(cd "$(dirname "$ORRUN")" && pwd)/$(basename "$ORRUN")' -n 4 -d 2 --topo 'nodes:2 devices:4' --placement packed --dry-run -- ./prog"
for case in "unknown-device.txt:3:12: unknown device 'n0.gpu3'" \
    "index-out-of-range.txt:5:4: device index 8 is out of range" \
    "not-a-device.txt:2:4: 'n0.cpu' is a cpu" \
    "device-twice.txt:4:12: device n0.dev1 \(D1\) is used twice" \
    "rank-twice.txt:4:1: rank 1 is placed twice" \
    "across-nodes.txt:3:12: rank 1's devices are on different nodes" \
    "too-many-devices.txt:3:8: rank 2 has more than 2 devices" \
    "too-few-devices.txt:3:1: rank 2 has 1 device" \
    "missing-rank.txt: rank 2 is missing" \
    "extra-rank.txt:6:1: rank 4 is not in the job" \
    "junk-rank.txt:2:1: expected 'RANK: DEVICE...'" \
    "no-colon.txt:3:1: expected 'RANK: DEVICE...'" \
    "junk-device.txt:2:6: unknown device '3x'" \
    "comments-only.txt: no ranks" \
    "empty.txt: no ranks"; do
    file=${case%%:*}
    expect 1 "^orrun: --placement: the placement file does not fit the job: .*/$case" -- "$ORRUN" -n 4 -d 2 --topo "nodes:2 devices:4" --placement "$pl/bad/$file" -- ./prog
done
expect 1 "^orrun: OPENREG_PLACEMENT: the placement file does not fit the job: .*device-twice.txt:4:12:" -- env OPENREG_PLACEMENT="$pl/bad/device-twice.txt" "$ORRUN" -n 4 -d 2 --topo "nodes:2 devices:4" --dry-run -- ./prog
# The same file for another job: devices per rank, ranks.
expect 1 "nodes2x4-4x2.txt:4:12: rank 1 has more than 1 device: the job gives each rank 1" -- "$ORRUN" -n 4 -d 1 --topo "nodes:2 devices:4" --placement "$good" -- ./prog
expect 1 "nodes2x4-4x2.txt:6:2: rank 3 is not in the job: it has 3 ranks" -- "$ORRUN" -n 3 -d 2 --topo "nodes:2 devices:4" --placement "$good" -- ./prog
# Unreadable: a name that is no file, or a directory, is a usage error.
expect 2 "--placement '$tmp/none.txt' is not valid: expected packed, spread or a placement file .*; as a file: No such file" -- "$ORRUN" -n 4 -d 2 --topo "nodes:2 devices:4" --placement "$tmp/none.txt" -- ./prog
expect 2 "as a file: not a regular file" -- "$ORRUN" -n 4 -d 2 --topo "nodes:2 devices:4" --placement "$tmp" -- ./prog
expect 1 "OPENREG_PLACEMENT='$tmp/none.txt' in the environment is not valid" -- env OPENREG_PLACEMENT="$tmp/none.txt" "$ORRUN" -n 4 -d 2 --topo "nodes:2 devices:4" --dry-run -- ./prog
expect 2 'give --topo' -- "$ORRUN" -n 2 --placement "$good" -- ./prog
if grep -q '^mpiexec' "$tmp/out"; then failed=$((failed + 1)); echo "FAIL: mpiexec ran" >&2; fi
echo "orrun topo smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
