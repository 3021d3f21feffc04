#!/bin/sh
# orinfo_smoke.sh - end-to-end checks of launch/orinfo: the cluster listing
# alone and under mpiexec, its JSON form, the --env listing, placement on a
# synthetic topology, and the exit status of bad configurations and options.
#
# 'make check' runs it from the build directory. ORINFO names the program
# (default ./launch/orinfo); srcdir, exported by Automake, locates
# src/config.c (default: two levels above this script). The last line reads
#   orinfo smoke: P passed, F failed
# and the exit status is 1 when F > 0.
set -e

ORINFO=${ORINFO:-./launch/orinfo}
srcdir=${srcdir:-$(dirname "$0")/../..}
config_c=$srcdir/src/config.c

# The shared harness: run, expect, the predicates and the closing line.
smoke_name=orinfo
. "$(dirname "$0")/smoke.sh"
smoke_require "$ORINFO" ORINFO

have_python=false
if command -v python3 >/dev/null 2>&1; then
    have_python=true
fi

# json_devices: the device count of the JSON document in $tmp/out, after
# checking that the ranks' devices add up to the cluster's total.
json_devices() {
    python3 -c '
import json, sys
doc = json.load(sys.stdin)
c = doc["cluster"]
n = sum(len(r["devices"]) for r in c["ranks"])
assert n == c["ndevices"], (n, c["ndevices"])
assert len(c["ranks"]) == c["nranks"]
for r in c["ranks"]:
    for d in r["devices"]:
        assert d["boundCpuList"] and d["cpuList"], d
print(n)
' <"$tmp/out"
}

# --- the cluster listing -----------------------------------------------------

run "$ORINFO"
expect "plain run exits 0" status_is 0
expect "plain run: one rank, two devices" has '^cluster: 1 rank, 2 devices$'
expect "plain run shows device 0 and device 1" has_all '^  device 0: ' '^  device 1: '
expect "plain run reads back the binding" has '^    binding:  core, bound to [0-9]'

run "$ORINFO" --json
if $have_python; then
    n=$(json_devices 2>>"$tmp/err") || n=invalid
    expect "--json exits 0 with valid JSON of 2 devices" status_and 0 [ "$n" = 2 ]
else
    skip "--json validation (no python3)"
fi

if command -v mpiexec >/dev/null 2>&1; then
    run mpiexec -n 2 "$ORINFO"
    expect "mpiexec -n 2 exits 0" status_is 0
    expect "mpiexec -n 2: two ranks, four devices" has '^cluster: 2 ranks, 4 devices$'
    order=$(grep '^rank ' "$tmp/out" | cut -d: -f1 | tr '\n' ' ')
    expect "mpiexec -n 2 shows rank 0 and rank 1 in order" [ "$order" = "rank 0 rank 1 " ]
    expect "mpiexec -n 2: local ranks from the launcher" has '^rank 1: .*local rank 1 of 2,'
    # The runtime's own placement on a topology: a file's nodes and devices.
    printf '0: n1.dev1\n1: n0.dev0\n' >"$tmp/placement"
    run mpiexec -n 2 env OPENREG_DEVICES=1 OPENREG_TOPO="nodes:2 devices:2" \
        OPENREG_PLACEMENT="$tmp/placement" "$ORINFO"
    expect "a placement file: rank 0 on virtual node 1, rank 1 on node 0" \
        has_all '^rank 0: .*virtual node 1 of 2,' '^rank 1: .*virtual node 0 of 2,'
    expect "a placement file: each rank's topology device" \
        has_all '^    topology: device n1.dev1 of' '^    topology: device n0.dev0 of'
    if $have_python; then
        run mpiexec -n 2 "$ORINFO" --json
        n=$(json_devices 2>>"$tmp/err") || n=invalid
        expect "mpiexec -n 2 --json has 4 devices" status_and 0 [ "$n" = 4 ]
    fi
else
    skip "mpiexec runs (no mpiexec)"
fi

# 2 packages x 2 NUMA nodes x 2 cores: one device per node, two cores each.
run env HWLOC_SYNTHETIC="pack:2 numa:2 core:2 pu:1" OPENREG_DEVICES=4 "$ORINFO"
expect "synthetic topology exits 0" status_is 0
expect "synthetic topology: four devices" has '^cluster: 1 rank, 4 devices$'
d=0
for cpus in 0-1 2-3 4-5 6-7; do
    expect "synthetic topology: device $d on cpus $cpus, NUMA node $d" \
        has "^  device $d: .*, cpus $cpus, NUMA node $d\$"
    d=$((d + 1))
done

# --- --env ---------------------------------------------------------------------

run env OPENREG_DEVICES=abc OPENREG_BIND=numa "$ORINFO" --env
expect "--env exits 0 although the runtime could not start" status_is 0
names=$(grep -o 'OPENREG_[A-Z_]*' "$config_c" | sort -u)
missing=
for name in $names; do
    grep -q "^$name = " "$tmp/out" || missing="$missing $name"
done
count=$(printf '%s\n' "$names" | grep -c . || true)
# No names at all means src/config.c was not found, not that nothing is missing.
env_complete() { [ -n "$names" ] && [ -z "$missing" ]; }
expect "--env lists every variable of src/config.c ($count)" status_and 0 env_complete
[ -z "$missing" ] || echo "  missing:$missing"
expect "--env marks OPENREG_DEVICES=abc INVALID" has '^OPENREG_DEVICES = abc +INVALID$'
expect "--env does not mark a good value" has '^OPENREG_BIND = numa$'
expect "--env lists the launcher's variables" has_all '^PMI_RANK = ' '^MPIR_CVAR_DEFAULT_THREAD_LEVEL = '

run env OPENREG_DEVICES=abc "$ORINFO" --env --json
if $have_python; then
    valid=true
    # shellcheck disable=SC2086 # one argument per name
    python3 -c '
import json, sys
env = {e["name"]: e for e in json.load(sys.stdin)["env"]}
assert all(n in env for n in sys.argv[1:]), sys.argv[1:]
assert env["OPENREG_DEVICES"]["valid"] is False
assert env["OPENREG_DEBUG"]["value"] is None
' $names <"$tmp/out" 2>>"$tmp/err" || valid=false
    expect "--env --json is valid JSON with every variable and the bad value" \
        status_and 0 $valid
else
    skip "--env --json validation (no python3)"
fi

# --- failures ------------------------------------------------------------------

run env OPENREG_DEVICES=abc "$ORINFO"
expect "OPENREG_DEVICES=abc exits 1" status_is 1
expect "OPENREG_DEVICES=abc: the message names the variable" has_err 'OPENREG_DEVICES'
expect "OPENREG_DEVICES=abc: orinfo says the runtime failed" \
    has_err '^orinfo: the runtime failed to start: orErrorInitialization: '

if command -v mpiexec >/dev/null 2>&1; then
    # One rank with a bad value: the other must not wait for it in start-up.
    run mpiexec -n 1 env OPENREG_DEVICES=abc "$ORINFO" : -n 1 "$ORINFO"
    expect "a bad value on one rank of two exits 1" status_is 1
    expect "a bad value on one rank: the other rank says why it stopped" \
        has_err "rank 1: another rank's configuration is invalid"
fi

run "$ORINFO" --no-such-option
usage_on_stderr() { grep -q '^usage: orinfo' "$tmp/err" && [ ! -s "$tmp/out" ]; }
expect "unknown option exits 2 with usage on stderr" status_and 2 usage_on_stderr

run "$ORINFO" --help
expect "--help exits 0 with usage on stdout" status_and 0 has '^usage: orinfo'

smoke_finish
