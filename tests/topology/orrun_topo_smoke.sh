#!/bin/sh
# orrun_topo_smoke.sh - orrun with a topology: --topo and --placement reach
# every rank, the dry run shows the virtual nodes and topology devices, and a
# job that does not fit or a bad topology stops orrun before mpiexec starts.
# Run from the build directory ('make check'); ORRUN names the program.
ORRUN=${ORRUN:-./launch/orrun}
unset OPENREG_TOPO OPENREG_PLACEMENT OPENREG_RANKS_PER_NODE OPENREG_DEVICES
tmp=$(mktemp -d "${TMPDIR:-/tmp}/orrun_topo.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
expect() { # STATUS PATTERN -- command...
    want=$1 pattern=$2
    shift 3
    "$@" >"$tmp/out" 2>&1
    got=$?
    if [ "$got" -eq "$want" ] && grep -Eq -- "$pattern" "$tmp/out"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: $* (exit $got, expected $want; wanted '$pattern')" >&2
        sed 's/^/  | /' "$tmp/out" >&2
    fi
}
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
expect 2 "--placement 'diag' is not valid: expected packed or spread" -- "$ORRUN" -n 2 --topo full2 --placement diag -- ./prog
expect 1 "OPENREG_PLACEMENT='bad' is not valid" -- env OPENREG_TOPO=full2 OPENREG_PLACEMENT=bad "$ORRUN" -n 2 -d 1 -- ./prog
if grep -q '^mpiexec' "$tmp/out"; then failed=$((failed + 1)); echo "FAIL: mpiexec ran" >&2; fi
echo "orrun topo smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
