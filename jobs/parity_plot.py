#!/usr/bin/env python3
"""Parity plots (predicted against reference) of the CSV files that `ddgnn evaluate` writes,
drawn with matplotlib.

Usage:
    python3 jobs/parity_plot.py EVAL_DIR [--out FILE.png] [--title TEXT]

Reads, from EVAL_DIR:
  energies.csv  header exactly `graph,split,n_atoms,energy_ref_ev,energy_pred_ev`
                one row per structure; split is a word such as `test`; energies in eV.
  forces.csv    header exactly `graph,atom,z,fx_ref,fy_ref,fz_ref,fx_pred,fy_pred,fz_pred`
                one row per atom, forces in eV/Å. Optional: when it is absent or has no rows
                (data without forces) only the energy panel is drawn. Likewise, when
                energies.csv has no rows (a model without an energy head) only the force
                panel is drawn; having neither is an error.

Writes a PNG (default EVAL_DIR/parity.png), PANEL x PANEL pixels per panel, side by side:
  energy   energy per atom in meV/atom, relative to the mean reference energy per atom
  forces   force components in eV/Å, x, y and z pooled
Each panel has square axes with one range, the y = x diagonal (red), the points (blue,
translucent; at most MAX_POINTS drawn, by deterministic striding, while the metrics use every
row), and a title with MAE, RMSE and the count. --title TEXT replaces the first title line of
each panel ("TEXT - energy"). Prints the path written and the MAE/RMSE figures. Bad input
(missing directory or file, wrong header, wrong column count, a value that is not a finite
number) gives a one-line error on stderr naming the file and line, exit status 1, and no PNG.
"""

import argparse
import math
import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plotting import InputError, number, pyplot, read_rows, write_png  # noqa: E402

ENERGY_HEADER = ["graph", "split", "n_atoms", "energy_ref_ev", "energy_pred_ev"]
FORCE_HEADER = ["graph", "atom", "z", "fx_ref", "fy_ref", "fz_ref", "fx_pred", "fy_pred", "fz_pred"]
MAX_POINTS = 200_000
PANEL = 450                 # pixels per panel side (at DPI)
DPI = 100
POINT_COLOR = "#1f77b4"
LINE_COLOR = "#d62728"


def read_energies(path):
    """Returns (ref, pred, n_atoms, splits): energies in eV per structure."""
    ref, pred, n_atoms, splits = [], [], [], set()
    for line, f in read_rows(path, ENERGY_HEADER):
        number(path, line, "graph", f[0], integer=True)
        n = number(path, line, "n_atoms", f[2], integer=True)
        if n <= 0:
            raise InputError(f"{path}:{line}: column n_atoms must be positive: {f[2]!r}")
        splits.add(f[1].strip())
        n_atoms.append(n)
        ref.append(number(path, line, "energy_ref_ev", f[3]))
        pred.append(number(path, line, "energy_pred_ev", f[4]))
    return ref, pred, n_atoms, splits


def read_forces(path):
    """Returns (ref, pred): force components in eV/Å, x, y, z of every atom in order."""
    ref, pred = [], []
    for line, f in read_rows(path, FORCE_HEADER):
        number(path, line, "graph", f[0], integer=True)
        number(path, line, "atom", f[1], integer=True)
        number(path, line, "z", f[2], integer=True)
        for k in range(3):
            ref.append(number(path, line, FORCE_HEADER[3 + k], f[3 + k]))
            pred.append(number(path, line, FORCE_HEADER[6 + k], f[6 + k]))
    return ref, pred


def mae_rmse(ref, pred):
    d = [p - r for r, p in zip(ref, pred)]
    return math.fsum(map(abs, d)) / len(d), math.sqrt(math.fsum(v * v for v in d) / len(d))


def fmt_metric(v):
    """A metric for a title: three significant digits, no exponent below a million."""
    if v >= 1e6:
        return f"{v:.3g}"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}" if v >= 0.001 or v == 0 else f"{v:.2e}"


def draw_panel(ax, xs, ys, title, subtitle, xlabel, ylabel):
    lo, hi = min(min(xs), min(ys)), max(max(xs), max(ys))
    span = hi - lo if hi > lo else (abs(lo) * 0.1 or 1.0)
    lo, hi = lo - 0.05 * span, hi + 0.05 * span
    stride = max(1, -(-len(xs) // MAX_POINTS))
    ax.scatter(xs[::stride], ys[::stride], s=6, color=POINT_COLOR, alpha=0.35, linewidths=0,
               rasterized=True)
    ax.plot([lo, hi], [lo, hi], color=LINE_COLOR, linewidth=1.2)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.grid(color="#e8e8e8", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_title(f"{title}\n{subtitle}", fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)


def figure(eval_dir, title):
    """(matplotlib figure, lines to print) of EVAL_DIR's parity plots; InputError on bad input."""
    if not os.path.isdir(eval_dir):
        raise InputError(f"{eval_dir}: no such directory")
    e_path = os.path.join(eval_dir, "energies.csv")
    f_path = os.path.join(eval_dir, "forces.csv")
    if not os.path.isfile(e_path):
        raise InputError(f"{e_path}: no such file")
    e_ref, e_pred, n_atoms, splits = read_energies(e_path)
    f_ref, f_pred = read_forces(f_path) if os.path.exists(f_path) else ([], [])
    if not e_ref and not f_ref:
        raise InputError(f"{e_path}: no rows, and no forces in {f_path}")

    split = f" ({next(iter(splits))})" if len(splits) == 1 else ""
    panels, report = [], []
    if e_ref:
        ref_pa = [e / n for e, n in zip(e_ref, n_atoms)]
        pred_pa = [e / n for e, n in zip(e_pred, n_atoms)]
        mean = math.fsum(ref_pa) / len(ref_pa)
        xs = [(v - mean) * 1000.0 for v in ref_pa]
        ys = [(v - mean) * 1000.0 for v in pred_pa]
        mae, rmse = mae_rmse(xs, ys)
        n = len(xs)
        report.append(f"energy: n={n} structures  MAE={mae:.6f} meV/atom  RMSE={rmse:.6f} meV/atom")
        panels.append((xs, ys, (f"{title} - energy" if title else f"Energy/atom - mean{split}"),
                       f"MAE {fmt_metric(mae)}, RMSE {fmt_metric(rmse)} meV/atom, n = {n}",
                       "reference (meV/atom)", "predicted (meV/atom)"))
    if f_ref:
        mae, rmse = (1000.0 * v for v in mae_rmse(f_ref, f_pred))
        n = len(f_ref)
        report.append(f"forces: n={n} components ({n // 3} atoms)  MAE={mae:.6f} meV/A  "
                      f"RMSE={rmse:.6f} meV/A")
        panels.append((f_ref, f_pred, (f"{title} - forces" if title else f"Force components{split}"),
                       f"MAE {fmt_metric(mae)}, RMSE {fmt_metric(rmse)} meV/Å, n = {n}",
                       "reference force (eV/Å)", "predicted force (eV/Å)"))

    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(PANEL * len(panels) / DPI, PANEL / DPI),
                             squeeze=False)
    for ax, p in zip(axes[0], panels):
        draw_panel(ax, *p)
    fig.tight_layout()
    return fig, report


def run(eval_dir, out, title):
    fig, report = figure(eval_dir, title)
    write_png(fig, out, dpi=DPI)
    for line in report:
        print(line)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Parity plots of energies.csv and forces.csv written by `ddgnn evaluate`.")
    parser.add_argument("eval_dir", metavar="EVAL_DIR")
    parser.add_argument("--out", metavar="FILE.png", help="output PNG (default EVAL_DIR/parity.png)")
    parser.add_argument("--title", metavar="TEXT", help="first title line of each panel")
    args = parser.parse_args(argv)
    out = args.out or os.path.join(args.eval_dir, "parity.png")
    try:
        run(args.eval_dir, out, args.title)
    except InputError as e:
        print(f"parity_plot: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
