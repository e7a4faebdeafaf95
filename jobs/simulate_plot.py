#!/usr/bin/env python3
"""Epoch time against ranks, log-log, for the CSV that `ddgnn simulate --out` writes.

Usage:
    python3 jobs/simulate_plot.py SIM.csv [--out FILE.png] [--title TEXT]

Reads SIM.csv, whose header must be exactly the columns of `ddgnn simulate` (tuner/simulate.h):
    platform,ranks,nodes,within_platform,backend,group_ranks,calibrated,feasible,
    memory_gb_per_rank,fetch_node_s,fetch_network_s,fetch_s,load_s,allreduce_s,step_s,steps,
    epoch_s,auto_pick
one platform per file. Draws one line per backend through its feasible points (a backend that
does not fit memory at some P has a gap there; one that never fits is left out of the plot and
named in the legend as "never fits"), and the `auto` rows as a dashed black line on top.
Rank counts beyond the platform (within_platform = 0) are shaded (and so named in the legend). Axes: ranks (log 2, x) and
epoch seconds (log 10, y), with tick labels; the legend is at the right, and a subtitle says
which backend `auto` picks over which ranks.

Writes a PNG (default SIM.png beside the CSV), RGB, 8 bit, WIDTH x HEIGHT pixels, to a temporary
name first and renamed over the output. Prints the path written. Bad input (missing file, wrong
header, wrong column count, a value that is not a number, several platforms, nothing feasible)
gives a one-line error on stderr naming the file (and line), exit status 1, and no PNG.

Only the Python 3 standard library is used; the canvas, font, PNG writer and CSV checks are
jobs/parity_plot.py's.
"""

import argparse
import math
import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parity_plot import (BLACK, GLYPH_H, GRID_COLOR, WHITE, Canvas, InputError,  # noqa: E402
                         _number, read_rows, text_width, write_png)

HEADER = ["platform", "ranks", "nodes", "within_platform", "backend", "group_ranks", "calibrated",
          "feasible", "memory_gb_per_rank", "fetch_node_s", "fetch_network_s", "fetch_s",
          "load_s", "allreduce_s", "step_s", "steps", "epoch_s", "auto_pick"]
COL = {name: k for k, name in enumerate(HEADER)}

WIDTH, HEIGHT = 860, 520
PLOT_LEFT, PLOT_TOP, PLOT_W, PLOT_H = 90, 64, 540, 380   # plot area
LEGEND_X = PLOT_LEFT + PLOT_W + 24
SHADE = (236, 236, 236)
AUTO_COLOR = BLACK
COLORS = {"collective": (214, 39, 40), "file": (148, 103, 189), "replicated": (44, 160, 44),
          "rma": (31, 119, 180), "shm": (255, 127, 14)}
OTHER_COLORS = [(140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34)]


def read_simulation(path):
    """Returns (platform, series, beyond): series maps a backend name (and "auto") to sorted
    (ranks, epoch_s, picked) points, feasible ones only; beyond is the set of rank counts past
    the platform; every backend seen is a key, possibly with no points."""
    platforms, series, beyond, picks = set(), {}, set(), {}
    for line, f in read_rows(path, HEADER):
        platforms.add(f[COL["platform"]].strip())
        ranks = _number(path, line, "ranks", f[COL["ranks"]], integer=True)
        if ranks < 1:
            raise InputError(f"{path}:{line}: column ranks must be positive: {f[COL['ranks']]!r}")
        if _number(path, line, "within_platform", f[COL["within_platform"]], integer=True) == 0:
            beyond.add(ranks)
        backend = f[COL["backend"]].strip()
        points = series.setdefault(backend, [])
        picks[ranks] = f[COL["auto_pick"]].strip()
        feasible = _number(path, line, "feasible", f[COL["feasible"]], integer=True)
        if not feasible or not f[COL["epoch_s"]].strip():
            continue
        epoch = _number(path, line, "epoch_s", f[COL["epoch_s"]])
        if epoch <= 0:
            raise InputError(f"{path}:{line}: column epoch_s must be positive: {epoch!r}")
        points.append((ranks, epoch))
    if not series:
        raise InputError(f"{path}: no rows")
    if len(platforms) != 1:
        raise InputError(f"{path}: {len(platforms)} platforms ({', '.join(sorted(platforms))}); "
                         "plot one simulation at a time")
    if not any(series.values()):
        raise InputError(f"{path}: no feasible point to draw")
    for points in series.values():
        points.sort()
    return platforms.pop(), series, beyond, picks


class Axes:
    """Log-log mapping of the plot area: x = log2(ranks), y = log10(seconds)."""

    def __init__(self, xs, ys):
        self.x0, self.x1 = math.log2(min(xs)), math.log2(max(xs))
        if self.x1 <= self.x0:
            self.x0, self.x1 = self.x0 - 1, self.x1 + 1
        self.y0 = math.floor(math.log10(min(ys)) + 1e-9)
        self.y1 = math.ceil(math.log10(max(ys)) - 1e-9)
        if self.y1 <= self.y0:
            self.y1 = self.y0 + 1

    def px(self, ranks):
        return PLOT_LEFT + int(round((math.log2(ranks) - self.x0) / (self.x1 - self.x0) *
                                     (PLOT_W - 1)))

    def py(self, seconds):
        t = (math.log10(seconds) - self.y0) / (self.y1 - self.y0)
        return PLOT_TOP + PLOT_H - 1 - int(round(t * (PLOT_H - 1)))


def seconds_label(exponent):
    v = 10.0 ** exponent
    if -3 <= exponent <= 4:
        return f"{v:.{max(0, -exponent)}f}"
    return f"1e{exponent}"


def line(canvas, x0, y0, x1, y1, color, width=2, dash=0):
    """Bresenham from (x0, y0) to (x1, y1), `width` pixels thick; dash > 0 draws dash pixels of
    every 2 dash."""
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    err, n = dx + dy, 0
    while True:
        if not dash or (n // dash) % 2 == 0:
            for ox in range(width):
                for oy in range(width):
                    canvas.set(x0 + ox - width // 2, y0 + oy - width // 2, color)
        if x0 == x1 and y0 == y1:
            return
        n += 1
        e2 = 2 * err
        if e2 >= dy:
            err += dy
            x0 += sx
        if e2 <= dx:
            err += dx
            y0 += sy


def draw_series(canvas, axes, points, all_ranks, color, width, dash, marker):
    """Lines between consecutive feasible rank counts (a gap where one is missing)."""
    order = {r: k for k, r in enumerate(sorted(all_ranks))}
    for (ra, ea), (rb, eb) in zip(points, points[1:]):
        if order[rb] - order[ra] == 1:
            line(canvas, axes.px(ra), axes.py(ea), axes.px(rb), axes.py(eb), color, width, dash)
    for r, e in points:
        x, y = axes.px(r), axes.py(e)
        canvas.rect(x - marker // 2, y - marker // 2, x + marker // 2, y + marker // 2, color)


def pick_summary(picks):
    """"auto: file P 1-16, rma P 32-16384" from the pick at each rank count."""
    runs = []
    for r in sorted(picks):
        if runs and runs[-1][0] == picks[r]:
            runs[-1][2] = r
        else:
            runs.append([picks[r], r, r])
    return "auto: " + ", ".join(f"{b} P {a}" + (f"-{c}" if c != a else "") for b, a, c in runs)


def run(path, out, title):
    platform, series, beyond, picks = read_simulation(path)
    all_ranks = sorted(picks)
    xs = all_ranks
    ys = [e for pts in series.values() for _, e in pts]
    axes = Axes(xs, ys)
    canvas = Canvas(WIDTH, HEIGHT, WHITE)

    # shading past the platform, half a step before the first rank count beyond it
    if beyond:
        first = min(beyond)
        left = PLOT_LEFT
        below = [r for r in all_ranks if r < first]
        if below:
            left = (axes.px(below[-1]) + axes.px(first)) // 2
        canvas.rect(left, PLOT_TOP, PLOT_LEFT + PLOT_W - 1, PLOT_TOP + PLOT_H - 1, SHADE)

    # grid, ticks and labels: every decade on y, every power of 2 on x (labels thinned to fit)
    for k in range(axes.y0, axes.y1 + 1):
        y = axes.py(10.0 ** k)
        canvas.rect(PLOT_LEFT, y, PLOT_LEFT + PLOT_W - 1, y, GRID_COLOR)
        canvas.rect(PLOT_LEFT - 6, y, PLOT_LEFT - 2, y, BLACK)
        lab = seconds_label(k)
        canvas.text(PLOT_LEFT - 9 - text_width(lab), y - GLYPH_H // 2, lab)
    xticks = [2 ** k for k in range(int(math.ceil(axes.x0)), int(math.floor(axes.x1)) + 1)]
    every = 1
    while len(xticks) // every > 8:
        every *= 2
    for n, r in enumerate(xticks):
        x = axes.px(r)
        canvas.rect(x, PLOT_TOP, x, PLOT_TOP + PLOT_H - 1, GRID_COLOR)
        canvas.rect(x, PLOT_TOP + PLOT_H + 1, x, PLOT_TOP + PLOT_H + 5, BLACK)
        if n % every == 0:
            canvas.text(x - text_width(str(r)) // 2, PLOT_TOP + PLOT_H + 9, str(r))

    # series: backends in the file's order, then auto, dashed, on top
    names = [b for b in series if b != "auto"]
    colors = {}
    for k, b in enumerate(names):
        colors[b] = COLORS.get(b, OTHER_COLORS[k % len(OTHER_COLORS)])
        if series[b]:
            draw_series(canvas, axes, series[b], all_ranks, colors[b], 2, 0, 5)
    if series.get("auto"):
        draw_series(canvas, axes, series["auto"], all_ranks, AUTO_COLOR, 1, 4, 3)

    # frame, axis labels, titles, legend
    canvas.rect(PLOT_LEFT - 1, PLOT_TOP - 1, PLOT_LEFT + PLOT_W, PLOT_TOP - 1, BLACK)
    canvas.rect(PLOT_LEFT - 1, PLOT_TOP + PLOT_H, PLOT_LEFT + PLOT_W, PLOT_TOP + PLOT_H, BLACK)
    canvas.rect(PLOT_LEFT - 1, PLOT_TOP - 1, PLOT_LEFT - 1, PLOT_TOP + PLOT_H, BLACK)
    canvas.rect(PLOT_LEFT + PLOT_W, PLOT_TOP - 1, PLOT_LEFT + PLOT_W, PLOT_TOP + PLOT_H, BLACK)
    xlabel, ylabel = "ranks (P)", "epoch time (s)"
    canvas.text(PLOT_LEFT + (PLOT_W - text_width(xlabel, 2)) // 2, PLOT_TOP + PLOT_H + 24, xlabel,
                scale=2)
    canvas.text_up(16, PLOT_TOP + (PLOT_H + text_width(ylabel, 2)) // 2, ylabel, scale=2)
    heading = title or f"{platform}: predicted epoch time"
    scale = 2 if text_width(heading, 2) <= WIDTH - 20 else 1
    canvas.text((WIDTH - text_width(heading, scale)) // 2, 10, heading, scale=scale)
    sub = pick_summary(picks)
    canvas.text((WIDTH - text_width(sub)) // 2, 36, sub)
    y = PLOT_TOP + 4
    for b in names + (["auto"] if "auto" in series else []):
        color = AUTO_COLOR if b == "auto" else colors[b]
        if b == "auto":
            line(canvas, LEGEND_X, y + 3, LEGEND_X + 22, y + 3, color, 1, 4)
        else:
            line(canvas, LEGEND_X, y + 3, LEGEND_X + 22, y + 3, color, 2, 0)
        canvas.text(LEGEND_X + 28, y, b if series[b] else f"{b}: never fits")
        y += 16
    if beyond:
        canvas.rect(LEGEND_X, y, LEGEND_X + 22, y + 7, SHADE)
        canvas.text(LEGEND_X + 28, y, "beyond the machine")
    write_png(canvas, out)
    print(f"wrote {out} ({canvas.width}x{canvas.height})")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Log-log epoch time against ranks from the CSV of `ddgnn simulate`.")
    parser.add_argument("csv", metavar="SIM.csv")
    parser.add_argument("--out", metavar="FILE.png", help="output PNG (default SIM.png)")
    parser.add_argument("--title", metavar="TEXT", help="title line")
    args = parser.parse_args(argv)
    out = args.out or os.path.splitext(args.csv)[0] + ".png"
    try:
        run(args.csv, out, args.title)
    except InputError as e:
        print(f"simulate_plot: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
