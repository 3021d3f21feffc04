# tests/hosts/lib.sh - what every test across test hosts (tests/hosts/or-hosts)
# starts with; sourced after setting
#   name  the test's name in its messages ("hosts mpi")
#   id    the id of its set of hosts (unique: the test's pid in it)
# It defines:
#   hosts, out        the or-hosts command, a temporary directory;
#   ok, bad           count and print a result (passed, failed);
#   hosts_skip WHY    exit 77 (skipped), but under CI (CI=true) exit 1: CI
#                     must be able to run every host test;
#   hosts_require PROGRAM...   exit 99 unless each is built;
#   hosts_up N        make hosts h1..hN (or fail the test); state is their
#                     state directory, holder HOST the pid holding HOST's
#                     namespaces;
#   stop_after_result JOB SEEN COMM [PIDS]   for a job still running after
#                     its result: see below;
#   stall_watch, stall_allow   a limit on a job's time that does not count
#                     the time the whole machine stopped: see below;
# and checks that test hosts can be made here (else hosts_skip). On exit the
# hosts go down and out is removed; a test with more to undo defines
# hosts_cleanup_more.
hosts="bash ${srcdir:-.}/tests/hosts/or-hosts"
passed=0
failed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }
out=$(mktemp -d)
stall_pid=
hosts_cleanup() {
    if declare -F hosts_cleanup_more >/dev/null; then hosts_cleanup_more; fi
    [ -z "$stall_pid" ] || kill "$stall_pid" 2>/dev/null
    $hosts --id "$id" down >/dev/null 2>&1
    rm -rf "$out"
}
trap hosts_cleanup EXIT

hosts_skip() { # WHY
    if [ "${CI:-}" = true ]; then
        echo "$name: FAIL: CI must be able to run this test: $1"
        exit 1
    fi
    echo "$name: SKIP: $1"
    exit 77
}

hosts_require() { # PROGRAM...
    local prog
    for prog in "$@"; do
        [ -x "$prog" ] || { echo "$name: $prog is not built"; exit 99; }
    done
}

state=${OR_HOSTS_DIR:-/run/or-hosts}/$id
hosts_up() { # N
    if ! $hosts --id "$id" up "$1" >"$out/up" 2>&1; then
        cat "$out/up"
        echo "$name: FAIL: or-hosts up $1"
        exit 1
    fi
}
holder() { $hosts --id "$id" list | awk -v h="$1" '$1 == h {print $3}'; }

# A virtual machine paused or snapshotted stops every process of it at once,
# for seconds: a limit on how long a job takes to react must not count that
# time. stall_watch starts a clock ticking every 0.1 s in the background;
# stall_allow adds to $limit (seconds) the longest gap between two of its
# ticks beyond the 0.1 s, when it is 0.5 s or more, and says so in $stalled
# (else empty) for the test's message. A job that is merely slow leaves the
# clock ticking.
stall_watch() {
    [ -z "$stall_pid" ] || kill "$stall_pid" 2>/dev/null
    echo 0 >"$out/stall"
    (
        prev=${EPOCHREALTIME//[!0-9]/} longest=0
        while sleep 0.1; do
            t=${EPOCHREALTIME//[!0-9]/}
            if ((t - prev - 100000 > longest)); then
                longest=$((t - prev - 100000))
                echo "$longest" >"$out/stall"
            fi
            prev=$t
        done
    ) &
    stall_pid=$!
}
stall_allow() {
    local stall
    stall=$(awk '{ printf "%.2f", $1 / 1e6 }' "$out/stall")
    stalled=
    if awk -v s="$stall" 'BEGIN { exit !(s >= 0.5) }'; then
        limit=$(awk -v l="$limit" -v s="$stall" 'BEGIN { print l + s }')
        stalled="; the machine stopped for $stall s"
    fi
}

# Processes in the set's namespaces whose command is COMM (libtool's
# wrapper runs a program as lt-COMM).
processes_named() { # COMM
    { find /proc/[0-9]*/ns -maxdepth 1 -name net -printf '%l %h\n' 2>/dev/null || true; } |
        awk 'NR == FNR { ours[$1] = 1; next } ($1 in ours) { split($2, p, "/"); print p[3] }' \
            "$state/namespaces" - |
        while read -r pid; do
            case $(cat "/proc/$pid/comm" 2>/dev/null) in "$1" | "lt-$1") echo "$pid" ;; esac
        done
}

# MPICH 4.0.2 over UCX's tcp can hang in MPI_Finalize once the job is done
# (docs/cluster.md#test-hosts-on-one-machine). For a JOB (a pid here) that
# still runs after the test has waited for its result: hung is set to
# "finalize" if the result was seen (SEEN is 1) and every rank left (PIDS,
# default the processes named COMM in the hosts) is inside PMPI_Finalize
# (gdb), else to "still running"; then the job and its ranks are stopped.
# hung stays empty if the job has ended.
stop_after_result() { # JOB SEEN COMM [PIDS]
    local job=$1 seen=$2 ranks=${4-} pid gdbs= in_finalize=0
    hung=
    kill -0 "$job" 2>/dev/null || return 0
    [ $# -ge 4 ] || ranks=$(processes_named "$3")
    hung="still running"
    if [ "$seen" = 1 ] && [ -n "$ranks" ] && command -v gdb >/dev/null 2>&1; then
        # All at once: on a loaded machine each attach can take seconds.
        for pid in $ranks; do
            timeout 30 gdb -p "$pid" -batch -nx -ex 'thread apply 1 bt' >"$out/gdb.$pid" 2>&1 &
            gdbs="$gdbs $!"
        done
        # shellcheck disable=SC2086
        wait $gdbs
        for pid in $ranks; do
            grep -q 'PMPI_Finalize' "$out/gdb.$pid" && in_finalize=$((in_finalize + 1))
        done
        [ "$in_finalize" -eq "$(echo "$ranks" | wc -w)" ] && hung=finalize
    fi
    kill -TERM "$job" 2>/dev/null
    sleep 2
    # shellcheck disable=SC2086
    kill -KILL "$job" $ranks 2>/dev/null
    return 0
}

if ! why=$($hosts check); then
    hosts_skip "$why"
fi
