#!/bin/sh
# study_smoke.sh - the study's command path (scripts/study.sh, as 'make study'
# runs it) on small sizes: every placement x algorithm run writes a row per
# size to study.csv with consistent figures, the forced algorithms are the
# ones used, the runs are in place only, study.md and study.svg are written
# and parse; bad arguments, a failing run and unusable logs give a clear
# error and status.
# Run from the build directory ('make check').
srcdir=${srcdir:-.}
study=$srcdir/scripts/study.sh
report=$srcdir/scripts/study_report.py
unset OPENREG_TOPO OPENREG_PLACEMENT OPENREG_RANKS_PER_NODE OPENREG_DEVICES OCCL_ALGO
tmp=$(mktemp -d "${TMPDIR:-/tmp}/study_smoke.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$srcdir/tests/expect.sh"

# The study itself, 1 KiB to 16 KiB: 2 placements x 4 algorithms x 3 sizes.
if sh "$study" --build . --out "$tmp/st" --min 1K --max 16K >"$tmp/log" 2>&1; then
    ok
else
    fail "study.sh on small sizes"
    sed 's/^/  | /' "$tmp/log" >&2
fi
if python3 - "$tmp/st" <<'PY'; then ok; else fail "study outputs"; fi
import csv, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/study.csv")))
runs = {(r["placement"], r["algorithm"]) for r in rows}
want = {(p, a) for p in ("packed", "spread") for a in ("ring", "tree", "hierarchical", "auto")}
assert runs == want, runs
assert len(rows) == 24, len(rows)
for r in rows:
    size, t, alg, bus = int(r["size_bytes"]), float(r["vtime_us"]), float(r["algbw_GBps"]), float(r["busbw_GBps"])
    assert size in (1024, 4096, 16384), r
    assert t > 0, r
    # algbw = size / time, busbw = 2(n-1)/n algbw for 8 ranks (2-digit rounding)
    assert abs(alg - size / (t * 1e3)) <= 0.006, r
    assert abs(bus - alg * 14 / 8) <= 0.02, r
    if r["algorithm"] != "auto":
        assert r["algorithm_used"] == r["algorithm"], r
    else:
        assert r["algorithm_used"] in ("ring", "tree", "hierarchical", "direct", "nvls"), r
# virtual time: larger messages never take less time on the same run
for k in want:
    ts = [float(r["vtime_us"]) for r in sorted(rows, key=lambda r: int(r["size_bytes"]))
          if (r["placement"], r["algorithm"]) == k]
    assert ts == sorted(ts), (k, ts)
md = open(d + "/study.md").read()
assert "| 16 KiB |" in md and "packed ring" in md and "network crossings" in md, md
# in place only: one buffer per rank, and the report says whose figures
for k in want:
    log = open("%s/raw/%s-%s.txt" % (d, k[0], k[1])).read()
    assert "# in place only: 1 device buffer" in log and "out-of-place" not in log, k
assert "Figures of occl_perf's in-place columns" in md, md
svg = ET.parse(d + "/study.svg").getroot()
lines = svg.findall("{http://www.w3.org/2000/svg}polyline")
assert len(lines) == 8, len(lines)
assert all(len(l.get("points").split()) == 3 for l in lines)
PY

# Bad input.
expect 2 "unknown argument '--bogus'" -- sh "$study" --bogus
expect 2 "--max needs a value" -- sh "$study" --max
expect 2 "unknown algorithm 'rings'" -- sh "$study" --algos rings
expect 2 "unknown placement 'scattered'" -- sh "$study" --placements scattered
expect 2 "not found: run from the build directory" -- sh "$study" --build "$tmp/nowhere"
expect 0 "usage: study.sh" -- sh "$study" --help
expect 1 "the packed ring run failed" -- \
    sh "$study" --out "$tmp/bad" --algos ring --placements packed --topo "nodes:0 devices:4"
expect 1 "no raw/ directory" -- python3 "$report" "$tmp/empty"
mkdir -p "$tmp/wall/raw"
printf '# occl-perf allreduce\n        1024  256 float sum -1 5.0 0.20 0.35 0 5.0 0.20 0.35 0\n' \
    >"$tmp/wall/raw/packed-ring.txt"
expect 1 "not a virtual-time occl_perf log" -- python3 "$report" "$tmp/wall"
mkdir -p "$tmp/norows/raw"
printf '# virtual time (OPENREG_TIME=virtual)\n' >"$tmp/norows/raw/packed-ring.txt"
expect 1 "no result rows" -- python3 "$report" "$tmp/norows"

echo "study_smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
