#!/bin/sh
# occl-sim's planner leaves out a candidate whose floor is above the best
# replay (docs/occl-sim.md#cost): on 128 devices a 1 MiB all-reduce does
# not replay the ring (its 254 steps' latencies alone exceed the tree's
# time), -v shows the ring's floors as "ring/P > T ns", and --replay-all
# replays every candidate, each ring time at least its floor, with the same
# pick and the same row. Run from the build directory.
set -u
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
# same LABEL WANT GOT
same() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: '$3', want '$2'"; fi; }
sim=./launch/occl-sim
topo="box:dgx-h100 nodes:16 fabric:rails"
"$sim" --profile h100 -v -b 1M "$topo" > "$dir/floors" 2>&1 || fail "occl-sim -v: status $?"
"$sim" --profile h100 -v --replay-all -b 1M "$topo" > "$dir/all" 2>&1 || fail "occl-sim -v --replay-all: status $?"
plan_f=$(grep '^# plan allreduce' "$dir/floors")
plan_a=$(grep '^# plan allreduce' "$dir/all")
n_floor=$(printf '%s\n' "$plan_f" | grep -o 'ring/[A-Za-z0-9]* > [0-9]* ns' | wc -l)
same "the ring's three protocols left out with their floors" 3 "$n_floor"
n_ring=$(printf '%s\n' "$plan_a" | grep -o 'ring/[A-Za-z0-9]* [0-9]* ns' | wc -l)
same "--replay-all: the ring's three protocols replayed" 3 "$n_ring"
same "--replay-all: no floor shown" 0 "$(printf '%s\n' "$plan_a" | grep -c ' > ')"
same "the same pick" "${plan_a##*-> }" "${plan_f##*-> }"
same "the same row" "$(grep '^ *[0-9]' "$dir/all")" "$(grep '^ *[0-9]' "$dir/floors")"
for p in LL LL128 Simple; do
    f=$(printf '%s\n' "$plan_f" | sed -n "s|.*ring/$p > \([0-9]*\) ns.*|\1|p")
    t=$(printf '%s\n' "$plan_a" | sed -n "s|.*ring/$p \([0-9]*\) ns.*|\1|p")
    if [ -n "$f" ] && [ -n "$t" ] && [ "$f" -le "$t" ]; then
        ok "ring/$p: floor $f ns <= replay $t ns"
    else
        fail "ring/$p: floor '$f' ns against replay '$t' ns"
    fi
done
echo "occl_sim_floors: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
