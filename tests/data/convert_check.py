#!/usr/bin/env python3
"""Converts a generated extxyz set with `ddgnn convert`, reads it back with `ddgnn info --json`,
and checks the figures a person would look at: graphs, atoms per graph, species, energy spread,
forces, and neighbours per atom within 5 A. Exits non-zero with a message on any mismatch."""
import argparse
import json
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ddgnn")
    ap.add_argument("extxyz")
    ap.add_argument("h5")
    ap.add_argument("--graphs", type=int, required=True)
    ap.add_argument("--atoms", required=True,
                    help="atoms in every graph, or min,max over the graphs")
    ap.add_argument("--species", required=True, help="comma-separated symbols")
    ap.add_argument("--neighbours", required=True, help="min,max of the mean count within 5 A")
    ap.add_argument("--config-types", type=int,
                    help="number of distinct config_type values (e.g. one per molecule)")
    a = ap.parse_args()

    subprocess.run([a.ddgnn, "convert", "--overwrite", a.extxyz, a.h5], check=True)
    out = subprocess.run([a.ddgnn, "info", "--json", "--radius", "5", a.h5], check=True,
                         capture_output=True, text=True).stdout
    info = json.loads(out)
    errors = []

    def expect(cond, what):
        if not cond:
            errors.append(what)

    expect(info["graphs"] == a.graphs, f"graphs {info['graphs']} != {a.graphs}")
    atoms = [int(x) for x in a.atoms.split(",")]
    lo_atoms, hi_atoms = atoms[0], atoms[-1]
    expect(info["atoms"]["min"] == lo_atoms and info["atoms"]["max"] == hi_atoms,
           f"atoms per graph {info['atoms']} != {a.atoms}")
    if a.config_types is not None:
        expect(len(info["config_types"]) == a.config_types,
               f"{len(info['config_types'])} config types != {a.config_types}")
    expect(sorted(info["species"]) == sorted(a.species.split(",")),
           f"species {sorted(info['species'])} != {a.species}")
    expect(info["has_forces"], "no forces")
    expect(info["energy_eV"]["std"] > 0, "energies do not vary")
    expect(0 < info["forces_eV_per_A"]["rms_component"] < 10,
           f"force RMS {info['forces_eV_per_A']['rms_component']} eV/A is not plausible")
    lo, hi = (float(x) for x in a.neighbours.split(","))
    nb = info["neighbours"]["mean"]
    expect(lo <= nb <= hi, f"mean neighbours within 5 A {nb:.2f} not in [{lo}, {hi}]")
    if errors:
        print(f"{a.h5}: " + "; ".join(errors), file=sys.stderr)
        return 1
    print(f"{a.h5}: ok ({info['graphs']} graphs, {nb:.2f} neighbours/atom within 5 A, "
          f"force RMS {info['forces_eV_per_A']['rms_component']:.3f} eV/A)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
