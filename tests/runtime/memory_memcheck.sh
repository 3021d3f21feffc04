#!/bin/sh
# test_memory again with OPENREG_MEMCHECK=1: the checker must not break valid
# programs (allocations stay 256-byte aligned, copies, memsets, attributes and
# errors as without it). The cases asserting exact memory accounting skip
# themselves under the checker (guard pages and the quarantine take memory).
set -eu
OPENREG_MEMCHECK=1 exec ./tests/runtime/test_memory "$@"
