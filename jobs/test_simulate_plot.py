#!/usr/bin/env python3
"""Tests for jobs/simulate_plot.py, jobs/simulate_scaling.py and jobs/plan_plot.py: run as
`python3 jobs/test_simulate_plot.py` (matplotlib from Debian's python3-matplotlib; another python3
first on PATH hands over to /usr/bin/python3).

Each test writes a small CSV in the format of `ddgnn simulate --out` (or of simulate_scaling.py's
CSV) into a temporary directory, runs the script through subprocess and checks its exit status,
output and the PNG it writes; what is drawn (lines, gaps, shading, legend, HydraGNN's claims) is
checked on the figure the script builds.
"""

import csv
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
import simulate_check  # noqa: E402
import simulate_plot  # noqa: E402
import plan_plot  # noqa: E402
import simulate_scaling  # noqa: E402
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
                        0.01, 100, repr(e), 1000.0 * e, "rma"])
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


SCALING_SCRIPT = os.path.join(HERE, "simulate_scaling.py")
SCALING_RANKS = (1, 2, 4, 8, 1024, 2048, 4096, 16384)


def scaling_rows():
    """Strong and weak scaling on perlmutter (4 ranks a node, 2,048 nodes: 16,384 ranks are
    beyond it) and frontier: rma ideal from P = 1 in both modes, collective losing half its
    efficiency by 16,384, replicated never fits, auto on file at P = 1 and rma after."""
    out = []
    for platform, rpn, nodes_max in (("perlmutter", 4, 2048), ("frontier", 8, 9856)):
        for mode in simulate_scaling.MODES:
            for p in SCALING_RANKS:
                nodes = -(-p // rpn)
                within = 1 if nodes <= nodes_max else 0
                base = 1000.0 / p if mode == "strong" else 10.0
                slow = 1 + math.log2(p) / 14  # 2x at 16,384
                epochs = {"collective": base * slow, "replicated": None, "rma": base,
                          "file": base * 3}
                pick = "file" if p == 1 else "rma"
                for b in ("collective", "file", "replicated", "rma", "auto"):
                    e = epochs[pick] if b == "auto" else epochs[b]
                    eff = "" if e is None else repr(base * (1 if mode == "weak" else p) /
                                                  (e * (1 if mode == "weak" else p)))
                    if b == "auto" and p == 1:
                        eff = ""  # before auto's last regime
                    out.append([mode, platform, p, nodes, within, 1000, b,
                                0 if e is None else 1, 0.01, "" if e is None else repr(e),
                                "" if e is None else 500.0 * e, eff, pick])
    return out


class SimulateScalingTest(InTempDir):
    def write(self, lines, header=",".join(simulate_scaling.HEADER)):
        path = self.path("scaling.csv")
        write(path, lines, header)
        return path

    def run_scaling(self, *args):
        return subprocess.run([sys.executable, SCALING_SCRIPT, *args], capture_output=True,
                              text=True, timeout=120)

    def test_efficiency_from_the_start_of_the_last_regime(self):
        # auto on file at 1 and 2 ranks, rma from 4: strong efficiency from P0 = 4.
        pts = [(1, 100.0, "file"), (2, 50.0, "file"), (4, 10.0, "rma"), (8, 5.0, "rma"),
               (16, 4.0, "rma")]
        self.assertEqual(simulate_scaling.efficiencies(pts, "strong"),
                         [None, None, 1.0, 1.0, 10.0 * 4 / (4.0 * 16)])
        # a backend: from its first feasible point; weak: T(P0) / T(P).
        pts = [(1, None, None), (2, 8.0, None), (4, 10.0, None)]
        self.assertEqual(simulate_scaling.efficiencies(pts, "weak"), [None, 1.0, 0.8])

    def test_panels_lines_and_hydragnn_claims(self):
        path = self.write(scaling_rows())
        r = self.run_scaling("plot", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = self.path("scaling.png")
        self.assertIn(out, r.stdout)
        self.assertEqual(png_size(out), (simulate_scaling.WIDTH, simulate_scaling.HEIGHT))

        fig = simulate_scaling.figure(path)
        axes = fig.get_axes()
        self.assertEqual([ax.get_title() for ax in axes],
                         ["perlmutter: strong scaling (fixed dataset)",
                          "perlmutter: weak scaling (fixed graphs a rank)",
                          "frontier: strong scaling (fixed dataset)",
                          "frontier: weak scaling (fixed graphs a rank)"])
        strong = axes[0]
        lines = {line.get_label(): line for line in strong.get_lines()}
        self.assertEqual(list(lines["rma"].get_xdata()), list(SCALING_RANKS))
        self.assertAlmostEqual(lines["rma"].get_ydata()[3], 1000.0 / 8)
        self.assertTrue(all(math.isnan(v) for v in lines["replicated"].get_ydata()))
        self.assertEqual(lines["auto"].get_linestyle(), "--")
        self.assertEqual(list(lines["auto"].get_ydata()),
                         [3000.0] + [1000.0 / p for p in SCALING_RANKS[1:]])
        # The ideal 1/P from auto's last regime (rma from P = 2).
        ideal = lines["ideal (from auto)"]
        self.assertEqual(list(ideal.get_xdata()), list(SCALING_RANKS[1:]))
        self.assertAlmostEqual(ideal.get_ydata()[-1], 500.0 * 2 / 16384)
        # HydraGNN's claim: a line at 2,000 GPUs, its source, and the simulated efficiency at
        # the nearest rank count (2,048: rma's, 1.0).
        claim = [ln for ln in strong.get_lines() if ln.get_label().startswith("HydraGNN")]
        self.assertEqual(len(claim), 1)
        self.assertEqual(list(claim[0].get_xdata()), [2000, 2000])
        texts = " ".join(t.get_text() for t in strong.texts)
        self.assertIn("near-linear", texts)
        self.assertIn("2,000 GPUs", texts)
        self.assertIn("simulated auto at P = 2,048: 100%", texts)
        self.assertIn("never fits memory: replicated", texts)
        frontier = axes[2]
        claim = [ln for ln in frontier.get_lines() if ln.get_label().startswith("HydraGNN")]
        self.assertEqual(list(claim[0].get_xdata()), [16000, 16000])
        self.assertIn("16,000 GCDs", " ".join(t.get_text() for t in frontier.texts))
        # Weak panels: no claim, the ideal flat, perlmutter's 16,384 ranks shaded.
        weak = axes[1]
        self.assertFalse(any(ln.get_label().startswith("HydraGNN") for ln in weak.get_lines()))
        flat = {ln.get_label(): ln for ln in weak.get_lines()}["ideal (from auto)"]
        self.assertEqual(set(flat.get_ydata()), {10.0})
        self.assertEqual(len(weak.patches), 1)  # the shading beyond 2,048 nodes
        self.assertEqual(len(axes[3].patches), 0)
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        self.assertIn("HydraGNN's claim (" + simulate_scaling.CLAIM_SOURCE + ")", legend)
        plotting.pyplot().close(fig)

    def test_wrong_header(self):
        path = self.write(scaling_rows(), header=",".join(simulate_scaling.HEADER[:-1]))
        r = self.run_scaling("plot", path)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("scaling.csv:1", r.stderr)
        self.assertFalse(os.path.exists(self.path("scaling.png")))

    def test_bad_mode_and_value(self):
        data = scaling_rows()
        data[3][0] = "sideways"  # line 5
        r = self.run_scaling("plot", self.write(data))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("scaling.csv:5: mode must be strong or weak", r.stderr)
        data = scaling_rows()
        data[1][9] = "slow"  # file at P = 1, line 3
        r = self.run_scaling("plot", self.write(data))
        self.assertIn("scaling.csv:3: column epoch_s is not a number", r.stderr)
        self.assertFalse(os.path.exists(self.path("scaling.png")))

    def test_run_refuses_bad_numbers_before_simulating(self):
        r = self.run_scaling("run", "--ddgnn", "/nonexistent/ddgnn", "--models", "m.json",
                             "--out", self.path("s.png"), "--graphs-per-rank", "0")
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stderr.strip().splitlines(),
                         ["simulate_scaling: error: --graphs, --graphs-per-rank and --compute-s "
                          "must be positive"])


CHECK_SCRIPT = os.path.join(HERE, "simulate_check.py")
MODELS = os.path.join(os.path.dirname(HERE), "results", "tuner_models.json")
MEASURED_HEADER = ("config,ranks,backend,batch_per_rank,prefetch,graphs_per_s,step_ms,load_ms,"
                   "fetch_ms,graph_ms,forward_ms,forces_ms,backward_ms,sync_ms,optimizer_ms,"
                   "peak_rss_mb")


def measured_rows(config="cu.json"):
    """One rank (B = 4, 18 ms of compute) and two ranks of rma and shm (B = 2)."""
    return [[config, 1, "shm", 4, 2, 212, 18.9, 0.04, 0.02, 2.0, 3.75, 3.37, 11.25, 0.01, 0.35, 336],
            [config, 2, "rma", 2, 2, 364, 11.0, 0.92, 0.03, 1.0, 1.9, 1.82, 5.65, 0.29, 0.32, 272],
            [config, 2, "shm", 2, 2, 347, 11.5, 0.93, 0.03, 1.05, 2.0, 1.94, 5.95, 0.27, 0.33, 267]]


class SimulateCheckTest(InTempDir):
    """jobs/simulate_check.py: its bad input, and with the ddgnn binary in $DDGNN (the ctest
    sets it) both tables end to end."""

    def run_check(self, *args):
        return subprocess.run([sys.executable, CHECK_SCRIPT, *args], capture_output=True,
                              text=True, timeout=300)

    def measured(self, lines, *extra):
        path = self.path("runs.csv")
        write(path, lines, MEASURED_HEADER)
        return self.run_check("measured", "--ddgnn", os.environ.get("DDGNN", "/nonexistent"),
                              "--models", MODELS, "--measured", path, "--parameters", "24065",
                              "--out", self.path("out.csv"), *extra)

    def assert_one_line_error(self, r, needle):
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(needle, r.stderr)
        self.assertFalse(os.path.exists(self.path("out.csv")))

    def test_bad_measured_input(self):
        self.assert_one_line_error(self.measured(measured_rows()[1:]),
                                   "no one-rank row to take the workload from")
        self.assert_one_line_error(self.measured(measured_rows("a.json") + measured_rows("b.json")),
                                   "rows of 2 configs (a.json, b.json); choose one with --config")
        self.assert_one_line_error(self.measured(measured_rows(), "--config", "c.json"),
                                   "no rows of config c.json with prefetch 2")
        bad = measured_rows()
        bad[1][6] = "fast"
        self.assert_one_line_error(self.measured(bad), "runs.csv:3: column step_ms")
        self.assert_one_line_error(self.measured(measured_rows(), "--graphs", "0"),
                                   "--parameters and --graphs must be positive")

    @unittest.skipUnless(os.path.isfile(os.environ.get("DDGNN", "")), "DDGNN is not a binary")
    def test_tables_end_to_end(self):
        r = self.run_check("published", "--ddgnn", os.environ["DDGNN"], "--models", MODELS,
                           "--out", self.path("published.csv"))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("published.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), len(simulate_check.PUBLISHED))
        first = rows[0]  # Frontier, one-sided, 3 KB: 0.68 µs published
        self.assertEqual((first["platform"], first["ranks"], first["backend"], first["row_bytes"]),
                         ("frontier", "16", "rma", "3136"))
        self.assertEqual(float(first["published_us_per_row"]), 0.68)
        predicted = float(first["predicted_us_per_row"])
        self.assertAlmostEqual(float(first["ratio"]), predicted / 0.68, delta=0.01)
        self.assertAlmostEqual(predicted, float(first["node_us_per_row"]) +
                               float(first["network_us_per_row"]), delta=0.01)
        self.assertIn("--sample-bytes 3136", r.stdout)
        self.assertIn("| frontier | 16 | collective (collective) | 1 MB | 685 |", r.stdout)

        r = self.measured(measured_rows())
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("out.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([(x["ranks"], x["backend"]) for x in rows],
                         [("1", "shm"), ("2", "rma"), ("2", "shm")])
        # One rank on two cores: the prefetch (collate 2 ms) hides behind the 18.72 ms compute.
        self.assertAlmostEqual(float(rows[0]["predicted_step_ms"]), 18.72, delta=0.01)
        self.assertAlmostEqual(float(rows[0]["measured_epoch_s"]), 400 * 18.9 / 1e3, delta=0.01)
        self.assertIn("--batch 2", r.stdout)
        self.assertIn("--compute-s 0.00936", r.stdout)  # per graph from the one-rank row, x 2


class PlanPlotTest(InTempDir):
    """jobs/plan_plot.py on the time-energy plan of `ddgnn simulate --global-batch` (the binary in
    $DDGNN, which the ctest sets), and its bad input."""

    def plan(self, platform):
        out = self.path(platform + ".csv")
        r = subprocess.run([os.environ["DDGNN"], "simulate", "--models", MODELS, "--platform",
                            platform, "--global-batch", "64", "--time-bound", "0.35",
                            "--compute-s", "0.0107", "--compute-fixed-s", "0.01", "--out", out],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("least energy within 0.35 s:", r.stdout)
        return out

    @unittest.skipUnless(os.path.isfile(os.environ.get("DDGNN", "")), "DDGNN is not a binary")
    def test_front_and_choice_of_two_platforms(self):
        paths = [self.plan("perlmutter"), self.plan("frontier")]
        for path in paths:
            _, batch, points = plan_plot.read_plan(path)
            self.assertEqual(batch, 64)
            front = sorted((p for p in points if p["pareto"]), key=lambda p: p["epoch_s"])
            self.assertGreater(len(front), 1)
            # Along the front, the faster point costs more energy; off it, each point has one
            # on the front at least as fast and as frugal.
            for a, b in zip(front, front[1:]):
                self.assertGreaterEqual(a["energy_j"], b["energy_j"])
            for p in points:
                self.assertTrue(any(f["epoch_s"] <= p["epoch_s"] and f["energy_j"] <= p["energy_j"]
                                    for f in front), p)
            chosen = [p for p in points if p["choice"]]
            self.assertEqual(len(chosen), 1)
            within = [p for p in points if p["epoch_s"] <= 0.35]
            self.assertEqual(chosen[0]["energy_j"], min(p["energy_j"] for p in within))
        out = self.path("plan.png")
        r = subprocess.run([sys.executable, os.path.join(HERE, "plan_plot.py"), *paths, "--out",
                            out], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("wrote " + out, r.stdout)
        width, height = png_size(out)
        self.assertGreater(width, height)  # two panels side by side

    def test_wrong_header_is_one_line_and_no_png(self):
        bad = self.path("bad.csv")
        write(bad, ["perlmutter,64,0,1"], "platform,global_batch,time_bound_s,ranks")
        r = subprocess.run([sys.executable, os.path.join(HERE, "plan_plot.py"), bad, "--out",
                            self.path("bad.png")], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("bad.csv:1: header is", r.stderr)
        self.assertFalse(os.path.exists(self.path("bad.png")))


class CalibrateTest(InTempDir):
    """`ddgnn simulate --calibrate RUN` (the binary in $DDGNN) on a run directory written here,
    whose joules come from 80 W idle and 200 W busy CPUs and memory over a busy share that
    varies."""

    @unittest.skipUnless(os.path.isfile(os.environ.get("DDGNN", "")), "DDGNN is not a binary")
    def test_fitted_powers_replace_the_estimates(self):
        run = self.path("run")
        os.makedirs(run)
        with open(os.path.join(run, "events.jsonl"), "w") as f:
            f.write('{"event":"run_start","device":"cpu","loader":{"ranks":1}}\n')
        with open(os.path.join(run, "metrics.csv"), "w") as f:
            f.write("epoch,epoch_s,forward_s,backward_s,fetch_s,graph_s,energy_j,energy_cpu_j\n")
            for e in range(1, 7):
                epoch, prefetch = 10.0 + e, (10.0 + e) * (e - 1) / 5
                u = (epoch + prefetch) / (4 * epoch)  # one rank on 4 cores
                joules = epoch * (80 + 120 * u)
                f.write(f"{e},{epoch!r},1,1,{prefetch!r},0,{joules!r},{joules!r}\n")
        r = subprocess.run([os.environ["DDGNN"], "simulate", "--models", MODELS, "--platform",
                            "perlmutter", "--cores-per-node", "4", "--calibrate", run,
                            "--ranks", "1,4", "--out", self.path("sim.csv")],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("idle 80 W, busy 200 W a node", r.stdout)
        self.assertIn("the simulation below uses the fitted figures", r.stdout)
        self.assertIn("power                  node 80 W idle, 200 W busy", r.stdout)
        self.assertNotIn("power estimated", r.stdout)
        self.assertIn("Power fitted to the measured joules of", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
