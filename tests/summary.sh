#!/bin/sh
# summary.sh - one line from the Automake test logs of a finished 'make check'.
#
# Usage: tests/summary.sh [BUILD_DIR]     (default: the current directory)
#
# Adds up Criterion's closing lines
#   [====] Synthesis: Tested: N | Passing: N | Failing: N | Crashing: N
# and pytest's ("N failed, N passed, N errors in 1.2s") over the logs under
# BUILD_DIR/tests and BUILD_DIR/backend, and prints
#   tests: P passed, F failed
# with F = failing + crashing. A test program whose log has no Synthesis line
# (it died before printing one, or it is not a Criterion program) counts as
# one test, passed or failed after its .trs result. A program that failed
# although all its tests passed (e.g. valgrind reported an error) adds one
# failure, so the line never says "0 failed" when 'make check' failed.
# Exit status: 0 if F = 0 and at least one test ran, 1 otherwise.

build_dir=${1:-.}
logs_dir=$build_dir/tests
if [ ! -d "$logs_dir" ]; then
    echo "summary.sh: no $logs_dir directory (run 'make check' first)" >&2
    echo "tests: 0 passed, 0 failed"
    exit 1
fi

esc=$(printf '\033')
passed=0
failed=0
programs=0

# Log names never contain newlines here: they are Automake test names.
extra_dirs=
[ -d "$build_dir/backend" ] && extra_dirs=$build_dir/backend
for log in $(find "$logs_dir" $extra_dirs -name '*.log' ! -name 'test-suite.log' | sort); do
    trs=${log%.log}.trs
    result=
    if [ -f "$trs" ]; then
        result=$(sed -n 's/^:test-result: *//p' "$trs" | head -n 1)
    fi
    # Criterion colours its output on a terminal; strip escapes to be safe.
    line=$(sed "s/${esc}\[[0-9;]*m//g" "$log" | grep 'Synthesis: Tested:' | tail -n 1)
    pyline=$(grep -E '^=* *([0-9]+ (passed|failed|errors?)(, )?)+.* in [0-9.]+s' "$log" | tail -n 1)
    if [ -z "$line" ] && [ -n "$pyline" ]; then
        count() { printf '%s\n' "$pyline" | sed -n "s/.*[^0-9]\([0-9][0-9]*\) $1.*/\1/p;s/^\([0-9][0-9]*\) $1.*/\1/p" | head -n 1; }
        p=$(count passed) f=$(count failed) e=$(count error)
        passed=$((passed + ${p:-0}))
        failed=$((failed + ${f:-0} + ${e:-0}))
        programs=$((programs + 1))
        case $result in
        FAIL | ERROR | XPASS)
            if [ $((${f:-0} + ${e:-0})) -eq 0 ]; then
                echo "summary.sh: $log: all tests passed but the program failed ($result)" >&2
                failed=$((failed + 1))
            fi
            ;;
        esac
    elif [ -n "$line" ]; then
        counts=$(printf '%s\n' "$line" | sed -n \
            's/.*Tested: *\([0-9]*\) *| *Passing: *\([0-9]*\) *| *Failing: *\([0-9]*\) *| *Crashing: *\([0-9]*\).*/\2 \3 \4/p')
        if [ -z "$counts" ]; then
            echo "summary.sh: cannot read the Synthesis line of $log" >&2
            failed=$((failed + 1))
            continue
        fi
        set -- $counts
        passed=$((passed + $1))
        failed=$((failed + $2 + $3))
        programs=$((programs + 1))
        case $result in
        FAIL | ERROR | XPASS)
            if [ $(($2 + $3)) -eq 0 ]; then
                echo "summary.sh: $log: all tests passed but the program failed ($result)" >&2
                failed=$((failed + 1))
            fi
            ;;
        esac
    else
        case $result in
        PASS | XFAIL) passed=$((passed + 1)); programs=$((programs + 1)) ;;
        FAIL | ERROR | XPASS)
            echo "summary.sh: $log: $result without a Criterion summary" >&2
            failed=$((failed + 1))
            programs=$((programs + 1))
            ;;
        *) ;; # SKIP, or a log that is not a test's (no .trs)
        esac
    fi
done

echo "tests: $passed passed, $failed failed"
if [ "$programs" -eq 0 ] || [ $((passed + failed)) -eq 0 ]; then
    echo "summary.sh: no test results under $logs_dir" >&2
    exit 1
fi
[ "$failed" -eq 0 ]
