#!/usr/bin/env python3
"""Finite-difference check of LAMMPS-generated extxyz labels: for a few frames, re-evaluates the
energy with `lmp` (same pair_style/pair_coeff as the generator, from datasets.py) at +-h
displacements of a few atoms and at +-d diagonal strains, and compares -dE/dx with the stored
forces and (1/V) dE/de with the stored stress. Exits 1 past the tolerances."""

import argparse
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import datasets  # noqa: E402
from gen_lammps import find_lmp, run_lmp  # noqa: E402


class CheckError(Exception):
    pass


def parse_header(header, where):
    lat = re.search(r'Lattice="([^"]+)"', header)
    energy = re.search(r"\benergy=(\S+)", header)
    stress = re.search(r'stress="([^"]+)"', header)
    ctype = re.search(r"\bconfig_type=(\S+)", header)
    if "Properties=species:S:1:pos:R:3:forces:R:3" not in header or not (lat and energy):
        raise CheckError(f"{where}: expected Lattice=, energy= and "
                         f"Properties=species:S:1:pos:R:3:forces:R:3")
    cell = [float(v) for v in lat.group(1).split()]
    if len(cell) != 9 or any(abs(cell[k]) > 0 for k in (1, 2, 3, 5, 6, 7)):
        raise CheckError(f"{where}: only orthogonal cells are supported")
    return dict(lattice=[cell[0], cell[4], cell[8]], energy=float(energy.group(1)),
                stress=[float(v) for v in stress.group(1).split()] if stress else None,
                config_type=ctype.group(1) if ctype else None, species=[], pos=[], forces=[])


def read_extxyz(path, wanted):
    """(number of frames, {index: frame} for the indices in `wanted`), streaming through the file
    (a --large set is > 1 GB). A frame: dict(lattice [3], energy, stress [9], config_type,
    species, pos, forces)."""
    frames = {}
    count = 0
    with open(path) as f:
        lineno = 0
        for line in f:
            lineno += 1
            if not line.strip():
                continue
            try:
                n = int(line)
            except ValueError:
                raise CheckError(f"{path}:{lineno}: expected the number of atoms of a frame")
            header = f.readline()
            lineno += 1
            keep = count in wanted
            if keep:
                fr = parse_header(header, f"{path}:{lineno}")
            for _ in range(n):
                line = f.readline()
                lineno += 1
                if not line:
                    raise CheckError(f"{path}:{lineno}: file ends inside a frame")
                if keep:
                    p = line.split()
                    fr["species"].append(p[0])
                    fr["pos"].append([float(v) for v in p[1:4]])
                    fr["forces"].append([float(v) for v in p[4:7]])
            if keep:
                frames[count] = fr
            count += 1
    if not count:
        raise CheckError(f"{path}: no frames")
    return count, frames


def data_file(fr, elements, masses):
    types = {e: k + 1 for k, e in enumerate(elements)}
    out = ["LAMMPS data file written by fd_check_lammps.py", "",
           f"{len(fr['species'])} atoms", f"{len(elements)} atom types", ""]
    for lo_hi, length in zip(("x", "y", "z"), fr["lattice"]):
        out.append(f"0.0 {length!r} {lo_hi}lo {lo_hi}hi")
    out += ["", "Masses", ""] + [f"{k + 1} {m}" for k, m in enumerate(masses)]
    out += ["", "Atoms # atomic", ""]
    for k, (s, p) in enumerate(zip(fr["species"], fr["pos"])):
        if s not in types:
            raise CheckError(f"atom {k + 1} is '{s}', not one of the dataset's elements {elements}")
        out.append(f"{k + 1} {types[s]} {p[0]!r} {p[1]!r} {p[2]!r}")
    return "\n".join(out) + "\n"


def pick_atoms(species, count, shift):
    """`count` atoms spread over the frame (shifted per frame), plus one atom of every element."""
    n = len(species)
    picks = []
    for e in dict.fromkeys(species):
        picks.append(species.index(e))
    k = 0
    while len(picks) < max(count, len(set(species))) and k < n:
        a = (k * n // max(count, 1) + shift * 7) % n
        if a not in picks:
            picks.append(a)
        k += 1
    return picks[:max(count, len(set(species)))]


def check_frame(name, fr, atoms, h, strain, lmp, workdir, shift):
    ds = datasets.LAMMPS[name]
    with open(os.path.join(workdir, "frame.data"), "w") as f:
        f.write(data_file(fr, ds["elements"], ds["masses"]))
    out_path = os.path.join(workdir, "fd.txt")
    if os.path.exists(out_path):
        os.remove(out_path)

    def pr(tag):
        return f'print "{tag} $(pe:%.17g)" append fd.txt screen no'

    lines = ["units metal", "atom_style atomic", "atom_modify map array", "boundary p p p",
             "read_data frame.data"]
    lines += datasets.lammps_potential_commands(name)
    lines += ["compute pvir all pressure NULL virial",
              "thermo_style custom step pe c_pvir[1] c_pvir[2] c_pvir[3]", "run 0", pr("E0")]
    for k in range(3):
        lines.append(f'print "P{k} $(c_pvir[{k + 1}]:%.17g)" append fd.txt screen no')
    picks = pick_atoms(fr["species"], atoms, shift)
    for a in picks:  # LAMMPS's own forces at the stored positions
        for d in range(3):
            lines.append(f'print "F {a} {d} $(f{"xyz"[d]}[{a + 1}]:%.17g)" append fd.txt '
                         f"screen no")
    for a in picks:
        lines.append(f"group g{a + 1} id {a + 1}")
        for d in range(3):
            for sign, move in (("+", h), ("-", -2 * h)):
                vec = ["0", "0", "0"]
                vec[d] = repr(move)
                lines += [f"displace_atoms g{a + 1} move {' '.join(vec)} units box", "run 0",
                          pr(f"A {a} {d} {sign}")]
            vec = ["0", "0", "0"]
            vec[d] = repr(h)
            lines.append(f"displace_atoms g{a + 1} move {' '.join(vec)} units box")
    for d in range(3):
        length = fr["lattice"][d]
        for sign, eps in (("+", strain), ("-", -strain)):
            lines += [f"change_box all {'xyz'[d]} final 0.0 {length * (1 + eps)!r} remap units box",
                      "run 0", pr(f"S {d} {sign}")]
        lines.append(f"change_box all {'xyz'[d]} final 0.0 {length!r} remap units box")
    run_lmp(lmp, "\n".join(lines) + "\n", workdir, f"{name} fd check")

    vals = {}
    with open(out_path) as f:
        for line in f:
            p = line.split()
            vals[" ".join(p[:-1])] = float(p[-1])
    volume = fr["lattice"][0] * fr["lattice"][1] * fr["lattice"][2]
    res = dict(force_fd=0.0, force_rel=0.0, force_lmp=0.0, stress_fd=0.0, stress_lmp=0.0,
               energy=abs(vals["E0"] - fr["energy"]), n_force=0)
    for a in picks:
        for d in range(3):
            stored = fr["forces"][a][d]
            fd = -(vals[f"A {a} {d} +"] - vals[f"A {a} {d} -"]) / (2 * h)
            err = abs(fd - stored)
            res["force_fd"] = max(res["force_fd"], err)
            res["force_rel"] = max(res["force_rel"], err / max(abs(stored), 1e-2))
            res["force_lmp"] = max(res["force_lmp"], abs(vals[f"F {a} {d}"] - stored))
            res["n_force"] += 1
    if fr["stress"] is not None:
        for d in range(3):
            fd = (vals[f"S {d} +"] - vals[f"S {d} -"]) / (2 * strain * volume)
            res["stress_fd"] = max(res["stress_fd"], abs(fd - fr["stress"][4 * d]))
            # the stored stress must also be minus LAMMPS's virial pressure at this frame
            p = -vals[f"P{d}"] / datasets.EV_PER_A3_IN_BAR
            res["stress_lmp"] = max(res["stress_lmp"], abs(p - fr["stress"][4 * d]))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file", help="extxyz written by gen_lammps.py / generate.sh")
    ap.add_argument("--dataset", help="dataset of datasets.py; default: the file's config_type")
    ap.add_argument("--frames", type=int, default=3, help="frames checked (first, ..., last)")
    ap.add_argument("--atoms", type=int, default=3, help="atoms displaced per frame")
    # Small steps: CuNi.eam.alloy's Ni density and Ni-Ni pair terms drop to zero within the last
    # table interval (0.0128 A), where the third derivative is large; h = 1e-3 A gives 2e-3 eV/A
    # errors there, 1e-5 A < 1e-7. Energies are printed with 17 digits (noise ~1e-13 eV / 2h).
    ap.add_argument("--h", type=float, default=1e-5, help="displacement, A")
    ap.add_argument("--strain", type=float, default=1e-6, help="diagonal strain step")
    ap.add_argument("--tol", type=float, default=1e-6, help="force tolerance, eV/A")
    ap.add_argument("--stress-tol", type=float, default=1e-7, help="stress tolerance, eV/A^3")
    ap.add_argument("--lmp", default=os.environ.get("LMP", "lmp"))
    a = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="ddgnn-fd-")
    try:
        count, _ = read_extxyz(a.file, set())
        nf = min(a.frames, count)
        idx = [0] if nf == 1 else [k * (count - 1) // (nf - 1) for k in range(nf)]
        _, frames = read_extxyz(a.file, set(idx))
        name = a.dataset or frames[0]["config_type"]
        if not name:
            raise CheckError(f"{a.file}: no config_type in the first frame; pass --dataset")
        if datasets.check_name(name) not in datasets.LAMMPS:
            raise CheckError(f"dataset '{name}' is not a LAMMPS dataset (use ddgnn-xtb-md "
                             f"--fd-check for xtb sets)")
        lmp = find_lmp(a.lmp)
        tot = dict(force_fd=0.0, force_rel=0.0, force_lmp=0.0, stress_fd=0.0, stress_lmp=0.0,
                   energy=0.0, n_force=0)
        for shift, i in enumerate(idx):
            r = check_frame(name, frames[i], a.atoms, a.h, a.strain, lmp, workdir, shift)
            for k in tot:
                tot[k] = tot[k] + r[k] if k == "n_force" else max(tot[k], r[k])
    except (CheckError, datasets.DatasetError, RuntimeError, OSError, KeyError) as e:
        print(f"fd_check_lammps.py: error: {e}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"fd-check {a.file} ({name}): {nf} frames, {tot['n_force']} force components, "
          f"h={a.h:g} A, strain={a.strain:g}")
    print(f"  max |F_stored - F_fd|          = {tot['force_fd']:.3e} eV/A (tolerance {a.tol:.1e})")
    print(f"  max relative error             = {tot['force_rel']:.3e} (|F| floored at 0.01 eV/A)")
    print(f"  max |F_stored - F_lammps|      = {tot['force_lmp']:.3e} eV/A")
    print(f"  max |E_stored - E_lammps|      = {tot['energy']:.3e} eV")
    print(f"  max |stress_stored - stress_fd| = {tot['stress_fd']:.3e} eV/A^3 "
          f"(diagonal; tolerance {a.stress_tol:.1e})")
    print(f"  max |stress_stored + P_virial|  = {tot['stress_lmp']:.3e} eV/A^3")
    bad = []
    if tot["force_fd"] > a.tol:
        bad.append(f"forces differ from -dE/dx by more than {a.tol:g} eV/A")
    if tot["stress_fd"] > a.stress_tol:
        bad.append(f"stress differs from (1/V) dE/de by more than {a.stress_tol:g} eV/A^3")
    if tot["energy"] > 1e-6:
        bad.append("stored energy differs from LAMMPS's energy of the stored positions")
    if bad:
        print("FAIL: " + "; ".join(bad))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
