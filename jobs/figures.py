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
  python3 jobs/figures.py learning RUN_DIR [RUN_DIR ...] --out learning.png [--time]
          [--split validate|test|train]
      energy and force MAE of one split (validation unless --split says) per epoch of each run
      (metrics.csv), or against minutes with --time, log scale
  python3 jobs/figures.py datasize RUN_DIR [RUN_DIR ...] --out datasize.png
      test energy and force MAE of each finished run's best epoch against its training graphs
      (events.jsonl), one line per config: runs on fractions of one training split
      (Dataset.train_fraction), log-log
  python3 jobs/figures.py auto GRID.csv [--remeasured AGAIN.csv] --out auto_backends.png
          [--table auto_backends.md]
      `Loader.backend: auto` against always one backend on a bench-loader grid (every
      configuration measured with rma, collective, shm and replicated; bench/loader_grid.sh):
      auto's pick replayed from the first repetitions (explore_seconds), its speed-up over each
      backend per configuration, how often it picks the fastest, the share of the best
      backend's speed it reaches, beside the published figures; judged on the repetitions after
      the exploration (rest_seconds) or, with --remeasured, on a second measurement of the same
      grid (seconds_per_batch), which also gives the ceiling (how often the two measurements
      agree on the fastest candidate). The table (markdown) is printed, and written to --table.

Bad input (missing file, wrong header, a value that is not a number, nothing to draw) is one
line on stderr naming the file (and line), exit status 1, and no PNG.
"""

import argparse
import csv
import json
import os
import shlex
import statistics
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plotting import InputError, number, pyplot, read_rows, write_png  # noqa: E402

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
    handles = {}
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
    many = len(data) > 6  # every mpnn_type: a wider figure, a log scale for graphs/s
    fig, (left, right) = plt.subplots(1, 2, figsize=(20 if many else 12, 5.2 if many else 4.6),
                                      gridspec_kw={"width_ratios": [1, 2.4 if many else 1.4]})
    left.set_xscale("log", base=2)
    if many:
        left.set_yscale("log")
    for k, model in enumerate(sorted(data)):
        by_p = {}
        for p, gps, phases, over in data[model]:
            by_p.setdefault(p, []).append((gps, phases, over))
        ps = sorted(by_p)
        mean = [sum(g for g, _, _ in by_p[p]) / len(by_p[p]) for p in ps]
        color = f"C{k % 10}"
        left.plot(ps, mean, color=color, label=model, linestyle="-" if k < 10 else "--")
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
    right.set_xticklabels(labels, fontsize=6 if many else 7, rotation=90 if many else 0)
    right.set_ylabel("seconds per epoch, each rank's mean")
    right.set_title("time per phase", fontsize=10)
    right.legend(frameon=False, fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


SPLIT_NAMES = {"validate": "validation", "test": "test", "train": "training"}


def learning_figure(run_dirs, by_time=False, split="validate"):
    """The energy and force MAE of one split (metrics.csv's validate_, test_ or train_ columns)
    of each run against its epoch, or with `by_time` against the minutes since it started
    (metrics.csv's elapsed_s), to compare models at equal time."""
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
        if by_time:
            epochs = [number(path, n, "elapsed_s", r["elapsed_s"]) / 60
                      for n, r in enumerate(rows, start=2)]
        else:
            epochs = [number(path, n, "epoch", r["epoch"], integer=True)
                      for n, r in enumerate(rows, start=2)]
        for ax, col in ((e_ax, f"{split}_energy_mae_mev_atom"), (f_ax, f"{split}_force_mae_mev_a")):
            if col in rows[0] and rows[0][col]:
                ax.plot(epochs, [number(path, n, col, r[col]) for n, r in enumerate(rows, 2)],
                        label=name, marker="o" if len(rows) < 4 else None, markersize=4)
    for ax, what in ((e_ax, f"{SPLIT_NAMES[split]} energy MAE (meV/atom)"),
                     (f_ax, f"{SPLIT_NAMES[split]} force MAE (meV/Å)")):
        ax.set_yscale("log")
        ax.set_xlabel("minutes" if by_time else "epoch")
        ax.set_ylabel(what)
        ax.grid(color="#e8e8e8", linewidth=0.6)
        ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def read_run_end(run):
    """(config name, training graphs, the best epoch's row) of a finished run, from its
    events.jsonl: run_start's config and graphs, run_end's best."""
    path = os.path.join(run, "events.jsonl")
    start = end = None
    try:
        with open(path) as f:
            for n, line in enumerate(f, start=1):
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    raise InputError(f"{path}:{n}: not a JSON line") from None
                if event.get("event") == "run_start":
                    start = event
                elif event.get("event") == "run_end":
                    end = event
    except OSError as e:
        raise InputError(f"{path}: cannot open: {e.strerror}") from None
    if start is None or end is None or "best" not in end:
        raise InputError(f"{path}: no run_start, or no run_end with the best epoch "
                         "(a run that has not finished)")
    try:
        config = os.path.splitext(os.path.basename(start["config"]))[0]
        return config, int(start["graphs"]["train"]), end["best"]
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{path}: run_start lacks config or graphs.train") from None


def datasize_figure(run_dirs):
    """The best epoch's test energy and force MAE of each run against its training graphs, one
    line per config (runs of one config on fractions of the training split, Dataset
    train_fraction), to show whether more data helps."""
    by_config = {}
    for run in run_dirs:
        config, n_train, best = read_run_end(run)
        for col in ("test_energy_mae_mev_atom", "test_force_mae_mev_a"):
            if not isinstance(best.get(col), (int, float)):
                raise InputError(f"{os.path.join(run, 'events.jsonl')}: the best epoch has no "
                                 f"{col}")
        by_config.setdefault(config, []).append(
            (n_train, best["test_energy_mae_mev_atom"], best["test_force_mae_mev_a"]))
    plt = pyplot()
    fig, (e_ax, f_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for config, points in sorted(by_config.items()):
        points.sort()
        xs = [p[0] for p in points]
        for ax, k in ((e_ax, 1), (f_ax, 2)):
            ax.plot(xs, [p[k] for p in points], label=config, marker="o", markersize=5)
    for ax, what in ((e_ax, "test energy MAE (meV/atom)"), (f_ax, "test force MAE (meV/Å)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("training graphs")
        ax.set_ylabel(what)
        ax.grid(color="#e8e8e8", linewidth=0.6, which="both")
        ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


# `auto` against always one backend. Loader.backend auto on one rank is replicated; on several it
# explores Tuner.candidates (default shm, rma, collective and file; file is not in a bench-loader
# grid, and 100x slower there) and keeps shm, the first, unless another is faster by the margin.
AUTO_CANDIDATES = ["shm", "rma", "collective"]
SINGLE_BACKENDS = ["collective", "rma", "shm", "replicated"]
SWITCH_MARGIN = 0.05  # OnlineOptions::switch_margin (tuner/online.h)
TIE_TOLERANCE = 0.05  # "within 5% of the fastest", as `ddgnn tune` counts it
PUBLISHED_SPEEDUP = 2.83  # over the worst single backend choice
PUBLISHED_ACCURACY = (96.3, 94.3)  # % of configurations where the best backend is selected


def ratio_text(x):
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}" if x >= 10 else f"{x:.2f}"


def describe(key):
    ranks, width, size, batch = key
    group = f" in groups of {width}" if width else ""
    ranks_text = f"{ranks} rank{'s' if ranks > 1 else ''}"
    return f"{ranks_text}{group}, {size_label(size)} records, batch {batch}"


def read_timings(path, columns):
    """{(ranks, width, sample_bytes, batch): {"line": first line, "exchanging": bool, "backends":
    {backend: {column: seconds}}}} of a bench-loader grid; every configuration must have all of
    SINGLE_BACKENDS."""
    try:
        with open(path, newline="") as f:
            header = [c.strip() for c in next(csv.reader(f), [])]
    except OSError as e:
        raise InputError(f"{path}: cannot open: {e.strerror}") from None
    if header[:len(GRID_HEADER)] != GRID_HEADER:
        raise InputError(f"{path}:1: header is {','.join(header)!r}, expected it to start with "
                         f"{','.join(GRID_HEADER)!r}")
    for c in columns:
        if c not in header:
            raise InputError(f"{path}:1: no column {c} (a grid of an older `ddgnn bench-loader`: "
                             "measure it again)")
    cells = {}
    for line, f in read_rows(path, header):
        c = dict(zip(header, f))
        key = tuple(number(path, line, k, c[k], integer=True)
                    for k in ("ranks", "width", "sample_bytes", "batch"))
        cell = cells.setdefault(key, {"line": line, "exchanging": False, "backends": {}})
        backend = c["backend"].strip()
        if backend in cell["backends"]:
            raise InputError(f"{path}:{line}: {backend} measured twice at {describe(key)} "
                             "(two grids in one file?)")
        times = {}
        for k in ["seconds_per_batch"] + list(columns):
            times[k] = number(path, line, k, c[k])
            if times[k] <= 0:
                raise InputError(f"{path}:{line}: column {k} is not a positive time: {c[k]!r}")
        cell["backends"][backend] = times
        cell["exchanging"] |= number(path, line, "fraction_remote", c["fraction_remote"]) > 0
    if not cells:
        raise InputError(f"{path}: no measurements after the header")
    for key, cell in cells.items():
        missing = [b for b in SINGLE_BACKENDS if b not in cell["backends"]]
        if missing:
            raise InputError(f"{path}:{cell['line']}: no {', '.join(missing)} at {describe(key)} "
                             f"(auto is compared with {', '.join(SINGLE_BACKENDS)}: measure all)")
    return cells


def auto_pick(ranks, explored):
    """The backend Loader.backend auto serves with, from the candidates' median times over the
    explored batches (train/backend_switcher.cpp, OnlineTuner::decide): replicated on one rank;
    else the fastest (the first by name among equals) unless shm is within the switch margin."""
    if ranks == 1:
        return "replicated"
    best = min(sorted(AUTO_CANDIDATES), key=lambda b: explored[b])
    return "shm" if explored["shm"] <= explored[best] * (1 + SWITCH_MARGIN) else best


def auto_outcomes(path, again_path=None):
    """One dict per configuration: key, exchanging, pick, times (the judging seconds per batch by
    backend) and, with a second measurement, agree (its fastest candidate is the first's)."""
    cells = read_timings(path, ["explore_seconds", "rest_seconds"])
    again = read_timings(again_path, []) if again_path else None
    out = []
    for key in sorted(cells):
        cell = cells[key]["backends"]
        pick = auto_pick(key[0], {b: cell[b]["explore_seconds"] for b in AUTO_CANDIDATES})
        o = {"key": key, "exchanging": cells[key]["exchanging"], "pick": pick}
        if again is None:
            o["times"] = {b: cell[b]["rest_seconds"] for b in SINGLE_BACKENDS}
        else:
            if key not in again:
                raise InputError(f"{again_path}: no measurement at {describe(key)} (not the grid "
                                 f"of {path} measured again)")
            o["times"] = {b: again[key]["backends"][b]["seconds_per_batch"]
                          for b in SINGLE_BACKENDS}
            first = {b: cell[b]["seconds_per_batch"] for b in AUTO_CANDIDATES}
            o["agree"] = fastest(first, AUTO_CANDIDATES) == fastest(o["times"], AUTO_CANDIDATES)
        out.append(o)
    return out


def fastest(times, backends):
    return min(sorted(backends), key=lambda b: times[b])


def auto_summary(outcomes):
    """Speed-ups {backend: [t(backend) / t(auto)]} and the selection measures, each a tuple
    (label, percent, count text, note)."""
    speedup = {b: [o["times"][b] / o["times"][o["pick"]] for o in outcomes]
               for b in SINGLE_BACKENDS}
    exch = [o for o in outcomes if o["exchanging"]]
    measures = []
    if exch:
        right = sum(o["pick"] == fastest(o["times"], AUTO_CANDIDATES) for o in exch)
        near = sum(o["times"][o["pick"]] <= (1 + TIE_TOLERANCE) *
                   o["times"][fastest(o["times"], AUTO_CANDIDATES)] for o in exch)
        measures.append(("picks the fastest of its candidates", 100 * right / len(exch),
                         f"{right}/{len(exch)}", "samples exchanged"))
        measures.append((f"picks one within {TIE_TOLERANCE:.0%} of it", 100 * near / len(exch),
                         f"{near}/{len(exch)}", "samples exchanged"))
        if "agree" in exch[0]:
            agree = sum(o["agree"] for o in exch)
            measures.append(("ceiling: two measurements agree on it", 100 * agree / len(exch),
                             f"{agree}/{len(exch)}", "samples exchanged"))
    n = len(outcomes)
    right4 = sum(o["pick"] == fastest(o["times"], SINGLE_BACKENDS) for o in outcomes)
    measures.append(("picks the fastest of all four", 100 * right4 / n, f"{right4}/{n}",
                     "every configuration"))
    for subset, note in ((outcomes, "every configuration"), (exch, "samples exchanged")):
        if subset:
            share = [o["times"][fastest(o["times"], SINGLE_BACKENDS)] / o["times"][o["pick"]]
                     for o in subset]
            measures.append(("share of the fastest backend's speed", 100 * sum(share) / len(share),
                             f"mean of {len(share)}", note))
    return speedup, measures


def auto_table(outcomes, grid, judged):
    speedup, measures = auto_summary(outcomes)
    exch = [o["exchanging"] for o in outcomes]
    rows = [f"`auto` against always one backend on {grid}: {len(outcomes)} configurations "
            f"({sum(exch)} exchanging samples), judged on {judged}", "",
            "| always | auto's speed-up: mean | median | largest | smallest "
            "| mean, samples exchanged | auto faster / the same backend / slower |",
            "|---|---|---|---|---|---|---|"]
    for b in SINGLE_BACKENDS:
        v = sorted(speedup[b])
        ex = [x for x, e in zip(speedup[b], exch) if e]
        ex_mean = f"{ratio_text(statistics.mean(ex))}x" if ex else "–"
        same = sum(o["pick"] == b for o in outcomes)
        faster, slower = sum(x > 1 for x in v), sum(x < 1 for x in v)
        rows.append(f"| {b} | {ratio_text(statistics.mean(v))}x | {statistics.median(v):.2f}x | "
                    f"{ratio_text(v[-1])}x | {v[0]:.2f}x | {ex_mean} | "
                    f"{faster} / {same} / {slower} |")
    rows.append(f"| published | {PUBLISHED_SPEEDUP}x over the worst single backend choice "
                "| | | | | |")
    rows += ["", "| selection | this machine | of | over | published |", "|---|---|---|---|---|"]
    for k, (label, pct, count, note) in enumerate(measures):
        pub = " / ".join(f"{p}%" for p in PUBLISHED_ACCURACY) if k == 0 else ""
        rows.append(f"| {label} | {pct:.1f}% | {count} | {note} | {pub} |")
    return "\n".join(rows) + "\n"


def write_text(path, text):
    """Writes `text` to `path` through a temporary file, as save_png does."""
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror}") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def judged_on(again_path):
    if again_path:
        return f"a second measurement ({os.path.basename(again_path)})"
    return "the repetitions after auto's exploration"


def auto_figure(path, again_path=None):
    outcomes = auto_outcomes(path, again_path)
    speedup, measures = auto_summary(outcomes)
    exch = [o["exchanging"] for o in outcomes]
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.2),
                                      gridspec_kw={"width_ratios": [1.15, 1]})
    left.set_yscale("log")
    means, medians, top = [], [], 1.0
    for i, b in enumerate(SINGLE_BACKENDS):
        v = speedup[b]
        xs = [i + 0.5 * ((k * 0.618034) % 1 - 0.5) for k in range(len(v))]  # spread, fixed
        for flag, label, face in ((True, b, COLORS[b]), (False, f"{b}, one rank", "white")):
            pts = [(x, y) for x, y, e in zip(xs, v, exch) if e == flag]
            if pts:
                left.plot([x for x, _ in pts], [y for _, y in pts], linestyle="none", marker="o",
                          markersize=3.5, color=COLORS[b], markerfacecolor=face, alpha=0.75,
                          label=label)
        means.append(statistics.mean(v))
        medians.append(statistics.median(v))
        top = max(top, max(v))
        left.annotate(f"mean {ratio_text(means[-1])}×\nmedian {medians[-1]:.2f}×\n"
                      f"largest {ratio_text(max(v))}×", (i, max(v)), textcoords="offset points",
                      xytext=(0, 8), ha="center", fontsize=8)
    ticks = range(len(SINGLE_BACKENDS))
    left.plot(ticks, means, linestyle="none", marker="D", color="black", label="mean")
    left.plot(ticks, medians, linestyle="none", marker="_", markersize=24, markeredgewidth=2,
              color="black", label="median")
    left.axhline(1, color="gray", linewidth=1)
    left.axhline(PUBLISHED_SPEEDUP, color="#d62728", linestyle="--", linewidth=1,
                 label=f"published: {PUBLISHED_SPEEDUP}× over the worst single backend")
    left.set_ylim(top=top * 8)
    left.set_xticks(list(ticks))
    left.set_xticklabels([f"always {b}" for b in SINGLE_BACKENDS])
    left.set_ylabel("t(always the backend) / t(auto), per configuration")
    left.set_title(f"speed-up of auto, {len(outcomes)} configurations "
                   "(hollow: one rank, where auto is replicated)", fontsize=10)
    left.grid(axis="y", color="#e8e8e8", linewidth=0.6)
    keep = [h for h in left.get_lines() if h.get_label() in ("mean", "median") or
            h.get_label().startswith("published")]
    left.legend(keep, [h.get_label() for h in keep], frameon=False, fontsize=8, loc="upper right")
    bars = [(f"{label}\n({note})", pct, f"{pct:.1f}% ({count})", "#4c72b0", "")
            for label, pct, count, note in measures]
    bars += [("published: selects the best backend", p, f"{p}%", "#bbbbbb", "//")
             for p in PUBLISHED_ACCURACY]
    ys = range(len(bars))
    for y, (_, pct, text, color, hatch) in zip(ys, bars):
        right.barh(y, pct, color=color, hatch=hatch, edgecolor="white" if not hatch else "gray")
        right.text(pct + 1, y, text, va="center", fontsize=8)
    right.set_yticks(list(ys))
    right.set_yticklabels([b[0] for b in bars], fontsize=8)
    right.invert_yaxis()
    right.set_xlim(0, 125)
    right.set_xticks(range(0, 101, 20))
    right.set_xlabel("% of configurations (share of speed: mean %)")
    right.set_title("auto's choice (candidates on several ranks: shm, rma, collective)",
                    fontsize=10)
    right.grid(axis="x", color="#e8e8e8", linewidth=0.6)
    fig.suptitle(f"auto against every single backend: {os.path.basename(path)}, judged on "
                 f"{judged_on(again_path)}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return fig, auto_table(outcomes, os.path.basename(path), judged_on(again_path))


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
    p.add_argument("--time", action="store_true", help="against minutes instead of epochs")
    p.add_argument("--split", choices=sorted(SPLIT_NAMES), default="validate",
                   help="the split whose errors are drawn (default validate)")
    p.add_argument("--out", required=True)
    p = sub.add_parser("datasize")
    p.add_argument("runs", nargs="+")
    p.add_argument("--out", required=True)
    p = sub.add_parser("auto")
    p.add_argument("csv")
    p.add_argument("--remeasured", help="a second measurement of the same grid to judge on")
    p.add_argument("--out", required=True)
    p.add_argument("--table", help="also write the table (markdown) here")
    args = ap.parse_args(argv)
    try:
        if args.figure == "loader":
            fig = loader_figure(args.csv)
        elif args.figure == "scaling":
            fig = scaling_figure(args.csv, args.cores)
        elif args.figure == "auto":
            fig, table = auto_figure(args.csv, args.remeasured)
            command = " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
            table = f"Made by `python3 jobs/figures.py {command}`.\n\n{table}"
            print(table)
            if args.table:
                write_text(args.table, table)
                print(f"wrote {args.table}")
        elif args.figure == "datasize":
            fig = datasize_figure(args.runs)
        else:
            fig = learning_figure(args.runs, args.time, args.split)
        write_png(fig, args.out)
    except InputError as e:
        print(f"figures: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
