#!/bin/sh
# OCCL collectives in virtual time do not depend on the host: 4 ranks on one
# virtual node, each run of tests/mpi/occl_vtime once with one compute
# thread per device and once with four while a CPU hog competes for the
# cores, print the same virtual times and write the same traces, byte for
# byte. The traces hold one slice per collective on its stream's track,
# with its size, type, op, root, algorithm, protocol and rank count; a wall-clock
# trace holds the same slices. occl-perf prints virtual times.
set -eu
# $dir, removed at exit, and under_load: the shared harness.
. "$(dirname "$0")/../runtime/vtime_harness.sh"
check="$(dirname "$0")/../tools/check_trace.py"
run() { # THREADS TRACE OUT
    timeout --kill-after=10 300 mpiexec -n 4 env OPENREG_TIME=virtual OPENREG_DEVICE_PROFILE=a100 \
        OPENREG_DEVICES=1 OPENREG_DEVICE_MEM=128M OCCL_ALGO=ring OCCL_PROTO=Simple OCCL_TIMEOUT_MS=120000 \
        MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE OPENREG_DEVICE_THREADS="$1" \
        OPENREG_TRACE="$2" ./tests/mpi/occl_vtime pix 8 > "$3"
}
failed=0
run 1 "$dir/a.json" "$dir/a.out"
under_load run 4 "$dir/b.json" "$dir/b.out"
cat "$dir/a.out"
if ! cmp -s "$dir/a.out" "$dir/b.out"; then
    echo "FAIL: virtual times differ between runs:"
    diff "$dir/a.out" "$dir/b.out" || true
    failed=1
fi
for r in 0 1 2 3; do
    if ! cmp -s "$dir/a.rank$r.json" "$dir/b.rank$r.json"; then
        echo "FAIL: rank $r's virtual traces differ between runs"
        diff "$dir/a.rank$r.json" "$dir/b.rank$r.json" | head -10 || true
        failed=1
    fi
done
# Rank 1's trace: every collective the program issued, once each, with its
# figures; the all-reduce's slice lasts its closed form with the Simple
# protocol (its base latency, then 2*3 hops of 2 MiB, each the peer path's
# 5 us, Simple's PCI hop latency and the bytes: 8400 + 6 * (5000 + 5700 +
# 83887) ns).
python3 "$check" "$dir/a.rank1.json" --time virtual \
    --count "occl AllReduce=2" --count "occl AllGather=1" --count "occl ReduceScatter=1" \
    --count "occl Broadcast=1" --count "occl Reduce=1" --count "occl AlltoAll=1" \
    --count "occl Gather=1" --count "occl Scatter=1" --count "occl Send/Recv group=1" \
    --arg "occl AllReduce:bytes=8388608" --arg "occl AllReduce:count=2097152" \
    --arg "occl AllReduce:type=float32" --arg "occl AllReduce:op=sum" \
    --arg "occl AllReduce:algorithm=ring" --arg "occl AllReduce:protocol=Simple" \
    --arg "occl AllReduce:nranks=4" \
    --arg "occl Broadcast:root=0" --arg "occl Reduce:root=1" \
    --min-dur "occl AllReduce=575922" || failed=1
# The same program in wall time: the same slices, with wall-clock spans.
if ! timeout --kill-after=10 300 mpiexec -n 4 env OPENREG_TIME=wall OPENREG_DEVICES=1 \
        OPENREG_DEVICE_MEM=128M OCCL_ALGO=ring MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE \
        OPENREG_TRACE="$dir/w.json" ./tests/mpi/occl_vtime pix 8 wall > "$dir/w.out"; then
    echo "FAIL: the wall-clock run failed"
    cat "$dir/w.out"
    failed=1
fi
python3 "$check" "$dir/w.rank2.json" --time wall --count "occl AllReduce=2" \
    --count "occl Broadcast=1" --arg "occl AllReduce:algorithm=ring" || failed=1
# occl-perf in virtual time: the header says so, the ring all-reduce of
# 8 MiB on 4 ranks with Simple takes its closed form (575.9 us) in and out of place,
# and the results are still checked (no wrong element).
out=$(timeout --kill-after=10 300 mpiexec -n 4 env OPENREG_TIME=virtual OPENREG_DEVICE_PROFILE=a100 \
        OPENREG_DEVICES=1 OPENREG_DEVICE_MEM=128M OCCL_ALGO=ring OCCL_PROTO=Simple \
        MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE \
        ./tests/perf/occl_perf --coll allreduce -b 8M -e 8M -n 3 -w 1 -c 1 2>&1) || {
    echo "$out"; echo "FAIL: occl_perf in virtual time"; failed=1; }
echo "$out" | grep -q '^# virtual time (OPENREG_TIME=virtual)' ||
    { echo "$out"; echo "FAIL: occl_perf does not say virtual time"; failed=1; }
echo "$out" | awk '$1 == 8388608 { found = 1; if ($6 != "575.9" || $10 != "575.9" || $9 != 0 || $13 != 0) bad = 1 }
                   END { exit !found || bad }' ||
    { echo "$out"; echo "FAIL: occl_perf's virtual ring all-reduce is not 575.9 us"; failed=1; }
# Its --mpi comparison times MPICH by the host's clock: refused.
if timeout 120 mpiexec -n 2 env OPENREG_TIME=virtual OPENREG_DEVICES=1 \
        ./tests/perf/occl_perf --coll allreduce -b 1K -e 1K --mpi > "$dir/mpi.out" 2>&1 ||
   ! grep -q 'not with OPENREG_TIME=virtual' "$dir/mpi.out"; then
    cat "$dir/mpi.out"; echo "FAIL: occl_perf --mpi in virtual time not refused"; failed=1
fi
exit $failed
