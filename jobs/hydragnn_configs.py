#!/usr/bin/env python3
"""Runs HydraGNN's own configs through `ddgnn config` and counts what stops them.

Every JSON file under <hydragnn>/examples and <hydragnn>/tests/inputs that has a NeuralNetwork
section is a run config. Each is copied with its Dataset section pointed at a ddgnn dataset
(Dataset.path = the file given, Dataset.format = "ddgnn"; the other Dataset keys stay, among
them node_features and graph_features, by whose entries ddgnn binds the heads' output_index as
HydraGNN does; --drop-raw-columns drops those two, and the heads are bound by name), then
checked twice: strict, and with --allow-unimplemented. Prints one row per config (validates
yes/no and the first refusal) and the refusals grouped by reason, by number of configs. With
--all, every refusal of a config is found by removing the refused key and checking again, until
the config validates or the refusal names no key of it (e.g. a missing required key). With
--train, each config that validates strictly also trains one epoch on the dataset (`ddgnn train
--set Training.num_epoch=1`, one thread; give a small dataset, e.g. a few dozen frames). With
--targets-extxyz FILE (the extxyz the dataset was converted from), a config whose heads predict
a target the dataset lacks (a gap, a spectrum, a per-atom charge; for a head bound by
output_index, the Dataset.node_features / graph_features entry it selects) is trained on a copy
of FILE that carries a synthetic value of each such target — a per-structure key for a graph head
(`convert --info-keys`), a per-atom column for a node head (`convert --extra-columns`), a
smooth function of each structure's energy or of each atom's force, a per-atom column
`node_inputs` wide enough for the input_node_features after the positions, and for a config of
multi-branch heads a per-structure key `dataset_name` that gives the frames the branches in
turn (without it every frame goes through branch 0, which ddgnn warns of), for a config of
graph-attribute conditioning a per-structure key `graph_attr` of charge 0 and spin 1 — so that
what is measured is whether ddgnn trains the config once its data holds the targets, not what
the targets are;
and a config whose radius is shorter than the data's bonds (HydraGNN's CI configs: 2 Å, for
its unit-spaced test lattices) is trained on a copy with positions and cell scaled by
0.4 × radius / 2.2 Å (a corner atom of a non-periodic cut of the Cu cell then has
neighbours inside the radius).

    python3 jobs/hydragnn_configs.py HYDRAGNN_CHECKOUT build/app/ddgnn data/cu_eam.h5
    python3 jobs/hydragnn_configs.py HYDRAGNN_CHECKOUT build/app/ddgnn data/cu_eam.h5 --as-shipped
    python3 jobs/hydragnn_configs.py HYDRAGNN_CHECKOUT build/app/ddgnn data/cu_eam.h5 --all
    python3 jobs/hydragnn_configs.py HYDRAGNN_CHECKOUT build/app/ddgnn data/cu_eam.h5 \
        --drop-raw-columns
    python3 jobs/hydragnn_configs.py HYDRAGNN_CHECKOUT build/app/ddgnn SMALL.h5 --train
    python3 jobs/hydragnn_configs.py HYDRAGNN_CHECKOUT build/app/ddgnn SMALL.h5 --train \
        --targets-extxyz SMALL.extxyz

Standard library only.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

RAW_COLUMN_KEYS = ("node_features", "graph_features")


def find_configs(root):
    """(relative path, parsed JSON or None, error text) of every JSON file, sorted."""
    found = []
    for top in ("examples", os.path.join("tests", "inputs")):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith(".json"):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root)
                try:
                    with open(path, encoding="utf-8") as f:
                        found.append((rel, json.load(f), ""))
                except (ValueError, UnicodeDecodeError) as e:
                    found.append((rel, None, f"{type(e).__name__}: {e}"))
    return sorted(found, key=lambda item: item[0])


def point_at(config, dataset, drop_raw_columns=False):
    """A copy of `config` whose Dataset section names the ddgnn file `dataset` (without
    node_features and graph_features when `drop_raw_columns`)."""
    out = json.loads(json.dumps(config))
    section = out.get("Dataset")
    if not isinstance(section, dict):
        section = {}
    if drop_raw_columns:
        for key in RAW_COLUMN_KEYS:
            section.pop(key, None)
    section["path"] = os.path.abspath(dataset)
    section["format"] = "ddgnn"
    out["Dataset"] = section
    return out


def first_refusal(output):
    """The error line of `ddgnn config`, without the prefix, the file name and the hint."""
    for line in output.splitlines():
        if "error:" in line:
            text = line.split("error:", 1)[1].strip()
            text = text.split(" — hint:", 1)[0]
            return re.sub(r"^\S+\.json(:\d+:\d+)?: ", "", text)
    lines = [l for l in output.splitlines() if l.strip()]
    return lines[-1] if lines else "(no output)"


def reason_of(refusal):
    """The refusal with what differs between configs masked, to group configs by reason."""
    text = re.sub(r"\[\d+\]", "[i]", refusal)  # array positions
    text = re.sub(r"(?<![\w.])-?\d+(\.\d+)?(e-?\d+)?(?![\w.])", "N", text)  # numbers
    text = re.sub(r"; found .*$", "", text)  # the value as written, after a key's refusal
    text = re.sub(r", found .*$", ", found ...", text)  # the value of a wrong type
    text = re.sub(r"^\S+?:\d+:\d+: JSON syntax error: .*$", "JSON syntax error", text)
    return text


def check(binary, path, allow):
    args = [binary, "config", "--config", path]
    if allow:
        args.append("--allow-unimplemented")
    try:
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120,
                           text=True)
    except subprocess.TimeoutExpired:
        return False, "(timed out after 120 s)"
    if r.returncode == 0:
        return True, ""
    return False, first_refusal(r.stdout)


def train_one_epoch(binary, path, run_dir, timeout):
    """(trained, error line, output) of `ddgnn train` for one epoch of the config at `path`."""
    args = [binary, "train", "--config", path, "--overwrite", "--set",
            "NeuralNetwork.Training.num_epoch=1", "--set", f"Output.run_dir={run_dir}",
            "--set", "Runtime.intra_op_threads=1"]
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE",
               OPENBLAS_NUM_THREADS="1")
    try:
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, text=True, env=env)
    except subprocess.TimeoutExpired:
        return False, f"(training timed out after {timeout} s)", ""
    if r.returncode == 0 and os.path.exists(os.path.join(run_dir, "metrics.csv")):
        return True, "", r.stdout
    return False, first_refusal(r.stdout), r.stdout


MISSING_HEAD = re.compile(r"head '([^']+)' is not in the data")
# A head bound by output_index: the entry of Dataset.<level>_features it selects, and its dim.
MISSING_ENTRY = re.compile(r"head '[^']+' \(output_index \d+: Dataset\.(node|graph)_features "
                           r"entry '([^']+)', dim (\d+)\) is not in the data")
NO_NEIGHBOUR = re.compile(r"no neighbour within the radius ([0-9.]+) Å")
MISSING_INPUT = re.compile(r"input_node_features: column (\d+) is not in the data")
NO_GRAPH_ATTR = re.compile(r"use_graph_attr_conditioning: \S+ has no per-structure key graph_attr")
NO_BRANCH_KEY = re.compile(r"(\d+) branches of output_heads, but \S+ has no per-structure key "
                           r"dataset_name")


def head_shape(config, name):
    """(kind, dim) of the head called `name` in the config's Variables_of_interest."""
    voi = config.get("NeuralNetwork", {}).get("Variables_of_interest", {})
    names = voi.get("output_names", [])
    k = names.index(name)
    kinds = voi.get("type", [])
    dims = voi.get("output_dim", [])
    kind = kinds[k] if k < len(kinds) else "graph"
    dim = dims[k] if k < len(dims) else 1
    return kind, int(dim)


def with_targets(extxyz, out, heads, scale=1.0):
    """Copies `extxyz` to `out` adding a synthetic value of each head in `heads` ({name: (kind,
    dim)}): graph heads as comment-line keys, node heads as Properties columns; positions and
    lattice multiplied by `scale`."""
    def number(text, key):
        m = re.search(r"(?:^|\s)" + key + r"=(\S+)", text)
        return float(m.group(1)) if m else 0.0

    with open(extxyz, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        frame = -1
        while True:
            frame += 1
            count = src.readline()
            if not count.strip():
                break
            n = int(count)
            comment = src.readline().rstrip("\n")
            atoms = [src.readline().rstrip("\n") for _ in range(n)]
            per_atom = number(comment, "energy") / n
            props = re.search(r"Properties=(\S+)", comment).group(1)
            fields, first, force_at, pos_at = props.split(":"), 0, None, None
            for i in range(0, len(fields), 3):
                if fields[i] == "forces":
                    force_at = first
                if fields[i] == "pos":
                    pos_at = first
                first += int(fields[i + 2])
            if scale != 1.0:
                lattice = re.search(r'Lattice="([^"]+)"', comment)
                if lattice:
                    scaled = " ".join(f"{float(x) * scale:.10g}" for x in lattice.group(1).split())
                    comment = comment.replace(lattice.group(0), f'Lattice="{scaled}"')
                for a in range(n):
                    tokens = atoms[a].split()
                    for c in range(pos_at, pos_at + 3):
                        tokens[c] = f"{float(tokens[c]) * scale:.10g}"
                    atoms[a] = " ".join(tokens)
            extra_props = ""
            for name, (kind, dim) in sorted(heads.items()):
                if kind == "branch":  # frames take the branches in turn
                    comment += f" {name}={frame % dim}"
                    continue
                if kind == "attributes":  # charge 0, spin 1 (HydraGNN's graph_attr)
                    comment += f' {name}="0 1"'
                    continue
                if kind == "graph":
                    values = " ".join(f"{per_atom * (c + 1) + 0.1 * c:.10g}" for c in range(dim))
                    comment += f' {name}="{values}"'
                    continue
                extra_props += f":{name}:R:{dim}"
                for a in range(n):
                    tokens = atoms[a].split()
                    f = ([float(t) for t in tokens[force_at:force_at + 3]]
                         if force_at is not None else [0.0, 0.0, 0.0])
                    norm = sum(x * x for x in f) ** 0.5
                    atoms[a] += "".join(f" {norm + c:.10g}" for c in range(dim))
            comment = comment.replace("Properties=" + props, "Properties=" + props + extra_props)
            dst.write(count + comment + "\n" + "".join(line + "\n" for line in atoms))


def train_with_targets(binary, config, path, run_dir, extxyz, timeout, tmp):
    """Trains like train_one_epoch; when a head's target is not in the data, trains again on a
    copy of `extxyz` that carries it. (trained, error line, names of the synthetic targets)."""
    heads, scale = {}, 1.0
    for _ in range(8):
        trained, why, output = train_one_epoch(binary, path, run_dir, timeout)
        missing = MISSING_HEAD.search(why or "")
        entry = MISSING_ENTRY.search(why or "")
        short = NO_NEIGHBOUR.search(why or "")
        branches = NO_BRANCH_KEY.search(output)
        no_input = MISSING_INPUT.search(why or "")
        if trained and branches and extxyz is not None and "dataset_name" not in heads:
            heads["dataset_name"] = ("branch", int(branches.group(1)))
        elif trained or extxyz is None:
            return trained, why, sorted(heads) + ([f"scaled x{scale:.3g}"] if scale != 1 else [])
        elif NO_GRAPH_ATTR.search(why or "") and "graph_attr" not in heads:
            heads["graph_attr"] = ("attributes", 2)
        elif missing and missing.group(1) not in heads:
            heads[missing.group(1)] = head_shape(config, missing.group(1))
        elif entry and entry.group(2) not in heads:
            heads[entry.group(2)] = (entry.group(1), int(entry.group(3)))
        elif no_input and "node_inputs" not in heads:
            columns = config["NeuralNetwork"]["Variables_of_interest"]["input_node_features"]
            heads["node_inputs"] = ("node", max(columns) - 3)  # covers them, forces or not
        elif short and scale == 1.0:
            scale = 0.4 * float(short.group(1)) / 2.2
        else:
            return trained, why, sorted(heads)
        xyz = os.path.join(tmp, "targets.extxyz")
        h5 = os.path.join(tmp, "targets.h5")
        with_targets(extxyz, xyz, heads, scale)
        graph = ",".join(k for k, (kind, _) in sorted(heads.items()) if kind != "node")
        node = ",".join(k for k, (kind, _) in sorted(heads.items()) if kind == "node")
        args = [binary, "convert", "--overwrite", xyz, h5]
        if graph:
            args += ["--info-keys", graph]
        if node:
            args += ["--extra-columns", node]
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            return False, "convert: " + first_refusal(r.stdout), sorted(heads)
        with open(path, encoding="utf-8") as f:
            pointed = json.load(f)
        pointed["Dataset"]["path"] = h5
        with open(path, "w", encoding="utf-8") as f:
            json.dump(pointed, f, indent=1)
    return False, "(too many missing targets)", sorted(heads)


def remove_key(config, dotted):
    """Removes the dotted key from `config`; False when it is not there."""
    node = config
    parts = dotted.split(".")
    for part in parts[:-1]:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    if not isinstance(node, dict) or parts[-1] not in node:
        return False
    del node[parts[-1]]
    return True


def all_refusals(binary, config, path, allow, limit=25):
    """Every refusal of `config` (written to `path`), removing each refused key and checking again."""
    config = json.loads(json.dumps(config))
    found = []
    for _ in range(limit):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=1)
        ok, why = check(binary, path, allow)
        if ok:
            break
        found.append(why)
        key = re.match(r"^([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(\[\d+\])?[.:]", why)
        if not key or not remove_key(config, key.group(1)):
            break
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hydragnn", help="a checkout of HydraGNN (its examples/ and tests/inputs/)")
    parser.add_argument("ddgnn", help="the ddgnn binary")
    parser.add_argument("dataset", help="a dataset written by `ddgnn convert` (Dataset.path)")
    parser.add_argument("--as-shipped", action="store_true",
                        help="check the configs as they are, Dataset section untouched")
    parser.add_argument("--drop-raw-columns", action="store_true",
                        help="drop Dataset.node_features and graph_features (heads bound by name, "
                             "as before ddgnn read them)")
    parser.add_argument("--all", action="store_true",
                        help="every refusal of each config, not only the first")
    parser.add_argument("--train", action="store_true",
                        help="also train one epoch with each config that validates strictly")
    parser.add_argument("--targets-extxyz", metavar="FILE",
                        help="with --train: the extxyz the dataset was converted from; targets the "
                             "dataset lacks are added to a copy of it (synthetic values)")
    parser.add_argument("--train-timeout", type=int, default=600,
                        help="seconds allowed for one config's epoch")
    parser.add_argument("--width", type=int, default=110, help="cut refusal lines at this width")
    a = parser.parse_args()
    for path, what in ((a.hydragnn, "HydraGNN checkout"), (a.ddgnn, "ddgnn binary"),
                       (a.dataset, "dataset")):
        if not os.path.exists(path):
            sys.exit(f"{path}: no such {what}")

    found = find_configs(a.hydragnn)
    unreadable = [(rel, err) for rel, cfg, err in found if cfg is None]
    other = [rel for rel, cfg, _ in found
             if cfg is not None and not (isinstance(cfg, dict) and "NeuralNetwork" in cfg)]
    runs = [(rel, cfg) for rel, cfg, _ in found
            if isinstance(cfg, dict) and "NeuralNetwork" in cfg]
    # A file that does not parse but names a NeuralNetwork section is a run config with a
    # syntax error: checked as it is (HydraGNN's json.load refuses it too).
    for rel, cfg, _ in found:
        if cfg is None:
            with open(os.path.join(a.hydragnn, rel), encoding="utf-8", errors="replace") as f:
                if '"NeuralNetwork"' in f.read():
                    runs.append((rel, None))
    runs.sort(key=lambda item: item[0])

    rows = []
    with tempfile.TemporaryDirectory(prefix="hydragnn_configs_") as tmp:
        for i, (rel, cfg) in enumerate(runs):
            path = os.path.join(a.hydragnn, rel)
            if cfg is not None:
                path = os.path.join(tmp, f"{i:03d}_" + rel.replace(os.sep, "__"))
                with open(path, "w", encoding="utf-8") as f:
                    shaped = cfg if a.as_shipped else point_at(cfg, a.dataset, a.drop_raw_columns)
                    json.dump(shaped, f, indent=1)
            strict = check(a.ddgnn, path, allow=False)
            allow = check(a.ddgnn, path, allow=True)
            every = ([], [])
            if a.all and cfg is not None:
                config = cfg if a.as_shipped else point_at(cfg, a.dataset, a.drop_raw_columns)
                every = tuple(all_refusals(a.ddgnn, config, path + ".all.json", allow)
                              for allow in (False, True))
            elif a.all:
                every = ([strict[1]] if strict[1] else [], [allow[1]] if allow[1] else [])
            trained = None
            if a.train and strict[0]:
                trained = train_with_targets(a.ddgnn, cfg, path, os.path.join(tmp, f"run_{i:03d}"),
                                             a.targets_extxyz, a.train_timeout, tmp)
            rows.append((rel, strict, allow, every, trained))

    def cut(text):
        return text if len(text) <= a.width else text[: a.width - 3] + "..."

    name_w = max(len(r[0]) for r in rows) if rows else 10
    mode = "as shipped" if a.as_shipped else f"Dataset pointed at {a.dataset}"
    if a.drop_raw_columns and not a.as_shipped:
        mode += ", node_features and graph_features dropped"
    print(f"HydraGNN configs through `ddgnn config` ({mode})\n")
    print(f"{'config':<{name_w}}  strict  allow  first refusal (strict / --allow-unimplemented)")
    for rel, (ok_s, why_s), (ok_a, why_a), every, trained in rows:
        print(f"{rel:<{name_w}}  {'yes' if ok_s else 'no':<6}  {'yes' if ok_a else 'no':<5}  "
              f"{cut(why_s) if why_s else '-'}")
        if trained is not None:
            synthetic = (f" (synthetic data: {', '.join(trained[2])})" if trained[2] else "")
            print(f"{'':<{name_w}}  {'':<6}  {'':<5}  "
                  f"{'trained one epoch' if trained[0] else 'train: ' + cut(trained[1])}"
                  f"{synthetic}")
        if why_a and why_a != why_s:
            print(f"{'':<{name_w}}  {'':<6}  {'':<5}  allow: {cut(why_a)}")
        for why in every[0][1:]:
            print(f"{'':<{name_w}}  {'':<6}  {'':<5}  then: {cut(why)}")

    n = len(rows)
    print(f"\nJSON files: {len(found)}; run configs (with a NeuralNetwork section): {n}")
    if other:
        print(f"not run configs ({len(other)}): " + ", ".join(other))
    for rel, err in unreadable:
        print(f"not JSON: {rel}: {err}")  # a run config when it names NeuralNetwork
    print(f"validate strict: {sum(r[1][0] for r in rows)} of {n}")
    print(f"validate with --allow-unimplemented: {sum(r[2][0] for r in rows)} of {n}")
    if a.train:
        print(f"validate strict and train one epoch: {sum(bool(r[4] and r[4][0]) for r in rows)} "
              f"of {n}")
        if a.targets_extxyz:
            print("  of which on a copy of the data given synthetic targets or scaled: "
                  f"{sum(bool(r[4] and r[4][0] and r[4][2]) for r in rows)}")
        failed = collections.Counter(reason_of(r[4][1]) for r in rows if r[4] and not r[4][0])
        for reason, count in sorted(failed.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {count:3d}  train: {cut(reason)}")
    for label, index in (("strict", 1), ("--allow-unimplemented", 2)):
        groups = collections.Counter(reason_of(r[index][1]) for r in rows if not r[index][0])
        print(f"\nfirst refusals by reason, {label} (configs):")
        for reason, count in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {count:3d}  {cut(reason)}")
        if a.all:
            every = collections.Counter()
            for r in rows:
                every.update(set(reason_of(why) for why in r[3][index - 1]))
            print(f"\nevery refusal by reason, {label} (configs):")
            for reason, count in sorted(every.items(), key=lambda kv: (-kv[1], kv[0])):
                print(f"  {count:3d}  {cut(reason)}")


if __name__ == "__main__":
    main()
