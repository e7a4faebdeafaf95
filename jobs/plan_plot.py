#!/usr/bin/env python3
"""The time-energy plan of `ddgnn simulate --global-batch B`: epoch energy against epoch time of
every rank count and loader backend at that fixed global batch, the Pareto front joined, the
plan's choice ringed; one panel per CSV (one platform each), drawn with matplotlib.

Usage:
    python3 jobs/plan_plot.py PLAN.csv [PLAN2.csv ...] [--out FILE.png] [--title TEXT]

Each CSV's header must be exactly the columns of the plan (tuner/plan.h):
    platform,global_batch,time_bound_s,ranks,nodes,within_platform,batch_per_rank,backend,
    epoch_s,energy_j,pareto,within_bound,choice
Points are coloured by backend and labelled with their rank count where they are on the front;
a dotted vertical line is the time bound, when there is one. Writes a PNG (default
PLAN.png beside the first CSV) and prints its path. Bad input gives a one-line error naming the
file (and line), exit status 1, and no PNG.
"""

import argparse
import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plotting import InputError, number, pyplot, read_rows, write_png  # noqa: E402

HEADER = ["platform", "global_batch", "time_bound_s", "ranks", "nodes", "within_platform", "batch_per_rank",
          "backend", "epoch_s", "energy_j", "pareto", "within_bound", "choice"]
COL = {name: k for k, name in enumerate(HEADER)}
COLORS = {"collective": "#d62728", "file": "#9467bd", "replicated": "#2ca02c", "rma": "#1f77b4",
          "shm": "#ff7f0e", "nccl": "#8c564b"}


def read_plan(path):
    """(platform, global batch, points): each point a dict of ranks, backend, epoch_s, energy_j,
    pareto, within_bound, choice."""
    platforms, batches, points = set(), set(), []
    for line, f in read_rows(path, HEADER):
        platforms.add(f[COL["platform"]].strip())
        batches.add(number(path, line, "global_batch", f[COL["global_batch"]]))
        p = {"ranks": number(path, line, "ranks", f[COL["ranks"]], integer=True),
             "backend": f[COL["backend"]].strip(),
             "epoch_s": number(path, line, "epoch_s", f[COL["epoch_s"]]),
             "energy_j": number(path, line, "energy_j", f[COL["energy_j"]]),
             "bound": number(path, line, "time_bound_s", f[COL["time_bound_s"]])}
        for flag in ("pareto", "within_bound", "choice", "within_platform"):
            p[flag] = number(path, line, flag, f[COL[flag]], integer=True) == 1
        if p["epoch_s"] <= 0 or p["energy_j"] <= 0:
            raise InputError(f"{path}:{line}: epoch_s and energy_j must be positive")
        points.append(p)
    if not points:
        raise InputError(f"{path}: no rows")
    if len(platforms) != 1 or len(batches) != 1:
        raise InputError(f"{path}: one platform and one global batch a file, not "
                         f"{len(platforms)} and {len(batches)}")
    return platforms.pop(), batches.pop(), points


def draw(ax, platform, batch, points):
    for backend in sorted({p["backend"] for p in points}):
        mine = [p for p in points if p["backend"] == backend]
        ax.scatter([p["epoch_s"] for p in mine], [p["energy_j"] / 1e3 for p in mine], s=16,
                   color=COLORS.get(backend, "#7f7f7f"), label=backend, alpha=0.75)
    front = sorted((p for p in points if p["pareto"]), key=lambda p: p["epoch_s"])
    ax.plot([p["epoch_s"] for p in front], [p["energy_j"] / 1e3 for p in front], "k-", lw=1,
            label="Pareto front")
    for p in front:
        ax.annotate(str(p["ranks"]), (p["epoch_s"], p["energy_j"] / 1e3), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    for p in points:
        if p["choice"]:
            ax.scatter([p["epoch_s"]], [p["energy_j"] / 1e3], s=140, facecolors="none",
                       edgecolors="k", lw=1.5,
                       label=f"least energy: {p['ranks']} ranks, {p['backend']}")
    if points[0]["bound"] > 0:
        ax.axvline(points[0]["bound"], color="k", ls=":", lw=1,
                   label=f"time bound {points[0]['bound']:g} s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("epoch time (s)")
    ax.set_ylabel("epoch energy, all nodes (kJ)")
    ax.set_title(f"{platform}: global batch {batch:.0f}", fontsize=10)
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=7, frameon=False)


def run(paths, out, title):
    plans = [read_plan(p) for p in paths]
    plt = pyplot()
    fig, axes = plt.subplots(1, len(plans), figsize=(5.2 * len(plans), 4.2), squeeze=False)
    for ax, (platform, batch, points) in zip(axes[0], plans):
        draw(ax, platform, batch, points)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    write_png(fig, out, dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Pareto front of `ddgnn simulate --global-batch`.")
    parser.add_argument("csv", nargs="+", metavar="PLAN.csv")
    parser.add_argument("--out", metavar="FILE.png", help="output PNG (default PLAN.png)")
    parser.add_argument("--title", metavar="TEXT", help="title line")
    args = parser.parse_args(argv)
    out = args.out or os.path.splitext(args.csv[0])[0] + ".png"
    try:
        run(args.csv, out, args.title)
    except InputError as e:
        print(f"plan_plot: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
