#!/bin/sh
# OPENREG_TOPO that is not valid, or a job that does not fit it: every rank's
# first call fails with a message naming the problem, before any rank starts
# work, and none hangs.
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
run "OPENREG_TOPO is not valid: OPENREG_TOPO:1:17: intra: unknown unit 'GHz'" \
    "OPENREG_TOPO=devices:4 intra:3GHz"
run "bad.xml:5: link to unknown 'd9'" OPENREG_TOPO="$out.bad.xml"
run "the job does not fit: 3 ranks x 4 devices need 12 devices; topology 'dgx-a100' has 8" \
    OPENREG_TOPO=dgx-a100 OPENREG_DEVICES=4
run "a rank's devices are in one node" OPENREG_TOPO="nodes:2 devices:3" OPENREG_DEVICES=2
run "OPENREG_PLACEMENT='diagonal' is not valid" OPENREG_TOPO=dgx-a100 OPENREG_PLACEMENT=diagonal
rm -f "$out" "$out.bad.xml"
echo "topo bad: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
