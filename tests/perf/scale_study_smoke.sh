#!/bin/sh
# scale_study_smoke.sh - the scale study's command path
# (scripts/occl_sim_scale_study.sh and occl_sim_scale_report.py,
# docs/study.md#6-scale-study) on 64 and 128 devices, two sizes, the ring
# only up to 64: a CSV row per job, placement, size and algorithm with
# consistent figures (the best protocol's time, busbw from size and time),
# the ring left out above RING_MAX, the tables and the SVG written and
# parsing, finished runs kept on a rerun; a bad placement, a missing
# occl-sim and unusable raw files give a clear error and status.
# Run from the build directory ('make check').
srcdir=${srcdir:-.}
study=$srcdir/scripts/occl_sim_scale_study.sh
report=$srcdir/scripts/occl_sim_scale_report.py
tmp=$(mktemp -d "${TMPDIR:-/tmp}/scale_study_smoke.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$srcdir/tests/expect.sh"

if SIZES="1M 64M" RING_MAX=64 sh "$study" "$tmp/s" 64 128 >"$tmp/log" 2>&1; then
    ok
else
    fail "occl_sim_scale_study.sh on 64 and 128 devices"
    sed 's/^/  | /' "$tmp/log" >&2
fi
if python3 - "$tmp/s" <<'PY'; then ok; else fail "the study's outputs"; fi
import csv, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
rows = list(csv.DictReader(open(d + "/scale.csv")))
keys = {(r["devices"], r["placement"], r["size_bytes"], r["algorithm"]) for r in rows}
want = {(n, p, s, a) for n in ("64", "128") for p in ("packed", "spread")
        for s in ("1048576", "67108864") for a in ("ring", "tree", "hierarchical")
        if not (n == "128" and a == "ring")}
assert keys == want and len(rows) == len(want), sorted(keys ^ want)
for r in rows:
    n, size, t = int(r["devices"]), int(r["size_bytes"]), float(r["vtime_us"])
    assert int(r["nodes"]) == (n // 8 if r["placement"] == "packed" else n // 4), r
    protos = {p: float(r[c]) for p, c in (("LL", "ll_us"), ("LL128", "ll128_us"), ("Simple", "simple_us")) if r[c]}
    assert len(protos) == 3 and abs(min(protos.values()) - t) < 0.1 and abs(protos[r["protocol"]] - t) < 0.1, r
    busbw = size / (t * 1e-6) / 1e9 * 2 * (n - 1) / n
    assert abs(busbw - float(r["busbw_GBps"])) <= 0.01 + 1e-3 * busbw, r
    assert float(r["run_cpu_s"]) >= 0 and float(r["run_peak_MiB"]) > 0, r
md = open(d + "/scale.md").read()
for h in ("### 1 MiB", "### 64 MiB", "### host cost", "| 128 | - |"):
    assert h in md, h
svg = ET.parse(d + "/scale.svg").getroot()
assert len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 12
PY
# A rerun keeps the finished runs; another RING_MAX reruns the jobs it changes.
expect 0 "128-spread.txt: kept" -- env SIZES="1M 64M" RING_MAX=64 sh "$study" "$tmp/s" 64 128
expect 0 "^128 devices, packed, .*ring,tree,hierarchical" -- env SIZES="1M" RING_MAX=128 sh "$study" "$tmp/s" 128
# Bad input.
expect 2 "placement 'mixed' is not packed or spread" -- env PLACEMENTS=mixed sh "$study" "$tmp/b" 64
expect 2 "not found: run from the build directory" -- env SIM=/nonexistent/occl-sim sh "$study" "$tmp/b" 64
mkdir -p "$tmp/e/raw"
expect 1 "no complete runs in" -- python3 "$report" "$tmp/e"
head -n 5 "$tmp/s/raw/64-packed.txt" >"$tmp/e/raw/64-packed.txt"
expect 1 "skipped: .*64-packed.txt: no plan lines or no TIME line" -- python3 "$report" "$tmp/e"
expect 1 "scale_report.py: .*No such file" -- python3 "$report" "$tmp/nowhere"
echo "scale_study_smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
