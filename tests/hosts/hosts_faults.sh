#!/bin/bash
# Faults across two test hosts (tests/hosts/or-hosts), 2 hosts x 2 ranks
# all-reducing in a loop (tests/hosts/host_fault), OCCL_TIMEOUT_MS=3000:
#   - h2's link goes down mid-all-reduce: every rank reports occlTimeout or
#     occlRemoteError within OCCL_TIMEOUT_MS + 1 s of the fault (not counting
#     seconds in which the whole machine stopped: stall_watch);
#   - 5% packet loss and 0-50 ms of jitter on both hosts' links
#     (launch/orlinkemu: no netem needed): the all-reduces stay exact;
#   - SIGKILL of one rank, of h2's ranks, of mpiexec: the job ends within
#     OCCL_TIMEOUT_MS, no process of it is left on either host, and nothing
#     in either host's /dev/shm.
# Each case checks its outcome and the time it took (docs/cluster.md#faults-across-hosts).
# Needs root and namespaces: skipped (exit 77) without them, but under CI
# (CI=true) that is a failure.
set -u
srcdir=${srcdir:-.}
name="hosts faults"
id=f$$
timeout_ms=3000
job=
hosts_cleanup_more() { [ -z "$job" ] || kill -KILL "$job" 2>/dev/null; }
. "$srcdir/tests/hosts/lib.sh"
hosts_require launch/orrun launch/orlinkemu tests/hosts/host_fault
hosts_up 2

h1=$(holder h1)
h2=$(holder h2)
# Run in a host's network namespace (its eth0), as its administrator would.
net_of() { local p; p=$(holder "$1"); shift; nsenter -t "$p" -n "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# Processes in a host's network namespace, its holder left out; with a name,
# only those whose command is that name.
procs_in() { # HOST [COMM]
    local hp ns
    hp=$(holder "$1")
    ns=$(readlink "/proc/$hp/ns/net")
    { find /proc/[0-9]*/ns -maxdepth 1 -name net -printf '%l %h\n' 2>/dev/null || true; } |
        awk -v ns="$ns" -v hp="$hp" '$1 == ns { split($2, p, "/"); if (p[3] != hp) print p[3] }' |
        while read -r pid; do
            # (libtool's wrapper runs the program as lt-NAME)
            if [ -z "${2:-}" ]; then
                echo "$pid"
            else
                case $(cat "/proc/$pid/comm" 2>/dev/null) in "$2" | "lt-$2") echo "$pid" ;; esac
            fi
        done
    return 0
}
left_on_hosts() { echo $(procs_in h1) $(procs_in h2); }
shm_of() { $hosts --id "$id" exec "$1" ls -A /dev/shm; }

# The job: 4 ranks on h1 and h2 all-reducing ITERATIONS times ELEMENTS floats
# into $out/CASE; mpiexec's pid in $job (or-hosts exec, nsenter, env and
# orrun each exec the next).
start_job() { # CASE ITERATIONS ELEMENTS [OCCL_TIMEOUT_MS]
    rm -rf "${out:?}/$1"
    mkdir -p "$out/$1"
    $hosts --id "$id" exec h1 env OCCL_TIMEOUT_MS=${4:-$timeout_ms} ./launch/orrun -n 4 -d 1 --hosts h1:2,h2:2 \
        --launcher-exec "$srcdir/tests/hosts/or-hosts-launch" -- \
        ./tests/hosts/host_fault "$out/$1" "$2" "$3" >"$out/$1/job" 2>&1 &
    job=$!
}
# Wait until every rank has all-reduced once (at most 90 s: start-up over
# TCP on a loaded machine).
wait_running() { # CASE
    local t
    for ((t = 0; t < 900; t++)); do
        [ "$(ls "$out/$1"/running.* 2>/dev/null | wc -l)" -eq 4 ] && return 0
        kill -0 "$job" 2>/dev/null || break
        sleep 0.1
    done
    tail -n 20 "$out/$1/job"
    return 1
}
# Wait for the job's mpiexec and every process of it on the hosts to end,
# at most $2 seconds; prints how long it took, or fails.
wait_ended() { # START LIMIT
    local t
    for ((t = 0; t < $2 * 10; t++)); do
        if ! kill -0 "$job" 2>/dev/null && [ -z "$(left_on_hosts)" ]; then
            since "$1"
            return 0
        fi
        sleep 0.1
    done
    return 1
}
finish_job() { # stop what is left of the job (not a result)
    kill -KILL "$job" 2>/dev/null
    wait "$job" 2>/dev/null
    job=
    local pids
    pids=$(left_on_hosts)
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
    for _ in $(seq 50); do [ -z "$(left_on_hosts)" ] && break; sleep 0.1; done
    $hosts --id "$id" exec h1 sh -c 'rm -rf /dev/shm/* /dev/shm/.[!.]*' 2>/dev/null
    $hosts --id "$id" exec h2 sh -c 'rm -rf /dev/shm/* /dev/shm/.[!.]*' 2>/dev/null
}
show() { cat "$out/$1"/rank.* 2>/dev/null | sed "s/^/  $1: /"; }

# ---- a link down mid-all-reduce ----------------------------------------------
case_linkdown() {
start_job linkdown 1000000 262144
if wait_running linkdown; then
    sleep 0.5
    stall_watch
    # The link is down by the time the command returns (t0): a loaded
    # machine may take a while to start it, which is not the ranks' time.
    t_cmd=$(now)
    nsenter -t "$h2" -n ip link set eth0 down
    t0=$(now)
    cmd_s=$(since "$t_cmd")
    limit=$(awk -v t=$timeout_ms 'BEGIN { print t / 1000 + 1 }')
    for _ in $(seq 300); do
        [ "$(ls "$out/linkdown"/rank.* 2>/dev/null | wc -l)" -eq 4 ] && break
        sleep 0.1
    done
    show linkdown
    # Seconds in which the whole machine stopped are not the ranks' delay.
    stall_allow
    late=$(cat "$out/linkdown"/rank.* 2>/dev/null |
        awk -v t0="$t0" -v tc="$t_cmd" -v lim="$limit" '
            / error (occlTimeout|occlRemoteError) / {
                for (i = 1; i <= NF; i++) if ($i == "at") { d = $(i + 1) - t0; e = $(i + 1) - tc }
                printf "%.2f ", d; n++; if (d > lim || e < 0) bad++ }
            END { printf "|%d|%d", n, bad }')
    delays=${late%%|*}
    counts=${late#*|}
    if [ "${counts%|*}" -eq 4 ] && [ "${counts#*|}" -eq 0 ]; then
        ok "h2's link down: all 4 ranks got occlTimeout/occlRemoteError within ${limit} s (after $delays s; ip link took $cmd_s s$stalled)"
    else
        tail -n 20 "$out/linkdown/job"
        bad "h2's link down: ${counts%|*} of 4 ranks reported an error, ${counts#*|} late (limit $limit s; after $delays s; ip link took $cmd_s s$stalled)"
    fi
    # With the link back the job ends: each rank has left. Hydra's messages
    # sent meanwhile wait for TCP's next retransmission, whose interval has
    # doubled since the link went down: seconds to tens of seconds.
    net_of h2 ip link set eth0 up
    t1=$(now)
    if took=$(wait_ended "$t1" 40); then
        ok "h2's link back up: the job ended ${took} s later, no process left on the hosts"
    else
        bad "h2's link back up: the job has not ended 40 s later: left $(left_on_hosts)"
    fi
    [ -z "$(shm_of h1)$(shm_of h2)" ] && ok "h2's link down: nothing left in /dev/shm" ||
        bad "h2's link down: left in /dev/shm: h1 '$(shm_of h1)' h2 '$(shm_of h2)'"
else
    bad "h2's link down: the job did not start"
fi
finish_job
}

# ---- loss and jitter ------------------------------------------------------
# launch/orlinkemu on both hosts' eth0: 5% of the frames dropped, the others
# delayed 0 to 50 ms (25 +- 25 ms) and allowed to overtake each other; no
# netem needed. The job waits for its peers up to 60 s (OCCL_TIMEOUT_MS).
case_loss() {
local h shaped=0
for h in h1 h2; do
    net_of $h ./launch/orlinkemu --delay 25ms --jitter 25ms --loss 5 --reorder eth0 \
        >"$out/emu.$h" 2>&1 && shaped=$((shaped + 1))
done
if [ $shaped -ne 2 ]; then
    cat "$out"/emu.*
    bad "loss and jitter: cannot start orlinkemu on both hosts"
else
    what="5% loss, 0-50 ms delay (orlinkemu)"
    t0=$(now)
    # TCP's retransmission timeouts double after each loss: over these links
    # a transfer may make no progress for longer than 3 s and still complete.
    start_job loss 10 65536 60000
    for _ in $(seq 900); do
        [ "$(ls "$out/loss"/rank.* 2>/dev/null | wc -l)" -eq 4 ] && break
        kill -0 "$job" 2>/dev/null || break
        sleep 0.1
    done
    took=$(since "$t0")
    show loss
    for h in h1 h2; do net_of $h ./launch/orlinkemu --stats eth0; done >"$out/emu.stats"
    sed 's/^/  /' "$out/emu.stats"
    # What the emulators did: frames dropped, and forwarded after a delay.
    lost=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "lost") s += $(i + 1) } END { print s + 0 }' "$out/emu.stats")
    forwarded=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "forwarded") s += $(i + 1) } END { print s + 0 }' "$out/emu.stats")
    if [ "$(grep -c ': ok 10 all-reduces, 0 mismatches' "$out"/loss/rank.* 2>/dev/null | awk -F: '{s += $2} END {print s + 0}')" -eq 4 ] &&
        [ "$lost" -gt 0 ] && [ "$forwarded" -gt 0 ]; then
        ok "$what: 10 all-reduces of 256 KiB exact on all 4 ranks in $took s, $forwarded frames delayed, $lost dropped"
    else
        tail -n 20 "$out/loss/job"
        bad "$what: not every rank ran 10 exact all-reduces ($forwarded frames delayed, $lost dropped, $took s)"
    fi
    wait "$job" 2>/dev/null
fi
for h in h1 h2; do net_of $h ./launch/orlinkemu --stop eth0 >/dev/null 2>&1; done
if [ -z "$(for h in h1 h2; do net_of $h tc filter show dev eth0 egress; net_of $h ip -o link show | grep orlk; done)" ]; then
    ok "loss and jitter: orlinkemu --stop left no filter and no veth on the hosts"
else
    bad "loss and jitter: left on the hosts: $(for h in h1 h2; do net_of $h tc filter show dev eth0 egress; net_of $h ip -o link show | grep orlk; done)"
fi
finish_job
}

# ---- SIGKILL: of one rank, of h2's ranks, of mpiexec ------------------------
# What the job must do: end within OCCL_TIMEOUT_MS, leave no process on any
# host and nothing in any /dev/shm.
kill_case() { # LABEL what-to-kill (rank | host | mpiexec)
    local label=$1 victims
    start_job "$2" 1000000 262144
    if ! wait_running "$2"; then
        bad "$label: the job did not start"
        finish_job
        return
    fi
    sleep 0.5
    case $2 in
    rank) victims=$(procs_in h2 host_fault | head -n 1) ;;
    host) victims=$(procs_in h2 host_fault) ;;
    mpiexec) victims=$job ;;
    esac
    local t0 took
    t0=$(now)
    # shellcheck disable=SC2086
    kill -KILL $victims
    if took=$(wait_ended "$t0" $((timeout_ms / 1000))); then
        ok "$label: the job ended ${took} s after, no process left on the hosts"
    else
        bad "$label: $(kill -0 "$job" 2>/dev/null && echo 'mpiexec still runs, ')left on the hosts after $((timeout_ms / 1000)) s: $(left_on_hosts) ($(for p in $(left_on_hosts); do cat /proc/$p/comm; done 2>/dev/null | sort | uniq -c | tr '\n' ' '))"
    fi
    local shm="$(shm_of h1)$(shm_of h2)"
    [ -z "$shm" ] && ok "$label: nothing left in /dev/shm" || bad "$label: left in /dev/shm: $shm"
    wait "$job" 2>/dev/null
    echo "  $label: exit status $?; mpiexec said: $(grep -m 2 -i 'terminat\|killed\|exit code' "$out/$2/job" | tr -s ' \n' ' ' | cut -c 1-200)"
    show "$2"
    finish_job
}
case_rank() { kill_case "SIGKILL of one rank on h2" rank; }
case_host() { kill_case "SIGKILL of h2's ranks" host; }
case_mpiexec() { kill_case "SIGKILL of mpiexec" mpiexec; }

# HOSTS_FAULTS_CASES picks some (to run one by hand); all by default.
for c in ${HOSTS_FAULTS_CASES:-linkdown loss rank host mpiexec}; do
    "case_$c"
done

echo "hosts faults: $passed passed, $failed failed"
[ $failed -eq 0 ]
