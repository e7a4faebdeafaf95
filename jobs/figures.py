#!/usr/bin/env python3
"""The figures of results/, each a PNG drawn with matplotlib from the CSV beside it.

  python3 jobs/figures.py loader GRID.csv --out loader_backends.png
      µs per sample against batch size, one panel per (record size, ranks), one line per
      backend, and the memcpy ceiling of the same run (record bytes / memcpy GB/s) dashed;
      GRID.csv is what `ddgnn bench-loader` / bench/loader_grid.sh write
  python3 jobs/figures.py scaling CAMPAIGN.csv --out train_scaling.png [--cores N]
      training throughput (graphs/s) against ranks, one line per mpnn_type, and the time of each
      phase per epoch (load, graph, forward, forces, backward, sync, optimizer) as stacked bars;
      points with more ranks than cores (N, default this machine's) are drawn hollow and named
      oversubscribed; CAMPAIGN.csv is what `jobs/campaign.py collect` writes (swept keys
      NeuralNetwork.Architecture.mpnn_type or Architecture.mpnn_type)
  python3 jobs/figures.py learning RUN_DIR [RUN_DIR ...] --out learning.png
      validation energy and force MAE per epoch of each run (metrics.csv), log scale

Bad input (missing file, wrong header, a value that is not a number, nothing to draw) is one
line on stderr naming the file (and line), exit status 1, and no PNG.
"""

import argparse
import csv
import os
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plotting import InputError, number, pyplot, read_rows, save_png  # noqa: E402

GRID_HEADER = ["backend", "ranks", "group_ranks", "width", "sample_bytes", "batch",
               "fraction_remote", "us_per_sample", "gb_per_s", "memcpy_gb_per_s",
               "seconds_per_batch"]
COLORS = {"collective": "#d62728", "file": "#9467bd", "replicated": "#2ca02c", "rma": "#1f77b4",
          "shm": "#ff7f0e", "nccl": "#8c564b", "auto": "black"}
PHASES = ["load_s", "graph_s", "forward_s", "forces_s", "backward_s", "sync_s", "optimizer_s"]
MODEL_KEYS = ["NeuralNetwork.Architecture.mpnn_type", "Architecture.mpnn_type"]


def size_label(n):
    return f"{n // 1048576} MiB" if n >= 1048576 else f"{n // 1024} KiB" if n >= 1024 else f"{n} B"


def read_grid(path):
    """{(sample_bytes, ranks): {backend: [(batch, us)]}}, {(sample_bytes, ranks): memcpy GB/s};
    one replica group of all ranks (width 0) only."""
    cells, memcpy = {}, {}
    try:
        with open(path, newline="") as f:
            header = [c.strip() for c in next(csv.reader(f), [])]
    except OSError as e:
        raise InputError(f"{path}: cannot open: {e.strerror}") from None
    if header[:len(GRID_HEADER)] != GRID_HEADER:  # later columns (quartiles, ...) are allowed
        raise InputError(f"{path}:1: header is {','.join(header)!r}, expected it to start with "
                         f"{','.join(GRID_HEADER)!r}")
    for line, f in read_rows(path, header):
        c = dict(zip(GRID_HEADER, f))
        if number(path, line, "width", c["width"], integer=True) != 0:
            continue
        key = (number(path, line, "sample_bytes", c["sample_bytes"], integer=True),
               number(path, line, "ranks", c["ranks"], integer=True))
        us = number(path, line, "us_per_sample", c["us_per_sample"])
        batch = number(path, line, "batch", c["batch"], integer=True)
        cells.setdefault(key, {}).setdefault(c["backend"].strip(), []).append((batch, us))
        memcpy.setdefault(key, []).append(number(path, line, "memcpy_gb_per_s",
                                                 c["memcpy_gb_per_s"]))
    if not cells:
        raise InputError(f"{path}: no rows with one replica group (width 0)")
    return cells, {k: sum(v) / len(v) for k, v in memcpy.items()}


def loader_figure(path):
    cells, memcpy = read_grid(path)
    sizes = sorted({s for s, _ in cells})
    ranks = sorted({r for _, r in cells})
    plt = pyplot()
    fig, axes = plt.subplots(len(sizes), len(ranks), figsize=(3.2 * len(ranks), 2.6 * len(sizes)),
                             squeeze=False, sharex=True)
    for i, size in enumerate(sizes):
        for j, p in enumerate(ranks):
            ax = axes[i][j]
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            series = cells.get((size, p), {})
            for backend in sorted(series):
                pts = sorted(series[backend])
                ax.plot([b for b, _ in pts], [u for _, u in pts], marker="o", markersize=3,
                        color=COLORS.get(backend, "gray"), label=backend)
            if (size, p) in memcpy:
                ceiling = size / (memcpy[(size, p)] * 1e3)  # µs per record at memcpy speed
                ax.axhline(ceiling, color="gray", linestyle="--", linewidth=1,
                           label="memcpy ceiling")
            ax.set_title(f"{size_label(size)} records, {p} rank{'s' if p > 1 else ''}",
                         fontsize=9)
            ax.grid(color="#e8e8e8", linewidth=0.6)
            if i == len(sizes) - 1:
                ax.set_xlabel("batch (records)")
            if j == 0:
                ax.set_ylabel("µs per record")
    handles, labels = {}, []
    for ax in fig.get_axes():
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="upper center",
               ncol=len(handles), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def read_campaign(path, cores):
    """{model: [(ranks, graphs/s, {phase: s}, oversubscribed)]} from the done points."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            header = reader.fieldnames or []
    except OSError as e:
        raise InputError(f"{path}: cannot open: {e.strerror}") from None
    key = next((k for k in MODEL_KEYS if k in header), None)
    for need in ["status", "ranks", "graphs_per_s"] + ["mean_" + p for p in PHASES]:
        if need not in header:
            raise InputError(f"{path}:1: no column {need} (a `jobs/campaign.py collect` CSV?)")
    out = {}
    for n, row in enumerate(rows, start=2):
        if row["status"] != "done":
            continue
        model = row[key] if key else "model"
        p = number(path, n, "ranks", row["ranks"], integer=True)
        gps = number(path, n, "graphs_per_s", row["graphs_per_s"])
        phases = {ph: number(path, n, "mean_" + ph, row["mean_" + ph] or "0") for ph in PHASES}
        out.setdefault(model, []).append((p, gps, phases, p > cores))
    if not out:
        raise InputError(f"{path}: no finished point to draw")
    return out


def scaling_figure(path, cores):
    data = read_campaign(path, cores)
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6),
                                      gridspec_kw={"width_ratios": [1, 1.4]})
    left.set_xscale("log", base=2)
    for k, model in enumerate(sorted(data)):
        by_p = {}
        for p, gps, phases, over in data[model]:
            by_p.setdefault(p, []).append((gps, phases, over))
        ps = sorted(by_p)
        mean = [sum(g for g, _, _ in by_p[p]) / len(by_p[p]) for p in ps]
        color = f"C{k}"
        left.plot(ps, mean, color=color, label=model)
        for p, m in zip(ps, mean):
            over = by_p[p][0][2]
            left.plot([p], [m], marker="o", color=color, markerfacecolor="white" if over else color)
    left.set_xticks(sorted({p for v in data.values() for p, *_ in v}))
    from matplotlib.ticker import ScalarFormatter
    left.get_xaxis().set_major_formatter(ScalarFormatter())
    left.set_xlabel(f"ranks (hollow: more ranks than the {cores} cores, oversubscribed)")
    left.set_ylabel("graphs / s, all ranks (epochs after the first)")
    left.set_title("training throughput", fontsize=10)
    left.grid(color="#e8e8e8", linewidth=0.6)
    left.legend(frameon=False, fontsize=8)
    labels, bars = [], []
    for model in sorted(data):
        by_p = {}
        for p, _, phases, over in data[model]:
            by_p.setdefault(p, []).append(phases)
        for p in sorted(by_p):
            avg = {ph: sum(d[ph] for d in by_p[p]) / len(by_p[p]) for ph in PHASES}
            bars.append(avg)
            labels.append(f"{model}\nP={p}")
    bottoms = [0.0] * len(bars)
    for k, ph in enumerate(PHASES):
        vals = [b[ph] for b in bars]
        right.bar(range(len(bars)), vals, bottom=bottoms, color=f"C{k}", label=ph[:-2])
        bottoms = [a + v for a, v in zip(bottoms, vals)]
    right.set_xticks(range(len(bars)))
    right.set_xticklabels(labels, fontsize=7)
    right.set_ylabel("seconds per epoch, each rank's mean")
    right.set_title("time per phase", fontsize=10)
    right.legend(frameon=False, fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


def learning_figure(run_dirs):
    plt = pyplot()
    fig, (e_ax, f_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for run in run_dirs:
        path = os.path.join(run, "metrics.csv")
        try:
            with open(path, newline="") as f:
                    rows = list(csv.DictReader(f))
        except OSError as e:
            raise InputError(f"{path}: cannot open: {e.strerror}") from None
        if not rows:
            raise InputError(f"{path}: no epoch rows")
        name = os.path.basename(os.path.normpath(run))
        epochs = [number(path, n, "epoch", r["epoch"], integer=True)
                  for n, r in enumerate(rows, start=2)]
        for ax, col in ((e_ax, "validate_energy_mae_mev_atom"), (f_ax, "validate_force_mae_mev_a")):
            if col in rows[0] and rows[0][col]:
                ax.plot(epochs, [number(path, n, col, r[col]) for n, r in enumerate(rows, 2)],
                        label=name)
    for ax, what in ((e_ax, "validation energy MAE (meV/atom)"),
                     (f_ax, "validation force MAE (meV/Å)")):
        ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_ylabel(what)
        ax.grid(color="#e8e8e8", linewidth=0.6)
        ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="figure", required=True)
    p = sub.add_parser("loader")
    p.add_argument("csv")
    p.add_argument("--out", required=True)
    p = sub.add_parser("scaling")
    p.add_argument("csv")
    p.add_argument("--out", required=True)
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p = sub.add_parser("learning")
    p.add_argument("runs", nargs="+")
    p.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    try:
        if args.figure == "loader":
            fig = loader_figure(args.csv)
        elif args.figure == "scaling":
            fig = scaling_figure(args.csv, args.cores)
        else:
            fig = learning_figure(args.runs)
        save_png(fig, args.out)
        w, h = fig.canvas.get_width_height()
        print(f"wrote {args.out} ({w}x{h})")
    except InputError as e:
        print(f"figures: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
