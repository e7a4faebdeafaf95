#!/usr/bin/env python3
"""Markdown table of stress-trained runs side by side, from their run directories.

usage: python3 jobs/stress_table.py RUN_DIR...

Each RUN_DIR needs `ddgnn evaluate --run RUN_DIR` done first (eval_test/errors.json and
eval_test/stress.csv). Per run: Architecture.stress_weight (and Training.stage_two's), epochs, the test split's energy, force
and stress MAE (the evaluated checkpoint), and the stress MAE against the spread of the test
split's stress: the standard deviation of each component about its mean, averaged over the nine
(the shear components have mean ~0), and the standard deviation of all nine components pooled.
"""
import csv
import json
import math
import os
import sys


def last_event(run_dir, name):
    found = None
    with open(os.path.join(run_dir, "events.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e.get("event") == name:
                found = e
    return found


def stress_spread(path):
    """(mean of the 9 per-component standard deviations, std of all 9 pooled), meV/Å³."""
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            v = [float(r[k]) * 1e3 for k in ("sxx_ref", "syy_ref", "szz_ref", "syz_ref", "sxz_ref", "sxy_ref")]
            # Voigt -> the 9 components (off-diagonals twice)
            rows.append([v[0], v[5], v[4], v[5], v[1], v[3], v[4], v[3], v[2]])

    def std(xs):
        m = sum(xs) / len(xs)
        return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))

    per_component = sum(std([r[k] for r in rows]) for k in range(9)) / 9
    pooled = std([x for r in rows for x in r])
    return per_component, pooled


def main(run_dirs):
    print("| run | stress_weight | epochs | test E MAE meV/atom | test F MAE meV/Å | test S MAE meV/Å³ "
          "(GPa) | S MAE / std per component | S MAE / std pooled |")
    print("|---|---|---|---|---|---|---|---|")
    for run_dir in run_dirs:
        config = json.load(open(os.path.join(run_dir, "config.resolved.json")))
        weight = f'{config["NeuralNetwork"]["Architecture"].get("stress_weight", 0.0):g}'
        two = config["NeuralNetwork"]["Training"].get("stage_two") or {}
        if "start_epoch" in two and "stress_weight" in two:
            weight += f' → {two["stress_weight"]:g} from epoch {two["start_epoch"]}'
        end = last_event(run_dir, "run_end")
        errors = json.load(open(os.path.join(run_dir, "eval_test", "errors.json")))
        per_component, pooled = stress_spread(os.path.join(run_dir, "eval_test", "stress.csv"))
        s = errors["stress"]
        print(f"| `{run_dir}` | {weight} | {end['epochs']} | {errors['energy']['mae_mev_atom']:.3g} | "
              f"{errors['forces']['mae_mev_a']:.3g} | {s['mae_mev_a3']:.3g} ({s['mae_gpa']:.3g}) | "
              f"{100 * s['mae_mev_a3'] / per_component:.2g}% of {per_component:.3g} | "
              f"{100 * s['mae_mev_a3'] / pooled:.2g}% of {pooled:.3g} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
