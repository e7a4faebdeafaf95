"""The campaign spec of jobs/campaign.py: reading and checking it (unknown keys with "did you
mean"), expanding it into points, and what each point runs (its run directory and `ddgnn train`
arguments)."""

import difflib
import itertools
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH_DIR = os.path.join(ROOT, "jobs", "launch")

SPEC_KEYS = {
    "name": str, "base_config": str, "set": dict, "grid": dict, "points": list, "ranks": list,
    "repetitions": int, "machine": str, "time": str, "account": str, "queue": str,
    "directory": str, "description": str,
}
# machine -> (scheduler, template file, ranks per node)
MACHINES = {
    "perlmutter_gpu": ("slurm", "perlmutter_gpu.sbatch", 4),
    "perlmutter_cpu": ("slurm", "perlmutter_cpu.sbatch", 8),
    "frontier": ("slurm", "frontier.sbatch", 8),
    "summit": ("lsf", "summit.lsf", 6),
    "flux": ("flux", "flux.sh", 4),
    "mpiexec": ("mpiexec", "mpiexec.sh", 0),
}
class CampaignError(Exception):
    pass


def did_you_mean(word, choices):
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(sorted(choices))})"


def set_value(v):
    """A spec value as the text of `--set KEY=VALUE` (strings bare, the rest as JSON)."""
    return v if isinstance(v, str) else json.dumps(v)


def load_spec(path):
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except OSError as e:
        raise CampaignError(f"{path}: cannot read the spec ({e.strerror})")
    except json.JSONDecodeError as e:
        raise CampaignError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}")
    where = path
    if not isinstance(spec, dict):
        raise CampaignError(f"{where}: the spec must be a JSON object")
    for k, v in spec.items():
        if k not in SPEC_KEYS:
            raise CampaignError(f"{where}: unknown key '{k}'{did_you_mean(k, SPEC_KEYS)}")
        want = SPEC_KEYS[k]
        if not isinstance(v, want) or (want is int and isinstance(v, bool)):
            raise CampaignError(f"{where}: '{k}' must be a {want.__name__}, "
                                f"got {json.dumps(v)}")
    for k in ("name", "base_config"):
        if k not in spec:
            raise CampaignError(f"{where}: '{k}' is required")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", spec["name"]):
        raise CampaignError(f"{where}: name '{spec['name']}': use letters, digits, '.', '_', '-'")
    if not os.path.isfile(spec["base_config"]):
        raise CampaignError(f"{where}: base_config '{spec['base_config']}' is not a file "
                            f"(paths are relative to the working directory, {os.getcwd()})")
    for k, values in spec.get("grid", {}).items():
        if not isinstance(values, list) or not values:
            raise CampaignError(f"{where}: grid '{k}' needs a non-empty list of values, "
                                f"got {json.dumps(values)}")
    if "grid" in spec and not spec["grid"]:
        raise CampaignError(f"{where}: 'grid' is empty: give it keys with lists of values, or "
                            "leave it out")
    for i, p in enumerate(spec.get("points", [])):
        if not isinstance(p, dict):
            raise CampaignError(f"{where}: points[{i}] must be an object of --set keys")
        if "ranks" in p:
            r = p["ranks"] if isinstance(p["ranks"], list) else [p["ranks"]]
            if not r or any(not isinstance(x, int) or isinstance(x, bool) or x < 1 for x in r):
                raise CampaignError(f"{where}: points[{i}].ranks must be a positive integer or a "
                                    f"non-empty list of them, got {json.dumps(p['ranks'])}")
    if "ranks" in spec.get("grid", {}):
        raise CampaignError(f"{where}: grid 'ranks': rank counts go in the top-level 'ranks' "
                            "(or a point's own 'ranks')")
    for section in ("set", "grid", "points"):
        blocks = spec.get(section, [] if section == "points" else {})
        for block in blocks if section == "points" else [blocks]:
            for k in block:
                if k.split(".")[-1] == "run_dir" and k.endswith("Output.run_dir"):
                    raise CampaignError(f"{where}: {section} sets {k}: the campaign gives each "
                                        "point its own run directory")
    ranks = spec.get("ranks", [1])
    if not ranks or any(not isinstance(r, int) or isinstance(r, bool) or r < 1 for r in ranks):
        raise CampaignError(f"{where}: ranks must be a non-empty list of positive integers, "
                            f"got {json.dumps(ranks)}")
    if spec.get("repetitions", 1) < 1:
        raise CampaignError(f"{where}: repetitions must be at least 1, "
                            f"got {spec['repetitions']}")
    if "machine" in spec and spec["machine"] not in MACHINES:
        raise CampaignError(f"{where}: machine '{spec['machine']}' has no launch template"
                            f"{did_you_mean(spec['machine'], MACHINES)}")
    if not re.fullmatch(r"\d{1,3}:\d\d:\d\d", spec.get("time", "00:30:00")):
        raise CampaignError(f"{where}: time '{spec['time']}' must read HH:MM:SS")
    return spec


def expand(spec):
    """The points: [{id, overrides (swept), ranks, repetition}], grid first, then the list."""
    grid = spec.get("grid", {})
    combos = []
    if grid:
        keys = list(grid)
        combos += [dict(zip(keys, vals)) for vals in itertools.product(*(grid[k] for k in keys))]
    combos += [dict(p) for p in spec.get("points", [])]
    if not combos:
        combos = [{}]
    points = []
    for combo in combos:
        own = combo.pop("ranks", None)  # a point's own rank counts replace the top-level ones
        rank_counts = spec.get("ranks", [1]) if own is None else \
            (own if isinstance(own, list) else [own])
        for ranks in rank_counts:
            for rep in range(spec.get("repetitions", 1)):
                points.append({"id": f"p{len(points):04d}", "overrides": combo, "ranks": ranks,
                               "repetition": rep})
    return points


def swept_keys(points):
    keys = []
    for p in points:
        for k in p["overrides"]:
            if k not in keys:
                keys.append(k)
    return keys


def campaign_dir(spec):
    return spec.get("directory") or os.path.join("campaigns", spec["name"])


def run_dir(spec, point):
    return os.path.join(campaign_dir(spec), "runs", point["id"])


def train_args(spec, point):
    """`ddgnn train` arguments of a point (the same on every launcher)."""
    args = ["--config", spec["base_config"]]
    for k, v in list(spec.get("set", {}).items()) + list(point["overrides"].items()):
        args += ["--set", f"{k}={set_value(v)}"]
    return args + ["--set", f"Output.run_dir={run_dir(spec, point)}"]


def ddgnn_binary():
    return os.environ.get("DDGNN", os.path.join("build", "app", "ddgnn"))


def describe(point):
    parts = [f"{k}={set_value(v)}" for k, v in point["overrides"].items()]
    return ", ".join(parts + [f"ranks={point['ranks']}", f"rep={point['repetition']}"])
