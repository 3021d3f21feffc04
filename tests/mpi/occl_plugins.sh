#!/bin/sh
# NCCL tuner plugins drive OCCL's algorithm choice, and broken plugins are
# refused: occl_perf on 2 ranks with OCCL_DEBUG=INFO, each run checking its
# results (-c 1: no wrong element). The tuner (tests/collectives/plugins/
# tuner_force.c, NCCL ABI v5, or v2 as libnccl-tuner-force2) forces the NCCL
# algorithm TEST_TUNER_ALGO; OCCL alone picks direct for these all-reduces.
# A refused plugin is a warning, and the job goes on without it.
set -eu
P=tests/collectives/plugins/.libs
log=tests/mpi/occl_plugins.tuner.log
passed=0
failed=0
out=
# Calls small enough for the low-latency path within a node (ll.c) are not
# the tuner's: one-node runs use 64 KiB.
bytes=4K
run() { # run PROCS DEVICES RANKS_PER_NODE ENV...: occl_perf all-reduce of $bytes into $out
    procs=$1 devs=$2 rpn=$3
    shift 3
    rm -f "$log"
    out=$(timeout 120 mpiexec -n "$procs" env OPENREG_DEVICES="$devs" OPENREG_RANKS_PER_NODE="$rpn" \
        OCCL_DEBUG=INFO OCCL_TIMEOUT_MS=30000 TEST_TUNER_LOG="$log" "$@" \
        ./tests/perf/occl_perf --coll allreduce -g "$devs" -b "$bytes" -e "$bytes" -n 2 -w 1 -c 1 2>&1) ||
        { echo "$out" | tail -20; echo "(occl_perf failed)"; return 1; }
    wrong=$(echo "$out" | awk '/^ *[0-9]/ { print $9 + $13 }' | sort -u | tr '\n' ' ')
    [ "$wrong" = "0 " ] || { echo "$out" | tail -20; echo "(wrong results: '$wrong')"; return 1; }
}
choices() { echo "$out" | sed -n 's/.*virtual nodes: \([a-z]*\)$/\1/p' | sort -u | tr '\n' ' '; }
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "$out" | tail -12; echo "FAIL $1"; failed=$((failed + 1)); }

# tuned LABEL WANT NCCL_ALGO PROCS DEVICES RANKS_PER_NODE ENV...: every choice is WANT,
# each logged as the tuner's; each rank's tuner was asked once per call (the
# funcs it logs: ncclFuncAllReduce) and finalized once.
tuned() {
    label=$1 want=$2 algo=$3
    shift 3
    if ! run "$@" TEST_TUNER_ALGO="$algo"; then fail "$label"; return; fi
    ranks=$(($1 * $2))
    asked=$(echo "$out" | grep -c "tuner plugin chose $algo/SIMPLE: $want/Simple (OCCL's own: " || true)
    calls=$(echo "$out" | grep -c "virtual nodes: [a-z]*$" || true)
    told=$(awk -v r="$ranks" '$3 == "nranks=" r && $6 ~ /^funcs=4(,4)*$/ { sub("calls=", "", $5); n += $5 }
        END { print n + 0 }' "$log")
    if [ "$(choices)" = "$want " ] && [ "$asked" -gt 0 ] && [ "$asked" -eq "$calls" ] &&
        [ "$told" -eq "$calls" ] && [ "$(wc -l < "$log")" -eq "$ranks" ]; then
        ok "$label: $want"
    else
        cat "$log" 2>/dev/null || true
        fail "$label: logged '$(choices)', $asked tuner choices (want $want)"
    fi
}
tuned "v5 by path, TREE" tree TREE 2 1 1 OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so
bytes=64K
tuned "v5, NVLS on one node" nvls NVLS 2 1 2 OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so
bytes=4K
tuned "v5, COLLNET_CHAIN on 2 nodes x 2" hierarchical COLLNET_CHAIN 2 2 1 \
    OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so
# A library with both v6 and v5 is used through v6, the newest.
tuned "v6 and v5 in one library" tree TREE 2 1 1 OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force6.so
if [ "$(grep -c '^tuner v6 ' "$log")" -eq 2 ] && echo "$out" | grep -q "NCCL interface v6"; then
    ok "v6 is the one used"
else
    fail "v6 is the one used: $(cat "$log")"
fi
# A bare name resolves as NCCL's: libnccl-tuner-<name>.so on the library path.
tuned "v2 by name, TREE" tree TREE 2 1 1 OCCL_TUNER_PLUGIN=force2 LD_LIBRARY_PATH=$P
# NCCL's variable works; OCCL's wins over it.
tuned "NCCL_TUNER_PLUGIN" tree TREE 2 1 1 NCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so
tuned "OCCL_ over NCCL_" ring RING 2 1 1 NCCL_TUNER_PLUGIN=/nonexistent.so \
    OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so

# A tuner that leaves the table as it is gets OCCL's own choice: the table
# holds OCCL's costs (the formulas', in virtual time the model's).
for mode in wall virtual; do
    pairs= # "chosen OCCL's-own" algorithm/protocol of each answer
    if run 2 1 1 OPENREG_TIME=$mode OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so TEST_TUNER_ALGO=KEEP &&
        pairs=$(echo "$out" | sed -n "s/.*tuner plugin chose [A-Z_]*\/[A-Z0-9]*: \([a-z]*\/[A-Za-z0-9]*\) (OCCL's own: \([a-z]*\/[A-Za-z0-9]*\))$/\1 \2/p") &&
        [ -n "$pairs" ] && [ -z "$(echo "$pairs" | awk '$1 != $2')" ]; then
        ok "an untouched table gives OCCL's choice ($mode time)"
    else
        fail "an untouched table gives OCCL's choice ($mode time)"
    fi
done

# In virtual time the protocols are offered too: the tuner's is the one the
# model charges, in the planner's log; in wall time only Simple is.
if run 2 1 1 OPENREG_TIME=virtual OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so TEST_TUNER_ALGO=RING \
    TEST_TUNER_PROTO=LL && echo "$out" | grep -q "tuner plugin chose RING/LL: ring/LL (OCCL's own: " &&
    [ "$(echo "$out" | sed -n 's/.*virtual nodes (virtual-time model: .*): \([a-z]*\/[A-Za-z0-9]*\)$/\1/p' |
        sort -u)" = ring/LL ]; then
    ok "a protocol in virtual time: ring/LL"
else
    fail "a protocol in virtual time: ring/LL"
fi
if run 2 1 1 OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so TEST_TUNER_ALGO=RING TEST_TUNER_PROTO=LL &&
    [ "$(choices)" = "direct " ] &&
    echo "$out" | grep -q "tuner plugin chose COLLNET_DIRECT/SIMPLE: direct/Simple (OCCL's own: direct/Simple)"; then
    ok "no LL offered in wall time across nodes: the table's cheapest"
else
    fail "no LL offered in wall time across nodes"
fi

# Within one node a call small enough for the low-latency path (ll.c) is
# offered under LL, and a tuner's choice of LL takes that path (every call
# logged as it), of Simple the algorithm it names. ll_runs: calls that took it.
ll_runs() { echo "$out" | grep -c "low-latency path, on the communicator's thread" || true; }
if run 2 1 2 OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so TEST_TUNER_ALGO=RING TEST_TUNER_PROTO=LL &&
    asked=$(echo "$out" | grep -c "tuner plugin chose RING/LL: ring/LL (OCCL's own: [a-z]*/LL)" || true) &&
    [ "$asked" -gt 0 ] && [ "$(ll_runs)" -eq "$asked" ]; then
    ok "LL within a node takes the low-latency path ($asked calls)"
else
    fail "LL within a node takes the low-latency path ($(ll_runs) runs)"
fi
if run 2 1 2 OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so TEST_TUNER_ALGO=RING &&
    echo "$out" | grep -q "tuner plugin chose RING/SIMPLE: ring/Simple (OCCL's own: [a-z]*/LL)" &&
    [ "$(choices)" = "ring " ] && [ "$(ll_runs)" -eq 0 ]; then
    ok "Simple within a node: the ring, not the low-latency path"
else
    fail "Simple within a node: '$(choices)', $(ll_runs) low-latency runs"
fi
# An untouched table keeps OCCL's own choice: the low-latency path.
if run 2 1 2 OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so TEST_TUNER_ALGO=KEEP &&
    asked=$(echo "$out" | grep -c "tuner plugin chose [A-Z_]*/LL: \([a-z]*\)/LL (OCCL's own: \1/LL)" || true) &&
    [ "$asked" -gt 0 ] && [ "$(ll_runs)" -eq "$asked" ]; then
    ok "an untouched table keeps the low-latency path"
else
    fail "an untouched table keeps the low-latency path ($(ll_runs) runs)"
fi
# Above OCCL_LL_MAX_BYTES the path is not offered: LL is ignored.
if run 2 1 2 OCCL_LL_MAX_BYTES=1024 OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so TEST_TUNER_ALGO=RING \
    TEST_TUNER_PROTO=LL && [ "$(ll_runs)" -eq 0 ] &&
    echo "$out" | grep -q "tuner plugin chose [A-Z_]*/SIMPLE: [a-z]*/Simple (OCCL's own: [a-z]*/Simple)"; then
    ok "no LL offered above OCCL_LL_MAX_BYTES"
else
    fail "no LL offered above OCCL_LL_MAX_BYTES ($(ll_runs) runs)"
fi

# OCCL_ALGO still limits what the tuner is offered: it cannot get tree.
if run 2 1 1 OCCL_ALGO=ring,direct OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so TEST_TUNER_ALGO=TREE &&
    [ "$(choices)" = "direct " ] && echo "$out" | grep -q "tuner plugin chose COLLNET_DIRECT/SIMPLE: direct/Simple"; then
    ok "OCCL_ALGO limits the offer"
else
    fail "OCCL_ALGO limits the offer: '$(choices)'"
fi

# refused LABEL MESSAGE MESSAGE2 ENV...: warned about with MESSAGE (and
# MESSAGE2 unless "-"), the run goes on with OCCL's own choice, and no tuner
# is consulted.
refused() {
    label=$1 msg=$2 msg2=$3
    shift 3
    if run 2 1 1 TEST_TUNER_ALGO=TREE "$@" && echo "$out" | grep -q "occl WARN: .*$msg" &&
        { [ "$msg2" = - ] || echo "$out" | grep -q "occl WARN: .*$msg2"; } &&
        [ "$(choices)" = "direct " ] && ! echo "$out" | grep -q "tuner plugin chose"; then
        ok "refused: $label"
    else
        fail "refused: $label (want a warning matching '$msg')"
    fi
}
refused "missing file" "tuner plugin '/nonexistent/libx.so' (OCCL_TUNER_PLUGIN) refused: .*No such file" - \
    OCCL_TUNER_PLUGIN=/nonexistent/libx.so
refused "unknown name" "tuner plugin 'nosuch' (OCCL_TUNER_PLUGIN) refused: .*libnccl-tuner-nosuch.so" - \
    OCCL_TUNER_PLUGIN=nosuch
refused "no symbol" "no symbol ncclTunerPlugin_v6 .. _v2 in it" "no symbol ncclProfiler_v6 .. _v4" \
    OCCL_TUNER_PLUGIN=$P/libbroken-nosym.so OCCL_PROFILER_PLUGIN=$P/libbroken-nosym.so
refused "unknown version, old version" "exports ncclTunerPlugin_v9, a version OCCL does not support" \
    "exports ncclProfiler_v1, a version OCCL does not support" \
    OCCL_TUNER_PLUGIN=$P/libbroken-tuner-v9.so OCCL_PROFILER_PLUGIN=$P/libbroken-profiler-v1.so
refused "init fails" "tuner plugin '.*libbroken-init.so' refused for comm .*: init returned 3" - \
    OCCL_TUNER_PLUGIN=$P/libbroken-init.so
refused "a NULL function" "refused: ncclTunerPlugin_v4 lacks a name or a function" - \
    OCCL_TUNER_PLUGIN=$P/libbroken-nullfn.so
# "none" is no plugin, and no warning.
if run 2 1 1 OCCL_TUNER_PLUGIN=none NCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so TEST_TUNER_ALGO=TREE &&
    [ "$(choices)" = "direct " ] && ! echo "$out" | grep -q "occl WARN"; then
    ok "none"
else
    fail "none"
fi
# Ranks that name different tuners would pick different algorithms: the
# runtime's start-up stops the job and names the variable. Each process
# writes its messages to a file of its own: a job that aborts may end before
# mpiexec has passed them on.
wrap=$(mktemp)
errs=$(mktemp -d)
cat > "$wrap" <<INNER
#!/bin/sh
[ "\${PMI_RANK:-0}" = 0 ] && export OCCL_TUNER_PLUGIN=$P/libnccl-tuner-force.so || export OCCL_TUNER_PLUGIN=none
exec "\$@" 2>"$errs/\${PMI_RANK:-0}"
INNER
chmod +x "$wrap"
timeout 60 mpiexec -n 2 env OPENREG_DEVICES=1 TEST_TUNER_ALGO=TREE "$wrap" \
    ./tests/perf/occl_perf --coll allreduce -b 4K -e 4K -n 1 -w 0 >/dev/null 2>&1 && rc=0 || rc=$?
out=$(cat "$errs"/* 2>/dev/null)
rm -rf "$wrap" "$errs"
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
    echo "$out" | grep -qF "openreg: OCCL_TUNER_PLUGIN differs: rank 0 has $P/libnccl-tuner-force.so, rank 1 has none"; then
    ok "tuners that differ between ranks stop the job"
else
    fail "tuners that differ between ranks stop the job (exit $rc)"
fi
rm -f "$log"
echo "occl plugins: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
