#!/usr/bin/env python3
"""Tests for jobs/simulate_plot.py: run as `python3 jobs/test_simulate_plot.py` (matplotlib from
Debian's python3-matplotlib; another python3 first on PATH hands over to /usr/bin/python3).

Each test writes a small CSV in the format of `ddgnn simulate --out` into a temporary directory,
runs the script through subprocess and checks its exit status, output and the PNG it writes;
what is drawn (lines, gaps, shading, legend) is checked on the figure the script builds.
"""

import math
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "simulate_plot.py")
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
import plotting  # noqa: E402

plotting.pyplot()  # under a python3 without matplotlib: run again by /usr/bin/python3
import simulate_plot  # noqa: E402
from test_parity_plot import InTempDir, png_size  # noqa: E402

HEADER = ",".join(simulate_plot.HEADER)


def rows(platform="test", ranks=(1, 2, 4, 8, 16, 32, 64), nodes_max=4, ranks_per_node=4):
    """A simulation: rma scales perfectly, collective flattens, replicated never fits, file fits
    only up to 8 ranks (so it has points and then none), auto follows rma."""
    out = []
    for p in ranks:
        nodes = -(-p // ranks_per_node)
        within = 1 if nodes <= nodes_max else 0
        epochs = {"collective": 100.0 / p ** 0.5, "file": 300.0 / p, "replicated": 90.0 / p,
                  "rma": 100.0 / p}
        feasible = {"collective": 1, "file": 1 if p <= 8 else 0, "replicated": 0, "rma": 1}
        for b in ("collective", "file", "replicated", "rma", "auto"):
            e = epochs["rma" if b == "auto" else b]
            f = 1 if b == "auto" else feasible[b]
            out.append([platform, p, nodes, within, b, p, 1, f, 1.0, 1e-6, 0, 1e-6, 0.01, 0,
                        0.01, 100, repr(e), "rma"])
    return out


def write(path, lines, header=HEADER):
    with open(path, "w") as f:
        f.write(header + "\n")
        for r in lines:
            f.write(",".join(str(v) for v in r) + "\n")


def run_script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=60)


class SimulatePlotTest(InTempDir):
    def assert_no_png(self):
        left = [n for n in os.listdir(self.dir) if n.endswith(".png") or ".png.tmp" in n]
        self.assertEqual(left, [])

    def assert_one_line_error(self, r, *needles):
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        for n in needles:
            self.assertIn(n, r.stderr)
        self.assert_no_png()

    def test_lines_gaps_shading_and_legend(self):
        data = rows()
        write(self.path("sim.csv"), data)
        r = run_script(self.path("sim.csv"))
        self.assertEqual(r.returncode, 0, r.stderr)
        out = self.path("sim.png")
        self.assertIn(out, r.stdout)
        self.assertEqual(png_size(out), (simulate_plot.WIDTH, simulate_plot.HEIGHT))

        fig = simulate_plot.figure(self.path("sim.csv"), None)
        (ax,) = fig.get_axes()
        lines = {line.get_label(): line for line in ax.get_lines()}
        ranks = [1, 2, 4, 8, 16, 32, 64]
        # Every backend over every rank count, its epoch times where it fits, a gap elsewhere.
        self.assertEqual(list(lines["collective"].get_xdata()), ranks)
        self.assertAlmostEqual(lines["collective"].get_ydata()[2], 50.0)
        self.assertEqual(lines["collective"].get_color(), simulate_plot.COLORS["collective"])
        file_y = lines["file"].get_ydata()
        self.assertAlmostEqual(file_y[3], 300.0 / 8)  # its last feasible point, P = 8
        self.assertTrue(all(math.isnan(v) for v in file_y[4:]))  # no line on to P = 16
        self.assertTrue(all(math.isnan(v) for v in lines["replicated: never fits"].get_ydata()))
        auto = lines["auto"]
        self.assertEqual(auto.get_linestyle(), "--")
        self.assertEqual([float(v) for v in auto.get_ydata()], [100.0 / p for p in ranks])
        # P = 32 and 64 need 8 and 16 nodes of a 4-node machine: shaded from between 16 and 32.
        (shade,) = ax.patches
        x0 = min(v[0] for v in shade.get_xy())
        self.assertGreater(x0, 16)
        self.assertLess(x0, 32)
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        self.assertEqual(legend, ["collective", "file", "replicated: never fits", "rma", "auto",
                                  "beyond the machine"])
        self.assertIn("auto: rma P 1-64", ax.get_title())
        self.assertEqual([float(t) for t in ax.get_xticks()], [float(p) for p in ranks])
        plotting.pyplot().close(fig)

    def test_out_and_title(self):
        write(self.path("sim.csv"), rows())
        out = self.path("other.png")
        r = run_script(self.path("sim.csv"), "--out", out, "--title", "Cu EAM on test")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(out))
        self.assertFalse(os.path.exists(self.path("sim.png")))

    def test_single_rank_count(self):
        write(self.path("sim.csv"), rows(ranks=(16,)))
        r = run_script(self.path("sim.csv"))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_wrong_header(self):
        write(self.path("sim.csv"), rows(), header=HEADER.replace("epoch_s", "epoch"))
        self.assert_one_line_error(run_script(self.path("sim.csv")), "sim.csv:1")

    def test_non_numeric_value(self):
        data = rows()
        data[6][16] = "fast"  # data row 7 = line 8
        write(self.path("sim.csv"), data)
        self.assert_one_line_error(run_script(self.path("sim.csv")), "sim.csv:8", "epoch_s")

    def test_two_platforms(self):
        write(self.path("sim.csv"), rows("perlmutter") + rows("frontier"))
        self.assert_one_line_error(run_script(self.path("sim.csv")), "2 platforms")

    def test_nothing_feasible(self):
        data = rows()
        for d in data:
            d[7] = 0
        write(self.path("sim.csv"), data)
        self.assert_one_line_error(run_script(self.path("sim.csv")), "no feasible point")

    def test_missing_file(self):
        self.assert_one_line_error(run_script(self.path("absent.csv")), "absent.csv")


if __name__ == "__main__":
    unittest.main(verbosity=2)
