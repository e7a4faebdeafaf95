#!/usr/bin/env python3
"""Generates one LAMMPS dataset of datasets.py: writes the input, runs `lmp` on one thread in a
scratch folder, and converts dump + fix print output to extended XYZ (lammps_to_extxyz.py).
Usage: gen_lammps.py NAME --frames N --out FILE [--lmp lmp] [--workdir DIR]"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import datasets  # noqa: E402
import lammps_to_extxyz  # noqa: E402


def run_lmp(lmp, input_text, workdir, what):
    """Runs lmp on input_text inside workdir (log in workdir/log.lammps); raises on failure."""
    in_path = os.path.join(workdir, "in.lammps")
    with open(in_path, "w") as f:
        f.write(input_text)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    log = os.path.join(workdir, "log.lammps")
    r = subprocess.run([lmp, "-in", "in.lammps", "-log", "log.lammps", "-screen", "none",
                        "-nocite"], cwd=workdir, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        tail = ""
        if os.path.exists(log):
            with open(log) as f:
                tail = "".join(f.readlines()[-15:])
        raise RuntimeError(f"{what}: `{lmp}` failed (exit {r.returncode}):\n{r.stdout}{tail}")


def find_lmp(lmp):
    path = shutil.which(lmp)
    if not path:
        raise RuntimeError(f"LAMMPS binary '{lmp}' not found; install the Debian package `lammps` "
                           f"or pass --lmp PATH")
    return path


def generate(name, frames, out, lmp, workdir=None):
    ds = datasets.LAMMPS[name]
    own = workdir is None
    if own:  # next to the output: the dump of a --large run is about as big as the output
        workdir = tempfile.mkdtemp(prefix=f".{name}.work.", dir=os.path.dirname(
            os.path.abspath(out)))
    text = datasets.lammps_md_input(name, frames, "dump.frames", "prints.txt")
    try:
        run_lmp(lmp, text, workdir, name)
        result = lammps_to_extxyz.convert(
            os.path.join(workdir, "dump.frames"), os.path.join(workdir, "prints.txt"), out,
            ds["elements"], name, ds["stride"], frames)
    except (RuntimeError, lammps_to_extxyz.ConvertError) as e:  # keep input and log
        raise RuntimeError(f"{e}\n(input and log kept in {workdir})") from None
    if own:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("name")
    ap.add_argument("--frames", type=int, default=datasets.DEFAULT_FRAMES)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lmp", default=os.environ.get("LMP", "lmp"))
    ap.add_argument("--workdir", help="scratch folder (kept); default: a temporary one next to "
                    "--out, removed at the end")
    a = ap.parse_args()
    try:
        if datasets.check_name(a.name) not in datasets.LAMMPS:
            raise datasets.DatasetError(f"dataset '{a.name}' is not a LAMMPS dataset")
        if a.frames < 1:
            raise datasets.DatasetError(f"--frames must be >= 1, got {a.frames}")
        n, atoms = generate(a.name, a.frames, a.out, find_lmp(a.lmp), a.workdir)
    except (datasets.DatasetError, lammps_to_extxyz.ConvertError, RuntimeError, OSError) as e:
        print(f"gen_lammps.py: error: {e}", file=sys.stderr)
        return 1
    print(f"{a.out}: {n} frames of {atoms} atoms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
