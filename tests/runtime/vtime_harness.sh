# vtime_harness.sh - what the virtual-time determinism tests share
# (tests/runtime/vtime_determinism.sh, tests/mpi/occl_vtime.sh), sourced by
# them: the same program run twice, the second time while a CPU hog competes
# for the cores, must print and trace the same virtual times.
#
#   $dir                  a temporary directory, removed at exit
#   under_load CMD...     runs CMD while a busy loop runs on the shared cores;
#                         returns CMD's status, or 1 (saying so) if the busy
#                         loop did not last the whole run
#
# The busy loop is stopped by its own pid when CMD ends, and at exit if the
# script stops early (set -e, a signal).
dir=$(mktemp -d "${TMPDIR:-/tmp}/vtime.XXXXXX")
hog=
vtime_cleanup() {
    if [ -n "$hog" ]; then
        kill "$hog" 2>/dev/null || true
        wait "$hog" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap vtime_cleanup EXIT
trap 'exit 130' INT TERM

under_load() {
    sh -c 'while :; do :; done' &
    hog=$!
    load_status=0
    "$@" || load_status=$?
    # A hog that died early would leave part of the run unloaded: the
    # comparison would no longer show independence from the load.
    if ! kill -0 "$hog" 2>/dev/null; then
        echo "FAIL: the CPU hog ended before the run did" >&2
        [ "$load_status" -ne 0 ] || load_status=1
    fi
    kill "$hog" 2>/dev/null || true
    wait "$hog" 2>/dev/null || true
    hog=
    return "$load_status"
}
