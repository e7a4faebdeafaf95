#!/usr/bin/env python3
"""Combines a LAMMPS `dump custom` (id type x y z fx fy fz, sorted by id, orthogonal box) and the
per-step file of `fix print` (step pe pxx pyy pzz pxy pxz pyz, eV and bar, virial only) into
extended XYZ frames (ASE convention: eV, Å, eV/Å, stress = -virial pressure in eV/Å^3)."""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from datasets import EV_PER_A3_IN_BAR  # noqa: E402


class ConvertError(Exception):
    pass


def read_prints(path):
    """{step: (pe, [pxx, pyy, pzz, pxy, pxz, pyz])} from the fix print file."""
    out = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 8:
                raise ConvertError(f"{path}:{lineno}: expected 8 columns "
                                   f"(step pe pxx pyy pzz pxy pxz pyz), got {len(parts)}")
            out[int(parts[0])] = (float(parts[1]), [float(p) for p in parts[2:]])
    return out


def read_dump(path):
    """Yields (step, box [(lo, hi)]*3, rows [(id, type, x, y, z, fx, fy, fz)]) per snapshot."""
    with open(path) as f:
        lineno = 0

        def next_line():
            nonlocal lineno
            line = f.readline()
            lineno += 1
            if not line:
                raise ConvertError(f"{path}:{lineno}: file ends inside a snapshot")
            return line

        while True:
            line = f.readline()
            lineno += 1
            if not line:
                return
            if not line.startswith("ITEM: TIMESTEP"):
                raise ConvertError(f"{path}:{lineno}: expected 'ITEM: TIMESTEP'")
            step = int(next_line())
            if not next_line().startswith("ITEM: NUMBER OF ATOMS"):
                raise ConvertError(f"{path}:{lineno}: expected 'ITEM: NUMBER OF ATOMS'")
            n = int(next_line())
            header = next_line()
            if not header.startswith("ITEM: BOX BOUNDS") or "xy" in header:
                raise ConvertError(f"{path}:{lineno}: expected an orthogonal box "
                                   f"('ITEM: BOX BOUNDS pp pp pp'), got '{header.strip()}'")
            box = [tuple(float(v) for v in next_line().split()[:2]) for _ in range(3)]
            cols = next_line().split()[2:]
            if cols != ["id", "type", "x", "y", "z", "fx", "fy", "fz"]:
                raise ConvertError(f"{path}:{lineno}: expected columns 'id type x y z fx fy fz', "
                                   f"got '{' '.join(cols)}'")
            rows = []
            for i in range(n):
                p = next_line().split()
                rows.append((int(p[0]), int(p[1])) + tuple(float(v) for v in p[2:8]))
                if rows[-1][0] != i + 1:
                    raise ConvertError(f"{path}:{lineno}: atoms not sorted by id "
                                       f"(use dump_modify sort id)")
            yield step, box, rows


def frame_text(box, rows, pe, pressure_bar, elements, config_type):
    lengths = [hi - lo for lo, hi in box]
    pxx, pyy, pzz, pxy, pxz, pyz = pressure_bar
    # ASE stress (eV/Å^3) is minus the virial pressure tensor.
    s = [-v / EV_PER_A3_IN_BAR for v in (pxx, pxy, pxz, pxy, pyy, pyz, pxz, pyz, pzz)]
    lattice = (f"{lengths[0]:.10f} 0.0 0.0 0.0 {lengths[1]:.10f} 0.0 0.0 0.0 {lengths[2]:.10f}")
    out = [f"{len(rows)}\n",
           f'Lattice="{lattice}" Properties=species:S:1:pos:R:3:forces:R:3 energy={pe:.10f} '
           f'stress="{" ".join(f"{v:.12g}" for v in s)}" pbc="T T T" config_type={config_type}\n']
    for _, typ, x, y, z, fx, fy, fz in rows:
        if not 1 <= typ <= len(elements):
            raise ConvertError(f"atom type {typ} has no element (elements: {elements})")
        # LAMMPS wraps atoms only when it rebuilds neighbour lists: wrap into [0, L) here.
        x, y, z = ((v - lo) % length for v, (lo, _), length in zip((x, y, z), box, lengths))
        out.append(f"{elements[typ - 1]:<2} {x:16.10f} {y:16.10f} {z:16.10f} "
                   f"{fx:16.10f} {fy:16.10f} {fz:16.10f}\n")
    return "".join(out)


def convert(dump_path, print_path, out_path, elements, config_type, stride, frames):
    """Writes frames at steps stride, 2*stride, ..., frames*stride to out_path (via a temporary
    name, renamed on success). Returns (frames, atoms)."""
    prints = read_prints(print_path)
    wanted = {stride * (k + 1) for k in range(frames)}
    tmp = out_path + ".tmp"
    written, n_atoms = 0, 0
    try:
        with open(tmp, "w") as out:
            for step, box, rows in read_dump(dump_path):
                if step not in wanted:
                    continue
                if step not in prints:
                    raise ConvertError(f"{print_path}: no energy/pressure line for step {step}")
                pe, p = prints[step]
                out.write(frame_text(box, rows, pe, p, elements, config_type))
                written += 1
                n_atoms = len(rows)
        if written != frames:
            raise ConvertError(f"{dump_path}: found {written} of the {frames} frames expected "
                               f"(steps {stride}..{stride * frames}); did LAMMPS stop early?")
        os.replace(tmp, out_path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return written, n_atoms


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--prints", required=True, help="fix print file")
    ap.add_argument("--out", required=True)
    ap.add_argument("--elements", required=True, help="element of each atom type, e.g. Cu,Ni")
    ap.add_argument("--config-type", required=True)
    ap.add_argument("--stride", type=int, required=True)
    ap.add_argument("--frames", type=int, required=True)
    a = ap.parse_args()
    try:
        n, atoms = convert(a.dump, a.prints, a.out, a.elements.split(","), a.config_type,
                           a.stride, a.frames)
    except (ConvertError, OSError, ValueError) as e:
        print(f"lammps_to_extxyz.py: error: {e}", file=sys.stderr)
        return 1
    print(f"{a.out}: {n} frames of {atoms} atoms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
