#!/bin/bash
# test.sh - run the unit tests and print one summary line:
#   tests: P passed, F failed
# Builds first (scripts/setup.sh) if the tree is not configured yet. The logs
# of failing test programs are printed in full before the summary.
set -euo pipefail

cd "$(dirname "$0")/.."
[ -f Makefile ] || ./scripts/setup.sh

check_rc=0
make -j2 check || check_rc=$?

if [ "$check_rc" -ne 0 ]; then
    # A .trs file holds each test program's result; print the logs of failures.
    while IFS= read -r trs; do
        if grep -Eq '^:test-result: (FAIL|ERROR|XPASS)' "$trs"; then
            log=${trs%.trs}.log
            echo
            echo "==================== $log ===================="
            cat "$log" 2>/dev/null || echo "(no log)"
        fi
    done < <(find tests backend -name '*.trs' 2>/dev/null | sort)
    echo
fi

summary_rc=0
tests/summary.sh || summary_rc=$?

if [ "$check_rc" -ne 0 ] || [ "$summary_rc" -ne 0 ]; then
    exit 1
fi
