#!/bin/sh
# perf_smoke.sh - the benchmark programs' command lines: every documented
# size spelling reaches occl_perf as the right number of bytes, bad sizes and
# bad --place values exit 2 with a message, runtime_perf and peer_perf refuse
# sizes out of their range; and occl_perf --place on 2 ranks runs, prints and
# allocates only the placement asked for; bench_hosts.sh refuses a BENCH_BIND
# it does not know.
#
# 'make check' runs it from the build directory. The last line reads
#   perf smoke: P passed, F failed
# and the exit status is 1 when F > 0.
set -e

OCCL_PERF=${OCCL_PERF:-./tests/perf/occl_perf}
RUNTIME_PERF=${RUNTIME_PERF:-./tests/perf/runtime_perf}
PEER_PERF=${PEER_PERF:-./tests/perf/peer_perf}

# The shared harness: run, expect, the predicates and the closing line.
smoke_name=perf
. "$(dirname "$0")/../tools/smoke.sh"
smoke_require "$OCCL_PERF" OCCL_PERF
smoke_require "$RUNTIME_PERF" RUNTIME_PERF
smoke_require "$PEER_PERF" PEER_PERF
unset OCCL_ALGO OCCL_DEBUG MPIR_CVAR_DEFAULT_THREAD_LEVEL

# --- sizes -----------------------------------------------------------------
# A first size above the last one is refused with both parsed values in the
# message, which shows what a spelling was read as without running anything.
size_is() { # SPELLING BYTES
    run "$OCCL_PERF" --coll allreduce -b "$1" -e 0
    status_and 2 has_err "minbytes $2 is above maxbytes 0"
}
for pair in 8:8 8B:8 4k:4096 4K:4096 4KB:4096 4KiB:4096 16M:16777216 16MiB:16777216 \
    1G:1073741824 1g:1073741824 1GiB:1073741824; do
    expect "-b ${pair%%:*} is ${pair#*:} bytes" size_is "${pair%%:*}" "${pair#*:}"
done

not_a_size() { # FLAG VALUE
    run "$OCCL_PERF" --coll allreduce "$1" "$2"
    status_and 2 has_err "$1 '.*' is not a size" && grep -Fq -- "'$2'" "$tmp/err" &&
        has_err '^usage: occl_perf'
}
for bad in x -5 +5 " 5" 1.5M 4Q 4KBx 4Ki 0x10 99999999999999999999 17179869184G; do
    expect "-b '$bad' exits 2: not a size" not_a_size -b "$bad"
done
expect "-e '1T1' exits 2: not a size" not_a_size -e 1T1
expect "-i '' exits 2: not a size" not_a_size -i ""

run "$RUNTIME_PERF" -s 4Q
expect "runtime_perf -s 4Q exits 2" status_and 2 has_err "-s needs a size of at least 4K"
run "$RUNTIME_PERF" -s 1K
expect "runtime_perf -s 1K (below 4K) exits 2" status_and 2 has_err "-s needs a size of at least 4K"
run "$RUNTIME_PERF" -m 12Q
expect "runtime_perf -m 12Q exits 2" status_and 2 has_err "-m needs a size of at least 4K"
run "$PEER_PERF" -s 2G
expect "peer_perf -s 2G (above 1G) exits 2" status_and 2 has_err "-s needs a size from 4K to 1G"
run "$PEER_PERF" -l 0
expect "peer_perf -l 0 exits 2" status_and 2 has_err "-l needs a size from 1 to 1G"
run "$PEER_PERF" -l 4KiB -s 2K
expect "peer_perf -s 2K (below 4K) exits 2" status_and 2 has_err "-s needs a size from 4K to 1G"

# --- --place ------------------------------------------------------------------
run "$OCCL_PERF" --coll allreduce --place sideways
expect "--place sideways exits 2" \
    status_and 2 has_err "--place 'sideways': expected out, in or both"
run "$OCCL_PERF" --coll allreduce --place
expect "--place without a value exits 2" status_and 2 has_err "'--place' needs a value"

# 2 ranks in virtual time, so the figures of a run of one placement can be
# compared with the same placement's columns of a run of both.
perf2() { # OCCL_PERF ARGS...
    run mpiexec -n 2 env OPENREG_DEVICES=1 OPENREG_TIME=virtual OPENREG_DEVICE_PROFILE=a100 \
        OCCL_ALGO=ring OCCL_TIMEOUT_MS=60000 "$OCCL_PERF" --coll allreduce -n 2 -w 1 -c 1 "$@"
}
# The rows: size count type redop root, then 4 columns per placement.
rows() { grep -E '^ +[0-9]' "$tmp/out" || true; }
fields() { rows | awk '{ print NF }' | sort -u | tr '\n' ' '; }

perf2 -b 64K -e 1M -f 4
cp "$tmp/out" "$tmp/both"
expect "--place both (default): 3 rows of 13 columns, nothing wrong" \
    status_and 0 eval '[ "$(fields)" = "13 " ] && [ "$(rows | wc -l)" -eq 3 ] &&
        [ "$(rows | awk "{ print \$9 + \$13 }" | sort -u)" = 0 ]'
expect "--place both: titles out-of-place and in-place" has 'out-of-place +in-place'

perf2 -b 64K -e 1M -f 4 --place in
cp "$tmp/out" "$tmp/in"
expect "--place in: 3 rows of 9 columns, nothing wrong" \
    status_and 0 eval '[ "$(fields)" = "9 " ] && [ "$(rows | wc -l)" -eq 3 ] &&
        [ "$(rows | awk "{ print \$9 }" | sort -u)" = 0 ]'
expect "--place in: one buffer per rank, the in-place title alone" \
    has_all '^# in place only: 1 device buffer of 1048576 bytes per rank' '^# +in-place *$'
expect "--place in: no out-of-place title" eval '! has out-of-place'
expect "--place in prints the in-place figures of a run of both" \
    eval '[ "$(rows | awk "{ print \$1, \$6, \$7, \$8 }")" = \
            "$(grep -E "^ +[0-9]" "$tmp/both" | awk "{ print \$1, \$10, \$11, \$12 }")" ]'

perf2 -b 64K -e 1M -f 4 --place out
expect "--place out: 3 rows of 9 columns, the out-of-place figures of a run of both" \
    status_and 0 eval '[ "$(fields)" = "9 " ] && ! has " in-place" &&
        [ "$(rows | awk "{ print \$1, \$6, \$7, \$8, \$9 }")" = \
          "$(grep -E "^ +[0-9]" "$tmp/both" | awk "{ print \$1, \$6, \$7, \$8, \$9 }")" ]'
expect "--place out: two buffers per rank" \
    has '^# out of place only: 2 device buffers of 1048576 bytes per rank'

# OCCL_PERF_RUSAGE=1: a line of CPU time and context switches per call after
# each row, for each placement run.
run env OCCL_PERF_RUSAGE=1 OPENREG_DEVICES=1 "$OCCL_PERF" --coll allreduce -b 8 -e 64 -f 8 \
    -n 5 -w 1 --place out
expect "OCCL_PERF_RUSAGE=1: one rusage line per row and placement" \
    status_and 0 eval '[ "$(grep -c "^# rusage out of place: per call, all processes: cpu [0-9.]* us, voluntary switches [0-9.]*, involuntary [0-9.]*$" "$tmp/out")" -eq 2 ] && ! has "rusage in place"'

# One buffer only: 15 MiB of device memory holds one 8 MiB buffer (and the
# collective's scratch), never two.
perf2_capped() {
    run mpiexec -n 2 env OPENREG_DEVICES=1 OPENREG_DEVICE_MEM=15M OCCL_ALGO=ring \
        OCCL_TIMEOUT_MS=60000 "$OCCL_PERF" --coll allreduce -b 8M -e 8M -n 1 -w 0 -c 1 "$@"
}
perf2_capped --place in
expect "--place in: 8 MiB in 15 MiB of device memory, checked" \
    status_and 0 eval '[ "$(rows | awk "{ print \$1, \$9 }")" = "8388608 0" ]'
# Both processes say why and exit 1, none aborts (which could end the job
# before mpiexec has passed the message on).
perf2_capped --place both
expect "--place both: 8 MiB does not fit twice in 15 MiB: every process says so" \
    status_and 1 eval '[ "$(grep -c "no room for a receive buffer of 8388608 bytes on device 0: orErrorMemoryAllocation" "$tmp/err")" -eq 2 ]'

# --- bench_hosts.sh ------------------------------------------------------------
# A BENCH_BIND it does not know is refused before anything is set up (no
# root needed), with exit 2 and the values it takes.
BENCH_HOSTS="$(dirname "$0")/../hosts/bench_hosts.sh"
for value in bad Split; do
    run env BENCH_BIND=$value bash "$BENCH_HOSTS" 2
    expect "bench_hosts.sh: BENCH_BIND=$value refused" \
        status_and 2 has_err "BENCH_BIND is '$value'; expected split or same"
done

smoke_finish
