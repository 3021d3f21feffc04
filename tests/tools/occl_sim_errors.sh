#!/bin/sh
# occl-sim's refusals (docs/occl-sim.md#errors): every bad input - an
# unknown collective, a job or placement the topology cannot hold, sizes
# that do not fit, bad lines of a call file, bad settings - stops it with
# its exit status and a message naming the problem, before any row. Also a
# good run: its trace is JSON with one slice per rank and call. Run from
# the build directory.
set -u
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sim=./launch/occl-sim
topo="nodes:2 devices:4"
passed=0
failed=0
# expect STATUS MESSAGE ARGS...: the exit status, a piece of stderr, no row.
expect() {
    want=$1 msg=$2
    shift 2
    "$sim" "$@" > "$dir/out" 2> "$dir/err"
    got=$?
    if [ "$got" -eq "$want" ] && grep -qF -- "$msg" "$dir/err" && ! grep -q '^ *[0-9]' "$dir/out"; then
        echo "ok   $*: $(head -1 "$dir/err")"
        passed=$((passed + 1))
    else
        echo "FAIL $*: status $got (want $want), stderr:"
        cat "$dir/err"
        failed=$((failed + 1))
    fi
}
line() { printf '%s\n' "$@" > "$dir/calls"; }

expect 2 "no TOPOLOGY"
expect 2 "-c 'allreduz': unknown collective" -c allreduz "$topo"
expect 1 "9 processes x 1 devices need 9 devices; topology 'nodes:2 devices:4' has 8" -n 9 "$topo"
expect 1 "the job does not fit" -n 2 -d 3 "nodes:4 devices:2"
printf '0: 0 1\n1: 2\n' > "$dir/short.txt"
expect 1 "rank 1 has 1 device" -n 2 -d 2 --placement "$dir/short.txt" "$topo"
expect 1 "cannot open the placement file" --placement "$dir/none.txt" "$topo"
printf '0: 0\n1: 0\n' > "$dir/twice.txt"
expect 1 "is used twice" -n 2 --placement "$dir/twice.txt" "$topo"
expect 1 "is not a whole number" "nodes:x"
# The topology's limits: 16384 devices in all, 1024 in a node.
expect 1 "17 nodes x 1024 devices is more than 16384 devices" "nodes:17 devices:1024"
expect 1 "nodes:16385 is not a whole number from 1 to 16384" "nodes:16385 devices:1"
expect 1 "devices:1025 is not a whole number from 1 to 1024" "nodes:2 devices:1025"
expect 1 "16385 processes x 1 devices need 16385 devices; topology 'nodes:2048 devices:8' has 16384" -n 16385 "nodes:2048 devices:8"
expect 1 "cannot open" "$dir/missing.xml"
expect 2 "-b '99999999999999999999' is not a size" -b 99999999999999999999 "$topo"
expect 2 "-e '32T7' is not a size" -e 32T7 "$topo"
expect 2 "sizes beyond 4 EiB" -b 8 -e 4194305T "$topo"
expect 2 "-b 64 is above -e 8" -b 64 -e 8 "$topo"
expect 2 "the sizes would never grow" -b 8 -e 64 -f 1 "$topo"
expect 2 "-r 8: the job has 8 ranks" -c reduce -r 8 "$topo"
expect 2 "-o: allgather takes no op" -c allgather -o max "$topo"
expect 2 "--profile 'b200': unknown profile" --profile b200 "$topo"
expect 2 "OCCL_ALGO: unknown algorithm 'rung'" --algo rung "$topo"
expect 2 "OCCL_PROTO='fast' is not valid" --proto fast "$topo"
line "allreduce 1M" "bogus 4K"
expect 1 "calls:2: unknown collective 'bogus'" --file "$dir/calls" "$topo"
line "allreduce"
expect 1 "calls:1: expected 'COLL SIZE" --file "$dir/calls" "$topo"
line "allreduce 1M colour=red"
expect 1 "calls:1: unknown key 'colour'" --file "$dir/calls" "$topo"
line "allreduce 1M type"
expect 1 "calls:1: expected KEY=VALUE" --file "$dir/calls" "$topo"
line "reduce 1M root=8"
expect 1 "calls:1: root '8' is not a rank of the job (0 to 7)" --file "$dir/calls" "$topo"
line "allreduce 99999999999999999999"
expect 1 "calls:1: '99999999999999999999' is not a size" --file "$dir/calls" "$topo"
line "allreduce 8388608T"
expect 1 "calls:1: '8388608T' is not a size" --file "$dir/calls" "$topo"
line "allreduce 1M repeat=0"
expect 1 "calls:1: repeat '0' is not a count" --file "$dir/calls" "$topo"
line "allgather 1M op=sum"
expect 1 "calls:1: allgather takes no op" --file "$dir/calls" "$topo"
line "# only a comment" ""
expect 1 "no calls" --file "$dir/calls" "$topo"
expect 1 "cannot open the call file" --file "$dir/none" "$topo"

# A good run: rows, and a trace of one slice per rank and call.
line "allreduce 1M" "broadcast 64K root=3 repeat=2"
if "$sim" --file "$dir/calls" --trace "$dir/t.json" "$topo" > "$dir/out" &&
    [ "$(grep -c '^ *[0-9]' "$dir/out")" -eq 3 ] &&
    { ! command -v python3 > /dev/null ||
        python3 -c "import json,sys; e=[x for x in json.load(open(sys.argv[1]))['traceEvents'] if x['ph']=='X']; sys.exit(len(e)!=24 or e[0]['name']!='occl AllReduce')" "$dir/t.json"; }; then
    echo "ok   a good run: 3 rows, 24 slices"
    passed=$((passed + 1))
else
    echo "FAIL a good run"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
