#!/bin/sh
# OPENREG_TOPO that is not valid, a job that does not fit it, or a placement
# file that does not fit the job: every rank's first call fails with a
# message naming the problem, before any rank starts work, and none hangs.
set -eu
out=$(mktemp)
failed=0
passed=0
run() { # expected message, then env assignments for every rank
    want=$1
    shift
    rc=0
    timeout 60 mpiexec -n 3 env MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE "$@" \
        ./tests/mpi/thread_level --expect-init-failure > "$out" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: $*: a rank did not see orErrorInitialization (exit $rc)"; cat "$out"
        failed=$((failed + 1))
    elif ! grep -q -- "$want" "$out"; then
        echo "FAIL: $*: no message '$want'"; cat "$out"
        failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
}
cat > "$out.bad.xml" <<'XML'
<topology version="1">
  <node name="n0">
    <device id="d0"/>
    <device id="d1"/>
    <link a="d0" b="d9" type="nvlink" bandwidth="300GB/s" latency="1us"/>
  </node>
</topology>
XML
run "OPENREG_TOPO is not valid: OPENREG_TOPO: unknown preset 'dgx-a300'" OPENREG_TOPO=dgx-a300
run "OPENREG_TOPO is not valid: OPENREG_TOPO: preset 'ring2000': its size is out of range (ringN has from 1 to 1024 devices)" \
    OPENREG_TOPO=ring2000
run "OPENREG_TOPO is not valid: OPENREG_TOPO:1:17: intra: unknown unit 'GHz'" \
    "OPENREG_TOPO=devices:4 intra:3GHz"
run "bad.xml:5: link to unknown 'd9'" OPENREG_TOPO="$out.bad.xml"
run "the job does not fit: 3 ranks x 4 devices need 12 devices; topology 'dgx-a100' has 8" \
    OPENREG_TOPO=dgx-a100 OPENREG_DEVICES=4
run "a rank's devices are in one node" OPENREG_TOPO="nodes:2 devices:3" OPENREG_DEVICES=2
run "OPENREG_PLACEMENT='diagonal' is not valid" OPENREG_TOPO=dgx-a100 OPENREG_PLACEMENT=diagonal
# Placement files: checked whole by every rank before any starts work.
pl=${srcdir:-$(dirname "$0")/../..}/tests/topology/placement
run "OPENREG_PLACEMENT is not valid for this job: .*device-twice.txt:4:12: device n0.dev1 (D1) is used twice" \
    OPENREG_TOPO="nodes:2 devices:4" OPENREG_DEVICES=2 OPENREG_PLACEMENT="$pl/bad/device-twice.txt"
run "nodes2x4-4x2.txt:6:2: rank 3 is not in the job: it has 3 ranks (0 to 2)" \
    OPENREG_TOPO="nodes:2 devices:4" OPENREG_DEVICES=2 OPENREG_PLACEMENT="$pl/good/nodes2x4-4x2.txt"
run "nodes2x4-4x2.txt:4:12: rank 1 has more than 1 device" \
    OPENREG_TOPO="nodes:2 devices:4" OPENREG_DEVICES=1 OPENREG_PLACEMENT="$pl/good/nodes2x4-4x2.txt"
run "OPENREG_PLACEMENT='$out.none' is not valid: expected packed, spread or a placement file .*; as a file: No such file" \
    OPENREG_TOPO="nodes:2 devices:4" OPENREG_PLACEMENT="$out.none"
run "is a placement file, which places ranks on a topology: set OPENREG_TOPO too" \
    OPENREG_PLACEMENT="$pl/good/nodes2x4-4x2.txt"
rm -f "$out" "$out.bad.xml"
echo "topo bad: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
