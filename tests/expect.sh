# expect.sh - the checks of the command-path smoke tests, sourced after
# they have made their scratch directory $tmp:
#   ok / fail MESSAGE            count a check (fail says why on stderr)
#   expect STATUS PATTERN -- command...
#                                the command's exit status, and a line of its
#                                output (stdout and stderr together, kept in
#                                $tmp/out) matching an extended regex
# $passed and $failed are the counts for the test's summary line.
passed=0
failed=0
ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
expect() {
    want=$1 pattern=$2
    shift 3
    "$@" >"$tmp/out" 2>&1
    got=$?
    if [ "$got" -eq "$want" ] && grep -Eq -- "$pattern" "$tmp/out"; then
        ok
    else
        fail "$* (exit $got, expected $want; wanted '$pattern')"
        sed 's/^/  | /' "$tmp/out" >&2
    fi
}
