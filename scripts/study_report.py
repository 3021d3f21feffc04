#!/usr/bin/env python3
"""study_report.py - tables and a plot from the study's occl_perf logs.

Reads DIR/raw/PLACEMENT-ALGO.txt (occl_perf output in virtual time, with
OCCL_DEBUG=INFO lines naming the algorithm each call used) and writes
DIR/study.csv, DIR/study.md and DIR/study.svg. Standard library only, so the
study needs nothing beyond python3.
"""
import argparse
import csv
import math
import os
import re
import sys

INFO = re.compile(r"occl INFO: rank 0: AllReduce of (\d+) x \S+ on .*: (\w+)(?:/\w+)?\s*$")  # "tree" or "tree/Simple"
RING = re.compile(r"occl INFO: comm \S+ ring (from the topology.*)$")
# The titles over occl_perf's column groups: the figures read are the first
# group's (in place when the study runs occl_perf --place in).
GROUPS = re.compile(r"^#\s+(out-of-place|in-place)\b")
ALGO_ORDER = ["ring", "tree", "hierarchical", "direct", "auto"]
PLACEMENT_ORDER = ["packed", "spread"]
COLOURS = {"ring": "#1f77b4", "tree": "#d62728", "hierarchical": "#2ca02c",
           "direct": "#9467bd", "auto": "#ff7f0e"}
DASHES = {"packed": "", "spread": "6,4"}


class StudyError(Exception):
    pass


def parse_log(path):
    """Rows (size, count, vtime_us, algbw, busbw) of one occl_perf log, the
    algorithm rank 0 used for each count, OCCL's ring, and which group of
    columns the figures come from ("in-place", "out-of-place" or "")."""
    rows, used, virtual = [], {}, False
    ring, group = "", ""
    lines = []
    # OCCL's INFO lines are in PATH.err when study.sh kept the streams apart.
    for name in (path, path + ".err"):
        if os.path.exists(name):
            with open(name, encoding="utf-8", errors="replace") as f:
                lines.extend(f)
    for line in lines:
        m = RING.search(line)
        if m:
            ring = m.group(1).strip()
            continue
        m = INFO.search(line)
        if m:
            used[int(m.group(1))] = m.group(2)
            continue
        if line.startswith("# virtual time"):
            virtual = True
        m = GROUPS.match(line)
        if m and not group:
            group = m.group(1)
        if line.startswith("#") or not line.strip() or "occl" in line:
            continue
        fields = line.split()
        if len(fields) < 9 or not fields[0].isdigit():
            continue
        try:
            rows.append((int(fields[0]), int(fields[1]), float(fields[5]),
                         float(fields[6]), float(fields[7])))
        except ValueError:
            raise StudyError("%s: unreadable row: %s" % (path, line.strip()))
    if not virtual:
        raise StudyError("%s: not a virtual-time occl_perf log" % path)
    if not rows:
        raise StudyError("%s: no result rows" % path)
    return rows, used, ring, group


def load(directory):
    raw = os.path.join(directory, "raw")
    if not os.path.isdir(raw):
        raise StudyError("%s: no raw/ directory of logs" % directory)
    runs = {}
    for name in sorted(os.listdir(raw)):
        m = re.fullmatch(r"(\w+)-(\w+)\.txt", name)
        if not m:
            continue
        runs[(m.group(1), m.group(2))] = parse_log(os.path.join(raw, name))
    if not runs:
        raise StudyError("%s: no PLACEMENT-ALGO.txt logs" % raw)
    return runs


def order(keys):
    def rank(k):
        p, a = k
        return (PLACEMENT_ORDER.index(p) if p in PLACEMENT_ORDER else 99, p,
                ALGO_ORDER.index(a) if a in ALGO_ORDER else 99, a)
    return sorted(keys, key=rank)


def human(size):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= div and size % div == 0:
            return "%d %s" % (size // div, unit)
    return "%d B" % size


def write_csv(path, runs):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["placement", "algorithm", "algorithm_used", "size_bytes",
                    "vtime_us", "algbw_GBps", "busbw_GBps"])
        for key in order(runs):
            rows, used = runs[key][:2]
            for size, count, t, alg, bus in rows:
                w.writerow([key[0], key[1], used.get(count, ""), size, t, alg, bus])


def write_markdown(path, runs, title):
    keys = order(runs)
    sizes = sorted({r[0] for k in keys for r in runs[k][0]})
    head = "| size | " + " | ".join("%s %s" % k for k in keys) + " | best |"
    rule = "|---:|" + "---:|" * len(keys) + "---|"
    lines = ["# " + title, ""]
    groups = sorted({runs[k][3] or "unnamed" for k in keys})
    lines += ["Figures of occl_perf's %s columns, virtual time." % " and ".join(groups), ""]
    for label, col in (("virtual time per call (us)", 2), ("busbw (GB/s)", 4)):
        lines += ["## " + label, "", head, rule]
        for s in sizes:
            cells, best = [], None
            for k in keys:
                row = next((r for r in runs[k][0] if r[0] == s), None)
                if row is None:
                    cells.append("")
                    continue
                cells.append("%g" % row[col])
                if best is None or row[2] < best[0]:
                    best = (row[2], k)
            lines.append("| %s | %s | %s |" % (human(s), " | ".join(cells),
                                                "%s %s" % best[1] if best else ""))
        lines.append("")
    lines += ["## OCCL's ring", "", "| run | ring |", "|---|---|"]
    for k in keys:
        lines.append("| %s %s | %s |" % (k[0], k[1], runs[k][2] or "rank order"))
    lines.append("")
    auto = [k for k in keys if k[1] == "auto"]
    if auto:
        lines += ["## algorithm the planner picked (auto)", "",
                  "| size | " + " | ".join(k[0] for k in auto) + " |",
                  "|---:|" + "---|" * len(auto)]
        for s in sizes:
            cells = []
            for k in auto:
                row = next((r for r in runs[k][0] if r[0] == s), None)
                cells.append(runs[k][1].get(row[1], "") if row else "")
            lines.append("| %s | %s |" % (human(s), " | ".join(cells)))
        lines.append("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def write_svg(path, runs, title):
    """busbw against size, log-2 x axis, linear y axis: one line per run,
    colour = algorithm, dashes = placement."""
    keys = order(runs)
    pts = {k: [(r[0], r[4]) for r in runs[k][0] if r[0] > 0] for k in keys}
    sizes = sorted({s for k in keys for s, _ in pts[k]})
    if not sizes:
        raise StudyError("no sizes above 0 bytes to plot")
    ymax = max([b for k in keys for _, b in pts[k]] + [1e-9])
    step = 10 ** math.floor(math.log10(ymax / 5)) if ymax > 0 else 1
    for m in (1, 2, 5, 10):
        if ymax / (step * m) <= 8:
            step *= m
            break
    ytop = step * math.ceil(ymax / step)
    W, H, L, R, T, B = 900, 520, 70, 190, 40, 60
    pw, ph = W - L - R, H - T - B
    x0, x1 = math.log2(sizes[0]), math.log2(sizes[-1])
    span = (x1 - x0) or 1

    def X(s):
        return L + (math.log2(s) - x0) / span * pw

    def Y(b):
        return T + ph - b / ytop * ph

    esc = lambda s: s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">' % (W, H, W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="14">%s</text>' % (L, esc(title))]
    y = 0.0
    while y <= ytop + 1e-9:
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>'
                   % (L, Y(y), L + pw, Y(y)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (L - 6, Y(y) + 4, y))
        y += step
    for s in sizes:
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>'
                   % (X(s), T, X(s), T + ph))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (X(s), T + ph + 16, human(s)))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>'
               % (L, T, pw, ph))
    out.append('<text x="%d" y="%d" text-anchor="middle">allreduce size (bytes per rank)</text>'
               % (L + pw // 2, H - 18))
    out.append('<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">'
               'busbw (GB/s, virtual time)</text>' % (T + ph // 2))
    for i, k in enumerate(keys):
        colour = COLOURS.get(k[1], "black")
        dash = DASHES.get(k[0], "2,2")
        d = ' stroke-dasharray="%s"' % dash if dash else ""
        poly = " ".join("%.1f,%.1f" % (X(s), Y(b)) for s, b in pts[k])
        out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>'
                   % (poly, colour, d))
        for s, b in pts[k]:
            out.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>' % (X(s), Y(b), colour))
        ly = T + 10 + 20 * i
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>'
                   % (L + pw + 15, ly, L + pw + 45, ly, colour, d))
        out.append('<text x="%d" y="%d">%s %s</text>' % (L + pw + 50, ly + 4, k[0], k[1]))
    out.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="study output directory (holds raw/)")
    ap.add_argument("--title", default="allreduce study")
    args = ap.parse_args()
    try:
        runs = load(args.dir)
        write_csv(os.path.join(args.dir, "study.csv"), runs)
        write_markdown(os.path.join(args.dir, "study.md"), runs, args.title)
        write_svg(os.path.join(args.dir, "study.svg"), runs, args.title)
    except (StudyError, OSError) as e:
        print("study_report.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
