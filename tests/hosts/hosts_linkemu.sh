#!/bin/bash
# launch/orlinkemu between two test hosts (tests/hosts/or-hosts), measured
# with small UDP round trips from h1 to h2 (tests/hosts/rtt_probe):
#   - delay: 20 ms on h1's eth0 and 10 ms on h2's: no round trip shorter
#     than 30 ms, the median under 30 ms + 250 ms (a loaded machine only adds);
#   - jitter: 40 +- 20 ms on h1: none shorter than 20 ms, and one shorter
#     than 37 ms (below the delay itself: load cannot make that up);
#   - loss: 30% on h1: some datagrams unanswered, counted by --stats;
#   - rate: 1 MB/s on h1: a 60000-byte datagram takes at least 60 ms;
#   - --stop and SIGTERM remove the filter and the veth pair, and the round
#     trip is back under the delay; bad command lines and states are refused.
# docs/cluster.md#emulated-links. Needs root and namespaces: skipped (exit 77)
# without them, but under CI (CI=true) that is a failure.
set -u
srcdir=${srcdir:-.}
name="hosts linkemu"
id=e$$
. "$srcdir/tests/hosts/lib.sh"
hosts_require launch/orlinkemu tests/hosts/rtt_probe
hosts_up 2

emu=./launch/orlinkemu
on() { local h=$1; shift; $hosts --id "$id" exec "$h" "$@"; }
# Round trips h1 -> h2: COUNT [WAIT_MS [SIZE]]; the summary line into $out/rtt.
port=7000
rtt() {
    port=$((port + 1))
    on h2 ./tests/hosts/rtt_probe echo $port 60 &
    local echo_pid=$!
    sleep 0.2
    on h1 ./tests/hosts/rtt_probe ping 10.77.0.2 $port "$@" >"$out/rtt" 2>&1
    kill "$echo_pid" 2>/dev/null
    wait "$echo_pid" 2>/dev/null
    sed 's/^/  /' "$out/rtt"
}
figure() { # min | median | max | answered
    case $1 in
    answered) awk '{ for (i = 1; i < NF; i++) if ($(i + 1) == "answered,") print $i }' "$out/rtt" ;;
    *) awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$out/rtt" ;;
    esac
}
leftovers() { # HOST: its emulator's filter and veth pair, if any is left
    on "$1" sh -c 'tc filter show dev eth0 egress; ip -o link show | grep -o "orlk[0-9]*[io]" || true'
}
refused() { # label exit-status pattern command...
    local label=$1 want=$2 pattern=$3 rc
    shift 3
    "$@" >"$out/refused" 2>&1
    rc=$?
    if [ $rc -eq "$want" ] && grep -q -- "$pattern" "$out/refused"; then
        ok "$label: refused (exit $rc)"
    else
        bad "$label: exit $rc (expected $want), expected a message matching '$pattern': $(head -n 2 "$out/refused")"
    fi
}

# Bad command lines and states.
refused "--delay abc" 2 "--delay 'abc': expected a time" on h1 $emu --delay abc eth0
refused "--loss 101" 2 "--loss '101': expected a percentage" on h1 $emu --loss 101 eth0
refused "--rate 0" 2 "--rate '0': expected bytes per second" on h1 $emu --rate 0 eth0
refused "--limit 1k" 2 "--limit '1k': expected a size" on h1 $emu --limit 1k eth0
refused "an unknown option" 2 "unknown option '--color'" on h1 $emu --color eth0
refused "no interface given" 2 "which interface" on h1 $emu --delay 1ms
refused "an interface not there" 1 "no interface 'eth9' here" on h1 $emu --delay 1ms eth9
refused "--stop with none running" 1 "no emulator runs on eth0" on h1 $emu --stop eth0
refused "--stats with none running" 1 "no emulator runs on eth0" on h1 $emu --stats eth0

rtt 20
base=$(figure median)
[ -n "$base" ] && ok "unshaped: median round trip $base us" || bad "unshaped: no round trip measured"

# Delay: 20 ms out of h1, 10 ms out of h2.
if on h1 $emu --delay 20ms eth0 && on h2 $emu --delay 10ms eth0; then
    refused "a second emulator on eth0" 1 "already runs on eth0" on h1 $emu --delay 1ms eth0
    rtt 20
    min=$(figure min) med=$(figure median)
    if [ -n "$min" ] && [ "$min" -ge 30000 ] && [ "$med" -le 280000 ]; then
        ok "delay 20 ms + 10 ms: round trips min $min us, median $med us (configured 30000 us)"
    else
        bad "delay 20 ms + 10 ms: round trips min ${min:-?} us, median ${med:-?} us (configured 30000 us)"
    fi
    # SIGTERM ends h2's emulator as --stop does.
    pid=$(pgrep -f "^$emu --delay 10ms eth0" | while read -r p; do
        [ "$(readlink /proc/"$p"/ns/net)" = "$(readlink /proc/"$(holder h2)"/ns/net)" ] && echo "$p"; done)
    [ -n "$pid" ] && kill -TERM $pid
    for _ in $(seq 50); do [ -z "$(leftovers h2)" ] && break; sleep 0.1; done
    [ -n "$pid" ] && [ -z "$(leftovers h2)" ] && ok "SIGTERM to h2's emulator: its filter and veth pair removed" ||
        bad "SIGTERM to h2's emulator (pid ${pid:-not found}): left $(leftovers h2)"
    on h1 $emu --stop eth0 >"$out/stop" 2>&1
    if grep -q 'forwarded [1-9]' "$out/stop" && [ -z "$(leftovers h1)" ]; then
        ok "--stop: $(cut -c 1-160 "$out/stop")"
    else
        bad "--stop: $(cat "$out/stop"); left $(leftovers h1)"
    fi
else
    bad "cannot start orlinkemu on h1 and h2"
fi
rtt 10
med=$(figure median)
[ -n "$med" ] && [ "$med" -lt 20000 ] && ok "after --stop: median round trip $med us again" ||
    bad "after --stop: median round trip ${med:-?} us"

# Jitter: 40 +- 20 ms out of h1, frames free to overtake.
if on h1 $emu --delay 40ms --jitter 20ms --reorder eth0; then
    rtt 20
    min=$(figure min) max=$(figure max)
    if [ -n "$min" ] && [ "$min" -ge 20000 ] && [ "$min" -lt 37000 ]; then
        ok "jitter 40 +- 20 ms: round trips from $min us to $max us"
    else
        bad "jitter 40 +- 20 ms: round trips from ${min:-?} us to ${max:-?} us (expected the shortest in 20000..37000)"
    fi
    on h1 $emu --stop eth0 >/dev/null
else
    bad "cannot start orlinkemu with jitter"
fi

# Loss: 30% out of h1 (a short wait for the answers: lost is lost).
if on h1 $emu --loss 30 --seed 7 eth0; then
    rtt 30 300
    answered=$(figure answered)
    lost=$(on h1 $emu --stop eth0 | awk '{ for (i = 1; i < NF; i++) if ($i == "lost") print $(i + 1) }' | tr -d ,)
    if [ -n "$answered" ] && [ "$answered" -lt 29 ] && [ "${lost:-0}" -gt 0 ]; then
        ok "loss 30%: $answered of 29 round trips answered, $lost frames dropped"
    else
        bad "loss 30%: ${answered:-?} of 29 answered, ${lost:-?} frames dropped"
    fi
else
    bad "cannot start orlinkemu with loss"
fi

# Rate: 1 MB/s out of h1; a datagram of 60000 bytes leaves as 41 frames.
if on h1 $emu --rate 1M eth0; then
    rtt 5 2000 60000
    min=$(figure min)
    if [ -n "$min" ] && [ "$min" -ge 60000 ]; then
        ok "rate 1 MB/s: 60000-byte round trips of at least $min us (60000 us on the wire)"
    else
        bad "rate 1 MB/s: 60000-byte round trips of at least ${min:-?} us (expected 60000 us or more)"
    fi
    on h1 $emu --stop eth0 >/dev/null
else
    bad "cannot start orlinkemu with a rate"
fi
[ -z "$(leftovers h1)$(leftovers h2)" ] && ok "nothing of orlinkemu left on the hosts" ||
    bad "left on the hosts: $(leftovers h1) $(leftovers h2)"

echo "$name: $passed passed, $failed failed"
[ $failed -eq 0 ]
