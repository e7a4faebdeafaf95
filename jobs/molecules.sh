#!/usr/bin/env bash
# Measures the bundled configs for varied chemistry (configs/molecules_schnet.json and
# configs/molecules_mace.json) on the set of small molecules split by molecule, as
# results/molecules.md reports them. Every training runs on one core (one thread), two at a time
# on two cores, each for the same wall time:
#   equal     both configs side by side: test errors against minutes
#   datasize  both configs on 1/4 and 1/2 of the training split (Dataset.train_fraction; the
#             whole split is the equal pair's run): test errors against training graphs
#   seeds     the MACE config with seeds 1-4 (weights and sampler; the split held by
#             Dataset.split_seed 0) for --seed-seconds each (default --seconds), besides the equal run's seed 0: none
#             may stop on a divergence (the script fails if one does)
# Writes the runs under --work (default runs/molecules) and into --out (default results/figures):
#   molecules_learning.png, molecules_datasize.png, molecules_runs.md (one row per run: config,
#   seed, training graphs, why it stopped, epochs, skipped steps, best epoch's test errors).
#   bash jobs/molecules.sh [--seconds S] [--seed-seconds S] [--only equal|datasize|seeds]
#                          [--work DIR] [--out DIR]
# Data: data/molecules.h5 (made with jobs/data/generate.sh --only molecules and ddgnn convert
# when missing, about 12 minutes on two cores). All parts at the default 570 s take about 48
# minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=570
seed_seconds=
only=""
work=runs/molecules
out=results/figures
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a number}; shift 2 ;;
    --seed-seconds) seed_seconds=${2:?--seed-seconds needs a number}; shift 2 ;;
    --only) only=${2:?--only needs equal, datasize or seeds}; shift 2 ;;
    --work) work=${2:?--work needs a folder}; shift 2 ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    *) echo "molecules.sh: unknown argument '$1' (--seconds, --seed-seconds, --only, --work, --out)" >&2
       exit 2 ;;
  esac
done
case "$only" in "" | equal | datasize | seeds) ;;
  *) echo "molecules.sh: --only takes equal, datasize or seeds, not '$only'" >&2; exit 2 ;;
esac
ddgnn=${DDGNN:-./build/app/ddgnn}
[ -x "$ddgnn" ] || { echo "molecules.sh: $ddgnn is not built: bash jobs/build.sh ddgnn" >&2; exit 2; }
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1
mkdir -p "$out" "$work"
if [ ! -f data/molecules.h5 ]; then
  bash jobs/data/generate.sh --only molecules
  "$ddgnn" convert data/molecules.extxyz data/molecules.h5
fi

# train NAME CONFIG [--set ...]: one run of S seconds into $work/NAME, in the background.
pids=()
names=()
train() {
  local name=$1 config=$2
  shift 2
  "$ddgnn" train -c "configs/$config.json" --overwrite --set Output.run_dir="$work/$name" \
    --set Training.time_limit_s="$run_seconds" --set Output.progress=lines "$@" \
    > "$work/$name.log" 2>&1 &
  pids+=($!)
  names+=("$name")
}
wait_all() {
  local k failed=0
  for k in "${!pids[@]}"; do
    wait "${pids[$k]}" || { echo "molecules.sh: ${names[$k]} failed: $work/${names[$k]}.log" >&2
                            failed=1; }
  done
  pids=()
  names=()
  [ "$failed" = 0 ]
}

run_seconds=$seconds
if [ -z "$only" ] || [ "$only" = equal ]; then
  train schnet molecules_schnet
  train mace molecules_mace
  wait_all
  python3 jobs/figures.py learning "$work/schnet" "$work/mace" --time --split test \
    --out "$out/molecules_learning.png"
fi
if [ -z "$only" ] || [ "$only" = datasize ]; then
  for f in 0.25 0.5; do
    train "schnet_f$f" molecules_schnet --set Dataset.train_fraction=$f
    train "mace_f$f" molecules_mace --set Dataset.train_fraction=$f
    wait_all
  done
  runs=()
  for r in schnet mace schnet_f0.25 mace_f0.25 schnet_f0.5 mace_f0.5; do
    [ -f "$work/$r/events.jsonl" ] && runs+=("$work/$r")
  done
  python3 jobs/figures.py datasize "${runs[@]}" --out "$out/molecules_datasize.png"
fi
if [ -z "$only" ] || [ "$only" = seeds ]; then
  run_seconds=${seed_seconds:-$seconds}
  for pair in "1 2" "3 4"; do
    for s in $pair; do
      train "mace_seed$s" molecules_mace --set Training.seed="$s" --set Dataset.split_seed=0
    done
    wait_all
  done
fi

# One row per finished run.
/usr/bin/python3 - "$work" "$out/molecules_runs.md" <<'EOF'
import json, os, sys
work, path = sys.argv[1], sys.argv[2]
rows = []
for name in sorted(os.listdir(work)):
    events = os.path.join(work, name, "events.jsonl")
    if not os.path.isfile(events):
        continue
    start = end = None
    skipped = 0
    with open(events) as f:
        for line in f:
            e = json.loads(line)
            start = e if e["event"] == "run_start" else start
            end = e if e["event"] == "run_end" else end
            skipped += e["event"] == "skipped_step"
    if start is None or end is None:
        continue
    best = end["best"]
    rows.append(f"| {name} | {os.path.basename(start['config'])} | {start['graphs']['train']} | "
                f"{end['stop']} | {end['epochs']} | {skipped} | {best['epoch']} | "
                f"{best['test_force_mae_mev_a']:.1f} | {best['test_energy_mae_mev_atom']:.1f} | "
                f"{end['elapsed_s']:.0f} |")
with open(path, "w") as f:
    f.write("| run | config | training graphs | stop | epochs | skipped steps | best epoch | "
            "test force MAE meV/Å | test energy MAE meV/atom | seconds |\n")
    f.write("|---|---|---|---|---|---|---|---|---|---|\n")
    f.write("\n".join(rows) + "\n")
print(open(path).read())
EOF
# A divergence stop of any run fails the measurement.
if grep -l '"event":"diverged"' "$work"/*/events.jsonl 2>/dev/null; then
  echo "molecules.sh: a run stopped as diverged (the files above)" >&2
  exit 1
fi
