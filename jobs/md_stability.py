#!/usr/bin/env python3
"""MD stability of trained models: NVE runs from test-split structures, driven by ASE through
`ddgnn driver` (jobs/md.py), and what they show beside the reference data.

    python3 jobs/md_stability.py run --name ethanol_schnet --run runs/ethanol_schnet \\
        --reference data/ethanol.extxyz --runs 10 --ps 10 --dt 0.5 --temperature 500 \\
        --out results/figures
    python3 jobs/md_stability.py report --out results/figures ethanol_schnet ethanol_mace cu_eam_schnet

`run` starts from --runs structures spread over the run's test split (`ddgnn evaluate` writes
them), each with its own velocities (Maxwell-Boltzmann at --temperature, seed = its index), for
--ps picoseconds, --jobs at a time on one thread each; it writes md_NAME.csv (one row per run:
steps, whether it stayed physical and why not, energy drift in meV/atom/ps, largest excursion,
mean temperature, steps/s, ns/day) and md_NAME_rdf.csv (the radial distribution function of the
stable runs' frames against the reference data's). `report` draws md_rdf.png and prints the
table (markdown). Physical: no force above 10 eV/Å, and for molecules every bond of the start
structure below 2 Å and no new one (jobs/md.py).
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from ase.io import read

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import md  # noqa: E402

R_MAX, BINS = 6.0, 120


def pair_histogram(frames):
    """Histogram of pair distances (minimum image for periodic frames) up to R_MAX, per frame."""
    edges = np.linspace(0.0, R_MAX, BINS + 1)
    counts = np.zeros(BINS)
    for atoms in frames:
        d = atoms.get_all_distances(mic=any(atoms.pbc))
        iu = np.triu_indices(len(atoms), k=1)
        counts += np.histogram(d[iu], bins=edges)[0]
    return edges, counts / max(len(frames), 1)


def rdf(frames):
    """g(r) for periodic frames (pairs over the ideal gas's at the same density), else the
    distribution of pair distances per Å (molecules have no density to normalise by)."""
    edges, counts = pair_histogram(frames)
    r = 0.5 * (edges[1:] + edges[:-1])
    dr = edges[1] - edges[0]
    atoms = frames[0]
    if any(atoms.pbc):
        n = len(atoms)
        ideal = 0.5 * n * (n - 1) / atoms.get_volume() * 4.0 * np.pi * r * r * dr
        return r, counts / ideal
    return r, counts / dr


def one_run(job):
    name, run_dir, atoms, steps, dt, temperature, seed, log, every = job
    snapshots = []
    summary = md.run_md(run_dir, atoms, steps, dt, temperature, seed=seed, log=log, every=every,
                        snapshots=snapshots)
    return summary, snapshots


def cmd_run(a):
    os.makedirs(a.out, exist_ok=True)
    pred = os.path.join(a.run, "eval_test", "predictions.extxyz")
    if not os.path.exists(pred):
        subprocess.run([md.DDGNN, "evaluate", "--run", a.run, "--threads", "1"], check=True,
                       stdout=subprocess.DEVNULL)
    test = read(pred, index=":")
    picks = np.linspace(0, len(test) - 1, a.runs).round().astype(int)
    steps = int(round(a.ps * 1000.0 / a.dt))
    every = max(1, int(round(a.sample_fs / a.dt)))
    jobs = []
    logs = tempfile.mkdtemp(prefix="md_%s_" % a.name)
    for k, i in enumerate(picks):
        atoms = test[int(i)].copy()
        atoms.calc = None
        for key in list(atoms.arrays):
            if key not in ("numbers", "positions"):
                del atoms.arrays[key]
        atoms.info = {}
        jobs.append((a.name, a.run, atoms, steps, a.dt, a.temperature, k,
                     os.path.join(logs, "run_%02d.csv" % k), every))
    rows, frames = [], []
    with ProcessPoolExecutor(max_workers=a.jobs) as pool:
        for k, (summary, snaps) in enumerate(pool.map(one_run, jobs)):
            summary["structure"] = int(picks[k])
            rows.append(summary)
            if summary["stable"]:
                frames.extend(snaps[len(snaps) // 5:])  # the first fifth equilibrates
            print(json.dumps(summary), flush=True)
    with open(os.path.join(a.out, "md_%s.csv" % a.name), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    reference = read(a.reference, index="::%d" % max(1, a.reference_stride))
    r, g_ref = rdf(reference)
    g_md = rdf(frames)[1] if frames else np.full_like(r, np.nan)
    with open(os.path.join(a.out, "md_%s_rdf.csv" % a.name), "w") as f:
        f.write("r_a,reference,md\n")
        for x, y, z in zip(r, g_ref, g_md):
            f.write("%.4f,%.6g,%.6g\n" % (x, y, z))
    print("logs of the steps in", logs)


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def cmd_report(a):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = a.names
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.4), squeeze=False)
    failures = []
    print("| model | runs stable | steps a run | drift meV/atom/ps (median, max abs) | largest excursion "
          "meV/atom (median) | mean T K | steps/s | ns/day | RDF mean abs diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for ax, name in zip(axes[0], names):
        rows = read_rows(os.path.join(a.out, "md_%s.csv" % name))
        rdf_rows = read_rows(os.path.join(a.out, "md_%s_rdf.csv" % name))
        r = np.array([float(x["r_a"]) for x in rdf_rows])
        ref = np.array([float(x["reference"]) for x in rdf_rows])
        got = np.array([float(x["md"]) for x in rdf_rows])
        ax.plot(r, ref, "k-", lw=1.5, label="reference data")
        ax.plot(r, got, "C1--", lw=1.2, label="ddgnn MD")
        ax.set_title(name)
        ax.set_xlabel("r (Å)")
        ax.set_ylabel("g(r)" if "cu" in name else "pair distances per Å")
        ax.legend(frameon=False, fontsize=8)
        stable = [x for x in rows if x["stable"] == "True"]
        drift = np.array([float(x["drift_mev_atom_ps"]) for x in stable]) if stable else [np.nan]
        exc = np.array([float(x["max_excursion_mev_atom"]) for x in stable]) if stable else [np.nan]
        area = np.trapz(np.abs(ref), r)
        diff = np.trapz(np.abs(got - ref), r) / area if area > 0 else np.nan
        print("| %s | %d of %d | %s | %.3g, %.3g | %.3g | %.0f | %.0f | %.2f | %.3f |" % (
            name, len(stable), len(rows), max(int(x["steps"]) for x in rows),
            np.median(drift), np.max(np.abs(drift)), np.median(exc),
            np.mean([float(x["mean_temperature_k"]) for x in rows]),
            np.mean([float(x["steps_per_s"]) for x in rows]),
            np.mean([float(x["ns_per_day"]) for x in rows]), diff))
        failures += ["- %s, test structure %s: %s (%.2f ps)" % (
            name, x["structure"], x["failure"], int(x["steps"]) * float(x["dt_fs"]) / 1000.0)
            for x in rows if x["stable"] != "True"]
    if failures:
        print("\nRuns that did not stay physical:\n")
        print("\n".join(failures))
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "md_rdf.png"), dpi=130)
    print("wrote", os.path.join(a.out, "md_rdf.png"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--name", required=True)
    r.add_argument("--run", required=True)
    r.add_argument("--reference", required=True, help="the data set's extxyz")
    r.add_argument("--reference-stride", type=int, default=1)
    r.add_argument("--runs", type=int, default=10)
    r.add_argument("--ps", type=float, default=10.0)
    r.add_argument("--dt", type=float, default=0.5, help="fs")
    r.add_argument("--temperature", type=float, default=300.0)
    r.add_argument("--sample-fs", type=float, default=10.0, help="check and keep a frame every")
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--out", default="results/figures")
    q = sub.add_parser("report")
    q.add_argument("--out", default="results/figures")
    q.add_argument("names", nargs="+")
    a = p.parse_args()
    cmd_run(a) if a.cmd == "run" else cmd_report(a)


if __name__ == "__main__":
    main()
