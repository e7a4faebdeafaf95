#!/usr/bin/env python3
"""Molecular dynamics with a trained ddgnn model, driven by ASE through `ddgnn driver` (the i-PI
socket protocol): NVE velocity Verlet from one structure, a CSV log of every step and a summary.

    python3 jobs/md.py --run runs/ethanol_schnet --structure data/start.extxyz --index 0 \\
        --steps 20000 --dt 0.5 --temperature 300 --log md.csv

ASE (Debian's python3-ase) is the server: it integrates the motion and sends positions and the
cell; the driver answers with energy, forces and virial. Velocities are drawn from Maxwell-Boltzmann
at --temperature (seeded), without centre-of-mass motion. Per step the log holds the potential,
kinetic and total energy (eV), the temperature (K), the largest force (eV/Å), the longest bond and
the shortest distance between atoms not bonded at the start (Å); bonds are the pairs within 1.3
times the sum of their covalent radii in the start structure (a thermal snapshot: its bonds may be
stretched), and a bond forms when two other atoms come within the sum of their radii. The summary (printed as JSON, and
returned by run_md) holds the total energy's drift (slope of a least-squares line, meV/atom/ps),
its largest excursion, whether the run stayed physical, and the speed. Exits 1 when the driver or
the run fails, with the reason.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from ase import units
from ase.calculators.socketio import SocketIOCalculator
from ase.data import covalent_radii
from ase.io import read, write
from ase.md.velocitydistribution import MaxwellBoltzmannDistribution, Stationary, ZeroRotation
from ase.md.verlet import VelocityVerlet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DDGNN = os.environ.get("DDGNN", os.path.join(ROOT, "build", "app", "ddgnn"))


def bonded_pairs(atoms, factor=1.3):
    """Pairs (i, j), i < j, closer than `factor` times the sum of their covalent radii."""
    d = atoms.get_all_distances(mic=any(atoms.pbc))
    r = covalent_radii[atoms.numbers]
    limit = factor * (r[:, None] + r[None, :])
    i, j = np.nonzero(np.triu(d < limit, k=1))
    return set(zip(i.tolist(), j.tolist()))


def start_driver(run_dir, structure, name, checkpoint="best", threads=1, extra=()):
    """`ddgnn driver` as a child process on the socket /tmp/ipi_<name>."""
    cmd = [DDGNN, "driver", "--run", run_dir, "--checkpoint", checkpoint, "--structure",
           structure, "--unix", name, "--threads", str(threads), "--device", "cpu",
           "--connect-timeout", "60", *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               OMP_WAIT_POLICY="PASSIVE")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            text=True)


def run_md(run_dir, atoms, steps, dt_fs, temperature, seed=0, log=None, checkpoint="best",
           threads=1, every=1, max_force=10.0, bond_break=2.0, snapshots=None):
    """NVE from `atoms` (an ase.Atoms); returns the summary dict. Stops early once the run is no
    longer physical (a bond beyond `bond_break` Å, a new bond, or a force above `max_force`).
    Checks and logs every `every` steps; a copy of the atoms is appended to `snapshots` (a list)
    each time."""
    name = "ddgnn_md_%d_%d" % (os.getpid(), int(time.time() * 1e6) % 1000000)
    with tempfile.TemporaryDirectory() as tmp:
        structure = os.path.join(tmp, "start.extxyz")
        write(structure, atoms, format="extxyz")
        calc = SocketIOCalculator(unixsocket=name, timeout=300)
        driver = start_driver(run_dir, structure, name, checkpoint, threads)
        try:
            return _integrate(calc, atoms.copy(), steps, dt_fs, temperature, seed, log, every,
                              max_force, bond_break, snapshots)
        finally:
            calc.close()
            try:
                out, _ = driver.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                driver.kill()
                out, _ = driver.communicate()
            if driver.returncode != 0:
                sys.stderr.write(out)
                raise RuntimeError("ddgnn driver exited with %d: %s" %
                                   (driver.returncode, out.strip().splitlines()[-1:]))


def _integrate(calc, atoms, steps, dt_fs, temperature, seed, log, every, max_force, bond_break,
               snapshots):
    n = len(atoms)
    periodic = any(atoms.pbc)
    # Bonds matter for molecules; a crystal is judged by its forces (and energy) alone.
    bond = np.zeros((n, n), dtype=bool)
    for i, j in bonded_pairs(atoms):
        bond[i, j] = True
    upper = np.triu(np.ones((n, n), dtype=bool), k=1)
    other = upper & ~bond
    radii = covalent_radii[atoms.numbers]
    near = 1.0 * (radii[:, None] + radii[None, :])
    rng = np.random.default_rng(seed)
    MaxwellBoltzmannDistribution(atoms, temperature_K=temperature, rng=rng)
    Stationary(atoms)
    if not periodic:
        ZeroRotation(atoms)
    atoms.calc = calc
    dyn = VelocityVerlet(atoms, timestep=dt_fs * units.fs)
    rows = []
    failure = None
    t0 = time.perf_counter()

    def record(step):
        nonlocal failure
        epot = atoms.get_potential_energy()
        ekin = atoms.get_kinetic_energy()
        f = float(np.linalg.norm(atoms.get_forces(), axis=1).max())
        longest, closest, formed, stretched = math.nan, math.nan, None, (0, 0)
        if not periodic and n > 1:
            d = atoms.get_all_distances()
            longest = float(d[bond].max()) if bond.any() else 0.0
            stretched = np.argwhere(bond & (d == longest))[0] if bond.any() else (0, 0)
            closest = float(d[other].min()) if other.any() else math.inf
            close = np.argwhere(other & (d < near))
            if len(close):
                i, j = close[0]
                formed = "atoms %d and %d %.3g A apart" % (i, j, d[i, j])
        if snapshots is not None:
            snapshots.append(atoms.copy())
        rows.append((step, step * dt_fs, epot, ekin, epot + ekin,
                     ekin / (1.5 * n * units.kB), f, longest, closest))
        if not np.isfinite(epot + ekin):
            failure = "energy not finite at step %d" % step
        elif f > max_force:
            failure = "force %.4g eV/A > %g at step %d" % (f, max_force, step)
        elif longest > bond_break:
            failure = "the bond of atoms %d and %d stretched to %.3g A > %g at step %d" % (
                stretched[0], stretched[1], longest, bond_break, step)
        elif formed:
            failure = "a bond formed (%s, not bonded at the start) at step %d" % (formed, step)

    record(0)
    done = 0
    while done < steps and failure is None:
        k = min(every, steps - done)
        dyn.run(k)
        done += k
        record(done)
    seconds = time.perf_counter() - t0
    data = np.array(rows)
    if log:
        with open(log, "w") as out:
            out.write("step,time_fs,epot_ev,ekin_ev,etot_ev,temperature_k,max_force_ev_a,"
                      "longest_bond_a,closest_nonbonded_a\n")
            for r in rows:
                out.write(",".join("%.10g" % v for v in r) + "\n")
    t_ps = data[:, 1] / 1000.0
    etot = data[:, 4]
    slope = np.polyfit(t_ps, etot, 1)[0] if len(rows) > 2 else 0.0
    return {
        "atoms": n,
        "steps": done,
        "dt_fs": dt_fs,
        "stable": failure is None,
        "failure": failure,
        "drift_mev_atom_ps": 1000.0 * slope / n,
        "max_excursion_mev_atom": 1000.0 * float(np.max(np.abs(etot - etot[0]))) / n,
        "mean_temperature_k": float(np.mean(data[1:, 5])) if len(rows) > 1 else float(data[0, 5]),
        "seconds": seconds,
        "steps_per_s": done / seconds if seconds > 0 else 0.0,
        "ns_per_day": done * dt_fs * 1e-6 / seconds * 86400 if seconds > 0 else 0.0,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", required=True, help="run directory of the model")
    p.add_argument("--checkpoint", default="best", help="best, last or a checkpoint file")
    p.add_argument("--structure", required=True, help="extended XYZ file")
    p.add_argument("--index", type=int, default=0, help="which frame of it to start from")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--dt", type=float, default=0.5, help="time step, fs")
    p.add_argument("--temperature", type=float, default=300.0, help="initial temperature, K")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--every", type=int, default=1, help="log every K steps")
    p.add_argument("--log", help="CSV of the steps")
    a = p.parse_args()
    atoms = read(a.structure, index=a.index)
    atoms.calc = None
    try:
        summary = run_md(a.run, atoms, a.steps, a.dt, a.temperature, a.seed, a.log,
                         a.checkpoint, a.threads, a.every)
    except (RuntimeError, OSError) as e:
        sys.exit("md.py: %s" % e)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
