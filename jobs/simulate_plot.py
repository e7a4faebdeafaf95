#!/usr/bin/env python3
"""Epoch time against ranks, log-log, for the CSV that `ddgnn simulate --out` writes, drawn with
matplotlib.

Usage:
    python3 jobs/simulate_plot.py SIM.csv [--out FILE.png] [--title TEXT]

Reads SIM.csv, whose header must be exactly the columns of `ddgnn simulate` (tuner/simulate.h):
    platform,ranks,nodes,within_platform,backend,group_ranks,calibrated,feasible,
    memory_gb_per_rank,fetch_node_s,fetch_network_s,fetch_s,load_s,allreduce_s,step_s,steps,
    epoch_s,energy_j,auto_pick
one platform per file. Draws one line per backend through its feasible points (a backend that
does not fit memory at some P has a gap there; one that never fits is named in the legend as
"never fits"), and the `auto` rows as a dashed black line on top. Rank counts beyond the
platform (within_platform = 0) are shaded and named in the legend. Axes: ranks (log 2) and epoch
seconds (log 10); a subtitle says which backend `auto` picks over which ranks.

Writes a PNG (default SIM.png beside the CSV), WIDTH x HEIGHT pixels. Prints the path written.
Bad input (missing file, wrong header, wrong column count, a value that is not a number, several
platforms, nothing feasible) gives a one-line error on stderr naming the file (and line), exit
status 1, and no PNG.
"""

import argparse
import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plotting import InputError, number, pyplot, read_rows, write_png  # noqa: E402

HEADER = ["platform", "ranks", "nodes", "within_platform", "backend", "group_ranks", "calibrated",
          "feasible", "memory_gb_per_rank", "fetch_node_s", "fetch_network_s", "fetch_s",
          "load_s", "allreduce_s", "step_s", "steps", "epoch_s", "energy_j", "auto_pick"]
COL = {name: k for k, name in enumerate(HEADER)}
WIDTH, HEIGHT, DPI = 860, 520, 100
SHADE = "#ececec"
COLORS = {"collective": "#d62728", "file": "#9467bd", "replicated": "#2ca02c", "rma": "#1f77b4",
          "shm": "#ff7f0e", "nccl": "#8c564b"}
OTHER_COLORS = ["#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def read_simulation(path):
    """Returns (platform, series, beyond): series maps a backend name (and "auto") to sorted
    (ranks, epoch_s, picked) points, feasible ones only; beyond is the set of rank counts past
    the platform; every backend seen is a key, possibly with no points."""
    platforms, series, beyond, picks = set(), {}, set(), {}
    for line, f in read_rows(path, HEADER):
        platforms.add(f[COL["platform"]].strip())
        ranks = number(path, line, "ranks", f[COL["ranks"]], integer=True)
        if ranks < 1:
            raise InputError(f"{path}:{line}: column ranks must be positive: {f[COL['ranks']]!r}")
        if number(path, line, "within_platform", f[COL["within_platform"]], integer=True) == 0:
            beyond.add(ranks)
        backend = f[COL["backend"]].strip()
        points = series.setdefault(backend, [])
        picks[ranks] = f[COL["auto_pick"]].strip()
        feasible = number(path, line, "feasible", f[COL["feasible"]], integer=True)
        if not feasible or not f[COL["epoch_s"]].strip():
            continue
        epoch = number(path, line, "epoch_s", f[COL["epoch_s"]])
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


def pick_summary(picks):
    """"auto: file P 1-16, rma P 32-16384" from the pick at each rank count."""
    runs = []
    for r in sorted(picks):
        if runs and runs[-1][0] == picks[r]:
            runs[-1][2] = r
        else:
            runs.append([picks[r], r, r])
    return "auto: " + ", ".join(f"{b} P {a}" + (f"-{c}" if c != a else "") for b, a, c in runs)


def figure(path, title):
    """The matplotlib figure of SIM.csv's epoch times; InputError on bad input."""
    platform, series, beyond, picks = read_simulation(path)
    all_ranks = sorted(picks)
    plt = pyplot()
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, NullLocator
    fig, ax = plt.subplots(figsize=(WIDTH / DPI, HEIGHT / DPI))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    handles = []
    if beyond:  # shading from half a step before the first rank count past the platform
        first = min(beyond)
        below = [r for r in all_ranks if r < first]
        left = (below[-1] * first) ** 0.5 if below else first / 1.5
        ax.axvspan(left, max(all_ranks) * 1.5, color=SHADE, zorder=0)
        handles.append(Patch(color=SHADE, label="beyond the machine"))
    names = [b for b in series if b != "auto"]
    for k, b in enumerate(names):
        color = COLORS.get(b, OTHER_COLORS[k % len(OTHER_COLORS)])
        pts = dict(series[b])
        ys = [pts.get(r) for r in all_ranks]  # None where infeasible: a gap in the line
        (h,) = ax.plot(all_ranks, [float("nan") if y is None else y for y in ys], color=color,
                       marker="o", markersize=4, linewidth=2,
                       label=b if series[b] else f"{b}: never fits")
        handles.insert(len(handles) - (1 if beyond else 0), h)
    if series.get("auto"):
        xs, ys = zip(*series["auto"])
        (h,) = ax.plot(xs, ys, color="black", linestyle="--", linewidth=1.2, marker=".",
                       label="auto", zorder=5)
        handles.insert(len(handles) - (1 if beyond else 0), h)
    ax.set_xlim(min(all_ranks) / 1.5, max(all_ranks) * 1.5)
    ticks = [r for r in all_ranks if r & (r - 1) == 0] or all_ranks
    every = 1
    while len(ticks[::every]) > 9:
        every *= 2
    ax.xaxis.set_major_locator(FixedLocator(ticks[::every]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(r) for r in ticks[::every]])
    ax.grid(True, which="major", color="#e8e8e8", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_xlabel("ranks (P)")
    ax.set_ylabel("epoch time (s)")
    ax.set_title(f"{title or platform + ': predicted epoch time'}\n{pick_summary(picks)}",
                 fontsize=10)
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=9,
              frameon=False)
    fig.tight_layout()
    return fig


def run(path, out, title):
    write_png(figure(path, title), out, dpi=DPI)


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
