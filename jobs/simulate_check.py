#!/usr/bin/env python3
"""`ddgnn simulate` against what was published and what was measured: two tables, each written
as CSV and printed as markdown, every prediction made by running `ddgnn simulate` itself.

Usage:
    python3 jobs/simulate_check.py published --ddgnn BIN --models M.json --out OUT.csv
    python3 jobs/simulate_check.py measured --ddgnn BIN --models M.json --measured RUNS.csv
        --parameters N [--graphs 1600] [--config NAME] [--prefetch 2] --out OUT.csv

published: DDStore's per-row fetch times (ORNL/DDStore, docs/results.md: bench_get.py, one
    thread, host destination, batch 128 rows of uniformly random global ids, most of them
    remote) against simulate's fetch of a batch of 128 samples of that size, divided by 128.
    One-sided is DDStore's method 1 (libfabric fi_read, one read a row) against ddgnn's rma
    (MPI_Get, two gets a sample); collective is DDStore's method 0 (MPI all-to-all in 2 MiB
    rounds) against ddgnn's collective. Ranks: 2 nodes, 16 on Frontier (8 GCDs a node; the
    collective figures say 16 ranks, the script's example runs 2 nodes x 8) and 8 on Perlmutter
    (4 GPUs a node, the 2-node job of the same page); the page does not give the one-sided
    figures' rank count.
measured: rows in the format of bench/train_scaling.sh (config,ranks,backend,batch_per_rank,
    ...,step_ms,...), one of them on one rank. The one-rank row gives the workload (compute =
    forward + forces + backward + optimizer, collate = the radius graph on the prefetch thread),
    per graph: a row with B graphs a rank gets B times the one-rank row's per-graph figures.
    simulate --platform local predicts every row's step and epoch (all ranks on this one node:
    --ranks-per-node 64, so ranks beyond the cores share them, as they did when measured). Only
    the rows of --config (needed when the file has several) and of --prefetch are used; rows of
    a backend without a model (file: the grids have none) are left out, and said so.

Writes OUT.csv and prints the markdown table with the commands run. Bad input (a missing file,
a wrong header, no one-rank row, a failed simulate) is one line on stderr and exit status 1.
"""

import argparse
import csv
import math
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plotting import InputError, number, read_rows  # noqa: E402

SOURCE = "https://github.com/ORNL/DDStore/blob/main/docs/results.md"
BATCH = 128
# Row sizes: 784 and 3,136 float32 (bench_get.py's defaults) and 200 KB, 1 MiB.
ROW_BYTES = {"3 KB": 3136, "12.5 KB": 12544, "200 KB": 204800, "1 MB": 1048576}
RANKS = {"frontier": 16, "perlmutter": 8}
# (platform, DDStore method, ddgnn backend, row, published µs per row, note)
PUBLISHED = [
    ("frontier", "one-sided", "rma", "3 KB", 0.68, ""),
    ("frontier", "one-sided", "rma", "12.5 KB", 1.82, ""),
    ("frontier", "one-sided", "rma", "200 KB", 27.5, ""),
    ("frontier", "one-sided", "rma", "1 MB", 189.0, "slower than single reads (not investigated)"),
    ("frontier", "one-sided", "rma", "3 KB", 1.6, "the collective's job, 16 ranks"),
    ("frontier", "collective", "collective", "3 KB", 3.0, "16 ranks, 2 MiB rounds"),
    ("frontier", "collective", "collective", "12.5 KB", 7.5, "16 ranks, 2 MiB rounds"),
    ("frontier", "collective", "collective", "200 KB", 111.0, "16 ranks, 2 MiB rounds"),
    ("frontier", "collective", "collective", "1 MB", 685.0, "16 ranks, 2 MiB rounds"),
    ("perlmutter", "one-sided", "rma", "3 KB", 0.82, ""),
    ("perlmutter", "one-sided", "rma", "12.5 KB", 1.19, ""),
    ("perlmutter", "one-sided", "rma", "1 MB", 75.0, ""),
]
PUBLISHED_HEADER = ["platform", "ranks", "method", "backend", "row", "row_bytes", "batch",
                    "published_us_per_row", "predicted_us_per_row", "ratio", "node_us_per_row",
                    "network_us_per_row", "note", "source"]
SIM_COLUMNS = ["platform", "ranks", "nodes", "within_platform", "backend", "group_ranks",
               "calibrated", "feasible", "memory_gb_per_rank", "fetch_node_s", "fetch_network_s",
               "fetch_s", "load_s", "allreduce_s", "step_s", "steps", "epoch_s", "energy_j",
               "auto_pick"]
MEASURED_COLUMNS = ["config", "ranks", "backend", "batch_per_rank", "prefetch", "graphs_per_s",
                    "step_ms", "load_ms", "fetch_ms", "graph_ms", "forward_ms", "forces_ms",
                    "backward_ms", "sync_ms", "optimizer_ms", "peak_rss_mb"]
MEASURED_HEADER = ["ranks", "backend", "batch_per_rank", "oversubscribed", "measured_step_ms",
                   "predicted_step_ms", "step_ratio", "measured_epoch_s", "predicted_epoch_s",
                   "epoch_ratio", "measured_sync_ms", "predicted_allreduce_ms",
                   "measured_fetch_ms", "predicted_fetch_ms"]


def simulate(ddgnn, args):
    """Runs `ddgnn simulate ARGS --out tmp.csv`; returns {(ranks, backend): row dict}."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "sim.csv")
        cmd = [ddgnn, "simulate", *args, "--out", out]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except OSError as e:
            raise InputError(f"{ddgnn}: cannot run: {e.strerror}") from None
        if r.returncode != 0:
            last = (r.stderr.strip() or r.stdout.strip() or "no output").splitlines()[-1]
            raise InputError(f"ddgnn simulate {' '.join(args)}: exit {r.returncode}: {last}")
        rows = {}
        for line, f in read_rows(out, SIM_COLUMNS):
            row = dict(zip(SIM_COLUMNS, f))
            rows[(int(row["ranks"]), row["backend"])] = row
        return rows


def fmt(v, digits=3):
    """A number for the markdown table (3 significant digits); text as it is."""
    if isinstance(v, float):
        return f"{v:.{digits}g}" if math.isfinite(v) else ""
    return str(v)


def write_csv(path, header, rows):
    """The rows with every float to 6 significant digits, through a temporary file."""
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            w.writerows([fmt(v, 6) for v in row] for row in rows)
        os.replace(tmp, path)
    except OSError as e:
        raise InputError(f"{path}: cannot write: {e.strerror}") from None


def published(args):
    """The DDStore table: one simulate run per (platform, row size)."""
    rows, cache = [], {}
    commands = []
    for platform, method, backend, row, us, note in PUBLISHED:
        size, ranks = ROW_BYTES[row], RANKS[platform]
        key = (platform, size)
        if key not in cache:
            sim_args = ["--models", args.models, "--platform", platform, "--ranks", str(ranks),
                        "--batch", str(BATCH), "--sample-bytes", str(size), "--graphs",
                        str(4096 * ranks)]
            commands.append(" ".join([args.ddgnn, "simulate", *sim_args, "--out", "X.csv"]))
            cache[key] = simulate(args.ddgnn, sim_args)
        sim = cache[key].get((ranks, backend))
        if sim is None:
            raise InputError(f"{args.models}: no {backend} model, so no {backend} prediction")
        per_row = lambda col: 1e6 * float(sim[col]) / BATCH  # noqa: E731
        predicted = per_row("fetch_s")
        rows.append([platform, ranks, method, backend, row, size, BATCH, us, predicted,
                     predicted / us, per_row("fetch_node_s"), per_row("fetch_network_s"), note,
                     SOURCE])
    write_csv(args.out, PUBLISHED_HEADER, rows)
    print("| platform | P | DDStore method (ddgnn backend) | row | published µs/row | "
          "predicted µs/row (node + network) | predicted / published | note |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} ({r[3]}) | {r[4]} | {r[7]:g} | {fmt(r[8])} "
              f"({fmt(r[10])} + {fmt(r[11])}) | {fmt(r[9])} | {r[12]} |")
    print("\nEach prediction: fetch_s / 128 of\n" + "\n".join("  " + c for c in commands))
    print(f"wrote {args.out}")


def read_measured(path, config, prefetch):
    rows, configs = [], set()
    for line, f in read_rows(path, MEASURED_COLUMNS):
        row = dict(zip(MEASURED_COLUMNS, f))
        for k in MEASURED_COLUMNS[1:2] + MEASURED_COLUMNS[3:5]:
            row[k] = number(path, line, k, row[k], integer=True)
        for k in MEASURED_COLUMNS[5:]:
            row[k] = number(path, line, k, row[k])
        if row["ranks"] < 1 or row["batch_per_rank"] < 1:
            raise InputError(f"{path}:{line}: ranks and batch_per_rank must be positive")
        if (config is None or row["config"] == config) and row["prefetch"] == prefetch:
            configs.add(row["config"])
            rows.append(row)
    if not rows:
        raise InputError(f"{path}: no rows of config {config or 'any'} with prefetch {prefetch}")
    if len(configs) > 1:
        raise InputError(f"{path}: rows of {len(configs)} configs ({', '.join(sorted(configs))});"
                         " choose one with --config")
    ones = [r for r in rows if r["ranks"] == 1]
    if not ones:
        raise InputError(f"{path}: no one-rank row to take the workload from")
    return rows, ones[0]


def measured(args):
    """Measured step and epoch per row against simulate --platform local from the one-rank row."""
    rows, one = read_measured(args.measured, args.config, args.prefetch)
    per_graph = 1e-3 / one["batch_per_rank"]
    compute_g = per_graph * sum(one[k] for k in ("forward_ms", "forces_ms", "backward_ms",
                                                 "optimizer_ms"))
    collate_g = per_graph * one["graph_ms"]
    cores = os.cpu_count() or 1
    out, commands, cache, left = [], [], {}, []
    for r in rows:
        b = r["batch_per_rank"]
        key = (r["ranks"], b)
        if key not in cache:
            sim_args = ["--models", args.models, "--platform", "local", "--ranks-per-node", "64",
                        "--ranks", str(r["ranks"]), "--batch", str(b), "--graphs",
                        str(args.graphs), "--compute-s", f"{b * compute_g:.6g}", "--collate-s",
                        f"{b * collate_g:.6g}", "--parameters", str(args.parameters)]
            commands.append(" ".join([args.ddgnn, "simulate", *sim_args, "--out", "X.csv"]))
            cache[key] = simulate(args.ddgnn, sim_args)
        sim = cache[key].get((r["ranks"], r["backend"]))
        if sim is None:
            left.append(f"{r['backend']} at P = {r['ranks']}")
            continue
        steps = math.ceil(args.graphs / (r["batch_per_rank"] * r["ranks"]))
        m_step, p_step = r["step_ms"], 1e3 * float(sim["step_s"])
        m_epoch, p_epoch = steps * r["step_ms"] / 1e3, float(sim["epoch_s"])
        out.append([r["ranks"], r["backend"], r["batch_per_rank"],
                    1 if r["ranks"] > cores else 0, m_step, p_step, p_step / m_step, m_epoch,
                    p_epoch, p_epoch / m_epoch, r["sync_ms"], 1e3 * float(sim["allreduce_s"]),
                    r["fetch_ms"], 1e3 * float(sim["fetch_s"])])
    write_csv(args.out, MEASURED_HEADER, out)
    print(f"workload from the one-rank row: compute {1e3 * compute_g:.3g} ms, collate "
          f"{1e3 * collate_g:.3g} ms a graph; {args.graphs} graphs an epoch; {cores} cores here")
    if left:
        print("left out (no cost model): " + ", ".join(left))
    print("| P | backend | B | step measured / predicted (ms) | ratio | epoch measured / "
          "predicted (s) | ratio | gradient sync measured / all-reduce predicted (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in out:
        over = " (oversubscribed)" if r[3] else ""
        f = [fmt(v) for v in r]
        print(f"| {r[0]}{over} | {r[1]} | {r[2]} | {f[4]} / {f[5]} | {f[6]} | {f[7]} / {f[8]} | "
              f"{f[9]} | {f[10]} / {f[11]} |")
    print("\nPredictions from\n" + "\n".join("  " + c for c in commands))
    print(f"wrote {args.out}")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="ddgnn simulate against published and measured figures.")
    sub = parser.add_subparsers(dest="what", required=True)
    for name in ("published", "measured"):
        p = sub.add_parser(name)
        p.add_argument("--ddgnn", default="build/app/ddgnn", help="the ddgnn binary")
        p.add_argument("--models", required=True, help="cost models of ddgnn tune --out")
        p.add_argument("--out", required=True, metavar="OUT.csv")
        if name == "measured":
            p.add_argument("--measured", required=True, metavar="RUNS.csv",
                           help="rows as bench/train_scaling.sh writes them")
            p.add_argument("--parameters", type=int, required=True,
                           help="model parameters (their gradients are all-reduced)")
            p.add_argument("--graphs", type=int, default=1600,
                           help="training graphs an epoch (Cu EAM: 1,600)")
            p.add_argument("--config", help="use the rows of this config (its file name)")
            p.add_argument("--prefetch", type=int, default=2,
                           help="use the rows of this prefetch depth")
    args = parser.parse_args(argv)
    try:
        if args.what == "measured" and (args.parameters < 1 or args.graphs < 1):
            raise InputError("--parameters and --graphs must be positive")
        published(args) if args.what == "published" else measured(args)
    except InputError as e:
        print(f"simulate_check: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
