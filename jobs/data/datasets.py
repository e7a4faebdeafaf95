#!/usr/bin/env python3
"""The one table of reference datasets (system, potential or method, temperature, timestep, stride,
seed) shared by generate.sh, gen_lammps.py, gen_molecules.py, fd_check_lammps.py and the xtb
driver's arguments.
Command line: datasets.py names [--all] | kind NAME | xtb-args NAME | describe."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# 1 eV/Å^3 in bar (LAMMPS `units metal` pressure unit): 160.21766208 GPa.
EV_PER_A3_IN_BAR = 1.6021766208e6

DEFAULT_FRAMES = 2000
LARGE_FRAMES = 100000

# LAMMPS sets. Times in ps (`units metal`); stride and equil in MD steps.
# `pair_coeff` takes {pot} for the absolute path of the potential file.
LAMMPS = {
    "cu_eam": dict(
        system="fcc Cu, 3x3x3 conventional cells (108 atoms), a = 3.615 A, periodic",
        elements=["Cu"], masses=[63.546],
        lattice="fcc", a=3.615, reps=3, alloy=None,
        potential="Cu_u3.eam", pair_style="eam", pair_coeff="* * {pot}",
        temperature=800.0, timestep=0.002, tdamp=0.2, stride=20, equil=5000, seed=1001),
    "cuni_eam": dict(
        system="random fcc Cu50Ni50, 3x3x3 cells (54 Cu + 54 Ni), a = 3.56 A, periodic",
        elements=["Cu", "Ni"], masses=[63.546, 58.6934],
        lattice="fcc", a=3.56, reps=3, alloy=dict(type=2, count=54, seed=2002),
        potential="CuNi.eam.alloy", pair_style="eam/alloy", pair_coeff="* * {pot} Cu Ni",
        temperature=900.0, timestep=0.002, tdamp=0.2, stride=20, equil=5000, seed=1002),
    "si_sw": dict(
        system="diamond Si, 2x2x2 conventional cells (64 atoms), a = 5.431 A, periodic",
        elements=["Si"], masses=[28.0855],
        lattice="diamond", a=5.431, reps=2, alloy=None,
        potential="Si.sw", pair_style="sw", pair_coeff="* * {pot} Si",
        temperature=1200.0, timestep=0.001, tdamp=0.1, stride=20, equil=5000, seed=1003),
}

# The same crystals with a cell that changes: after equilibration at the 0 K cell, each box length
# oscillates by +-`amplitude` (fraction of its length) with its own period in ps (`fix deform ...
# wiggle`, atoms remapped), so the frames span volumes and uniaxial strains and the energy and
# stress labels carry the equation of state (stress training needs it; a fixed cell gives only
# one volume). Orthogonal box: the shear stresses still fluctuate with the thermal motion.
LAMMPS["cu_eam_strain"] = dict(
    LAMMPS["cu_eam"], seed=1011,
    system="fcc Cu, 3x3x3 conventional cells (108 atoms), a = 3.615 A +-3% per axis, periodic",
    deform=dict(amplitude=0.03, periods=(7.3, 11.9, 17.1)))
LAMMPS["si_sw_strain"] = dict(
    LAMMPS["si_sw"], seed=1013,
    system="diamond Si, 2x2x2 conventional cells (64 atoms), a = 5.431 A +-3% per axis, periodic",
    deform=dict(amplitude=0.03, periods=(3.7, 5.9, 8.3)))

# xtb sets (ddgnn-xtb-md). dt and tau in fs; stride and equil in MD steps.
XTB = {
    "ethanol": dict(
        system="ethanol C2H5OH (9 atoms), isolated molecule",
        geometry="ethanol.xyz", temperature=500.0, dt=0.5, tau=50.0, stride=5, equil=1000,
        seed=2001, accuracy=0.01),
    "aspirin": dict(
        system="aspirin C9H8O4 (21 atoms), isolated molecule",
        geometry="aspirin.xyz", temperature=500.0, dt=0.5, tau=50.0, stride=1, equil=600,
        seed=2002, accuracy=0.01),
}

# Many small molecules, each labelled by a short GFN2-xTB MD run of its own (gen_molecules.py):
# SMILES from `smiles`, embedded by RDKit (ETKDG, randomSeed seed + i for the i-th molecule of the
# file, counted from 1) and relaxed with MMFF94 (UFF where MMFF has no parameters); ddgnn-xtb-md
# then relaxes it to the GFN2 minimum (at most `relax` FIRE steps, to `fmax` eV/A: MMFF's CO2 and
# CS2 bonds are 0.25 A too long, and the energy released would heat the MD) and runs MD as the xtb
# sets with seed + i; `per_molecule` frames each, every `stride` steps after `equil` steps,
# config_type=<molecule name>. Not a default set (generate.sh --only molecules): it takes minutes.
MOLECULES = {
    "molecules": dict(
        system="small organic molecules (H, C, N, O, F, S, Cl; 2-10 heavy atoms), isolated",
        smiles="molecules.smi", per_molecule=5, temperature=500.0, dt=0.5, tau=50.0, stride=40,
        equil=200, seed=3000, accuracy=0.01, relax=500, fmax=0.01,
        elements=("H", "C", "N", "O", "F", "S", "Cl"), heavy_atoms=(2, 10)),
}

# The sets generate.sh makes when no --only is given (and jobs/main.sh converts).
NAMES = list(LAMMPS) + list(XTB)
# Every set generate.sh --only accepts.
ALL_NAMES = NAMES + list(MOLECULES)


class DatasetError(Exception):
    pass


def check_name(name):
    if name not in ALL_NAMES:
        raise DatasetError(f"unknown dataset '{name}'; known datasets: {', '.join(ALL_NAMES)}")
    return name


def potential_dir():
    """Where the LAMMPS potential files are: $LAMMPS_POTENTIALS or the Debian location."""
    return os.environ.get("LAMMPS_POTENTIALS", "/usr/share/lammps/potentials")


def potential_path(ds):
    path = os.path.join(potential_dir(), ds["potential"])
    if not os.path.isfile(path):
        raise DatasetError(
            f"LAMMPS potential file '{path}' not found; install the Debian package `lammps` "
            f"(it ships /usr/share/lammps/potentials) or set LAMMPS_POTENTIALS to its folder")
    return path


def lammps_potential_commands(name):
    """The pair_style / pair_coeff / mass lines of dataset `name` (also used by the FD check)."""
    ds = LAMMPS[check_name(name)]
    lines = [f"mass {i + 1} {m}" for i, m in enumerate(ds["masses"])]
    lines.append(f"pair_style {ds['pair_style']}")
    lines.append("pair_coeff " + ds["pair_coeff"].format(pot=potential_path(ds)))
    return lines


def lammps_md_input(name, frames, dump_path, print_path):
    """A complete LAMMPS input: build the crystal, equilibrate with fix nvt (not dumped), reset the
    step counter, then dump every `stride` steps positions and forces (sorted by id) and print the
    potential energy and the virial-only pressure tensor (bar) of the same steps (for a set with
    `deform`, of the snapshots of the deforming run, recomputed by `rerun`)."""
    ds = LAMMPS[check_name(name)]
    r, t, stride = ds["reps"], ds["temperature"], ds["stride"]
    lines = [
        f"# {name}: generated by jobs/data/gen_lammps.py from jobs/data/datasets.py",
        "units metal",
        "atom_style atomic",
        "boundary p p p",
        f"lattice {ds['lattice']} {ds['a']}",
        f"region box block 0 {r} 0 {r} 0 {r}",
        f"create_box {len(ds['elements'])} box",
        "create_atoms 1 box",
    ]
    if ds["alloy"]:
        al = ds["alloy"]
        lines.append(f"set type 1 type/subset {al['type']} {al['count']} {al['seed']}")
    lines += lammps_potential_commands(name)
    lines += [
        f"timestep {ds['timestep']}",
        f"velocity all create {t} {ds['seed']} mom yes rot no dist gaussian",
        f"fix md all nvt temp {t} {t} {ds['tdamp']}",
        "thermo 1000",
        f"run {ds['equil']}",
        "reset_timestep 0",
    ]
    labels = [
        "compute pvir all pressure NULL virial",
        f"dump frames all custom {stride} {dump_path} id type x y z fx fy fz",
        "dump_modify frames sort id format float %.12g",
        f"fix energies all print {stride} "
        '"$(step) $(pe:%.17g) $(c_pvir[1]:%.17g) $(c_pvir[2]:%.17g) $(c_pvir[3]:%.17g) '
        '$(c_pvir[4]:%.17g) $(c_pvir[5]:%.17g) $(c_pvir[6]:%.17g)" '
        f"file {print_path} screen no title \"# step pe pxx pyy pzz pxy pxz pyz (eV, bar)\"",
    ]
    if not ds.get("deform"):
        return "\n".join(lines + labels + [f"run {frames * stride}"]) + "\n"
    # fix deform changes the box at the end of a step, after the forces and before the dump, so
    # the labels of a deformed cell come from a second pass: `rerun` recomputes energy, forces
    # and pressure of each dumped snapshot (positions and box, full precision) as they are.
    de, length = ds["deform"], ds["a"] * r
    lines += [
        "fix strain all deform 1 " + " ".join(
            f"{axis} wiggle {de['amplitude'] * length!r} {period!r}"
            for axis, period in zip("xyz", de["periods"])) + " remap x units box",
        f"dump traj all custom {stride} traj.dump id type x y z",
        "dump_modify traj sort id format float %.17g",
        f"run {frames * stride}",
        "undump traj",
        "unfix strain",
        "unfix md",
    ]
    return "\n".join(lines + labels + ["rerun traj.dump dump x y z box yes"]) + "\n"


def xtb_args(name):
    """Arguments of ddgnn-xtb-md for dataset `name` (without --frames and --out)."""
    ds = XTB[check_name(name)]
    return ["--in", os.path.join(HERE, ds["geometry"]), "--config-type", name,
            "--temperature", repr(ds["temperature"]), "--dt", repr(ds["dt"]),
            "--tau", repr(ds["tau"]), "--stride", str(ds["stride"]), "--equil", str(ds["equil"]),
            "--seed", str(ds["seed"]), "--accuracy", repr(ds["accuracy"])]


def kind(name):
    """lammps, xtb (one trajectory) or xtb-molecules (gen_molecules.py)."""
    if check_name(name) in LAMMPS:
        return "lammps"
    return "xtb" if name in XTB else "xtb-molecules"


def molecule_xtb_args(name, index, mol_name, geometry):
    """Arguments of ddgnn-xtb-md for the `index`-th molecule (from 1) of set `name`, called
    `mol_name`, starting from the xyz file `geometry` (without --out)."""
    ds = MOLECULES[check_name(name)]
    return ["--in", geometry, "--config-type", mol_name,
            "--temperature", repr(ds["temperature"]), "--dt", repr(ds["dt"]),
            "--tau", repr(ds["tau"]), "--stride", str(ds["stride"]), "--equil", str(ds["equil"]),
            "--frames", str(ds["per_molecule"]), "--seed", str(ds["seed"] + index),
            "--accuracy", repr(ds["accuracy"]), "--relax", str(ds["relax"]),
            "--fmax", repr(ds["fmax"])]


def describe():
    rows = []
    for name, ds in LAMMPS.items():
        rows.append(f"{name}: {ds['system']}; LAMMPS pair_style {ds['pair_style']} "
                    f"({ds['potential']}); NVT {ds['temperature']:g} K (Nose-Hoover, Tdamp "
                    f"{ds['tdamp'] * 1000:g} fs); dt {ds['timestep'] * 1000:g} fs; "
                    f"equil {ds['equil']} steps; frame every {ds['stride']} steps; "
                    f"velocity seed {ds['seed']}"
                    + (f"; box lengths +-{ds['deform']['amplitude'] * 100:g}% "
                       f"(fix deform wiggle, periods {', '.join(f'{p:g}' for p in ds['deform']['periods'])} ps)"
                       if ds.get("deform") else ""))
    for name, ds in XTB.items():
        rows.append(f"{name}: {ds['system']}; GFN2-xTB (accuracy {ds['accuracy']:g}); "
                    f"NVT {ds['temperature']:g} K (Bussi, tau {ds['tau']:g} fs); "
                    f"dt {ds['dt']:g} fs; equil {ds['equil']} steps; frame every "
                    f"{ds['stride']} steps; seed {ds['seed']}")
    for name, ds in MOLECULES.items():
        rows.append(f"{name}: {ds['system']}, SMILES from {ds['smiles']}; RDKit ETKDG + MMFF94 "
                    f"(seed {ds['seed']} + i), GFN2 FIRE relaxation (<= {ds['relax']} steps, "
                    f"fmax {ds['fmax']:g} eV/A); GFN2-xTB (accuracy {ds['accuracy']:g}); "
                    f"NVT {ds['temperature']:g} K (Bussi, tau {ds['tau']:g} fs); "
                    f"dt {ds['dt']:g} fs; equil {ds['equil']} steps; {ds['per_molecule']} frames "
                    f"per molecule, every {ds['stride']} steps; seed {ds['seed']} + i; "
                    f"config_type = molecule name; not a default set")
    return "\n".join(rows)


def main(argv):
    usage = "usage: datasets.py names [--all] | kind NAME | xtb-args NAME | describe"
    try:
        if argv == ["names"]:
            print(" ".join(NAMES))
        elif argv == ["names", "--all"]:
            print(" ".join(ALL_NAMES))
        elif argv == ["describe"]:
            print(describe())
        elif len(argv) == 2 and argv[0] == "kind":
            print(kind(argv[1]))
        elif len(argv) == 2 and argv[0] == "xtb-args":
            if check_name(argv[1]) not in XTB:
                raise DatasetError(f"dataset '{argv[1]}' is not an xtb dataset")
            print("\n".join(xtb_args(argv[1])))
        else:
            print(usage, file=sys.stderr)
            return 2
    except DatasetError as e:
        print(f"datasets.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
