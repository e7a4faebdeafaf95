#!/usr/bin/env python3
"""Tests for jobs/simulate_plot.py: run as `python3 jobs/test_simulate_plot.py` (stdlib only).

Each test writes a small CSV in the format of `ddgnn simulate --out` into a temporary directory,
runs the script through subprocess and checks its exit status, output and the PNG it writes
(PNG decoding: jobs/test_parity_plot.py's read_png).
"""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "simulate_plot.py")
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
import simulate_plot  # noqa: E402  (geometry and colours)
from test_parity_plot import pixel, read_png  # noqa: E402

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


class SimulatePlotTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def assert_no_png(self):
        left = [n for n in os.listdir(self.dir) if n.endswith(".png") or ".png.tmp" in n]
        self.assertEqual(left, [])

    def assert_one_line_error(self, r, *needles):
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        for n in needles:
            self.assertIn(n, r.stderr)
        self.assert_no_png()

    def test_lines_markers_and_shading(self):
        data = rows()
        write(self.path("sim.csv"), data)
        r = run_script(self.path("sim.csv"))
        self.assertEqual(r.returncode, 0, r.stderr)
        out = self.path("sim.png")
        self.assertIn(out, r.stdout)
        w, h, depth, colour, raw = read_png(out)
        self.assertEqual((w, h, depth, colour),
                         (simulate_plot.WIDTH, simulate_plot.HEIGHT, 8, 2))
        # Axes over every rank count and every feasible epoch time.
        epochs = [float(d[16]) for d in data if d[7] == 1]
        axes = simulate_plot.Axes([d[1] for d in data], epochs)
        self.assertEqual(axes.px(1), simulate_plot.PLOT_LEFT)
        self.assertEqual(axes.px(64), simulate_plot.PLOT_LEFT + simulate_plot.PLOT_W - 1)
        # A collective marker where collective differs from the others (P = 4: 50 s).
        red = simulate_plot.COLORS["collective"]
        self.assertEqual(pixel(raw, w, axes.px(4), axes.py(50.0)), red)
        # file's last feasible point (P = 8) is drawn, and no file line goes on to P = 16.
        purple = simulate_plot.COLORS["file"]
        self.assertEqual(pixel(raw, w, axes.px(8), axes.py(300.0 / 8)), purple)
        mid_x = (axes.px(8) + axes.px(16)) // 2
        mid_y = (axes.py(300.0 / 8) + axes.py(300.0 / 16)) // 2
        column = [pixel(raw, w, mid_x, y) for y in range(mid_y - 3, mid_y + 4)]
        self.assertNotIn(purple, column)
        # replicated never fits: none of its green anywhere in the plot area.
        green = simulate_plot.COLORS["replicated"]
        x0, y0 = simulate_plot.PLOT_LEFT, simulate_plot.PLOT_TOP
        area = [pixel(raw, w, x, y) for y in range(y0, y0 + simulate_plot.PLOT_H, 3)
                for x in range(x0, x0 + simulate_plot.PLOT_W, 3)]
        self.assertNotIn(green, area)
        # P = 32 and 64 need 8 and 16 nodes of a 4-node machine: shaded at the far right.
        self.assertEqual(pixel(raw, w, x0 + simulate_plot.PLOT_W - 3, y0 + 2),
                         simulate_plot.SHADE)
        self.assertEqual(pixel(raw, w, x0 + 2, y0 + 2), simulate_plot.WHITE)

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
