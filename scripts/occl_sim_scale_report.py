#!/usr/bin/env python3
"""occl_sim_scale_report.py - the scale study's CSV, tables and plot.

Reads DIR/raw/N-PLACEMENT.txt (occl-sim -v --stats output of
scripts/occl_sim_scale_study.sh: one "# plan allreduce COUNT x float: ..."
line per size with every algorithm and protocol the planner replayed, every
rank entering at 0, and /usr/bin/time's "TIME user sys wall maxrss_KiB"
line) and writes DIR/scale.csv (one row per job, placement, size and
algorithm: its best protocol, virtual time, busbw, each protocol's time and
the run's host cost), DIR/scale.md (the tables) and DIR/scale.svg (busbw
against devices, one panel per size). Standard library only; the SVG is
drawn as scripts/study_report.py draws its plot.
"""
import argparse
import csv
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from study_report import COLOURS, DASHES, human  # noqa: E402

PLAN = re.compile(r"^# plan allreduce (\d+) x float: (.*) -> (\S+)\s*$")
CAND = re.compile(r"(\w+)/(\w+) (\d+) ns")
TIME = re.compile(r"^TIME (\S+) (\S+) (\S+) (\d+) nodes=(\d+) algos=(\S+)\s*$")
RAW = re.compile(r"^(\d+)-(packed|spread)\.txt$")
ALGOS = ["ring", "tree", "hierarchical"]
PLACEMENTS = ["packed", "spread"]
PROTOS = ["LL", "LL128", "Simple"]


class ReportError(Exception):
    pass


def parse(path, n):
    """{size: {algo: {proto: ns}}} and the run's (cpu_s, wall_s, peak_MiB, nodes)."""
    plans, cost = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = PLAN.match(line)
            if m:
                size = int(m.group(1)) * 4
                for algo, proto, t in CAND.findall(m.group(2)):
                    plans.setdefault(size, {}).setdefault(algo, {})[proto] = int(t)
                continue
            m = TIME.match(line)
            if m:
                cost = (float(m.group(1)) + float(m.group(2)), float(m.group(3)),
                        int(m.group(4)) / 1024.0, int(m.group(5)))
    if not plans or cost is None:
        raise ReportError("%s: no plan lines or no TIME line (the run failed?)" % path)
    return plans, cost


def load(directory):
    runs = {}
    raw = os.path.join(directory, "raw")
    for name in sorted(os.listdir(raw)):
        m = RAW.match(name)
        if not m:
            continue
        n, place = int(m.group(1)), m.group(2)
        try:
            runs[(n, place)] = parse(os.path.join(raw, name), n)
        except ReportError as e:
            print("occl_sim_scale_report.py: skipped: %s" % e, file=sys.stderr)
    if not runs:
        raise ReportError("no complete runs in %s" % raw)
    return runs


def rows(runs):
    """(n, place, nodes, size, algo, proto, us, busbw, {proto: us}, cost)"""
    out = []
    for (n, place) in sorted(runs, key=lambda k: (k[0], PLACEMENTS.index(k[1]))):
        plans, cost = runs[(n, place)]
        for size in sorted(plans):
            for algo in ALGOS:
                t = plans[size].get(algo)
                if not t:
                    continue
                proto = min(t, key=lambda p: (t[p], PROTOS.index(p)))
                us = t[proto] / 1000.0
                busbw = size / (t[proto] * 1e-9) / 1e9 * 2 * (n - 1) / n
                out.append((n, place, cost[3], size, algo, proto, us, busbw,
                            {p: t[p] / 1000.0 for p in t}, cost))
    return out


def write_csv(path, table):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["devices", "placement", "nodes", "size_bytes", "algorithm", "protocol", "vtime_us",
                    "busbw_GBps", "ll_us", "ll128_us", "simple_us", "run_cpu_s", "run_peak_MiB"])
        for n, place, nodes, size, algo, proto, us, bw, per, cost in table:
            w.writerow([n, place, nodes, size, algo, proto, "%.1f" % us, "%.2f" % bw]
                       + ["%.1f" % per[p] if p in per else "" for p in PROTOS]
                       + ["%.2f" % cost[0], "%.0f" % cost[2]])


def write_markdown(path, table, runs):
    """Per size: one row per job size, each algorithm's time (its best
    protocol) packed and spread, and the fastest; then each run's cost."""
    sizes = sorted({r[3] for r in table})
    devs = sorted({n for n, _ in runs})
    by = {(r[0], r[1], r[3], r[4]): r for r in table}
    lines = []
    for size in sizes:
        unit, div = ("us", 1.0) if size < (16 << 20) else ("ms", 1000.0)
        lines += ["### %s: virtual time per call (%s), each algorithm with its best protocol" % (human(size), unit),
                  "",
                  "| devices | " + " | ".join("%s %s" % (p, a) for p in PLACEMENTS for a in ALGOS) + " | fastest |",
                  "|---:|" + "---:|" * (len(PLACEMENTS) * len(ALGOS)) + "---|"]
        for n in devs:
            cells, best = [], None
            for place in PLACEMENTS:
                for algo in ALGOS:
                    r = by.get((n, place, size, algo))
                    if r is None:
                        cells.append("-")
                        continue
                    v = r[6] / div
                    cells.append("%.3g" % v if v < 1000 else "%.0f" % v)
                    if best is None or r[6] < best[6]:
                        best = r
            if best is None:
                continue
            lines.append("| %d | %s | %s %s (%s), %.1f GB/s |" % (n, " | ".join(cells), best[1], best[4],
                                                                 best[5], best[7]))
        lines.append("")
    lines += ["### host cost of each run (every size, algorithm and protocol replayed)", "",
              "| devices | placement | boxes | algorithms | CPU s | wall s | peak MiB |",
              "|---:|---|---:|---|---:|---:|---:|"]
    for n, place in sorted(runs, key=lambda k: (k[0], PLACEMENTS.index(k[1]))):
        cost = runs[(n, place)][1]
        algos = sorted({a for s in runs[(n, place)][0].values() for a in s}, key=ALGOS.index)
        lines.append("| %d | %s | %d | %s | %.1f | %.1f | %.0f |" % (n, place, cost[3], ",".join(algos), cost[0],
                                                                   cost[1], cost[2]))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def nice_step(ymax):
    step = 10 ** math.floor(math.log10(ymax / 5)) if ymax > 0 else 1
    for m in (1, 2, 5, 10):
        if ymax / (step * m) <= 6:
            return step * m
    return step * 10


def write_svg(path, table, title):
    """busbw against devices (log-2 x axis), one panel per size; colour =
    algorithm, dashes = placement."""
    sizes = sorted({r[3] for r in table})
    devs = sorted({r[0] for r in table})
    PW, PH, L, GAP, T, B, LEG = 300, 340, 60, 50, 50, 60, 130
    W = L + len(sizes) * PW + (len(sizes) - 1) * GAP + LEG
    H = T + PH + B
    x0, x1 = math.log2(devs[0]), math.log2(devs[-1])
    span = (x1 - x0) or 1
    esc = lambda s: s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">' % (W, H, W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="14">%s</text>' % (L, esc(title))]
    for i, size in enumerate(sizes):
        left = L + i * (PW + GAP)
        pts = {}
        for r in table:
            if r[3] == size:
                pts.setdefault((r[1], r[4]), []).append((r[0], r[7]))
        ymax = max(b for v in pts.values() for _, b in v)
        step = nice_step(ymax)
        ytop = step * math.ceil(ymax / step)
        X = lambda d: left + (math.log2(d) - x0) / span * PW
        Y = lambda b: T + PH - b / ytop * PH
        out.append('<text x="%d" y="%d" font-size="13" text-anchor="middle">%s</text>'
                   % (left + PW // 2, T - 10, human(size)))
        y = 0.0
        while y <= ytop + 1e-9:
            out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>'
                       % (left, Y(y), left + PW, Y(y)))
            out.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (left - 6, Y(y) + 4, y))
            y += step
        for d in devs:
            out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>' % (X(d), T, X(d), T + PH))
            out.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (X(d), T + PH + 16, d))
        out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>'
                   % (left, T, PW, PH))
        for (place, algo) in sorted(pts, key=lambda k: (PLACEMENTS.index(k[0]), ALGOS.index(k[1]))):
            colour = COLOURS.get(algo, "black")
            dash = DASHES.get(place, "2,2")
            d = ' stroke-dasharray="%s"' % dash if dash else ""
            p = sorted(pts[(place, algo)])
            out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>'
                       % (" ".join("%.1f,%.1f" % (X(n), Y(b)) for n, b in p), colour, d))
            for n, b in p:
                out.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>' % (X(n), Y(b), colour))
    out.append('<text x="%d" y="%d" text-anchor="middle">devices (one rank each)</text>'
               % ((L + W - LEG) // 2, H - 18))
    out.append('<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">'
               'busbw (GB/s, virtual time)</text>' % (T + PH // 2))
    lx = W - LEG + 10
    i = 0
    for place in PLACEMENTS:
        for algo in ALGOS:
            colour, dash = COLOURS[algo], DASHES[place]
            d = ' stroke-dasharray="%s"' % dash if dash else ""
            ly = T + 10 + 20 * i
            out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>'
                       % (lx, ly, lx + 30, ly, colour, d))
            out.append('<text x="%d" y="%d">%s %s</text>' % (lx + 35, ly + 4, place, algo))
            i += 1
    out.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="the study's output directory (holds raw/)")
    ap.add_argument("--title", default="all-reduce on box:dgx-h100 fabric:rails, h100, occl-sim: "
                    "solid packed, dashed spread (4 ranks a box)")
    args = ap.parse_args()
    try:
        runs = load(args.dir)
        table = rows(runs)
        write_csv(os.path.join(args.dir, "scale.csv"), table)
        write_markdown(os.path.join(args.dir, "scale.md"), table, runs)
        write_svg(os.path.join(args.dir, "scale.svg"), table, args.title)
    except (ReportError, OSError) as e:
        print("occl_sim_scale_report.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
