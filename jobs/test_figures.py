#!/usr/bin/env python3
"""Tests for jobs/figures.py: what each figure draws from a small CSV, and bad input as one line
on stderr, exit status 1 and no PNG. Run as `python3 jobs/test_figures.py` (matplotlib from
Debian's python3-matplotlib; another python3 first on PATH hands over to /usr/bin/python3)."""

import csv
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
import plotting  # noqa: E402

plotting.pyplot()  # under a python3 without matplotlib: run again by /usr/bin/python3
import figures  # noqa: E402
from test_parity_plot import InTempDir  # noqa: E402


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


class Figures(InTempDir):
    def run_script(self, *args):
        return subprocess.run([sys.executable, os.path.join(HERE, "figures.py"), *args],
                              capture_output=True, text=True, timeout=120)

    def assert_error(self, r, needle):
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(needle, r.stderr)
        self.assertEqual([n for n in os.listdir(self.dir) if ".png" in n], [])

    def grid(self, extra_columns=()):
        rows = []
        for size in (1024, 65536):
            for p in (1, 2):
                for backend, scale in (("rma", 2.0), ("shm", 1.0)):
                    for batch in (16, 64):
                        us = scale * size / 1e3 / batch ** 0.5
                        rows.append([backend, p, p, 0, size, batch, 0.5, us, 1.0, 8.0, 1e-3] +
                                    [0] * len(extra_columns))
        # a replica-group row (width 2): not drawn
        rows.append(["rma", 2, 1, 2, 1024, 16, 0.5, 99.0, 1.0, 8.0, 1e-3] +
                    [0] * len(extra_columns))
        write(self.path("grid.csv"), figures.GRID_HEADER + list(extra_columns), rows)

    def test_loader_panels_lines_and_ceiling(self):
        self.grid(extra_columns=("p25_seconds",))  # later columns of bench-loader are fine
        fig = figures.loader_figure(self.path("grid.csv"))
        axes = fig.get_axes()
        self.assertEqual(len(axes), 4)  # 2 record sizes x 2 rank counts
        self.assertEqual(axes[1].get_title(), "1 KiB records, 2 ranks")
        lines = {l.get_label(): l for l in axes[1].get_lines()}
        self.assertEqual(set(lines), {"rma", "shm", "memcpy ceiling"})
        self.assertEqual(list(lines["rma"].get_xdata()), [16, 64])
        self.assertAlmostEqual(lines["rma"].get_ydata()[0], 2.0 * 1.024 / 4)
        self.assertAlmostEqual(lines["memcpy ceiling"].get_ydata()[0], 1024 / 8e3)
        r = self.run_script("loader", self.path("grid.csv"), "--out", self.path("g.png"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(self.path("g.png")))

    def test_scaling_marks_oversubscribed_points(self):
        header = ["point", "status", "ranks", "Architecture.mpnn_type", "graphs_per_s"] + \
            ["mean_" + p for p in figures.PHASES]
        rows = [[f"p{k}", "done", p, m, 100.0 * p, *[0.1] * len(figures.PHASES)]
                for k, (m, p) in enumerate([("SchNet", 1), ("SchNet", 4), ("GIN", 1)])]
        rows.append(["p9", "failed", 2, "GIN", "", *[""] * len(figures.PHASES)])
        write(self.path("c.csv"), header, rows)
        fig = figures.scaling_figure(self.path("c.csv"), cores=2)
        left, right = fig.get_axes()
        lines = [l for l in left.get_lines() if l.get_label() == "SchNet"]
        self.assertEqual(list(lines[0].get_xdata()), [1, 4])
        markers = [l for l in left.get_lines() if list(l.get_xdata()) == [4]]
        self.assertEqual(markers[0].get_markerfacecolor(), "white")  # 4 ranks on 2 cores
        self.assertEqual(len(right.patches), 3 * len(figures.PHASES))  # the failed one is left out
        write(self.path("none.csv"), header, rows[3:])
        self.assert_error(self.run_script("scaling", self.path("none.csv"), "--out",
                                          self.path("x.png")), "no finished point")

    def test_bad_input(self):
        write(self.path("grid.csv"), ["backend", "ranks"], [["rma", 1]])
        self.assert_error(self.run_script("loader", self.path("grid.csv"), "--out",
                                          self.path("x.png")), "grid.csv:1")
        self.assert_error(self.run_script("learning", self.path("nope"), "--out",
                                          self.path("x.png")), "nope/metrics.csv")


if __name__ == "__main__":
    unittest.main(verbosity=2)
