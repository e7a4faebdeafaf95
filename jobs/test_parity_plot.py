#!/usr/bin/env python3
"""Tests for jobs/parity_plot.py: run as `python3 jobs/test_parity_plot.py` (matplotlib from
Debian's python3-matplotlib; another python3 first on PATH hands over to /usr/bin/python3).

Each test writes small energies.csv / forces.csv files into a temporary directory, runs the
script through subprocess and checks its exit status, output and the PNG it writes; what the
panels hold (points, diagonal, titles) is checked on the figure the script builds.
"""

import math
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "parity_plot.py")
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
import plotting  # noqa: E402

plotting.pyplot()  # under a python3 without matplotlib: run again by /usr/bin/python3
import parity_plot  # noqa: E402

ENERGY_HEADER = "graph,split,n_atoms,energy_ref_ev,energy_pred_ev"
FORCE_HEADER = "graph,atom,z,fx_ref,fy_ref,fz_ref,fx_pred,fy_pred,fz_pred"


def make_data(n_graphs=40, atoms=(3, 12), seed=7):
    """Returns (energy rows, force rows) as lists of tuples, deterministic."""
    rng = random.Random(seed)
    energies, forces = [], []
    for g in range(n_graphs):
        n = rng.randint(*atoms)
        ref = -3.7 * n + rng.gauss(0, 0.3)
        energies.append((g, "test", n, ref, ref + rng.gauss(0, 0.02 * n)))
        for a in range(n):
            r = [rng.gauss(0, 1.5) for _ in range(3)]
            forces.append((g, a, 29, *r, *(v + rng.gauss(0, 0.1) for v in r)))
    return energies, forces


def write_csv(path, header, rows):
    with open(path, "w") as f:
        f.write(header + "\n")
        for row in rows:
            f.write(",".join(repr(v) if isinstance(v, float) else str(v) for v in row) + "\n")


def run_script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=60)


def png_size(path):
    """(width, height) from a PNG's header, after checking its signature."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "no PNG signature"
    assert head[12:16] == b"IHDR", "no IHDR"
    return struct.unpack(">II", head[16:24])


class InTempDir(unittest.TestCase):
    """A test with a temporary folder of its own (self.dir, self.path(name)); the figure tests
    of jobs/ share it."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)


class ParityPlotTest(InTempDir):

    def check_png(self, path, width, height):
        self.assertTrue(os.path.isfile(path))
        self.assertEqual(png_size(path), (width, height))

    def check_panels(self, n_points):
        """The figure of self.dir: one panel per entry of n_points, each with that many points,
        the red y = x diagonal over the whole (square, equal) range, and MAE in the title."""
        fig, _ = parity_plot.figure(self.dir, None)
        axes = fig.get_axes()
        self.assertEqual(len(axes), len(n_points))
        for ax, n in zip(axes, n_points):
            self.assertEqual(len(ax.collections[0].get_offsets()), n)
            (diag,) = ax.get_lines()
            self.assertEqual(diag.get_color(), parity_plot.LINE_COLOR)
            self.assertEqual(list(diag.get_xdata()), list(diag.get_ydata()))
            self.assertEqual(ax.get_xlim(), ax.get_ylim())
            self.assertEqual(tuple(diag.get_xdata()), ax.get_xlim())
            self.assertIn("MAE", ax.get_title())
        plotting.pyplot().close(fig)

    def assert_no_png(self):
        left = [n for n in os.listdir(self.dir) if n.endswith(".png") or ".png.tmp" in n]
        self.assertEqual(left, [])

    def printed(self, stdout, what):
        m = re.search(rf"^{what}: .*MAE=([0-9.eE+-]+) .*RMSE=([0-9.eE+-]+)", stdout, re.M)
        self.assertIsNotNone(m, f"no {what} line in {stdout!r}")
        return float(m.group(1)), float(m.group(2))

    def test_energy_and_forces(self):
        energies, forces = make_data()
        write_csv(self.path("energies.csv"), ENERGY_HEADER, energies)
        write_csv(self.path("forces.csv"), FORCE_HEADER, forces)
        r = run_script(self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(self.path("parity.png"), r.stdout)
        self.check_png(self.path("parity.png"), 900, 450)
        self.check_panels([len(energies), 3 * len(forces)])

        # energy MAE / RMSE per atom, in meV/atom
        d = [(p - e) / n * 1000.0 for _, _, n, e, p in energies]
        mae, rmse = sum(map(abs, d)) / len(d), math.sqrt(sum(v * v for v in d) / len(d))
        got = self.printed(r.stdout, "energy")
        self.assertAlmostEqual(got[0], mae, delta=1e-5 + 1e-7 * mae)
        self.assertAlmostEqual(got[1], rmse, delta=1e-5 + 1e-7 * rmse)
        # force MAE over all components, in meV/A
        d = [(row[6 + k] - row[3 + k]) * 1000.0 for row in forces for k in range(3)]
        mae = sum(map(abs, d)) / len(d)
        self.assertAlmostEqual(self.printed(r.stdout, "forces")[0], mae, delta=1e-5 + 1e-7 * mae)

    def test_out_and_title(self):
        energies, forces = make_data(n_graphs=5)
        write_csv(self.path("energies.csv"), ENERGY_HEADER, energies)
        write_csv(self.path("forces.csv"), FORCE_HEADER, forces)
        out = self.path("other.png")
        r = run_script(self.dir, "--out", out, "--title", "cu_eam run 3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_png(out, 900, 450)
        self.assertFalse(os.path.exists(self.path("parity.png")))

    def test_energies_only(self):
        energies, _ = make_data(n_graphs=10)
        write_csv(self.path("energies.csv"), ENERGY_HEADER, energies)
        r = run_script(self.dir)  # no forces.csv at all
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("forces:", r.stdout)
        self.check_png(self.path("parity.png"), 450, 450)
        self.check_panels([len(energies)])

        write_csv(self.path("forces.csv"), FORCE_HEADER, [])  # header, no rows
        r = run_script(self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_png(self.path("parity.png"), 450, 450)

    def test_single_exact_structure(self):
        write_csv(self.path("energies.csv"), ENERGY_HEADER, [(0, "test", 4, -12.5, -12.5)])
        r = run_script(self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.printed(r.stdout, "energy"), (0.0, 0.0))
        self.check_png(self.path("parity.png"), 450, 450)

    def test_wrong_header(self):
        energies, _ = make_data(n_graphs=3)
        write_csv(self.path("energies.csv"), "graph,split,natoms,energy_ref_ev,energy_pred_ev",
                  energies)
        r = run_script(self.dir)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("energies.csv:1", r.stderr)
        self.assert_no_png()

    def test_non_numeric_value(self):
        energies, forces = make_data(n_graphs=3)
        forces[2] = forces[2][:4] + ("abc",) + forces[2][5:]  # data row 3 = line 4
        write_csv(self.path("energies.csv"), ENERGY_HEADER, energies)
        write_csv(self.path("forces.csv"), FORCE_HEADER, forces)
        r = run_script(self.dir)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("forces.csv:4", r.stderr)
        self.assertIn("fy_ref", r.stderr)
        self.assert_no_png()

    def test_missing_input(self):
        r = run_script(self.path("nope"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("nope", r.stderr)
        r = run_script(self.dir)  # directory without energies.csv
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("energies.csv", r.stderr)
        self.assert_no_png()


if __name__ == "__main__":
    unittest.main(verbosity=2)
