#!/usr/bin/env python3
"""Tests for jobs/figures.py: what each figure draws from a small CSV, and bad input as one line
on stderr, exit status 1 and no PNG. Run as `python3 jobs/test_figures.py` (matplotlib from
Debian's python3-matplotlib; another python3 first on PATH hands over to /usr/bin/python3)."""

import csv
import json
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

    # bench-loader's columns after GRID_HEADER, and four configurations (µs): one rank (auto is
    # replicated); rma explored 20% faster than shm (switches); rma explored 3% faster (keeps
    # shm, the switch margin); collective explored fastest but served 5.3% slower than shm.
    AUTO_COLUMNS = ["p25_seconds", "p75_seconds", "repetitions", "explore_seconds",
                    "rest_seconds", "beats_best"]
    AUTO_CONFIGS = [  # (ranks, bytes, batch, {backend: (explored, served)})
        (1, 1024, 16, {"collective": (4, 4), "rma": (2, 2), "shm": (2, 2), "replicated": (1, 1)}),
        (2, 1024, 16, {"collective": (30, 40), "rma": (8, 8), "shm": (10, 10),
                       "replicated": (6, 6)}),
        (2, 65536, 16, {"collective": (50, 100), "rma": (9.7, 12.5), "shm": (10, 10),
                        "replicated": (11, 11)}),
        (2, 64, 4096, {"collective": (5, 6), "rma": (9, 9), "shm": (8, 5.7),
                       "replicated": (9, 9)}),
    ]

    def auto_grid(self, name="grid.csv", change=None, drop=None):
        """Writes AUTO_CONFIGS as a bench-loader grid; `change` (ranks, bytes, batch, backend,
        column, text) overrides one value, `drop` (ranks, bytes, backend) leaves a row out."""
        rows = []
        for p, size, batch, times in self.AUTO_CONFIGS:
            for backend, (explored, served) in times.items():
                if drop == (p, size, backend):
                    continue
                c = dict(zip(figures.GRID_HEADER + self.AUTO_COLUMNS,
                             [backend, p, p, 0, size, batch, 0.5 if p > 1 else 0.0, 1.0, 1.0,
                              8.0, served * 1e-6, 0, 0, 60, explored * 1e-6, served * 1e-6, 0]))
                if change and change[:4] == (p, size, batch, backend):
                    c[change[4]] = change[5]
                rows.append(list(c.values()))
        write(self.path(name), figures.GRID_HEADER + self.AUTO_COLUMNS, rows)

    def test_auto_speedups_and_selection(self):
        self.auto_grid()
        outcomes = figures.auto_outcomes(self.path("grid.csv"))
        self.assertEqual([o["pick"] for o in outcomes],  # by ranks, width, bytes, batch
                         ["replicated", "collective", "rma", "shm"])
        fig, table = figures.auto_figure(self.path("grid.csv"))
        left, right = fig.get_axes()
        lines = {l.get_label(): l for l in left.get_lines()}
        # t(backend) / t(auto) judged on the repetitions after the exploration
        self.assertEqual(sorted(lines["collective"].get_ydata()), [1.0, 5.0, 10.0])
        self.assertEqual(list(lines["collective, one rank"].get_ydata()), [4.0])
        self.assertEqual(sorted(lines["rma"].get_ydata()), [1.0, 1.25, 1.5])
        for got, want in zip(lines["mean"].get_ydata(), [5.0, 1.4375, 1.3, 1.0875]):
            self.assertAlmostEqual(got, want)
        self.assertEqual([l.get_ydata()[0] for l in left.get_lines()
                          if l.get_label().startswith("published")], [2.83])
        labels = [t.get_text() for t in right.get_yticklabels()]
        widths = [b.get_width() for b in right.patches]
        got = dict(zip([lab.split("\n")[0] + lab.split("\n")[1] for lab in labels[:5]],
                       widths))
        want = {"picks the fastest of its candidates(samples exchanged)": 200 / 3,
                "picks one within 5% of it(samples exchanged)": 200 / 3,
                "picks the fastest of all four(every configuration)": 50.0,
                "share of the fastest backend's speed(every configuration)": 92.5,
                "share of the fastest backend's speed(samples exchanged)": 90.0}
        self.assertEqual(set(got), set(want))
        for k in want:
            self.assertAlmostEqual(got[k], want[k], msg=k)
        self.assertEqual(widths[5:], [96.3, 94.3])
        self.assertEqual(labels[5:], ["published: selects the best backend"] * 2)
        self.assertIn("| collective | 5.00x | 4.50x | 10x | 1.00x | 5.33x | 3 / 1 / 0 |", table)
        self.assertIn("| picks the fastest of its candidates | 66.7% | 2/3 |", table)
        r = self.run_script("auto", self.path("grid.csv"), "--out", self.path("a.png"),
                            "--table", self.path("a.md"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(self.path("a.png")))
        with open(self.path("a.md")) as f:
            text = f.read()
        self.assertIn("| rma | 1.44x |", text)
        self.assertTrue(text.startswith("Made by `python3 jobs/figures.py auto "), text)

    def test_auto_judged_on_a_second_measurement(self):
        self.auto_grid()
        # measured again: shm is now the faster of rma and shm at 2 ranks, 1 KiB
        self.auto_grid("again.csv", change=(2, 1024, 16, "shm", "seconds_per_batch", "7e-06"))
        _, measures = figures.auto_summary(figures.auto_outcomes(self.path("grid.csv"),
                                                                 self.path("again.csv")))
        got = {label: (round(pct, 3), count) for label, pct, count, _ in measures}
        self.assertEqual(got["picks the fastest of its candidates"], (33.333, "1/3"))
        self.assertEqual(got["ceiling: two measurements agree on it"], (66.667, "2/3"))
        r = self.run_script("auto", self.path("grid.csv"), "--remeasured",
                            self.path("again.csv"), "--out", self.path("a.png"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("judged on a second measurement (again.csv)", r.stdout)

    def test_auto_bad_input(self):
        write(self.path("old.csv"), figures.GRID_HEADER,
              [["rma", 1, 1, 0, 1024, 16, 0.0, 1.0, 1.0, 8.0, 1e-6]])
        self.assert_error(self.run_script("auto", self.path("old.csv"), "--out",
                                          self.path("x.png")), "old.csv:1: no column explore")
        self.auto_grid(drop=(2, 65536, "replicated"))
        self.assert_error(self.run_script("auto", self.path("grid.csv"), "--out",
                                          self.path("x.png"), "--table", self.path("x.md")),
                          "grid.csv:10: no replicated at 2 ranks, 64 KiB records, batch 16")
        self.assertFalse(os.path.exists(self.path("x.md")))
        self.auto_grid(change=(2, 1024, 16, "rma", "explore_seconds", "fast"))
        self.assert_error(self.run_script("auto", self.path("grid.csv"), "--out",
                                          self.path("x.png")), "grid.csv:7: column explore")
        self.auto_grid(change=(2, 64, 4096, "shm", "rest_seconds", "0"))
        self.assert_error(self.run_script("auto", self.path("grid.csv"), "--out",
                                          self.path("x.png")), "not a positive time")
        self.auto_grid()
        with open(self.path("grid.csv")) as f:
            twice = f.read()
        with open(self.path("twice.csv"), "w") as f:
            f.write(twice + twice.split("\n", 2)[1] + "\n")
        self.assert_error(self.run_script("auto", self.path("twice.csv"), "--out",
                                          self.path("x.png")), "twice.csv:18: collective "
                          "measured twice at 1 rank, 1 KiB records, batch 16")
        self.auto_grid("again.csv", drop=(1, 1024, "rma"))
        with open(self.path("again.csv")) as f:
            kept = [line for line in f if not line.startswith(("collective,1,", "shm,1,",
                                                              "replicated,1,"))]
        with open(self.path("again.csv"), "w") as f:
            f.writelines(kept)
        self.assert_error(self.run_script("auto", self.path("grid.csv"), "--remeasured",
                                          self.path("again.csv"), "--out", self.path("x.png")),
                          "again.csv: no measurement at 1 rank, 1 KiB records, batch 16")

    def test_learning_draws_the_split_asked_for(self):
        os.mkdir(self.path("run"))
        header = ["epoch", "elapsed_s"] + [f"{split}_{what}" for split in ("validate", "test")
                                           for what in ("energy_mae_mev_atom", "force_mae_mev_a")]
        write(self.path("run/metrics.csv"), header,
              [[1, 60, 2.0, 20.0, 3.0, 30.0], [2, 120, 1.0, 10.0, 1.5, 15.0]])
        for split, forces, label in ((None, [20.0, 10.0], "validation force MAE (meV/Å)"),
                                     ("test", [30.0, 15.0], "test force MAE (meV/Å)")):
            fig = (figures.learning_figure([self.path("run")], by_time=True) if split is None
                   else figures.learning_figure([self.path("run")], by_time=True, split=split))
            f_ax = fig.get_axes()[1]
            self.assertEqual(f_ax.get_ylabel(), label)
            (line,) = f_ax.get_lines()
            self.assertEqual(list(line.get_xdata()), [1.0, 2.0])  # minutes
            self.assertEqual(list(line.get_ydata()), forces)
        r = self.run_script("learning", self.path("run"), "--split", "test", "--out",
                            self.path("test.png"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.getsize(self.path("test.png")) > 0)

    def write_run(self, name, config, n_train, energy, force, end=True):
        os.mkdir(self.path(name))
        with open(self.path(name + "/events.jsonl"), "w") as f:
            f.write(json.dumps({"event": "run_start", "config": f"configs/{config}.json",
                                "graphs": {"train": n_train, "validate": 10, "test": 10}}) + "\n")
            if end:
                f.write(json.dumps({"event": "run_end", "best": {
                    "test_energy_mae_mev_atom": energy, "test_force_mae_mev_a": force}}) + "\n")

    def test_datasize_one_line_per_config_in_training_graphs(self):
        self.write_run("a_all", "mace", 400, 10.0, 100.0)
        self.write_run("a_quarter", "mace", 100, 20.0, 200.0)
        self.write_run("b_half", "schnet", 200, 30.0, 300.0)
        fig = figures.datasize_figure([self.path(n) for n in ("a_all", "b_half", "a_quarter")])
        f_ax = fig.get_axes()[1]
        lines = {l.get_label(): l for l in f_ax.get_lines()}
        self.assertEqual(sorted(lines), ["mace", "schnet"])
        self.assertEqual(list(lines["mace"].get_xdata()), [100, 400])
        self.assertEqual(list(lines["mace"].get_ydata()), [200.0, 100.0])
        self.assertEqual(list(lines["schnet"].get_ydata()), [300.0])
        self.write_run("unfinished", "mace", 50, 0, 0, end=False)
        self.assert_error(self.run_script("datasize", self.path("a_all"), self.path("unfinished"),
                                          "--out", self.path("x.png")),
                          "unfinished/events.jsonl: no run_start, or no run_end")
        r = self.run_script("datasize", self.path("a_all"), self.path("a_quarter"), "--out",
                            self.path("d.png"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.getsize(self.path("d.png")) > 0)

    def test_bad_input(self):
        write(self.path("grid.csv"), ["backend", "ranks"], [["rma", 1]])
        self.assert_error(self.run_script("loader", self.path("grid.csv"), "--out",
                                          self.path("x.png")), "grid.csv:1")
        self.assert_error(self.run_script("learning", self.path("nope"), "--out",
                                          self.path("x.png")), "nope/metrics.csv")


if __name__ == "__main__":
    unittest.main(verbosity=2)
