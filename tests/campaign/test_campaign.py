#!/usr/bin/env python3
"""jobs/campaign.py end to end with the real ddgnn on a small Lennard-Jones dataset made here:
plan, run --local (a point that fails does not stop the others), status, collect, a second run
that skips finished points and resumes an unfinished one; every kind of bad spec; a campaign
directory of another spec and run directories of another ddgnn version; and each launch template
rendered, checked by shellcheck and run under a fake scheduler whose launcher records the command
line. Run from the repository root with DDGNN set to the binary (ctest does both)."""

import csv
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAMPAIGN = os.path.join(ROOT, "jobs", "campaign.py")
DDGNN = os.environ.get("DDGNN", os.path.join(ROOT, "build", "app", "ddgnn"))


def lj_frames(n_frames, seed=3):
    """Argon clusters of 6 atoms with Lennard-Jones energies and forces (eV, Å)."""
    rng = random.Random(seed)
    eps, sigma = 0.0104, 3.4
    frames = []
    for _ in range(n_frames):
        pos = [[0.0, 0.0, 0.0]]
        while len(pos) < 6:  # each atom 3.3-4.5 Å from one before it, none closer than 3.2
            base, r = rng.choice(pos), rng.uniform(3.3, 4.5)
            u = [rng.gauss(0, 1) for _ in range(3)]
            n = math.sqrt(sum(x * x for x in u))
            p = [b + r * x / n for b, x in zip(base, u)]
            if all(math.dist(p, q) > 3.2 for q in pos):
                pos.append(p)
        energy, forces = 0.0, [[0.0] * 3 for _ in pos]
        for i in range(6):
            for j in range(i + 1, 6):
                d = [pos[j][c] - pos[i][c] for c in range(3)]
                r = math.sqrt(sum(x * x for x in d))
                sr6 = (sigma / r) ** 6
                energy += 4 * eps * (sr6 * sr6 - sr6)
                dv = 4 * eps * (-12 * sr6 * sr6 + 6 * sr6) / r  # dE/dr
                for c in range(3):
                    forces[i][c] += dv * d[c] / r
                    forces[j][c] -= dv * d[c] / r
        frames.append((pos, energy, forces))
    return frames


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT, **kw)


def campaign(*args):
    return run([sys.executable, CAMPAIGN] + list(args))


class Campaign(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ddgnn-campaign-")
        xyz = os.path.join(cls.tmp, "lj.extxyz")
        with open(xyz, "w") as f:
            for pos, e, forces in lj_frames(40):
                f.write("6\nProperties=species:S:1:pos:R:3:forces:R:3 "
                        f"energy={e!r} pbc=\"F F F\"\n")
                for p, fo in zip(pos, forces):
                    f.write("Ar " + " ".join(f"{v!r}" for v in p + fo) + "\n")
        cls.h5 = os.path.join(cls.tmp, "lj.h5")
        r = run([DDGNN, "convert", xyz, cls.h5])
        assert r.returncode == 0, r.stderr
        with open(os.path.join(ROOT, "configs", "ethanol_schnet.json")) as f:
            config = json.load(f)
        config["Dataset"]["path"] = cls.h5
        config["Dataset"]["split_by"] = "frame"
        arch = config["NeuralNetwork"]["Architecture"]
        arch.update({"hidden_dim": 8, "num_conv_layers": 1, "num_filters": 8,
                     "num_gaussians": 8, "radius": 5.0})
        arch["output_heads"]["node"]["dim_headlayers"] = [8, 8]
        training = config["NeuralNetwork"]["Training"]
        training.update({"num_epoch": 2, "batch_size": 4})
        training.pop("time_limit_s", None)
        cls.config = os.path.join(cls.tmp, "base.json")
        with open(cls.config, "w") as f:
            json.dump(config, f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def spec(self, name, **fields):
        s = {"name": name, "base_config": self.config,
             "directory": os.path.join(self.tmp, "campaigns", name)}
        s.update(fields)
        path = os.path.join(self.tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(s, f)
        return path, s["directory"]

    def test_plan_run_status_collect_and_a_second_run(self):
        spec, cdir = self.spec("sweep", grid={"Training.batch_size": [2, 4]},
                               points=[{"Dataset.path": os.path.join(self.tmp, "none.h5")}])
        r = campaign("plan", spec)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("3 points", r.stdout)
        self.assertIn("--set Training.batch_size=2", r.stdout)
        self.assertIn(f"--set Output.run_dir={cdir}/runs/p0002", r.stdout)

        r = campaign("run", "--local", spec)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)  # one point failed
        self.assertIn("p0002: failed", r.stdout)
        self.assertIn("2 of 3 points done", r.stdout)  # the failure did not stop the others

        r = campaign("status", spec)
        lines = {l.split()[0]: l for l in r.stdout.splitlines() if l.startswith("p0")}
        self.assertRegex(lines["p0000"], r"p0000\s+done")
        self.assertRegex(lines["p0001"], r"p0001\s+done")
        self.assertRegex(lines["p0002"], r"p0002\s+failed.*none\.h5")

        out = os.path.join(self.tmp, "sweep.csv")
        r = campaign("collect", spec, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("p0002: failed", r.stdout)
        with open(out) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([row["point"] for row in rows], ["p0000", "p0001", "p0002"])
        self.assertEqual([row["Training.batch_size"] for row in rows], ["2", "4", ""])
        version = run([DDGNN, "--version"]).stdout.split()[1]
        for row in rows[:2]:
            self.assertEqual(row["status"], "done")
            self.assertEqual(row["epochs"], "2")
            self.assertGreater(float(row["graphs_per_s"]), 0)
            self.assertGreater(float(row["best_test_force_mae_mev_a"]), 0)
            self.assertGreater(float(row["mean_forward_s"]), 0)
            self.assertGreater(float(row["peak_rss_mb"]), 0)
            self.assertEqual(row["ddgnn_version"], version)
        self.assertEqual(rows[2]["status"], "failed")
        self.assertIn("none.h5", rows[2]["error"])

        # Again: the finished points are skipped, the failed one runs (and fails) again.
        r = campaign("run", "--local", spec)
        self.assertIn("p0000: done, skipped", r.stdout)
        self.assertIn("p0002: reruns", r.stdout)

    def test_an_unfinished_point_resumes_from_its_checkpoint(self):
        spec, cdir = self.spec("resume")
        self.assertEqual(campaign("run", "--local", spec).returncode, 0)
        # As if killed before its end: no run_end event, no exit status.
        events = os.path.join(cdir, "runs", "p0000", "events.jsonl")
        with open(events) as f:
            kept = [l for l in f if '"event":"run_end"' not in l]
        with open(events, "w") as f:
            f.writelines(kept)
        os.remove(os.path.join(cdir, "runs", "p0000.exit"))
        self.assertRegex(campaign("status", spec).stdout, r"p0000\s+unfinished")
        r = campaign("run", "--local", spec)
        self.assertIn("p0000: resumes", r.stdout)
        self.assertIn("Training.continue=1", r.stdout)
        self.assertRegex(campaign("status", spec).stdout, r"p0000\s+done")

    def test_run_directories_of_another_ddgnn_version_are_refused(self):
        spec, cdir = self.spec("versions")
        self.assertEqual(campaign("run", "--local", spec).returncode, 0)
        events = os.path.join(cdir, "runs", "p0000", "events.jsonl")
        with open(events) as f:
            text = f.read()
        with open(events, "w") as f:
            f.write(text.replace('"ddgnn_version":"', '"ddgnn_version":"0.0.0-old'))
        r = campaign("run", "--local", spec)
        self.assertEqual(r.returncode, 2)
        self.assertIn("another ddgnn version", r.stderr)
        self.assertIn("p0000: 0.0.0-old", r.stderr)
        r = campaign("run", "--local", "--allow-other-versions", spec)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("p0000: reruns", r.stdout)

    def test_a_directory_made_by_another_spec_is_refused(self):
        spec, cdir = self.spec("mine", grid={"Training.batch_size": [2]})
        self.assertEqual(campaign("submit", "--launcher", "slurm", "--machine", "frontier",
                                  spec).returncode, 0)
        other, _ = self.spec("other", grid={"Training.batch_size": [4]}, directory=cdir)
        r = campaign("run", "--local", other)
        self.assertEqual(r.returncode, 2)
        self.assertIn("was made by another spec (campaign 'mine'", r.stderr)

    def test_bad_specs_are_clear_errors_and_run_nothing(self):
        cases = [
            ({"grdi": {"Training.batch_size": [2]}}, "unknown key 'grdi' (did you mean 'grid'?)"),
            ({"grid": {}}, "'grid' is empty"),
            ({"grid": {"Training.batch_size": []}}, "grid 'Training.batch_size' needs a non-empty"),
            ({"ranks": [0]}, "ranks must be a non-empty list of positive integers"),
            ({"ranks": []}, "ranks must be a non-empty list"),
            ({"repetitions": 0}, "repetitions must be at least 1"),
            ({"machine": "frontere"}, "did you mean 'frontier'"),
            ({"time": "30 minutes"}, "must read HH:MM:SS"),
            ({"set": {"Output.run_dir": "x"}}, "the campaign gives each point its own run"),
            ({"grid": {"Training.batch_sise": [2, 4]}},
             "did you mean 'batch_size'?"),  # ddgnn's own check, before anything runs
            ({"points": [{"Training.batch_size": "four"}]}, "expected an int"),
        ]
        for i, (fields, message) in enumerate(cases):
            with self.subTest(fields=fields):
                spec, cdir = self.spec(f"bad{i}", **fields)
                r = campaign("run", "--local", spec)
                self.assertEqual(r.returncode, 2, r.stdout)
                self.assertIn(message, r.stderr)
                self.assertFalse(os.path.exists(cdir), "nothing may be made")
        r = campaign("plan", os.path.join(self.tmp, "missing.json"))
        self.assertIn("cannot read the spec", r.stderr)


FAKE_LAUNCHER = """#!/bin/bash
if [ "$(basename "$0")" = flux ] && [ "$1" = getattr ]; then echo 2; exit 0; fi
printf '%s\\n' "$(basename "$0") $*" >> "$FAKE_LOG"
"""


class Templates(unittest.TestCase):
    """Each template rendered for a point, checked by shellcheck, and run with a fake scheduler
    environment: the launcher line it runs is the one the machine needs."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ddgnn-templates-")
        cls.bin = os.path.join(cls.tmp, "bin")
        os.makedirs(cls.bin)
        for name in ("srun", "jsrun", "flux", "mpiexec"):
            path = os.path.join(cls.bin, name)
            with open(path, "w") as f:
                f.write(FAKE_LAUNCHER)
            os.chmod(path, 0o755)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def submit(self, machine, launcher, ranks, extra=(), points=None):
        name = f"t_{machine}_{ranks}"
        spec = {"name": name, "base_config": "configs/cu_eam_schnet.json", "ranks": [ranks],
                "directory": os.path.join(self.tmp, name), "account": "mat123",
                "time": "01:30:00"}
        if points:
            spec["points"] = points
        path = os.path.join(self.tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(spec, f)
        env = dict(os.environ)  # no sbatch, bsub or flux here: the lines are printed
        env.pop("SLURM_JOB_ID", None)
        r = subprocess.run([sys.executable, CAMPAIGN, "submit", "--launcher", launcher,
                            "--machine", machine, path] + list(extra), capture_output=True,
                           text=True, cwd=ROOT, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return spec["directory"], r.stdout

    def launch(self, script, env):
        check = subprocess.run(["shellcheck", "-S", "warning", script], capture_output=True,
                               text=True)
        self.assertEqual(check.returncode, 0, check.stdout)
        log = os.path.join(self.tmp, "launch.log")
        if os.path.exists(log):
            os.remove(log)
        full = {"PATH": self.bin + ":/usr/bin:/bin", "FAKE_LOG": log, "DDGNN": DDGNN}
        full.update(env)
        r = subprocess.run(["bash", script], capture_output=True, text=True, env=full, cwd="/")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(log) as f:
            return f.read().strip()

    def test_frontier(self):
        d, out = self.submit("frontier", "slurm", 16)
        self.assertIn("sbatch " + os.path.join(d, "jobs", "p0000.sbatch"), out)
        script = os.path.join(d, "jobs", "p0000.sbatch")
        text = open(script).read()
        self.assertIn("#SBATCH --nodes=2", text)
        self.assertIn("#SBATCH --account=mat123", text)
        line = self.launch(script, {"SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS_PER_NODE": "8"})
        self.assertTrue(line.startswith(
            "srun --nodes=2 --ntasks=16 --ntasks-per-node=8 --cpus-per-task=7 "
            "--gpus-per-task=1 --gpu-bind=closest "), line)
        self.assertIn("train --set Runtime.intra_op_threads=7 --config configs/cu_eam_schnet.json",
                      line)
        self.assertIn(f"--set Output.run_dir={d}/runs/p0000", line)
        self.assertEqual(open(os.path.join(d, "runs", "p0000.exit")).read().strip(), "0")

    def test_perlmutter_gpu_and_cpu(self):
        d, _ = self.submit("perlmutter_gpu", "slurm", 8)
        line = self.launch(os.path.join(d, "jobs", "p0000.sbatch"),
                           {"SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS_PER_NODE": "4"})
        self.assertIn("--ntasks=8 --ntasks-per-node=4 --cpus-per-task=32 --cpu-bind=cores "
                      "--gpus-per-task=1 --gpu-bind=none", line)
        d, _ = self.submit("perlmutter_cpu", "slurm", 24)
        text = open(os.path.join(d, "jobs", "p0000.sbatch")).read()
        self.assertIn("#SBATCH --nodes=3", text)
        line = self.launch(os.path.join(d, "jobs", "p0000.sbatch"),
                           {"SLURM_JOB_NUM_NODES": "3", "SLURM_NTASKS_PER_NODE": "8(x3)"})
        self.assertIn("--ntasks=24 --ntasks-per-node=8 --cpus-per-task=32", line)

    def test_summit(self):
        d, out = self.submit("summit", "lsf", 12)
        script = os.path.join(d, "jobs", "p0000.lsf")
        self.assertIn(f"bsub < {script}", out)
        text = open(script).read()
        self.assertIn("#BSUB -nnodes 2", text)
        self.assertIn("#BSUB -W 01:30", text)
        hosts = os.path.join(self.tmp, "hosts")
        with open(hosts, "w") as f:
            f.write("batch3\n" + "h1\n" * 42 + "h2\n" * 42)
        line = self.launch(script, {"LSB_DJOB_HOSTFILE": hosts})
        self.assertTrue(line.startswith("jsrun --nrs 12 --rs_per_host 6 --tasks_per_rs 1 "
                                        "--cpu_per_rs 7 --gpu_per_rs 1 --bind packed:7 "), line)

    def test_flux_and_plain_mpiexec(self):
        d, out = self.submit("flux", "flux", 8)
        self.assertIn("flux batch -N 2 ", out)
        line = self.launch(os.path.join(d, "jobs", "p0000.sh"), {})
        self.assertTrue(line.startswith("flux run --nodes=2 --ntasks=8 --gpus-per-task=1 "), line)
        d, out = self.submit("mpiexec", "mpiexec", 3)
        self.assertIn("bash " + os.path.join(d, "jobs", "p0000.sh"), out)
        line = self.launch(os.path.join(d, "jobs", "p0000.sh"), {})
        self.assertTrue(line.startswith("mpiexec -n 3 --oversubscribe --bind-to none "), line)
        self.assertIn(" train --config configs/cu_eam_schnet.json", line)

    def test_slurm_array_picks_its_point(self):
        d, out = self.submit("frontier", "slurm", 8, ["--array"],
                             points=[{"Training.batch_size": 2}, {"Training.batch_size": 4}])
        script = os.path.join(d, "jobs", "array.sbatch")
        self.assertIn("#SBATCH --array=0-1", open(script).read())
        line = self.launch(script, {"SLURM_JOB_NUM_NODES": "1", "SLURM_NTASKS_PER_NODE": "8",
                                    "SLURM_ARRAY_TASK_ID": "1"})
        self.assertIn("--set Training.batch_size=4", line)
        self.assertIn(f"--set Output.run_dir={d}/runs/p0001", line)

    def test_wrong_launcher_for_the_machine(self):
        spec = os.path.join(self.tmp, "w.json")
        with open(spec, "w") as f:
            json.dump({"name": "w", "base_config": "configs/cu_eam_schnet.json",
                       "directory": os.path.join(self.tmp, "w")}, f)
        r = campaign("submit", "--launcher", "lsf", "--machine", "frontier", spec)
        self.assertEqual(r.returncode, 2)
        self.assertIn("machine frontier is launched by slurm, not lsf", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
