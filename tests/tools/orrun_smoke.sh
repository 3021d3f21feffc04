#!/bin/sh
# orrun_smoke.sh - end-to-end checks of launch/orrun: the dry-run plan on a
# synthetic topology, what it passes to mpiexec (arguments and environment,
# through a stand-in mpiexec), real multi-rank runs, and the exit status of
# bad command lines and of a missing mpiexec.
#
# 'make check' runs it from the build directory. ORRUN names the program
# (default ./launch/orrun); the multi-rank programs are taken from the build
# directory (./tests/mpi/ring, ./tests/mpi/thread_level, ./examples/demo).
# The last line reads
#   orrun smoke: P passed, F failed
# and the exit status is 1 when F > 0.
set -e

ORRUN=${ORRUN:-./launch/orrun}

# The shared harness: run, expect, the predicates and the closing line.
smoke_name=orrun
. "$(dirname "$0")/smoke.sh"
smoke_require "$ORRUN" ORRUN
unset MPIR_CVAR_DEFAULT_THREAD_LEVEL ORRUN_MPIEXEC

# A stand-in mpiexec: records its arguments, one per line, and the
# environment it was given, and exits with $FAKE_STATUS.
fake=$tmp/fake-mpiexec
cat >"$fake" <<EOF
#!/bin/sh
printf '%s\n' "\$@" >"$tmp/args"
env >"$tmp/env"
exit \${FAKE_STATUS:-0}
EOF
chmod +x "$fake"

arg_list() { tr '\n' '|' <"$tmp/args"; }
env_has() { grep -qx -- "$1" "$tmp/env"; }
env_lacks() { ! grep -q -- "^$1=" "$tmp/env"; }

# --- the dry run ---------------------------------------------------------------

# 2 packages x 2 NUMA nodes x 2 cores, 4 ranks of 2 devices: one core each.
run env HWLOC_SYNTHETIC="pack:2 numa:2 core:2 pu:1" ORRUN_MPIEXEC="$fake" \
    "$ORRUN" -n 4 -d 2 --ranks-per-node 2 --dry-run -- ./tests/mpi/ring
expect "dry run exits 0" status_is 0
expect "dry run launches nothing" [ ! -e "$tmp/args" ]
expect "dry run: 4 ranks, 2 nodes, 8 devices" \
    has_all '^ranks: +4 on this host$' '^nodes: +2 virtual nodes of 2 ranks' \
    '^devices: +2 per rank \(-d 2\), 8 in total$'
# "rank device cpus numa" for every device line, under its rank header.
awk '/^rank [0-9]+ \(node [0-9]+\):$/ { r = $2; n = $4; sub(/\):/, "", n); print "rank", r, "node", n }
     /^  device / { d = $2; c = $6; sub(/,/, "", c); print r, d, c, $9 }' \
    "$tmp/out" >"$tmp/plan"
nodes=$(sed -n 's/^rank \([0-9]*\) node \([0-9]*\)$/\2/p' "$tmp/plan" | tr '\n' ' ')
expect "dry run: ranks 0-3 on nodes 0 0 1 1" [ "$nodes" = "0 0 1 1 " ]
expect "dry run: rank 0 devices on cpus 0 and 1, NUMA node 0" \
    grep -qx '0 0 0 0' "$tmp/plan"
expect "dry run: rank 0 device 1 on cpu 1" grep -qx '0 1 1 0' "$tmp/plan"
expect "dry run: rank 3 devices on cpus 6 and 7, NUMA node 3" \
    grep -qx '3 0 6 3' "$tmp/plan"
expect "dry run: rank 3 device 1 on cpu 7" grep -qx '3 1 7 3' "$tmp/plan"
own_cores() {
    [ "$(grep -c '^[0-9]' "$tmp/plan")" -eq 8 ] &&
        [ "$(grep '^[0-9]' "$tmp/plan" | cut -d' ' -f3 | sort -u | wc -l)" -eq 8 ]
}
expect "dry run: 8 devices, each on a core of its own" own_cores
expect "dry run: the environment it would set" \
    has_all '^  OPENREG_DEVICES=2$' '^  OPENREG_RANKS_PER_NODE=2$' \
    '^  MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE$'
expect "dry run: torch.distributed's variables" \
    has_all '^  MASTER_ADDR=127\.0\.0\.1$' '^  MASTER_PORT=a free port, chosen at launch$' \
    '^  WORLD_SIZE=4$' "^  RANK, LOCAL_RANK, LOCAL_WORLD_SIZE: each rank's own"
expect "dry run: the mpiexec command line starts each rank through orrun --exec-rank" \
    has "^  $fake -n 4 [^ ]*orrun --exec-rank -- \./tests/mpi/ring\$"

run env OPENREG_DEVICES=abc "$ORRUN" -n 2 --dry-run -- prog
expect "dry run with OPENREG_DEVICES=abc in the environment exits 1 naming it" \
    status_and 1 has_err "OPENREG_DEVICES='abc'"

# --- what reaches mpiexec --------------------------------------------------------

run env ORRUN_MPIEXEC="$fake" "$ORRUN" -n 3 -d 4 --ranks-per-node 3 --bind numa \
    --profile a100 -- prog 'a b' --dry-run -n 9
expect "launch exits with mpiexec's status (0)" status_is 0
# Line 3 is orrun's own path, which differs between build tree and install.
arg_list_but_self() { sed 3d "$tmp/args" | tr '\n' '|'; }
expect "mpiexec gets -n 3, orrun --exec-rank --, then the program and its arguments unchanged" \
    [ "$(arg_list_but_self)" = "-n|3|--exec-rank|--|prog|a b|--dry-run|-n|9|" ]
expect "each rank starts as orrun itself" grep -q 'orrun$' "$tmp/args"
torch_env() {
    env_has MASTER_ADDR=127.0.0.1 && grep -Eqx 'MASTER_PORT=[1-9][0-9]*' "$tmp/env" &&
        env_has WORLD_SIZE=3 && env_lacks RANK
}
expect "torch.distributed's env:// gets MASTER_ADDR, a MASTER_PORT and WORLD_SIZE" torch_env
options_set() {
    env_has OPENREG_DEVICES=4 && env_has OPENREG_RANKS_PER_NODE=3 &&
        env_has OPENREG_BIND=numa && env_has OPENREG_DEVICE_PROFILE=a100
}
expect "every option becomes its variable" options_set
expect "the thread level is raised for plain MPI_Init" \
    env_has MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE

run env ORRUN_MPIEXEC="$fake" "$ORRUN" -n 2 --time virtual --trace "$tmp/t r.json" -- prog
time_and_trace_set() {
    env_has OPENREG_TIME=virtual && env_has "OPENREG_TRACE=$tmp/t r.json"
}
expect "--time and --trace become OPENREG_TIME and OPENREG_TRACE" \
    status_and 0 time_and_trace_set

run env ORRUN_MPIEXEC="$fake" OPENREG_BIND=none OPENREG_DEVICES=3 \
    MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_MULTIPLE "$ORRUN" -n 2 --bind core -- prog
user_values_kept() {
    env_has OPENREG_BIND=core && env_has OPENREG_DEVICES=3 &&
        env_lacks OPENREG_RANKS_PER_NODE && env_lacks OPENREG_DEVICE_PROFILE
}
expect "an option overrides the environment, the others keep it" \
    status_and 0 user_values_kept

run env ORRUN_MPIEXEC="$fake" MASTER_ADDR=10.1.2.3 MASTER_PORT=4242 WORLD_SIZE=9 \
    "$ORRUN" -n 2 -- prog
master_kept() {
    env_has MASTER_ADDR=10.1.2.3 && env_has MASTER_PORT=4242 && env_has WORLD_SIZE=2
}
expect "MASTER_ADDR and MASTER_PORT already set are kept; WORLD_SIZE is -n's" \
    status_and 0 master_kept

# --exec-rank: what each rank runs; the rank's variables come from the launcher's.
show='echo "RANK=$RANK LOCAL_RANK=$LOCAL_RANK LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE"'
run env PMI_RANK=5 MPI_LOCALRANKID=1 MPI_LOCALNRANKS=4 "$ORRUN" --exec-rank -- sh -c "$show"
expect "--exec-rank sets RANK, LOCAL_RANK, LOCAL_WORLD_SIZE from PMI_RANK, MPI_LOCALRANKID, MPI_LOCALNRANKS" \
    status_and 0 has '^RANK=5 LOCAL_RANK=1 LOCAL_WORLD_SIZE=4$'
run env -u PMI_RANK OMPI_COMM_WORLD_RANK=2 WORLD_SIZE=3 "$ORRUN" --exec-rank -- sh -c "$show"
expect "--exec-rank under Open MPI's variables; LOCAL_RANK defaults to RANK" \
    status_and 0 has '^RANK=2 LOCAL_RANK=2 LOCAL_WORLD_SIZE=3$'
run env -u PMI_RANK "$ORRUN" --exec-rank -- sh -c "$show"
expect "--exec-rank without a launcher's rank exits 1 saying so" \
    status_and 1 has_err 'the launcher gave no rank'
run env PMI_RANK=x1 "$ORRUN" --exec-rank -- sh -c "$show"
expect "--exec-rank with PMI_RANK=x1 exits 1 naming it" status_and 1 has_err 'PMI_RANK=x1'
run env PMI_RANK=0 "$ORRUN" --exec-rank sh
expect "--exec-rank without '--' exits 2" status_and 2 has_err "orrun --exec-rank -- PROGRAM"
run env PMI_RANK=0 "$ORRUN" --exec-rank -- /nonexistent/prog
expect "--exec-rank of a missing program exits 127 naming it" \
    status_and 127 has_err 'rank 0 cannot run /nonexistent/prog'

run env ORRUN_MPIEXEC="$fake" MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_FUNNELED \
    "$ORRUN" -n 1 -- prog
level_kept() {
    env_has MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_FUNNELED &&
        has_err 'warning: MPIR_CVAR_DEFAULT_THREAD_LEVEL=MPI_THREAD_FUNNELED'
}
expect "a thread level already set is kept, with a warning" status_and 0 level_kept

run env ORRUN_MPIEXEC="$fake" FAKE_STATUS=3 "$ORRUN" -n 1 -- prog
expect "launch exits with mpiexec's status (3)" status_is 3

# Other hosts: --hosts, --hostfile and --launcher-exec reach mpiexec (Hydra's
# -hosts, -f, -launcher ssh -launcher-exec) before -n; rank 0's host is
# MASTER_ADDR.
launcher=$tmp/my-launcher
printf '#!/bin/sh\nexit 0\n' >"$launcher"
chmod +x "$launcher"
run env ORRUN_MPIEXEC="$fake" "$ORRUN" -n 4 --hosts h1:2,h2:2 --launcher-exec "$launcher" -- prog a
expect "--hosts and --launcher-exec pass to mpiexec as -launcher ssh -launcher-exec, -hosts" \
    status_and 0 [ "$(arg_list)" = "-launcher|ssh|-launcher-exec|$launcher|-hosts|h1:2,h2:2|-n|4|$(sed -n 9p "$tmp/args")|--exec-rank|--|prog|a|" ]
expect "--hosts: MASTER_ADDR is the first host" env_has MASTER_ADDR=h1
printf '# the hosts\n\n  node-a:2 # first\nnode-b ifhn=eth0\n' >"$tmp/hostfile"
run env ORRUN_MPIEXEC="$fake" ORRUN_LAUNCHER_EXEC="$launcher" "$ORRUN" -n 3 \
    --hostfile="$tmp/hostfile" -- prog
expect "--hostfile passes as -f FILE, ORRUN_LAUNCHER_EXEC as --launcher-exec" \
    status_and 0 [ "$(arg_list | cut -d'|' -f1-8)" = "-launcher|ssh|-launcher-exec|$launcher|-f|$tmp/hostfile|-n|3" ]
expect "--hostfile: MASTER_ADDR is the file's first host" env_has MASTER_ADDR=node-a
run env ORRUN_MPIEXEC="$fake" "$ORRUN" -n 4 --hosts h1:2,h2:2 --dry-run -- prog
expect "dry run on hosts: the hosts, a node per host, no plan of other hosts' cores" \
    status_and 0 has_all '^ranks: +4 on hosts h1:2,h2:2 \(--hosts\)$' \
    '^nodes: +one per host' '^placement: each host places' ' -hosts h1:2,h2:2 -n 4 '

# --emulate-links: the plan shapes each host from its topology node's NICs
# (50 MB/s = 400 Mbit/s, 2 ms NIC to NIC); a host the launcher cannot shape
# stops orrun before mpiexec, after undoing the hosts already shaped.
links_topo="nodes:2 devices:1 inter:50MB/s,2ms"
run env ORRUN_MPIEXEC="$fake" "$ORRUN" -n 2 -d 1 --hosts h1,h2 --topo "$links_topo" \
    --launcher-exec "$launcher" --emulate-links --dry-run -- prog
expect "--emulate-links dry run: each host's tc command from the topology" \
    status_and 0 has_all '^links: +--emulate-links: eth0 on each host, through ' \
    '^  h1 \(node 0\): 50 MB/s, 2000 us: if tc qdisc replace dev eth0 root netem delay 2000us rate 50000000bps' \
    '^  h2 \(node 1\): 50 MB/s, 2000 us: .* tbf rate 50000000bps burst 500000 latency 200ms' \
    '^  h1 .*; elif /[^ ]*/orlinkemu --delay 2000us --rate 50000000 eth0; then echo orlinkemu; else tc '
# A launcher that records what each host was asked; REFUSE=h2: h2 refuses tc.
shaper=$tmp/shaper
{
    echo '#!/bin/sh'
    echo "echo \"\$2: \$3\" >>'$tmp/shaped'"
    echo 'case ${REFUSE:-}:$2:$3 in h2:h2:*replace*) echo "RTNETLINK answers: Operation not permitted"; exit 2 ;; *replace*) echo "${HOW:-tbf}" ;; esac'
} >"$shaper"
chmod +x "$shaper"
rm -f "$tmp/args" "$tmp/shaped"
run env ORRUN_MPIEXEC="$fake" REFUSE=h2 UCX_NET_DEVICES=veth7:1 "$ORRUN" -n 2 -d 1 --hosts h1,h2 \
    --topo "$links_topo" --launcher-exec "$shaper" --emulate-links -- prog
expect "--emulate-links: a host that cannot be shaped exits 1 naming it" \
    status_and 1 has_err 'cannot shape veth7 on h2 with tc .*: Operation not permitted'
expect "--emulate-links: the interface of UCX_NET_DEVICES; h1 shaped, then unshaped" \
    [ "$(cut -c 1-40 "$tmp/shaped" | tr '\n' '|')" = "h1: if tc qdisc replace dev veth7 root n|h2: if tc qdisc replace dev veth7 root n|h1: tc qdisc del dev veth7 root|" ]
expect "--emulate-links: a host not shaped launches nothing" [ ! -e "$tmp/args" ]
rm -f "$tmp/shaped"
run env ORRUN_MPIEXEC="$fake" FAKE_STATUS=5 "$ORRUN" -n 2 -d 1 --hosts h1,h2 \
    --topo "$links_topo" --launcher-exec "$shaper" --emulate-links -- prog
expect "--emulate-links: orrun waits for mpiexec, unshapes and exits with mpiexec's status" \
    status_and 5 [ "$(grep -c 'tc qdisc del dev eth0 root' "$tmp/shaped")" -eq 2 ]
# Where a host had no netem, orlinkemu delayed its frames: --stop ends it.
rm -f "$tmp/shaped"
run env ORRUN_MPIEXEC="$fake" HOW=orlinkemu "$ORRUN" -n 2 -d 1 --hosts h1,h2 \
    --topo "$links_topo" --launcher-exec "$shaper" --emulate-links -- prog
expect "--emulate-links: hosts shaped by orlinkemu are unshaped with orlinkemu --stop" \
    status_and 0 [ "$(grep -c '^h[12]: /[^ ]*/orlinkemu --stop eth0' "$tmp/shaped")" -eq 2 ]

# --- real runs -----------------------------------------------------------------------

if command -v mpiexec >/dev/null 2>&1; then
    if [ -x ./tests/mpi/ring ]; then
        # 2 ranks as 2 virtual nodes: the ring crosses nodes through MPI.
        run "$ORRUN" -n 2 -d 2 --ranks-per-node 1 -- ./tests/mpi/ring
        expect "orrun -n 2 -d 2 --ranks-per-node 1 -- ring passes" \
            status_and 0 has '^ring of 4 devices on 2 ranks, 2 nodes: ok$'
    else
        skip "ring run (no ./tests/mpi/ring: 'make check' builds it)"
    fi
    # Every rank gets its own RANK and the same MASTER_ADDR, MASTER_PORT, WORLD_SIZE.
    run "$ORRUN" -n 3 -- sh -c \
        'echo "rank $RANK local $LOCAL_RANK of $LOCAL_WORLD_SIZE world $WORLD_SIZE at $MASTER_ADDR:$MASTER_PORT"'
    ranks_env() {
        [ "$(sed 's/ at .*//' "$tmp/out" | sort | tr '\n' '|')" = \
            "rank 0 local 0 of 3 world 3|rank 1 local 1 of 3 world 3|rank 2 local 2 of 3 world 3|" ] &&
            [ "$(sed -n 's/.* at //p' "$tmp/out" | sort -u | grep -Ec '^127\.0\.0\.1:[1-9][0-9]*$')" -eq 1 ]
    }
    expect "orrun -n 3: ranks 0, 1, 2, one MASTER_ADDR:MASTER_PORT" status_and 0 ranks_env
    if [ -x ./tests/mpi/thread_level ]; then
        run "$ORRUN" -n 2 -- ./tests/mpi/thread_level --expect-success
        expect "plain MPI_Init under orrun gets MPI_THREAD_MULTIPLE" status_is 0
    else
        skip "thread level run (no ./tests/mpi/thread_level: 'make check' builds it)"
    fi
    if [ -x ./examples/demo ]; then
        run "$ORRUN" -n 2 -d 2 --ranks-per-node 1 -- ./examples/demo
        expect "the quick start's demo run passes" \
            status_and 0 has_all '^result: OK$' '2 ranks, 2 nodes, 4 devices' \
            'other node'
    else
        skip "demo run (no ./examples/demo)"
    fi
else
    skip "real runs (no mpiexec)"
fi

# --- bad command lines ------------------------------------------------------------------

# bad NAME PATTERN ARGS...: exit 2, nothing on stdout, a usage on stderr whose
# first line matches PATTERN.
usage_error() {
    pattern=$1
    [ "$rc" -eq 2 ] && [ ! -s "$tmp/out" ] && grep -q '^usage: orrun' "$tmp/err" &&
        head -n 1 "$tmp/err" | grep -Eq -- "$pattern"
}
bad_args() {
    name=$1
    pattern=$2
    shift 2
    run env ORRUN_MPIEXEC="$fake" "$ORRUN" "$@"
    expect "$name exits 2 with usage naming the problem" usage_error "$pattern"
}
rm -f "$tmp/args"
bad_args "no --" "no '--' before 'prog'" -n 2 prog
bad_args "no program" "no program after '--'" -n 2 --
bad_args "no -n" "-n RANKS is required" -- prog
bad_args "-n 0" "-n '0' is not valid: expected an integer from 1 to 4096" -n 0 -- prog
bad_args "-n abc" "-n 'abc' is not valid: expected an integer from 1 to 4096" -n abc -- prog
bad_args "-n 4097" "-n '4097' is not valid" -n 4097 -- prog
bad_args "--hosts ''" "--hosts needs a host list" -n 2 --hosts= -- prog
bad_args "--hosts h1,,h2" "--hosts 'h1,,h2' is not valid: '' is not host\[:n\]" -n 2 --hosts h1,,h2 -- prog
bad_args "--hosts h1:0" "--hosts 'h1:0' is not valid: 'h1:0' is not host\[:n\]" -n 2 --hosts h1:0 -- prog
bad_args "--hosts 'a b'" "'a b' is not host\[:n\]" -n 2 --hosts 'a b' -- prog
bad_args "--hosts with --hostfile" "--hosts and --hostfile: give one" -n 2 --hosts h1 --hostfile "$tmp/hostfile" -- prog
bad_args "--hostfile missing" "--hostfile '/nonexistent/hosts': No such file" -n 2 --hostfile /nonexistent/hosts -- prog
printf '# nothing\n\n' >"$tmp/nohosts"
bad_args "--hostfile of no host" "--hostfile .*/nohosts names no host" -n 2 --hostfile "$tmp/nohosts" -- prog
printf 'h1:2\nh2 slots\n' >"$tmp/badhosts"
bad_args "--hostfile bad word" "--hostfile .*/badhosts:2: 'slots' after the host is not key=value" -n 2 --hostfile "$tmp/badhosts" -- prog
printf 'h1:x\n' >"$tmp/badcount"
bad_args "--hostfile bad count" "--hostfile .*/badcount:1: 'h1:x' is not host\[:n\]" -n 2 --hostfile "$tmp/badcount" -- prog
bad_args "--emulate-links without hosts" "--emulate-links shapes the network between hosts: give --hosts or --hostfile" \
    -n 2 --topo dgx-a100x2 --emulate-links -- prog
bad_args "--emulate-links without a topology" "--emulate-links takes the network from the topology: give --topo" \
    -n 2 --hosts h1,h2 --emulate-links -- prog
bad_args "--emulate-links with --time virtual" "--emulate-links is for wall-clock runs" \
    -n 2 --hosts h1,h2 --topo dgx-a100x2 --time virtual --emulate-links -- prog
run env ORRUN_MPIEXEC="$fake" UCX_NET_DEVICES='a;b' "$ORRUN" -n 2 --hosts h1,h2 --topo dgx-a100x2 --emulate-links -- prog
expect "--emulate-links with UCX_NET_DEVICES='a;b' exits 2 naming it" usage_error "UCX_NET_DEVICES='a;b' does not start with an interface name"
run env ORRUN_MPIEXEC="$fake" "$ORRUN" -n 1 -d 1 --hosts h1 --topo "nodes:1 devices:1" --launcher-exec "$launcher" --emulate-links -- prog
expect "--emulate-links on a topology without a network exits 1 naming the node" \
    status_and 1 has_err "has no network link \(a NIC to a switch\): nothing to give host h1"
bad_args "--launcher-exec missing" "--launcher-exec '/nonexistent/launch': no such executable" -n 2 --launcher-exec /nonexistent/launch -- prog
run env ORRUN_MPIEXEC="$fake" ORRUN_LAUNCHER_EXEC=/nonexistent/launch "$ORRUN" -n 2 -- prog
expect "ORRUN_LAUNCHER_EXEC missing exits 2 naming it" usage_error "ORRUN_LAUNCHER_EXEC '/nonexistent/launch': no such executable"
bad_args "-d 300" "-d '300' is not valid: expected an integer from 1 to 256" \
    -n 2 -d 300 -- prog
bad_args "--bind socket" "--bind 'socket' is not valid: expected core, numa or none" \
    -n 2 --bind socket -- prog
bad_args "--profile tpu" "--profile 'tpu' is not valid: expected cpu, v100, a100 or h100" \
    -n 2 --profile tpu -- prog
bad_args "--ranks-per-node 0" \
    "--ranks-per-node '0' is not valid: expected an integer from 1 to RANKS \(2\)" \
    -n 2 --ranks-per-node 0 -- prog
bad_args "--ranks-per-node 3 of 2 ranks" "--ranks-per-node '3' is not valid" \
    -n 2 --ranks-per-node 3 -- prog
bad_args "unknown option" "unknown option '--frobnicate'" -n 2 --frobnicate -- prog
bad_args "--time fast" "--time 'fast' is not valid: expected wall or virtual" \
    -n 2 --time fast -- prog
bad_args "--trace ''" "--trace needs a file name" -n 2 --trace '' -- prog
bad_args "-d without a value" "-d needs a value" -n 2 -d -- prog
expect "no bad command line reached mpiexec" [ ! -e "$tmp/args" ]

run env ORRUN_MPIEXEC=/nonexistent "$ORRUN" -n 2 -- prog
expect "ORRUN_MPIEXEC=/nonexistent exits 127 naming it" \
    status_and 127 has_err '/nonexistent'

run "$ORRUN" --help
expect "--help exits 0 with usage on stdout" status_and 0 has '^usage: orrun'

smoke_finish
