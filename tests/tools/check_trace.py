#!/usr/bin/env python3
"""check_trace.py - validate an OpenReg trace file and check what it holds.

usage: check_trace.py FILE [options]
  --time MODE            the file's clock must be MODE (wall or virtual)
  --ranks R1,R2          the file holds these ranks (merged files)
  --pids P1,P2           every one of these devices has a named track
  --count NAME=N         exactly N slices or instants named NAME
  --arg NAME:KEY=VALUE   every event named NAME has args KEY == VALUE
  --min-dur NAME=NS      the shortest slice named NAME lasts exactly NS ns
  --dur NAME=NS          every slice named NAME lasts exactly NS ns

Always checked: the file is JSON in Chrome's trace-event format, with
OpenReg's metadata; every event has a name, a phase, integer pid and tid and
a time; every track with events is named; on each stream's track, slices are
in time order and do not overlap (a stream runs one op at a time).
Exit status 0 if every check passes, 1 otherwise (each failure printed).
"""
import argparse
import json
import sys
from collections import defaultdict


def ns(us):
    """Microseconds with nanosecond decimals, as written, to integer ns."""
    return int(round(float(us) * 1000))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--time")
    ap.add_argument("--ranks")
    ap.add_argument("--pids")
    ap.add_argument("--count", action="append", default=[])
    ap.add_argument("--arg", action="append", default=[])
    ap.add_argument("--min-dur", action="append", default=[])
    ap.add_argument("--dur", action="append", default=[])
    a = ap.parse_args()
    errors = []

    try:
        with open(a.file) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"FAIL: {a.file}: not a JSON file: {e}")
        return 1
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    meta = doc.get("otherData", {}).get("openreg") if isinstance(doc, dict) else None
    if not isinstance(events, list) or not isinstance(meta, dict):
        print(f"FAIL: {a.file}: no traceEvents list or otherData.openreg")
        return 1

    proc_named, thread_named = set(), set()
    by_name = defaultdict(list)
    tracks = defaultdict(list)
    for i, e in enumerate(events):
        where = f"event {i} ({e.get('name')})"
        if not isinstance(e.get("name"), str) or e.get("ph") not in ("X", "i", "M"):
            errors.append(f"{where}: no name or an unknown phase {e.get('ph')!r}")
            continue
        if not isinstance(e.get("pid"), int):
            errors.append(f"{where}: pid is not an integer")
            continue
        if e["ph"] == "M":
            if e["name"] == "process_name":
                proc_named.add(e["pid"])
            elif e["name"] == "thread_name":
                thread_named.add((e["pid"], e.get("tid")))
            continue
        if not isinstance(e.get("tid"), int) or not isinstance(e.get("ts"), (int, float)):
            errors.append(f"{where}: tid or ts missing")
            continue
        if e["ts"] < 0 or (e["ph"] == "X" and not (isinstance(e.get("dur"), (int, float))
                                                  and e["dur"] >= 0)):
            errors.append(f"{where}: negative time or no duration")
            continue
        by_name[e["name"]].append(e)
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append(e)
        if e["pid"] not in proc_named:
            errors.append(f"{where}: device {e['pid']} has no process_name")
        if (e["pid"], e["tid"]) not in thread_named:
            errors.append(f"{where}: track {e['pid']}/{e['tid']} has no thread_name")

    for (pid, tid), slices in tracks.items():
        for prev, cur in zip(slices, slices[1:]):
            if ns(cur["ts"]) < ns(prev["ts"]):
                errors.append(f"track {pid}/{tid}: {cur['name']} at {cur['ts']} listed after "
                              f"{prev['name']} at {prev['ts']}")
            elif ns(cur["ts"]) < ns(prev["ts"]) + ns(prev["dur"]):
                errors.append(f"track {pid}/{tid}: {cur['name']} at {cur['ts']} starts before "
                              f"{prev['name']} (at {prev['ts']}, {prev['dur']} us) ends")

    if a.time and meta.get("time") != a.time:
        errors.append(f"clock is {meta.get('time')!r}, expected {a.time!r}")
    if a.ranks:
        want = sorted(int(r) for r in a.ranks.split(","))
        got = sorted(meta.get("ranks", [meta.get("rank")]))
        if got != want:
            errors.append(f"ranks {got}, expected {want}")
    if a.pids:
        for p in (int(x) for x in a.pids.split(",")):
            if p not in proc_named:
                errors.append(f"device {p} has no track")
    for spec in a.count:
        name, n = spec.rsplit("=", 1)
        if len(by_name[name]) != int(n):
            errors.append(f"{len(by_name[name])} events named {name!r}, expected {n}")
    for spec in a.arg:
        name, kv = spec.split(":", 1)
        key, value = kv.split("=", 1)
        if not by_name[name]:
            errors.append(f"no event named {name!r} to check {key}")
        for e in by_name[name]:
            got = e.get("args", {}).get(key)
            if str(got) != value:
                errors.append(f"{name} at {e['ts']}: {key} = {got!r}, expected {value}")
                break
    for spec, every in [(s, False) for s in a.min_dur] + [(s, True) for s in a.dur]:
        name, want = spec.rsplit("=", 1)
        durs = [ns(e["dur"]) for e in by_name[name] if e["ph"] == "X"]
        if not durs:
            errors.append(f"no slice named {name!r}")
        elif every and any(d != int(want) for d in durs):
            errors.append(f"{name}: durations {sorted(set(durs))} ns, expected all {want}")
        elif not every and min(durs) != int(want):
            errors.append(f"{name}: shortest lasts {min(durs)} ns, expected {want}")

    for e in errors[:40]:
        print(f"FAIL: {a.file}: {e}")
    if not errors:
        print(f"{a.file}: {len(events)} events, {len(tracks)} tracks with slices: ok")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
