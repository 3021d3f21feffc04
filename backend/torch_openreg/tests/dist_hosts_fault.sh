#!/bin/bash
# torch.distributed's "occl" backend across two test hosts (tests/hosts/or-hosts),
# 2 hosts x 2 ranks all-reducing in a loop (dist_link_down.py) with a group
# timeout of 3 s: h2's link goes down, and every rank's all_reduce raises a
# RuntimeError naming the collective and OCCL's timeout (or the remote
# error) within the timeout + 2 s, not counting seconds in which the whole
# machine stopped (docs/cluster.md#faults-across-hosts).
# Needs root and namespaces: skipped (exit 77) without them, but under CI
# (CI=true) that is a failure. TORCH_PYTHON_WRAPPER names the Python with
# torch_openreg (default: the build tree's torch-python).
set -u
srcdir=${srcdir:-.}
py=${TORCH_PYTHON_WRAPPER:-$PWD/backend/torch_openreg/tests/torch-python}
name="dist hosts fault"
id=d$$
timeout_s=3
job=
hosts_cleanup_more() { [ -z "$job" ] || { kill -KILL "$job"; wait "$job"; } 2>/dev/null; }
. "$srcdir/tests/hosts/lib.sh"
hosts_require launch/orrun "$py"
hosts_up 2
h2=$(holder h2)

$hosts --id "$id" exec h1 ./launch/orrun -n 4 -d 1 --hosts h1:2,h2:2 \
    --launcher-exec "$srcdir/tests/hosts/or-hosts-launch" -- \
    "$py" "$srcdir/backend/torch_openreg/tests/dist_link_down.py" "$out" $timeout_s \
    >"$out/job" 2>&1 &
job=$!
for _ in $(seq 1200); do
    [ "$(ls "$out"/running.* 2>/dev/null | wc -l)" -eq 4 ] && break
    kill -0 $job 2>/dev/null || break
    sleep 0.1
done
if [ "$(ls "$out"/running.* 2>/dev/null | wc -l)" -ne 4 ]; then
    tail -n 20 "$out/job"
    echo "dist hosts fault: FAIL: the job did not start"
    exit 1
fi
sleep 0.5
stall_watch
t0=$(date +%s.%N)
nsenter -t "$h2" -n ip link set eth0 down
for _ in $(seq 300); do
    [ "$(ls "$out"/rank.* 2>/dev/null | wc -l)" -eq 4 ] && break
    sleep 0.1
done
cat "$out"/rank.* 2>/dev/null | sed 's/^/  /'
limit=$((timeout_s + 2))
# Seconds in which the whole machine stopped are not the ranks' delay.
stall_allow
verdict=$(cat "$out"/rank.* 2>/dev/null | awk -v t0="$t0" -v lim=$limit '
    /: RuntimeError at .*occl allreduce failed: (timed out waiting for peers|remote process exited)/ {
        for (i = 1; i <= NF; i++) if ($i == "at") d = $(i + 1) - t0
        printf "%.2f ", d; n++; if (d > lim || d < 0) late++ }
    END { printf "|%d|%d", n, late }')
IFS='|' read -r delays good late <<<"$verdict"
nsenter -t "$h2" -n ip link set eth0 up
if [ "$good" -eq 4 ] && [ "$late" -eq 0 ]; then
    echo "ok   h2's link down: every rank's all_reduce raised RuntimeError 'occl allreduce failed: ...' within $limit s (after $delays s$stalled)"
    echo "dist hosts fault: 1 passed, 0 failed"
    exit 0
fi
tail -n 20 "$out/job"
echo "FAIL h2's link down: $good of 4 ranks raised OCCL's allreduce error, $late late (limit $limit s; after $delays s$stalled)"
echo "dist hosts fault: 0 passed, 1 failed"
exit 1
