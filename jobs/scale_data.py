#!/usr/bin/env python3
"""Extended XYZ shards of many structures for measurements at scale (results/scale.md).

Each structure is a frame of one of the repository's sets (ethanol, molecules, Cu EAM by default,
drawn with the given weights) with fresh perturbations, so that no two are equal: every position
moved by a uniform draw of at most --displacement Å (written with 6 decimals, as text-born data
is) and the energy by at most 1e-4 eV; forces and cells as in the source frame. The Cu frames
lose their stress (the other sets have none). Shards are written in parallel, one process each
(--jobs), with seeds seed + shard: a rerun gives the same files.

    /usr/bin/python3 jobs/scale_data.py --structures 10000000 --shards 8 --out runs/scale/xyz
"""
import argparse
import multiprocessing
import os
import re
import sys

import numpy as np

SETS = {"ethanol": "data/ethanol.extxyz", "molecules": "data/molecules.extxyz",
        "cu_eam": "data/cu_eam.extxyz"}


def read_frames(path):
    """[(header before the energy, header after it, energy, species, positions [n, 3], the
    forces' text of each atom)] of an extxyz file written with species, pos and forces columns."""
    frames = []
    with open(path) as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        n = int(lines[i])
        header = re.sub(r' stress="[^"]*"', "", lines[i + 1])
        m = re.search(r"energy=(\S+)", header)
        if not m:
            raise SystemExit(f"{path}: frame at line {i + 1} has no energy")
        atoms = [l.split() for l in lines[i + 2:i + 2 + n]]
        species = [a[0] for a in atoms]
        pos = np.array([[float(x) for x in a[1:4]] for a in atoms])
        forces = [" ".join(a[4:7]) for a in atoms]
        frames.append((header[:m.start(1)], header[m.end(1):], float(m.group(1)), species, pos,
                       forces))
        i += 2 + n
    return frames


def write_shard(args):
    shard, count, seed, out, weights, displacement = args
    rng = np.random.default_rng(seed + shard)
    sources = [(name, read_frames(SETS[name])) for name in weights]
    p = np.array(list(weights.values()), dtype=float)
    p /= p.sum()
    # One format per source frame: the positions are its only fields.
    templates = [[("".join(f"{s} %.6f %.6f %.6f {f}\n" for s, f in zip(fr[3], fr[5])))
                  for fr in frames] for _, frames in sources]
    path = os.path.join(out, f"shard_{shard:04d}.extxyz")
    tmp = path + ".tmp"
    which = rng.choice(len(sources), size=count, p=p)
    with open(tmp, "w", buffering=1 << 24) as f:
        for k in range(count):
            s = which[k]
            frames = sources[s][1]
            j = int(rng.integers(len(frames)))
            before, after, energy, species, pos, _ = frames[j]
            moved = pos + rng.uniform(-displacement, displacement, pos.shape)
            e = energy + rng.uniform(-1e-4, 1e-4)
            f.write(f"{len(species)}\n{before}{e:.10f}{after}\n")
            f.write(templates[s][j] % tuple(moved.ravel().tolist()))
    os.replace(tmp, path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--structures", type=int, required=True)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--displacement", type=float, default=0.005, help="Å")
    ap.add_argument("--weights", default="ethanol=0.48,molecules=0.48,cu_eam=0.04")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    weights = {}
    for item in a.weights.split(","):
        name, w = item.split("=")
        if name not in SETS:
            sys.exit(f"--weights: unknown set '{name}' (known: {', '.join(SETS)})")
        if not os.path.exists(SETS[name]):
            sys.exit(f"{SETS[name]}: missing; make it with jobs/data/generate.sh --only {name}")
        weights[name] = float(w)
    os.makedirs(a.out, exist_ok=True)
    per = [a.structures // a.shards + (1 if k < a.structures % a.shards else 0)
           for k in range(a.shards)]
    jobs = [(k, per[k], a.seed, a.out, weights, a.displacement) for k in range(a.shards)]
    with multiprocessing.Pool(a.jobs) as pool:
        for path in pool.imap(write_shard, jobs):
            print(path, flush=True)


if __name__ == "__main__":
    main()
