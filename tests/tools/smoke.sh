# smoke.sh - the harness of the end-to-end smoke scripts of tests/tools,
# sourced by them after they set smoke_name (e.g. smoke_name=orinfo):
#
#   smoke_require PROGRAM VAR   stop with a failure unless PROGRAM is executable
#   run CMD...                  stdout in $tmp/out, stderr in $tmp/err, status in $rc
#   expect NAME CMD...          CMD's success is the check's result (PASS/FAIL line)
#   skip NAME                   a check that cannot run here
#   smoke_finish                the closing line "<smoke_name> smoke: P passed, F failed"
#                               and the exit status (1 when F > 0)
# plus predicates over the last run: has, has_err, has_all, status_is, status_and.
#
# Sourcing it also gives every script the same start: the documented defaults
# and the real host whatever the caller's shell holds, a temporary directory
# $tmp removed at exit, and a time limit ($limit) on every run.

# The documented defaults and the real host, whatever the caller's shell holds.
for var in $(env | sed -n 's/^\(OPENREG_[A-Za-z0-9_]*\)=.*/\1/p'); do
    unset "$var"
done
unset HWLOC_SYNTHETIC HWLOC_XMLFILE
# MPI_Init loads hwloc's PCI plugin, whose allocations outlive the plugin's
# unloading at exit: LeakSanitizer builds would report them as leaks of an
# unknown module. Placement needs cores and NUMA nodes only, not PCI devices.
HWLOC_PLUGINS_BLACKLIST=hwloc_pci
export HWLOC_PLUGINS_BLACKLIST

tmp=$(mktemp -d "${TMPDIR:-/tmp}/${smoke_name}_smoke.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# A hung MPI start must fail the test, not the whole 'make check'.
limit=
if command -v timeout >/dev/null 2>&1; then
    limit="timeout 120"
fi

passed=0
failed=0
skipped=0

# smoke_require PROGRAM VAR: PROGRAM must be built (VAR names the variable
# that overrides its path).
smoke_require() {
    if [ ! -x "$1" ]; then
        echo "${smoke_name}_smoke.sh: no program at $1 (build it, or set $2)" >&2
        echo "$smoke_name smoke: 0 passed, 1 failed"
        exit 1
    fi
}

# run CMD...: stdout in $tmp/out, stderr in $tmp/err, exit status in $rc.
run() {
    rc=0
    $limit "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
}

ok() {
    passed=$((passed + 1))
    echo "PASS: $1"
}

# On failure the log shows what the program printed.
bad() {
    failed=$((failed + 1))
    echo "FAIL: $1 (exit status $rc)"
    echo "  --- stdout"
    sed 's/^/  | /' "$tmp/out"
    echo "  --- stderr"
    sed 's/^/  | /' "$tmp/err"
}

skip() {
    skipped=$((skipped + 1))
    echo "SKIP: $1"
}

# expect NAME CMD...: CMD's success is the check's result.
expect() {
    name=$1
    shift
    if "$@"; then ok "$name"; else bad "$name"; fi
}

has() { grep -Eq -- "$1" "$tmp/out"; }
has_err() { grep -Eq -- "$1" "$tmp/err"; }
status_is() { [ "$rc" -eq "$1" ]; }
# status_and N CMD...: the exit status was N and CMD succeeds.
status_and() {
    status=$1
    shift
    [ "$rc" -eq "$status" ] && "$@"
}
# has_all PATTERN...: every pattern matches a line of the output.
has_all() {
    for pattern in "$@"; do
        has "$pattern" || return 1
    done
}

smoke_finish() {
    [ "$skipped" -eq 0 ] || echo "($skipped skipped)"
    echo "$smoke_name smoke: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
