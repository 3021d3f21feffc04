# dist_env_expect.sh - sourced by the tests that start dist_env.py on 2 ranks
# (dist_launch.sh through orrun, dist_torchrun.sh through torchrun):
#   dist_env_expect LAUNCH_EXIT_STATUS OUTPUT_FILE
# returns 0 when the output holds every line dist_env.py prints on success,
# else prints what was seen and returns 1.

# Counted as occurrences, not lines: the launcher forwards the two ranks'
# output through one stream, where one rank's line can land inside the other's.
count_in() { grep -o -- "$2" "$1" | wc -l; }

dist_env_expect() {
    _rc=$1 _out=$2
    _ok=$(count_in "$_out" 'rank [01]: env:// ok')
    _timed=$(count_in "$_out" 'rank 0: a missing peer fails the all_reduce')
    _gave_up=$(count_in "$_out" 'rank 0: wait(timeout=1 s) gives up before OCCL does')
    _done=$(count_in "$_out" 'rank [01]: done')
    if [ "$_rc" -ne 0 ] || [ "$_ok" -ne 2 ] || [ "$_timed" -ne 1 ] || [ "$_gave_up" -ne 1 ] ||
        [ "$_done" -ne 2 ]; then
        echo "dist_env.py: exit status $_rc; env:// ok on $_ok ranks, timeout seen $_timed," \
            "wait(timeout) gave up $_gave_up, done $_done"
        return 1
    fi
}
