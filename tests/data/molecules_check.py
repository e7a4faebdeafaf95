#!/usr/bin/env python3
"""Checks a generated `molecules` set against its SMILES file: the first M molecules in file order,
K frames each, every frame with config_type=<the molecule's name>, an energy, pbc="F F F", the
same atoms in all frames of a molecule, and finite positions and forces on every atom line.
Usage: molecules_check.py FILE.extxyz --smiles molecules.smi --molecules M --per-molecule K"""
import argparse
import math
import re
import sys


def names_of(path, count):
    """The names of the first `count` molecules of a SMILES file ('SMILES name' lines)."""
    names = []
    with open(path) as f:
        for line in f:
            text = line.strip()
            if text and not text.startswith("#"):
                names.append(text.split()[1])
    return names[:count]


def check(path, names, per_molecule):
    """A list of problems (empty when the file is as expected)."""
    with open(path) as f:
        lines = f.read().splitlines()
    errors, frames, i = [], [], 0
    while i < len(lines):
        where = f"{path}:{i + 1}"
        try:
            n = int(lines[i])
        except ValueError:
            return errors + [f"{where}: expected the number of atoms, got '{lines[i]}'"]
        if i + 2 + n > len(lines):
            return errors + [f"{where}: the file ends inside a frame of {n} atoms"]
        header = lines[i + 1]
        kv = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', header))
        if "forces:R:3" not in kv.get("Properties", ""):
            errors.append(f"{where}: no forces in Properties")
        try:
            if not math.isfinite(float(kv.get("energy", "nan"))):
                errors.append(f"{where}: energy is not finite")
        except ValueError:
            errors.append(f"{where}: energy '{kv.get('energy')}' is not a number")
        if kv.get("pbc") != '"F F F"':
            errors.append(f"{where}: pbc {kv.get('pbc')} (expected \"F F F\")")
        species = []
        for k, row in enumerate(lines[i + 2:i + 2 + n]):
            f = row.split()
            try:
                ok = len(f) == 7 and all(math.isfinite(float(v)) for v in f[1:])
            except ValueError:
                ok = False
            if not ok:
                errors.append(f"{path}:{i + 3 + k}: expected 'symbol x y z fx fy fz', got '{row}'")
            species.append(f[0] if f else "")
        frames.append((kv.get("config_type"), species, where))
        i += 2 + n
    want = [name for name in names for _ in range(per_molecule)]
    got = [c for c, _, _ in frames]
    if got != want:
        errors.append(f"{path}: config_type of the frames {got} != {want}")
    for k in range(0, len(frames) - per_molecule + 1, per_molecule):
        block = frames[k:k + per_molecule]
        if any(s != block[0][1] for _, s, _ in block):
            errors.append(f"{block[0][2]}: the frames of {block[0][0]} differ in their atoms")
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("extxyz")
    ap.add_argument("--smiles", required=True)
    ap.add_argument("--molecules", type=int, required=True)
    ap.add_argument("--per-molecule", type=int, required=True)
    a = ap.parse_args()
    try:
        names = names_of(a.smiles, a.molecules)
        errors = check(a.extxyz, names, a.per_molecule)
    except OSError as e:
        print(f"molecules_check.py: error: {e}", file=sys.stderr)
        return 1
    if errors:
        print("\n".join(errors[:20]), file=sys.stderr)
        return 1
    print(f"{a.extxyz}: ok ({len(names)} molecules x {a.per_molecule} frames, config_type = "
          f"name, energies and forces on every frame)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
