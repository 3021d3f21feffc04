#!/bin/bash
# run-mpi.sh SPEC - run one multi-rank test described by a .mpi file.
#
# A spec holds shell assignments:
#   ranks=4                          (mpiexec -n)
#   program=tests/mpi/ring           (relative to the build directory)
#   args="..."                       (optional)
#   env="OPENREG_DEVICES=2 ..."      (optional, passed to every rank)
#   export NAME="a value with spaces" (also reaches every rank)
#   timeout=120                      (optional, seconds; the job is killed after)
# Criterion cannot run under mpiexec (it forks), so multi-rank tests are
# plain programs that exit non-zero on failure; this wrapper launches them.
# A job still running at its timeout is reported before it is killed: the
# load, the host's stall figures, every rank's state and (where gdb is
# installed) the first ranks' threads, so a hang in CI can be told from a
# host that stopped running anything.
set -eu
spec=$1
ranks=1 program= args= env= timeout=120
. "$spec"
[ -n "$program" ] || { echo "run-mpi.sh: $spec names no program" >&2; exit 99; }
echo "run-mpi.sh: mpiexec -n $ranks $env $program $args"

# The job's processes: every descendant of mpiexec (its proxies, the ranks).
job_pids() {
    local all=$1 next pid ppid
    while :; do
        next=$all
        while read -r pid ppid; do
            case " $next " in *" $pid "*) ;; *) case " $next " in *" $ppid "*) next="$next $pid" ;; esac ;; esac
        done < <(ps -e -o pid=,ppid=)
        [ "$next" = "$all" ] && break
        all=$next
    done
    echo "$all"
}

report_hang() {
    echo "run-mpi.sh: still running after ${timeout} s; load average: $(cat /proc/loadavg)"
    for f in /proc/pressure/cpu /proc/pressure/io /proc/pressure/memory; do
        [ -r "$f" ] && sed "s|^|run-mpi.sh: ${f##*/}: |" "$f"
    done
    local pids ranks
    pids=$(job_pids "$job")
    # shellcheck disable=SC2086
    ps -o pid,ppid,stat,wchan:24,pcpu,etimes,time,args -p "$(echo $pids | tr ' ' ,)" || true
    # The ranks: the job's processes that are the program (env execs it).
    # shellcheck disable=SC2086
    ranks=$(ps -o pid=,args= -p "$(echo $pids | tr ' ' ,)" | awk -v p="./$program" '$2 == p { print $1 }')
    if command -v gdb >/dev/null 2>&1; then
        for pid in $(echo "$ranks" | head -n 3); do
            echo "run-mpi.sh: threads of rank process $pid:"
            timeout 30 gdb -p "$pid" -batch -nx -ex 'thread apply all bt 12' 2>/dev/null |
                grep -E '^(Thread|#)' || true
        done
    fi
}

# shellcheck disable=SC2086
mpiexec -n "$ranks" env $env "./$program" $args &
job=$!
sleep "$timeout" &
timer=$!
finished=
rc=0
wait -n -p finished "$job" "$timer" || rc=$?
if [ "$finished" = "$job" ]; then
    kill "$timer" 2>/dev/null || true
    exit "$rc"
fi
report_hang
kill -TERM "$job" 2>/dev/null || true
sleep 10 &
timer=$!
wait -n -p finished "$job" "$timer" || true
if [ "$finished" != "$job" ]; then
    echo "run-mpi.sh: the job outlived SIGTERM by 10 s; killed"
    # shellcheck disable=SC2046
    kill -KILL $(job_pids "$job") 2>/dev/null || true
    exit 137
fi
exit 124
