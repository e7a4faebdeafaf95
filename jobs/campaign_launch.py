"""Launch scripts of jobs/campaign.py: a template of jobs/launch/ filled in with one point's
values, or a Slurm job array over several points."""

import os
import shlex

from campaign_spec import LAUNCH_DIR, MACHINES, campaign_dir, ddgnn_binary, train_args


def render(spec, point, machine, array_ids=None):
    """A launch template with this point's values (or, array_ids, a Slurm array over points)."""
    scheduler, template, per_node = MACHINES[machine]
    with open(os.path.join(LAUNCH_DIR, template), encoding="utf-8") as f:
        text = f.read()
    ranks = point["ranks"]
    nodes = 1 if per_node == 0 else -(-ranks // per_node)
    base = os.path.join(campaign_dir(spec), "runs", point["id"])
    extra = []
    if scheduler == "slurm":
        if spec.get("account"):
            extra.append(f"#SBATCH --account={spec['account']}")
        if spec.get("queue"):
            extra.append(f"#SBATCH --qos={spec['queue']}")
    elif scheduler == "lsf":
        if spec.get("account"):
            extra.append(f"#BSUB -P {spec['account']}")
        if spec.get("queue"):
            extra.append(f"#BSUB -q {spec['queue']}")
    h, m, _ = spec.get("time", "00:30:00").split(":")
    if array_ids:
        runs = os.path.join(campaign_dir(spec), "runs")
        cases = "\n".join(
            f"  {i}) args=({shlex.join(train_args(spec, p))}); "
            f"base={shlex.quote(os.path.join(runs, p['id']))} ;;"
            for i, p in enumerate(array_ids))
        args_block = (f"case \"${{SLURM_ARRAY_TASK_ID:?not a Slurm array job}}\" in\n{cases}\n"
                      "  *) echo \"no point for array task $SLURM_ARRAY_TASK_ID\" >&2; exit 2 ;;\n"
                      "esac")
        extra.append(f"#SBATCH --array=0-{len(array_ids) - 1}")
        log = os.path.join(campaign_dir(spec), "runs", "array_%a.log")
    else:
        args_block = (f"args=({shlex.join(train_args(spec, point))})\n"
                      f"base={shlex.quote(base)}")
        log = base + ".log"
    values = {
        "@JOB_NAME@": f"{spec['name']}-{'array' if array_ids else point['id']}",
        "@NODES@": str(nodes), "@RANKS_PER_NODE@": str(min(ranks, per_node) or ranks),
        "@RANKS@": str(ranks), "@TIME@": spec.get("time", "00:30:00"), "@TIME_HHMM@": f"{h}:{m}",
        "@LOG@": log, "@WORKDIR@": shlex.quote(os.getcwd()),
        "@DDGNN@": shlex.quote(ddgnn_binary()), "@SCHEDULER_EXTRA@": "\n".join(extra),
        "@ARGS_BLOCK@": args_block,
    }
    for k, v in values.items():
        text = text.replace(k, v)
    return text, nodes
