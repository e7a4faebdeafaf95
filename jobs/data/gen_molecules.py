#!/usr/bin/env python3
"""Generates the `molecules` set of datasets.py: for each molecule of molecules.smi, RDKit adds the
hydrogens, embeds it (ETKDG, fixed seed) and relaxes it (MMFF94, else UFF); ddgnn-xtb-md then runs
a short GFN2-xTB MD from that geometry and writes a few frames with config_type=<molecule name>.
The runs are joined, in file order, into one extended XYZ file (temporary name, then renamed).
Needs RDKit: Debian's python3-rdkit, i.e. /usr/bin/python3 (this script re-runs itself with it).
Usage: gen_molecules.py --out FILE [--xtb-md PATH] [--per-molecule K] [--molecules M] [--jobs J]
       gen_molecules.py --check [--min-molecules N]     validate the SMILES file, print a summary
       gen_molecules.py --count [--molecules M]         how many molecules a run takes"""

import argparse
import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import datasets  # noqa: E402

SET = "molecules"
DEBIAN_PYTHON = "/usr/bin/python3"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_+-]*$")  # a bare extxyz value: no quotes needed
# Covalent radii (Å; Cordero et al., Dalton Trans. 2008, 2832; C sp3): two atoms closer than
# BOND_FACTOR times the sum are bonded. Used to check that no MD frame broke or made a bond.
COVALENT_RADIUS = {"H": 0.31, "C": 0.76, "N": 0.71, "O": 0.66, "F": 0.57, "S": 1.05, "Cl": 1.02}
BOND_FACTOR = 1.25


class MoleculeError(Exception):
    pass


def import_rdkit():
    """RDKit's Chem and AllChem; re-runs this script with Debian's python3 if this one lacks it."""
    try:
        from rdkit import Chem, RDLogger
        from rdkit.Chem import AllChem
    except ImportError:
        here = os.path.realpath(sys.executable or "")
        if (not os.environ.get("DDGNN_RDKIT_REEXEC") and os.access(DEBIAN_PYTHON, os.X_OK)
                and os.path.realpath(DEBIAN_PYTHON) != here):
            os.environ["DDGNN_RDKIT_REEXEC"] = "1"
            os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
        raise MoleculeError(
            f"RDKit cannot be imported by {sys.executable} (nor by {DEBIAN_PYTHON}); install "
            f"Debian's python3-rdkit (apt-get install python3-rdkit) and run this script with "
            f"{DEBIAN_PYTHON}") from None
    RDLogger.DisableLog("rdApp.*")  # its parse errors go to stderr; ours name file and line
    return Chem, AllChem


def read_smiles(path, Chem):
    """[(line number, SMILES, name, RDKit molecule with hydrogens)] of a SMILES file: one molecule
    per line, 'SMILES name'; lines that start with '#' are comments ('#' is also SMILES's triple
    bond). Every molecule is checked against the set's rules."""
    ds = datasets.MOLECULES[SET]
    lo, hi = ds["heavy_atoms"]
    allowed = set(ds["elements"])
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise MoleculeError(f"cannot read the SMILES file '{path}': {e.strerror}") from None
    out, names, canonical = [], {}, {}
    for lineno, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        where = f"{path}:{lineno}"
        fields = text.split()
        if len(fields) != 2:
            raise MoleculeError(f"{where}: expected 'SMILES name', got '{text}'")
        smiles, name = fields
        mol = Chem.MolFromSmiles(smiles)
        if mol is None:
            raise MoleculeError(f"{where}: RDKit cannot parse the SMILES '{smiles}' ({name})")
        if not NAME_RE.match(name):
            raise MoleculeError(f"{where}: name '{name}' may hold only letters, digits, '_', "
                                f"'+' and '-' (it becomes the frames' config_type)")
        if name in names:
            raise MoleculeError(f"{where}: name '{name}' is used already on line {names[name]}")
        key = Chem.MolToSmiles(mol)
        if key in canonical:
            raise MoleculeError(f"{where}: '{smiles}' ({name}) is the molecule of line "
                                f"{canonical[key][0]} ({canonical[key][1]}; canonical {key})")
        molh = Chem.AddHs(mol)
        elements = {a.GetSymbol() for a in molh.GetAtoms()}
        problems = []
        if not elements <= allowed:
            problems.append(f"elements {', '.join(sorted(elements - allowed))} not in "
                            f"{', '.join(ds['elements'])}")
        if Chem.GetFormalCharge(mol) != 0:
            problems.append(f"net charge {Chem.GetFormalCharge(mol):+d} (must be neutral)")
        radicals = sum(a.GetNumRadicalElectrons() for a in molh.GetAtoms())
        electrons = sum(a.GetAtomicNum() for a in molh.GetAtoms()) - Chem.GetFormalCharge(mol)
        if radicals or electrons % 2:
            problems.append(f"{radicals} unpaired and {electrons} electrons (must be closed "
                            f"shell)")
        if not lo <= mol.GetNumHeavyAtoms() <= hi:
            problems.append(f"{mol.GetNumHeavyAtoms()} heavy atoms (allowed {lo} to {hi})")
        if problems:
            raise MoleculeError(f"{where}: '{smiles}' ({name}): {'; '.join(problems)}")
        names[name] = lineno
        canonical[key] = (lineno, name)
        out.append((lineno, smiles, name, molh))
    if not out:
        raise MoleculeError(f"{path}: no molecules")
    return out


def starting_geometry(molh, seed, AllChem):
    """(xyz text, force field): ETKDG embedding with randomSeed `seed`, then MMFF94 or UFF."""
    params = AllChem.ETKDGv3()
    params.randomSeed = seed
    if AllChem.EmbedMolecule(molh, params) != 0:
        raise MoleculeError("RDKit's ETKDG embedding failed")
    if AllChem.MMFFHasAllMoleculeParams(molh):
        AllChem.MMFFOptimizeMolecule(molh, maxIters=2000)
        ff = "MMFF94"
    elif AllChem.UFFHasAllMoleculeParams(molh):
        AllChem.UFFOptimizeMolecule(molh, maxIters=2000)
        ff = "UFF"
    else:
        ff = "none"
    pos = molh.GetConformer().GetPositions()
    lines = [str(molh.GetNumAtoms()), f"{ff}-relaxed starting geometry"]
    lines += [f"{a.GetSymbol():2s} {x:16.10f} {y:16.10f} {z:16.10f}"
              for a, (x, y, z) in zip(molh.GetAtoms(), pos)]
    return "\n".join(lines) + "\n", ff


def bonds_of(symbols, pos):
    """Pairs (i, j), i < j, closer than BOND_FACTOR times the sum of their covalent radii."""
    out = set()
    for i in range(len(symbols)):
        for j in range(i + 1, len(symbols)):
            d2 = sum((pos[i][k] - pos[j][k]) ** 2 for k in range(3))
            cut = BOND_FACTOR * (COVALENT_RADIUS[symbols[i]] + COVALENT_RADIUS[symbols[j]])
            if d2 < cut * cut:
                out.add((i, j))
    return out


def check_frames(path, name, molh, frames):
    """Checks one molecule's ddgnn-xtb-md output: `frames` frames of its atoms, config_type=name,
    energy and forces, and the bonds of the SMILES in every frame; returns the text."""
    with open(path) as f:
        text = f.read()
    lines = text.splitlines()
    symbols = [a.GetSymbol() for a in molh.GetAtoms()]
    want = {tuple(sorted((b.GetBeginAtomIdx(), b.GetEndAtomIdx()))) for b in molh.GetBonds()}
    n, i, count = len(symbols), 0, 0
    while i < len(lines):
        where = f"{path}:{i + 1}"
        if lines[i].strip() != str(n) or i + 2 + n > len(lines):
            raise MoleculeError(f"{where}: expected a frame of {n} atoms")
        header = lines[i + 1]
        if f"config_type={name}" not in header.split() or " energy=" not in header:
            raise MoleculeError(f"{where}: frame header without energy or config_type={name}")
        rows = [r.split() for r in lines[i + 2:i + 2 + n]]
        if [r[0] for r in rows] != symbols or any(len(r) != 7 for r in rows):
            raise MoleculeError(f"{where}: expected '{' '.join(symbols)}' with positions and "
                                f"forces")
        got = bonds_of(symbols, [[float(v) for v in r[1:4]] for r in rows])
        if got != want:
            broken = sorted(want - got)
            made = sorted(got - want)
            raise MoleculeError(
                f"frame {count + 1}: the MD changed the bonds (broken: "
                f"{', '.join(f'{symbols[a]}{a}-{symbols[b]}{b}' for a, b in broken) or '-'}; "
                f"made: {', '.join(f'{symbols[a]}{a}-{symbols[b]}{b}' for a, b in made) or '-'})")
        i += 2 + n
        count += 1
    if count != frames:
        raise MoleculeError(f"{path}: {count} frames, expected {frames}")
    return text


def run_one(job, xtb_md, workdir, frames):
    """Embeds, relaxes and runs ddgnn-xtb-md for one molecule; (text, atoms, seconds, ff,
    FIRE steps of the GFN2 relaxation, whether it converged)."""
    index, lineno, smiles, name, molh, AllChem = job
    ds = datasets.MOLECULES[SET]
    t0 = time.monotonic()
    geometry = os.path.join(workdir, f"{index:04d}.xyz")
    part = os.path.join(workdir, f"{index:04d}.extxyz")
    xyz, ff = starting_geometry(molh, ds["seed"] + index, AllChem)
    with open(geometry, "w") as f:
        f.write(xyz)
    args = datasets.molecule_xtb_args(SET, index, name, geometry)
    args[args.index("--frames") + 1] = str(frames)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.setdefault("OMP_STACKSIZE", "64M")
    r = subprocess.run([xtb_md] + args + ["--threads", "1", "--out", part], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        tail = r.stdout.splitlines()[-12:]
        raise MoleculeError(f"{os.path.basename(xtb_md)} failed (exit {r.returncode})"
                            + ("".join(f"\n  | {line}" for line in tail) if tail else
                               ", no output"))
    text = check_frames(part, name, molh, frames)
    fire = re.search(r"relaxed in (\d+) FIRE steps", r.stdout)
    return (text, molh.GetNumAtoms(), time.monotonic() - t0, ff, int(fire.group(1)) if fire else 0,
            "not converged" not in r.stdout)


def generate(a, molecules, AllChem):
    xtb_md = shutil.which(a.xtb_md) if os.sep not in a.xtb_md else a.xtb_md
    if not xtb_md or not os.path.isfile(xtb_md) or not os.access(xtb_md, os.X_OK):
        raise MoleculeError(f"xtb driver '{a.xtb_md}' not found or not executable; build it with "
                            f"`cmake --build build --target ddgnn-xtb-md` (needs libxtb-dev) and "
                            f"pass --xtb-md PATH")
    out = os.path.abspath(a.out)
    folder = os.path.dirname(out)
    if not os.path.isdir(folder):
        raise MoleculeError(f"output folder '{folder}' does not exist")
    t0 = time.monotonic()
    base = os.path.basename(out)
    workdir = tempfile.mkdtemp(prefix=f"{'' if base.startswith('.') else '.'}{base}.work.",
                               dir=folder)
    tmp = f"{out}.tmp"
    try:
        jobs = [(i, lineno, smiles, name, molh, AllChem)
                for i, (lineno, smiles, name, molh) in enumerate(molecules, 1)]
        results, failures = {}, []
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            futures = {pool.submit(run_one, job, xtb_md, workdir, a.per_molecule): job
                       for job in jobs}
            try:
                for fut in concurrent.futures.as_completed(futures):
                    index, lineno, smiles, name = futures[fut][:4]
                    try:
                        results[index] = fut.result()
                    except (MoleculeError, OSError, ValueError) as e:
                        failures.append((index, f"{a.smiles}:{lineno}: molecule {index} "
                                                f"'{name}' ({smiles}): {e}"))
            except BaseException:  # interrupted: run nothing more
                for fut in futures:
                    fut.cancel()
                raise
        if failures:
            raise MoleculeError(f"{len(failures)} of {len(jobs)} molecules failed, no output "
                                f"written:\n" + "\n".join(m for _, m in sorted(failures)))
        with open(tmp, "w") as f:
            for index in sorted(results):
                f.write(results[index][0])
        os.replace(tmp, out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if os.path.exists(tmp):
            os.remove(tmp)
    atoms = [r[1] for r in results.values()]
    seconds = [r[2] for r in results.values()]
    slow = max(results, key=lambda i: results[i][2])
    uff = sum(1 for r in results.values() if r[3] != "MMFF94")
    fire = [r[4] for r in results.values()]
    unrelaxed = [molecules[i - 1][2] for i in sorted(results) if not results[i][5]]
    print(f"gen_molecules.py: {len(results)} molecules x {a.per_molecule} frames = "
          f"{len(results) * a.per_molecule} frames, {min(atoms)}-{max(atoms)} atoms, "
          f"{time.monotonic() - t0:.1f} s wall on {a.jobs} job(s); per molecule "
          f"{sum(seconds) / len(seconds):.2f} s on average, slowest "
          f"{molecules[slow - 1][2]} ({results[slow][1]} atoms) {results[slow][2]:.2f} s; "
          f"{uff} relaxed without MMFF94; GFN2 relaxation {min(fire)}-{max(fire)} FIRE steps, "
          f"{len(unrelaxed)} not at the GFN2 minimum after "
          f"{datasets.MOLECULES[SET]['relax']} FIRE steps{': ' if unrelaxed else ''}"
          f"{', '.join(unrelaxed)} -> {out}")


def main():
    ds = datasets.MOLECULES[SET]
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smiles", default=os.path.join(HERE, ds["smiles"]),
                    help="SMILES file (default: molecules.smi next to this script)")
    ap.add_argument("--out", help="extended XYZ file to write")
    ap.add_argument("--xtb-md", default=os.environ.get("DDGNN_XTB_MD", "ddgnn-xtb-md"),
                    help="ddgnn-xtb-md binary (default: $DDGNN_XTB_MD, else on PATH)")
    ap.add_argument("--per-molecule", type=int, default=ds["per_molecule"],
                    help=f"frames per molecule (default {ds['per_molecule']})")
    ap.add_argument("--molecules", type=int, help="only the first M molecules of the file")
    ap.add_argument("--jobs", type=int, default=2,
                    help="molecules run at the same time, one thread each (default 2)")
    ap.add_argument("--check", action="store_true", help="only validate the SMILES file")
    ap.add_argument("--min-molecules", type=int, default=1,
                    help="with --check: fail if the file has fewer molecules")
    ap.add_argument("--count", action="store_true",
                    help="only print how many molecules a run takes")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # finally-blocks clean up
    try:
        for opt in ("per_molecule", "molecules", "jobs"):
            v = getattr(a, opt)
            if v is not None and v < 1:
                raise MoleculeError(f"--{opt.replace('_', '-')} expects an integer >= 1, got {v}")
        if not (a.check or a.count or a.out):
            raise MoleculeError("--out FILE is required (or --check, --count)")
        Chem, AllChem = import_rdkit()
        molecules = read_smiles(a.smiles, Chem)
        if a.check:
            heavy = [m.GetNumHeavyAtoms() for _, _, _, m in molecules]
            atoms = [m.GetNumAtoms() for _, _, _, m in molecules]
            elements = sorted({at.GetSymbol() for *_, m in molecules for at in m.GetAtoms()})
            print(f"{a.smiles}: {len(molecules)} distinct neutral closed-shell molecules, "
                  f"elements {' '.join(elements)}, {min(heavy)}-{max(heavy)} heavy atoms, "
                  f"{min(atoms)}-{max(atoms)} atoms with hydrogens")
            if len(molecules) < a.min_molecules:
                raise MoleculeError(f"{a.smiles}: {len(molecules)} molecules, fewer than "
                                    f"{a.min_molecules}")
            return 0
        if a.molecules is not None:
            molecules = molecules[:a.molecules]
        if a.count:
            print(len(molecules))
            return 0
        generate(a, molecules, AllChem)
    except MoleculeError as e:
        print(f"gen_molecules.py: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
