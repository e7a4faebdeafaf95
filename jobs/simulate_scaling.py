#!/usr/bin/env python3
"""Strong and weak scaling to 16,384 ranks of every loader backend and of `auto`, from
`ddgnn simulate`, drawn with matplotlib beside HydraGNN's published strong-scaling claims.

Usage:
    python3 jobs/simulate_scaling.py run --ddgnn BIN --models M.json --out FIG.png
        [--platforms perlmutter,frontier] [--graphs 134217728] [--graphs-per-rank 8192]
        [--compute-s 0.001]
    python3 jobs/simulate_scaling.py plot SCALING.csv [--out FIG.png]

run: strong scaling is one `ddgnn simulate` per platform with N = --graphs fixed; weak scaling
    is one per platform and rank count with N = --graphs-per-rank x P. Both at P = 1, 2, 4, ...,
    16,384 with B = 2 graphs a rank and --compute-s a step. Writes FIG.csv beside FIG.png (the
    columns below) and the figure.
plot: draws FIG.png again from such a CSV.

CSV columns, fixed: mode (strong|weak), platform, ranks, nodes, within_platform, graphs,
backend, feasible, step_s, epoch_s, energy_j, efficiency, auto_pick. Efficiency: strong,
T(P0) P0 / (T(P) P); weak, T(P0) / T(P); P0 is the backend's smallest feasible P (for `auto`,
the smallest P from which it keeps the pick it has at the largest P).

Figure: one row per platform, strong scaling on the left (epoch seconds against ranks, log-log,
with the ideal 1/P through auto's P0) and weak on the right (ideal: flat). On the strong panel
a dotted line marks the rank count to which HydraGNN reports near-linear strong scaling (2,000
Perlmutter GPUs, 16,000 Frontier GCDs; Lupo Pasini et al., J. Supercomputing 81, 618 (2025),
arXiv:2406.12909), with simulate's efficiency of auto there. Ranks beyond the machine are shaded.

Bad input (missing file, wrong header, a value that is not a number, no feasible point, a
failed simulate) is one line on stderr naming the file (and line), exit status 1, and no PNG.
"""

import argparse
import math
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plotting import InputError, number, pyplot, read_rows, write_png  # noqa: E402

HEADER = ["mode", "platform", "ranks", "nodes", "within_platform", "graphs", "backend",
          "feasible", "step_s", "epoch_s", "energy_j", "efficiency", "auto_pick"]
COL = {name: k for k, name in enumerate(HEADER)}
SIM_HEADER = ["platform", "ranks", "nodes", "within_platform", "backend", "group_ranks",
              "calibrated", "feasible", "memory_gb_per_rank", "fetch_node_s", "fetch_network_s",
              "fetch_s", "load_s", "allreduce_s", "step_s", "steps", "epoch_s", "energy_j",
              "auto_pick"]
MODES = ("strong", "weak")
RANKS = [2 ** k for k in range(15)]  # 1 ... 16,384
CLAIM_SOURCE = "Lupo Pasini et al. 2025 (arXiv:2406.12909)"
# HydraGNN's published strong-scaling reach: near-linear to these many GPUs (GCDs on Frontier).
CLAIMS = {"perlmutter": (2000, "GPUs"), "frontier": (16000, "GCDs")}
WIDTH, HEIGHT, DPI = 1300, 900, 100
SHADE = "#ececec"
COLORS = {"collective": "#d62728", "file": "#9467bd", "replicated": "#2ca02c", "rma": "#1f77b4",
          "shm": "#ff7f0e", "nccl": "#8c564b"}
OTHER_COLORS = ["#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def simulate(ddgnn, args):
    """Rows of one `ddgnn simulate` run (dicts keyed by its CSV header)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "sim.csv")
        try:
            r = subprocess.run([ddgnn, "simulate", *args, "--out", out], capture_output=True,
                               text=True, timeout=600)
        except OSError as e:
            raise InputError(f"{ddgnn}: cannot run: {e.strerror}") from None
        if r.returncode != 0:
            last = (r.stderr.strip() or r.stdout.strip() or "no output").splitlines()[-1]
            raise InputError(f"ddgnn simulate {' '.join(args)}: exit {r.returncode}: {last}")
        return [dict(zip(SIM_HEADER, f)) for _, f in read_rows(out, SIM_HEADER)]


def efficiencies(points, mode):
    """points: sorted [(ranks, epoch_s or None, pick)] of one backend; returns [efficiency or
    None] per point (see the module docstring)."""
    feasible = [(p, t, pick) for p, t, pick in points if t is not None]
    if not feasible:
        return [None] * len(points)
    last_pick = feasible[-1][2]
    p0, t0 = feasible[0][0], feasible[0][1]
    if last_pick is not None:  # auto: from the start of its last regime
        for p, t, pick in reversed(feasible):
            if pick != last_pick:
                break
            p0, t0 = p, t
    out = []
    for p, t, _ in points:
        if t is None or p < p0:
            out.append(None)
        else:
            out.append(t0 * p0 / (t * p) if mode == "strong" else t0 / t)
    return out


def rows_of(mode, sims):
    """CSV rows (lists of strings) for one mode and platform from its simulate rows."""
    series = {}
    for r in sims:
        series.setdefault(r["backend"], []).append(r)
    out = []
    for backend, rs in series.items():
        rs.sort(key=lambda r: int(r["ranks"]))
        pts = [(int(r["ranks"]), float(r["epoch_s"]) if r["feasible"] == "1" and r["epoch_s"]
                else None, r["auto_pick"] if backend == "auto" else None) for r in rs]
        for r, eff in zip(rs, efficiencies(pts, mode)):
            graphs = r.get("graphs", "")
            out.append([mode, r["platform"], r["ranks"], r["nodes"], r["within_platform"], graphs,
                        backend, r["feasible"], r["step_s"], r["epoch_s"], r["energy_j"],
                        "" if eff is None else f"{eff:.6g}", r["auto_pick"]])
    return out


def run(args):
    pyplot()  # where matplotlib is only in the system python3, re-execute there before simulating
    platforms = [p for p in args.platforms.split(",") if p]
    common = ["--models", args.models, "--compute-s", str(args.compute_s)]
    rows = []
    for platform in platforms:
        strong = simulate(args.ddgnn, [*common, "--platform", platform, "--graphs",
                                       str(args.graphs)])
        for r in strong:
            r["graphs"] = str(args.graphs)
        rows += rows_of("strong", strong)
        weak = []
        for p in RANKS:
            n = args.graphs_per_rank * p
            part = simulate(args.ddgnn, [*common, "--platform", platform, "--graphs", str(n),
                                         "--ranks", str(p)])
            for r in part:
                r["graphs"] = str(n)
            weak += part
        rows += rows_of("weak", weak)
    csv_path = os.path.splitext(args.out)[0] + ".csv"
    tmp = f"{csv_path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write(",".join(HEADER) + "\n")
            for r in rows:
                f.write(",".join(str(v) for v in r) + "\n")
        os.replace(tmp, csv_path)
    except OSError as e:
        raise InputError(f"{csv_path}: cannot write: {e.strerror}") from None
    print(f"wrote {csv_path} ({len(rows)} rows)")
    draw(csv_path, args.out)


def read_scaling(path):
    """{(mode, platform): {backend: [(ranks, epoch_s or None, efficiency or None)]}}, the rank
    counts beyond each platform, and the auto picks by (mode, platform, ranks)."""
    data, beyond, picks = {}, {}, {}
    for line, f in read_rows(path, HEADER):
        mode, platform = f[COL["mode"]].strip(), f[COL["platform"]].strip()
        if mode not in MODES:
            raise InputError(f"{path}:{line}: mode must be strong or weak: {mode!r}")
        ranks = number(path, line, "ranks", f[COL["ranks"]], integer=True)
        if ranks < 1:
            raise InputError(f"{path}:{line}: column ranks must be positive: {ranks}")
        key = (mode, platform)
        if number(path, line, "within_platform", f[COL["within_platform"]], integer=True) == 0:
            beyond.setdefault(platform, set()).add(ranks)
        feasible = number(path, line, "feasible", f[COL["feasible"]], integer=True)
        epoch = eff = None
        if feasible and f[COL["epoch_s"]].strip():
            epoch = number(path, line, "epoch_s", f[COL["epoch_s"]])
            if epoch <= 0:
                raise InputError(f"{path}:{line}: column epoch_s must be positive: {epoch}")
        if f[COL["efficiency"]].strip():
            eff = number(path, line, "efficiency", f[COL["efficiency"]])
        backend = f[COL["backend"]].strip()
        data.setdefault(key, {}).setdefault(backend, []).append((ranks, epoch, eff))
        picks[(mode, platform, ranks)] = f[COL["auto_pick"]].strip()
    if not data:
        raise InputError(f"{path}: no rows")
    if not any(e is not None for series in data.values() for pts in series.values()
               for _, e, _ in pts):
        raise InputError(f"{path}: no feasible point to draw")
    for series in data.values():
        for pts in series.values():
            pts.sort()
    return data, beyond, picks


def nearest(points, target):
    """The (ranks, epoch, efficiency) point whose rank count is nearest `target` in log terms."""
    return min(points, key=lambda p: abs(math.log(p[0] / target)))


def draw_panel(ax, mode, platform, series, beyond):
    from matplotlib.ticker import FixedLocator, NullLocator
    all_ranks = sorted({p for pts in series.values() for p, _, _ in pts})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    if beyond:
        first = min(beyond)
        below = [r for r in all_ranks if r < first]
        left = (below[-1] * first) ** 0.5 if below else first / 1.5
        ax.axvspan(left, max(all_ranks) * 1.5, color=SHADE, zorder=0,
                   label="beyond the machine")
    names = [b for b in series if b != "auto"]
    never = []
    for k, b in enumerate(names):
        pts = dict((p, e) for p, e, _ in series[b])
        ys = [pts.get(r) for r in all_ranks]
        if all(y is None for y in ys):
            never.append(b)
        ax.plot(all_ranks, [float("nan") if y is None else y for y in ys],
                color=COLORS.get(b, OTHER_COLORS[k % len(OTHER_COLORS)]), marker="o",
                markersize=3, linewidth=1.6, label=b)
    if never:
        ax.text(0.02, 0.03, "never fits memory: " + ", ".join(never), transform=ax.transAxes,
                fontsize=8, color="#555555")
    auto = [(p, e, f) for p, e, f in series.get("auto", []) if e is not None]
    if auto:
        ax.plot([p for p, _, _ in auto], [e for _, e, _ in auto], color="black", linestyle="--",
                linewidth=1.2, marker=".", label="auto", zorder=5)
        start = next((p, e) for p, e, f in auto if f is not None)
        xs = [p for p in all_ranks if p >= start[0]]
        ideal = [start[1] * (start[0] / p if mode == "strong" else 1) for p in xs]
        ax.plot(xs, ideal, color="#888888", linestyle=":", linewidth=1.4,
                label="ideal (from auto)", zorder=4)
    claim = CLAIMS.get(platform)
    if mode == "strong" and claim:
        at, units = claim
        ax.axvline(at, color="#2b8c3e", linestyle=(0, (2, 2)), linewidth=1.6,
                   label=f"HydraGNN: near-linear to {at:,} {units}", zorder=3)
        text = f"HydraGNN reports near-linear\nstrong scaling to {at:,} {units}"
        with_eff = [(p, e, f) for p, e, f in auto if f is not None]
        if with_eff:
            p, _, eff = nearest(with_eff, at)
            text += f"\nsimulated auto at P = {p:,}: {100 * eff:.0f}%"
        ax.annotate(text, xy=(at, 0.97), xycoords=("data", "axes fraction"), xytext=(-6, 0),
                    textcoords="offset points", ha="right", va="top", fontsize=8,
                    color="#2b8c3e", bbox={"facecolor": "white", "edgecolor": "none",
                                           "alpha": 0.85, "pad": 1.5})
    ax.set_xlim(min(all_ranks) / 1.5, max(all_ranks) * 1.5)
    ticks = all_ranks
    every = 1
    while len(ticks[::every]) > 8:
        every *= 2
    ax.xaxis.set_major_locator(FixedLocator(ticks[::every]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{r:,}" for r in ticks[::every]], fontsize=8)
    ax.grid(True, which="major", color="#e8e8e8", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_xlabel("ranks (P)")
    ax.set_ylabel("epoch time (s)")
    what = "fixed dataset" if mode == "strong" else "fixed graphs a rank"
    ax.set_title(f"{platform}: {mode} scaling ({what})", fontsize=10)


def figure(path):
    """The matplotlib figure of SCALING.csv; InputError on bad input."""
    data, beyond, _ = read_scaling(path)
    order = list(CLAIMS)
    platforms = sorted({p for _, p in data},
                       key=lambda p: (order.index(p) if p in order else len(order), p))
    plt = pyplot()
    fig, axes = plt.subplots(len(platforms), 2, figsize=(WIDTH / DPI, HEIGHT / DPI),
                             squeeze=False)
    for row, platform in enumerate(platforms):
        for col, mode in enumerate(MODES):
            ax = axes[row][col]
            if (mode, platform) in data:
                draw_panel(ax, mode, platform, data[(mode, platform)], beyond.get(platform))
            else:
                ax.set_axis_off()
    handles, labels = {}, []
    for ax in fig.get_axes():
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab.startswith("HydraGNN"):
                lab = "HydraGNN's claim (" + CLAIM_SOURCE + ")"
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    fig.legend([handles[lab] for lab in labels], labels, loc="lower center",
               ncol=min(5, len(labels)), fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def draw(path, out):
    write_png(figure(path), out, dpi=DPI)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Strong and weak scaling of ddgnn simulate beside HydraGNN's claims.")
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="run ddgnn simulate, write FIG.csv and FIG.png")
    r.add_argument("--ddgnn", default="build/app/ddgnn", help="the ddgnn binary")
    r.add_argument("--models", required=True, help="cost models of ddgnn tune --out")
    r.add_argument("--out", required=True, metavar="FIG.png")
    r.add_argument("--platforms", default="perlmutter,frontier")
    r.add_argument("--graphs", type=int, default=2 ** 27, help="strong scaling: N")
    r.add_argument("--graphs-per-rank", type=int, default=8192, help="weak scaling: N / P")
    r.add_argument("--compute-s", type=float, default=0.001, help="compute seconds a step")
    p = sub.add_parser("plot", help="draw FIG.png from FIG.csv")
    p.add_argument("csv", metavar="SCALING.csv")
    p.add_argument("--out", metavar="FIG.png", help="output PNG (default SCALING.png)")
    args = parser.parse_args(argv)
    try:
        if args.what == "run":
            if args.graphs < 1 or args.graphs_per_rank < 1 or not args.compute_s > 0:
                raise InputError("--graphs, --graphs-per-rank and --compute-s must be positive")
            run(args)
        else:
            draw(args.csv, args.out or os.path.splitext(args.csv)[0] + ".png")
    except InputError as e:
        print(f"simulate_scaling: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
