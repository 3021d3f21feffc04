#!/bin/bash
# OCCL and the runtime against MPICH across test hosts (tests/hosts/or-hosts),
# over TCP (UCX tcp/eth0), in the same jobs: run by hand, not in the suite.
#   bench_hosts.sh [HOSTS...]     (default: 2 4)
# For each number of hosts N, on a set of N test hosts:
#   - peer copies between h1 and hN (tests/perf/peer_perf, 2 ranks of 2
#     devices, each its own node): 4 KiB latency (median, write and read,
#     against half an MPI ping-pong, against MPI's round trip of the same
#     direction (the bytes and a 0-byte ack back; a 0-byte request and the
#     bytes back) and against MPI_Put/MPI_Get + MPI_Win_flush, passive target
#     waiting outside MPI as for the runtime's copies), a burst of 32 posted
#     4 KiB writes waited for once (per write, against 32 MPI_Send and one ack)
#     and 64 MiB bandwidth (against MPI_Send/MPI_Recv);
#   - all-reduce of 8 B and 64 MiB (tests/perf/occl_perf --mpi, float sum,
#     out of place), one process of one device per host, against
#     MPI_Allreduce on host buffers;
# then one table with OCCL's figure, MPICH's, their ratio (>1: OCCL faster)
# and the load average before and after each job. The machine is shared:
# figures to compare within a run.
#   BENCH_ITERS   occl_perf's timed calls per size (default 20)
#   BENCH_LAT     peer_perf's timed 4 KiB copies (default 300)
#   BENCH_PEER_PERF  the peer_perf to run (default ./tests/perf/peer_perf), e.g.
#                 a script running it on another build's library, to compare
#   BENCH_ALLREDUCE=0  peer copies only
#   BENCH_BIND    how the ranks' threads sit on this machine's cores (the
#                 test hosts share them): unset, where the scheduler puts
#                 them; split, rank r on CPU r mod (CPUs); same, every rank
#                 on CPU 0 (taskset, docs/cluster.md#benchmarks-across-hosts)
# Needs root and namespaces (exit 77 without them).
set -u
srcdir=${srcdir:-.}
# A rank's CPU from its rank (Hydra's PMI_RANK), set before it starts.
case "${BENCH_BIND:-}" in
"") bind=() ;;
split) bind=(sh -c 'exec taskset -c $((PMI_RANK % $(nproc))) "$@"' bind) ;;
same) bind=(taskset -c 0) ;;
*) echo "bench hosts: BENCH_BIND is '$BENCH_BIND'; expected split or same" >&2; exit 2 ;;
esac
hosts="bash $srcdir/tests/hosts/or-hosts"
counts=${*:-2 4}
iters=${BENCH_ITERS:-20}
lat=${BENCH_LAT:-300}
peer_perf=${BENCH_PEER_PERF:-./tests/perf/peer_perf}
id=b$$
out=$(mktemp -d)
trap '$hosts --id $id down >/dev/null 2>&1; rm -rf "$out"' EXIT

if ! why=$($hosts check); then
    echo "bench hosts: SKIP: $why"
    exit 77
fi
for prog in launch/orrun tests/perf/peer_perf tests/perf/occl_perf; do
    [ -x "$prog" ] || { echo "bench hosts: $prog is not built"; exit 99; }
done

load() { cut -d' ' -f1 /proc/loadavg; }

# Run a job on h1 of the current set into $out/NAME. MPICH 4.0.2 over UCX's
# tcp can hang in MPI_Finalize after the results
# (docs/cluster.md#test-hosts-on-one-machine): once MARK is in the output
# the job gets 10 s to end, then it and its ranks are stopped.
run_job() { # NAME MARK command...
    local name=$1 mark=$2 t=0 after=0
    shift 2
    echo "$(load)" >"$out/$name.load0"
    $hosts --id "$id" exec h1 "$@" >"$out/$name" 2>"$out/$name.err" &
    local pid=$!
    while kill -0 $pid 2>/dev/null && [ $t -lt 9000 ] && [ $after -lt 100 ]; do
        sleep 0.1
        t=$((t + 1))
        grep -q "$mark" "$out/$name" && after=$((after + 1))
    done
    echo "$(load)" >"$out/$name.load1"
    if kill -0 $pid 2>/dev/null; then
        kill -TERM $pid
        sleep 2
        # Ranks left in the set's namespaces (the hang): stopped too.
        local ns p
        for p in $(pgrep -x peer_perf; pgrep -x occl_perf); do
            ns=$(readlink "/proc/$p/ns/net" 2>/dev/null) &&
                grep -qF "$ns" "${OR_HOSTS_DIR:-/run/or-hosts}/$id/namespaces" && kill -KILL "$p"
        done
        kill -KILL $pid 2>/dev/null
        echo "  ($name: stopped $((t / 10)) s after it began; result printed: $([ $after -gt 0 ] && echo yes || echo no))"
    fi
    wait $pid 2>/dev/null
}

rows=$out/rows
: >"$rows"
row() { # HOSTS WHAT UNIT OCCL MPICH BIGGER-IS-BETTER(1/0) JOB
    local ratio
    ratio=$(awk -v o="$4" -v m="$5" -v b="$6" 'BEGIN {
        if (o == "" || m == "" || o + 0 == 0 || m + 0 == 0) { print "-"; exit }
        r = b ? o / m : m / o; printf (r < 0.1 ? "%.3f" : "%.2f"), r }')
    printf '| %s | %s | %s %s | %s %s | %s | %s → %s |\n' "$1" "$2" "${4:-?}" "$3" "${5:-?}" "$3" "$ratio" \
        "$(cat "$out/$7.load0")" "$(cat "$out/$7.load1")" >>"$rows"
}

for n in $counts; do
    $hosts --id "$id" down >/dev/null 2>&1
    if ! $hosts --id "$id" up "$n" >"$out/up" 2>&1; then
        cat "$out/up"
        echo "bench hosts: FAIL: or-hosts up $n"
        exit 1
    fi
    list=$(seq -s, -f 'h%g' 1 "$n")
    launch=(./launch/orrun --launcher-exec "$srcdir/tests/hosts/or-hosts-launch")

    echo "== $n hosts: peer_perf h1 <-> h$n"
    run_job "peer$n" '^target: other-node' "${launch[@]}" -n 2 -d 2 --hosts "h1,h$n" -- \
        ${bind[@]+"${bind[@]}"} "$peer_perf" -s 64M -r 3 -i "$lat" -w poll
    grep 'MPI one way\|MPI round trip\|MPI RMA\|other node: orMemcpy\|burst' "$out/peer$n"
    grep '64 MiB\|size' "$out/peer$n" | grep -v target
    f="$out/peer$n"
    # latency rows end: median p99 x1 xrt
    mpi_lat=$(awk '/MPI one way/ {print $(NF-3)}' "$f")
    rt_wr=$(awk '/MPI round trip, write/ {print $(NF-3)}' "$f")
    rt_rd=$(awk '/MPI round trip, read/ {print $(NF-3)}' "$f")
    put_lat=$(awk '/MPI RMA write/ {print $(NF-3)}' "$f")
    get_lat=$(awk '/MPI RMA read/ {print $(NF-3)}' "$f")
    wr_lat=$(awk '/write, other node/ {print $(NF-3)}' "$f")
    rd_lat=$(awk '/read, other node/ {print $(NF-3)}' "$f")
    mpi_burst=$(awk '/MPI burst/ {print $(NF-2)}' "$f")
    wr_burst=$(awk '/posted burst, other node/ {print $(NF-2)}' "$f")
    # 64 MiB row: size unit memcpy MPI | same /memcpy /MPI | other /memcpy /MPI | read /MPI
    read -r mpi_bw wr_bw rd_bw < <(awk '$1 == 64 && $2 == "MiB" {print $4, $10, $14}' "$f")
    row "$n" "peer copy 4 KiB, write (median; MPI: one way)" µs "$wr_lat" "$mpi_lat" 0 "peer$n"
    row "$n" "peer copy 4 KiB, write (median; MPI: round trip, the bytes and a 0-byte ack)" µs \
        "$wr_lat" "$rt_wr" 0 "peer$n"
    row "$n" "peer copy 4 KiB, write (median; MPI: MPI_Put + MPI_Win_flush)" µs \
        "$wr_lat" "$put_lat" 0 "peer$n"
    row "$n" "peer copy 4 KiB, read (median; MPI: one way)" µs "$rd_lat" "$mpi_lat" 0 "peer$n"
    row "$n" "peer copy 4 KiB, read (median; MPI: round trip, a 0-byte request and the bytes)" µs \
        "$rd_lat" "$rt_rd" 0 "peer$n"
    row "$n" "peer copy 4 KiB, read (median; MPI: MPI_Get + MPI_Win_flush)" µs \
        "$rd_lat" "$get_lat" 0 "peer$n"
    row "$n" "peer copy 4 KiB, burst of 32 posted writes (median per write; MPI: 32 sends, one ack)" µs \
        "${wr_burst:-}" "${mpi_burst:-}" 0 "peer$n"
    row "$n" "peer copy 64 MiB, write" GB/s "${wr_bw:-}" "${mpi_bw:-}" 1 "peer$n"
    row "$n" "peer copy 64 MiB, read" GB/s "${rd_bw:-}" "${mpi_bw:-}" 1 "peer$n"

    [ "${BENCH_ALLREDUCE:-1}" = 0 ] && continue
    echo "== $n hosts: occl_perf allreduce, $n processes x 1 device"
    run_job "ar$n" '^# Avg bus bandwidth' "${launch[@]}" -n "$n" -d 1 --hosts "$list" -- \
        ${bind[@]+"${bind[@]}"} ./tests/perf/occl_perf --coll allreduce -b 8 -e 64M -i 67108856 -n "$iters" -w 5 --mpi --place out
    grep -v '^#  Rank\|^# Using\|^#$' "$out/ar$n" | grep '^ \|occl/mpi\|Load'
    # columns: size count type redop root time algbw busbw #wrong mpi-time mpi-busbw x
    for size in 8 67108864; do
        read -r t_occl t_mpi < <(awk -v s=$size '$1 == s {print $6, $10}' "$out/ar$n")
        label=$([ $size = 8 ] && echo "8 B" || echo "64 MiB")
        row "$n" "all-reduce $label (time per call)" µs "${t_occl:-}" "${t_mpi:-}" 0 "ar$n"
    done
done

echo
echo "| hosts | what | OCCL / runtime | MPICH | x (>1: OCCL faster) | load average before → after |"
echo "|---:|---|---:|---:|---:|---|"
cat "$rows"
