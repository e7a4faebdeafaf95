#!/usr/bin/env python3
"""Parameter-sweep campaigns of `ddgnn train`: a JSON spec expands into points (a grid and/or a
list over any `--set` key, times rank counts, times repetitions), each run into its own run
directory under the campaign directory, on this machine or as batch jobs, and collected into one
CSV.

  jobs/campaign.py plan    SPEC             the points and the exact command of each (checked)
  jobs/campaign.py run     SPEC --local     run the points one after another here (mpiexec);
                                            again: finished points are skipped, failed ones rerun,
                                            unfinished ones resumed from their last checkpoint
  jobs/campaign.py submit  SPEC --launcher slurm|lsf|flux|mpiexec [--machine M] [--array]
                                            one job script per point from jobs/launch/ (or one
                                            Slurm job array), submitted when sbatch/bsub/flux is
                                            here, else the submission lines are printed
  jobs/campaign.py status  SPEC             done / failed (error line) / running / submitted /
                                            unfinished / not started, per point
  jobs/campaign.py collect SPEC [--out CSV] every point in one CSV (swept values, final and best
                                            metrics, graphs/s, time per phase, tuner decisions,
                                            peak RSS, ddgnn version and commit); failed and
                                            unfinished points are listed, not dropped

A script rather than a ddgnn subcommand: it runs where job scripts are written and submitted
(login nodes, laptops), it only spawns processes and reads the run directories, and every config
check is ddgnn's own (`ddgnn config` validates each point before anything runs).

Spec keys (unknown keys are errors, with "did you mean"):
  name           campaign name: letters, digits, '.', '_', '-' (required)
  base_config    the run config every point starts from, relative to the working directory
  set            {key: value} overrides of every point
  grid           {key: [values]}: every combination is a point
  points         [{key: value}, ...]: more points (after the grid's); a point's "ranks" (a
                 count or a list) replaces the top-level ranks for it (strong scaling: a
                 per-rank batch size that shrinks as the ranks grow)
  ranks          [P, ...] rank counts, each point runs at every one (default [1])
  repetitions    runs of each point and rank count (default 1)
  machine        launch template for submit: perlmutter_gpu, perlmutter_cpu, frontier (Slurm),
                 summit (LSF), flux, mpiexec (a plain script)
  time           wall-clock limit of a batch job, HH:MM:SS (default 00:30:00)
  account        batch account (optional); queue: Slurm QOS / LSF queue (optional)
  directory      campaign directory (default campaigns/<name>)
  description    free text
Keys of set/grid/points are `ddgnn train --set` keys (e.g. Training.batch_size); Output.run_dir
belongs to the campaign.
"""

import argparse
import csv
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys

sys.dont_write_bytecode = True  # leave no __pycache__ in jobs/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from campaign_launch import render  # noqa: E402
from campaign_spec import (MACHINES, CampaignError, campaign_dir, ddgnn_binary,  # noqa: E402
                           describe, did_you_mean, expand, load_spec, run_dir, set_value,
                           swept_keys, train_args)

PHASES = ["load_s", "fetch_s", "graph_s", "forward_s", "forces_s", "backward_s", "sync_s",
          "optimizer_s", "eval_s", "checkpoint_s", "epoch_s"]
METRICS = ["validate_energy_mae_mev_atom", "validate_force_mae_mev_a",
           "validate_stress_mae_mev_a3", "test_energy_mae_mev_atom", "test_force_mae_mev_a",
           "test_stress_mae_mev_a3", "train_loss", "validate_loss"]


def local_command(spec, point):
    return ["bash", os.path.join("jobs", "train.sh"), "-n", str(point["ranks"])] + \
        train_args(spec, point)


def spec_fingerprint(spec, points):
    body = {"spec": {k: v for k, v in spec.items() if k not in ("description", "time",
                                                                 "account", "queue")},
            "points": points}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def check_configs(spec, points):
    """Every point's config through `ddgnn config` before anything runs: all failures at once."""
    binary = ddgnn_binary()
    if not os.access(binary, os.X_OK):
        raise CampaignError(f"{binary}: ddgnn is not built (bash jobs/build.sh ddgnn), or set "
                            "DDGNN to the binary")
    bad, seen = [], {}
    for p in points:
        args = train_args(spec, p)
        key = json.dumps(args[:-2])  # the same config at every rank count and repetition
        if key not in seen:
            r = subprocess.run([binary, "config"] + args, capture_output=True, text=True)
            seen[key] = (r.stderr.strip().splitlines() or ["exit status %d" % r.returncode])[-1] \
                if r.returncode else None
        if seen[key]:
            bad.append(f"  {p['id']} ({describe(p)}): {seen[key]}")
    if bad:
        raise CampaignError("points whose config ddgnn refuses (nothing was run):\n" +
                            "\n".join(bad))


def open_campaign(spec, points, create):
    """The campaign directory, made by this spec: refuses one that another spec made."""
    d = campaign_dir(spec)
    marker = os.path.join(d, "campaign.json")
    fp = spec_fingerprint(spec, points)
    if os.path.exists(marker):
        with open(marker, encoding="utf-8") as f:
            old = json.load(f)
        if old.get("fingerprint") != fp:
            raise CampaignError(
                f"{d} was made by another spec (campaign '{old.get('name')}', fingerprint "
                f"{old.get('fingerprint')}; this spec's is {fp}): its points differ. Use another "
                "'directory' in the spec, or remove the old campaign directory")
    elif create:
        os.makedirs(os.path.join(d, "runs"), exist_ok=True)
        tmp = marker + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"name": spec["name"], "fingerprint": fp, "spec": spec, "points": points},
                      f, indent=1)
        os.replace(tmp, marker)
    return d


def read_events(path):
    events = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut by a kill
    except OSError:
        pass
    return events


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except (OSError, ValueError):
        return False


def point_state(spec, point):
    """(status, detail, events): done | failed | running | submitted | unfinished | not started."""
    rd = run_dir(spec, point)
    events = read_events(os.path.join(rd, "events.jsonl"))
    names = [e.get("event") for e in events]
    side = {ext: os.path.join(os.path.dirname(rd), point["id"] + "." + ext)
            for ext in ("pid", "exit", "log", "submitted")}
    if os.path.exists(side["pid"]):
        try:
            pid = int(open(side["pid"]).read().strip() or 0)
        except ValueError:
            pid = 0
        if pid and pid_alive(pid):
            return "running", f"pid {pid}", events
    exit_code = None
    if os.path.exists(side["exit"]):
        text = open(side["exit"]).read().strip()
        exit_code = int(text) if text.lstrip("-").isdigit() else -1
    if "run_end" in names and (exit_code in (None, 0)):
        return "done", "", events
    errors = [e for e in events if e.get("event") == "error"]
    if errors or (exit_code not in (None, 0)):
        line = errors[-1].get("what", "") if errors else last_error_line(side["log"])
        return "failed", line or f"exit status {exit_code}", events
    if "run_start" in names:
        return "unfinished", f"stopped after epoch {last_epoch(events)}", events
    if os.path.exists(side["submitted"]):
        return "submitted", open(side["submitted"]).read().strip(), events
    return "not started", "", events


def last_epoch(events):
    epochs = [e.get("epoch", 0) for e in events if e.get("event") == "epoch"]
    return max(epochs) if epochs else 0


def last_error_line(log):
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError:
        return ""
    for line in reversed(lines):  # ddgnn's own message first, not MPI's noise after it
        if re.match(r"(\[[^]]*\] )?(\[[a-z]+\] )?ddgnn: .*error", line):
            return line
    for line in reversed(lines):
        if "error" in line.lower():
            return line
    return lines[-1] if lines else ""


def ddgnn_version():
    r = subprocess.run([ddgnn_binary(), "--version"], capture_output=True, text=True)
    m = re.match(r"ddgnn (\S+)", r.stdout.strip())
    return m.group(1) if m else None


def run_version(events):
    start = next((e for e in events if e.get("event") == "run_start"), {})
    return start.get("ddgnn_version"), start.get("git")


def cmd_plan(spec, points, args):
    check_configs(spec, points)
    print(f"campaign {spec['name']}: {len(points)} points into {campaign_dir(spec)}/runs/")
    for p in points:
        print(f"{p['id']}  {describe(p)}")
        print("  " + shlex.join(local_command(spec, p)))
    return 0


def cmd_run(spec, points, args):
    if not args.local:
        raise CampaignError("run needs --local (this machine, one point after another); batch "
                            "systems: jobs/campaign.py submit --launcher slurm|lsf|flux")
    check_configs(spec, points)
    d = open_campaign(spec, points, create=True)
    version = ddgnn_version()
    states = [(p,) + point_state(spec, p) for p in points]
    other = [f"  {p['id']}: {run_version(ev)[0]} ({run_version(ev)[1]})"
             for p, st, _, ev in states
             if st in ("done", "unfinished", "failed")
             and run_version(ev)[0] not in (None, version)]
    if other and not args.allow_other_versions:
        raise CampaignError(f"run directories written by another ddgnn version than this one "
                            f"({version}); their results would mix versions:\n" +
                            "\n".join(other) + "\nrerun them with --allow-other-versions (they "
                            "start afresh) or use a new campaign directory")
    failed = 0
    for p, st, detail, ev in states:
        if st == "done" and run_version(ev)[0] in (None, version):
            print(f"{p['id']}: done, skipped")
            continue
        if st in ("running", "submitted"):
            print(f"{p['id']}: {st} ({detail}), skipped")
            continue
        cmd = local_command(spec, p)
        rd = run_dir(spec, p)
        ckpt = os.path.join(rd, "checkpoints")
        resumable = (st == "unfinished" and run_version(ev)[0] == version and os.path.isdir(ckpt)
                     and any(f.endswith(".pt") for f in os.listdir(ckpt)))
        cmd += ["--set", "Training.continue=1"] if resumable else ["--overwrite"]
        base = os.path.join(d, "runs", p["id"])
        for ext in ("exit", "submitted"):
            if os.path.exists(f"{base}.{ext}"):
                os.remove(f"{base}.{ext}")
        verb = "resumes" if resumable else ("reruns" if st != "not started" else "runs")
        print(f"{p['id']}: {verb} ({describe(p)}): {shlex.join(cmd)}", flush=True)
        with open(f"{base}.log", "a", encoding="utf-8") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            with open(f"{base}.pid", "w") as f:
                f.write(str(proc.pid))
            try:
                code = proc.wait()
            except KeyboardInterrupt:
                os.killpg(proc.pid, signal.SIGTERM)
                code = proc.wait()
                raise
            finally:
                with open(f"{base}.exit", "w") as f:
                    f.write(str(proc.returncode if proc.returncode is not None else -1))
                os.remove(f"{base}.pid")
        st2, detail2, _ = point_state(spec, p)
        print(f"{p['id']}: {st2}" + (f": {detail2}" if detail2 else ""), flush=True)
        failed += st2 != "done"
    print(f"campaign {spec['name']}: {len(points) - failed} of {len(points)} points done")
    return 1 if failed else 0


def cmd_status(spec, points, args):
    counts = {}
    for p in points:
        st, detail, _ = point_state(spec, p)
        counts[st] = counts.get(st, 0) + 1
        print(f"{p['id']}  {st:<11}  {describe(p)}" + (f"  -- {detail}" if detail else ""))
    print(f"campaign {spec['name']}: " +
          ", ".join(f"{n} {st}" for st, n in sorted(counts.items())))
    return 0


def mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def number(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def cmd_collect(spec, points, args):
    keys = swept_keys(points)
    rows = []
    versions = set()
    for p in points:
        st, detail, events = point_state(spec, p)
        row = {"point": p["id"], "status": st, "error": detail if st == "failed" else "",
               "ranks": p["ranks"], "repetition": p["repetition"]}
        for k in keys:
            row[k] = set_value(p["overrides"][k]) if k in p["overrides"] else ""
        epochs = [e for e in events if e.get("event") == "epoch"]
        end = next((e for e in reversed(events) if e.get("event") == "run_end"), {})
        version, git = run_version(events)
        if version:
            versions.add(version)
        row.update({"epochs": len(epochs), "stop": end.get("stop", ""),
                    "best_epoch": end.get("best_epoch", "")})
        best, last = end.get("best") or {}, epochs[-1] if epochs else {}
        for m in METRICS:
            row["best_" + m] = best.get(m, "")
            row["final_" + m] = last.get(m, "")
        gps = [number(e.get("graphs_per_s")) for e in epochs]
        row["graphs_per_s"] = mean(gps[1:] if len(gps) > 1 else gps) or ""
        for ph in PHASES:
            v = mean([number(e.get(ph)) for e in epochs])
            row["mean_" + ph] = v if v is not None else ""
        tuner = [e for e in events if e.get("event") == "tuner"]
        row["tuner_decisions"] = ";".join(f"{e.get('reason', '')}:{e.get('backend', '')}"
                                          for e in tuner)
        row["final_backend"] = tuner[-1].get("backend", "") if tuner else \
            (events[0].get("loader", {}).get("backend", "") if events else "")
        row["peak_rss_mb"] = end.get("peak_rss_mb", "")
        row["ddgnn_version"], row["git"] = version or "", git or ""
        row["run_dir"] = run_dir(spec, p)
        rows.append(row)
    out = args.out or os.path.join(campaign_dir(spec), "results.csv")
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, out)
    not_done = [r for r in rows if r["status"] != "done"]
    print(f"wrote {out}: {len(rows)} points, {len(rows) - len(not_done)} done")
    for r in not_done:
        print(f"  {r['point']}: {r['status']}" + (f": {r['error']}" if r["error"] else ""))
    if len(versions) > 1:
        print(f"warning: the runs come from several ddgnn versions: {', '.join(sorted(versions))}",
              file=sys.stderr)
    return 0


def cmd_submit(spec, points, args):
    machine = args.machine or spec.get("machine")
    if not machine:
        raise CampaignError("submit needs a launch template: 'machine' in the spec or --machine "
                            f"({', '.join(MACHINES)})")
    if machine not in MACHINES:
        raise CampaignError(f"--machine {machine}: no such template"
                            f"{did_you_mean(machine, MACHINES)}")
    scheduler = MACHINES[machine][0]
    if scheduler != args.launcher:
        raise CampaignError(f"machine {machine} is launched by {scheduler}, not "
                            f"{args.launcher}")
    check_configs(spec, points)
    d = open_campaign(spec, points, create=True)
    todo = [p for p in points if point_state(spec, p)[0] in ("not started", "failed",
                                                             "unfinished")]
    jobs_dir = os.path.join(d, "jobs")
    os.makedirs(jobs_dir, exist_ok=True)
    ext = {"slurm": "sbatch", "lsf": "lsf", "flux": "sh", "mpiexec": "sh"}[scheduler]
    scripts = []
    if args.array:
        if scheduler != "slurm":
            raise CampaignError("--array: job arrays are written for Slurm only")
        if len({p["ranks"] for p in todo}) > 1:
            raise CampaignError("--array: the points need one rank count for one array (they "
                                f"have {sorted({p['ranks'] for p in todo})}); submit without "
                                "--array")
        if todo:
            text, nodes = render(spec, todo[0], machine, array_ids=todo)
            scripts.append((todo, os.path.join(jobs_dir, "array." + ext), text, nodes))
    else:
        for p in todo:
            text, nodes = render(spec, p, machine)
            scripts.append(([p], os.path.join(jobs_dir, f"{p['id']}.{ext}"), text, nodes))
    submit_cmd = {"slurm": "sbatch", "lsf": "bsub", "flux": "flux", "mpiexec": None}[scheduler]
    have = submit_cmd is not None and shutil.which(submit_cmd) is not None
    for members, path, text, nodes in scripts:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(path, 0o755)
        line = {"slurm": ["sbatch", path], "lsf": ["bsub"], "mpiexec": ["bash", path],
                "flux": ["flux", "batch", "-N", str(nodes), path]}[scheduler]
        shown = shlex.join(line) + (f" < {shlex.quote(path)}" if scheduler == "lsf" else "")
        if not have:
            print(shown)
            continue
        with open(path, encoding="utf-8") as script:
            r = subprocess.run(line, stdin=script if scheduler == "lsf" else None,
                               capture_output=True, text=True)
        if r.returncode != 0:
            raise CampaignError(f"{shown} failed: {r.stderr.strip() or r.stdout.strip()}")
        for p in members:
            with open(os.path.join(d, "runs", p["id"] + ".submitted"), "w") as f:
                f.write(r.stdout.strip())
        print(f"{shown}: {r.stdout.strip()}")
    if not have:
        print(f"({submit_cmd or 'no batch system'}{' is not on this machine' if submit_cmd else ''}"
              f": the {len(scripts)} job script(s) are in {jobs_dir}; start them with the lines "
              "above)")
    return 0


def main(argv=None):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `plan | head` ends quietly
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    for name in ("plan", "run", "submit", "status", "collect"):
        p = sub.add_parser(name)
        p.add_argument("spec", help="campaign spec (JSON)")
        if name == "run":
            p.add_argument("--local", action="store_true", help="run here, one point at a time")
            p.add_argument("--allow-other-versions", action="store_true",
                           help="rerun points whose run directory another ddgnn version wrote")
        if name == "submit":
            p.add_argument("--launcher", required=True, choices=["slurm", "lsf", "flux", "mpiexec"])
            p.add_argument("--machine", help="launch template (default: the spec's machine)")
            p.add_argument("--array", action="store_true", help="one Slurm job array")
        if name == "collect":
            p.add_argument("--out", help="CSV (default: <campaign directory>/results.csv)")
    args = ap.parse_args(argv)
    try:
        spec = load_spec(args.spec)
        points = expand(spec)
        return {"plan": cmd_plan, "run": cmd_run, "submit": cmd_submit, "status": cmd_status,
                "collect": cmd_collect}[args.command](spec, points, args)
    except CampaignError as e:
        print(f"campaign: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
