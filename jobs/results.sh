#!/usr/bin/env bash
# Regenerates the measured figures of results/figures/, each a PNG drawn with matplotlib
# (jobs/figures.py, jobs/parity_plot.py) with the CSV it was drawn from beside it:
#   loader_backends.{csv,png}   µs per record of every loader backend against batch size, per
#                               record size and rank count, with the memcpy ceiling of the run
#                               (`ddgnn bench-loader` on 1, 2, 4, 8 ranks)
#   auto_backends.{csv,png,md}  `Loader.backend: auto` against always one backend: its speed-up
#                               over each, how often it picks the fastest, beside the published
#                               figures (bench/loader_grid.sh: 1-8 ranks, 64 B-1 MiB records,
#                               about 5 minutes; the table in auto_backends.md)
#   train_weak.{csv,png}        training throughput and time per phase of every mpnn_type at 1,
#                               2, 4, 8 ranks, 4 graphs per rank (jobs/campaigns/train_weak.json)
#   train_strong.{csv,png}      SchNet and PAINN at a global batch of 8 over 1-8 ranks
#                               (jobs/campaigns/train_strong.json); both campaigns train one epoch
#                               of the first 200 frames of data/cu_eam.extxyz (160 training graphs)
#   simulate_published.{csv,md}, simulate_vs_train_scaling.{csv,md}, simulate_scaling.{csv,png}
#                               `ddgnn simulate` against DDStore's published fetch times and the
#                               measured steps of results/train_scaling.csv, and its strong and
#                               weak scaling to 16,384 ranks beside HydraGNN's published claims
#   learning.png, learning_<config>.csv, parity_<config>.png
#                               validation errors per epoch and test parity of every bundled config
#                               (configs/*.json) trained for 3.5 minutes, two at a time (the
#                               configs' own budgets are longer)
# Data: data/*.h5 (made here with jobs/data/generate.sh when missing; the molecules set takes
# about 12 minutes). The full run takes about 41 minutes on the 2-core development machine with
# the data made (50 at most).
#   bash jobs/results.sh                 into results/figures
#   bash jobs/results.sh --quick         small version of each (a few minutes; the test suite
#                                        runs it), its own data and runs under --work
#   bash jobs/results.sh --out DIR --work DIR
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
out=results/figures
work=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --out) out=${2:?--out needs a folder}; shift 2 ;;
    --work) work=${2:?--work needs a folder}; shift 2 ;;
    *) echo "results.sh: unknown argument '$1' (--quick, --out DIR, --work DIR)" >&2; exit 2 ;;
  esac
done
ddgnn=${DDGNN:-./build/app/ddgnn}
[ -x "$ddgnn" ] || { echo "results.sh: $ddgnn is not built: bash jobs/build.sh ddgnn" >&2; exit 2; }
export DDGNN=$ddgnn
[ -n "$work" ] || work=$([ "$quick" = 1 ] && mktemp -d -t ddgnn-results-XXXXXX || echo runs/results)
mkdir -p "$out" "$work"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 OMPI_MCA_osc=^rdma
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
start=$SECONDS
step() { echo "== results.sh: $* ($((SECONDS - start)) s)"; }

# ---- data ----
if [ "$quick" = 1 ]; then
  data=$work/data
  sets=(cu_eam)
  mkdir -p "$data"
  [ -f "$data/cu_eam.h5" ] || {
    bash jobs/data/generate.sh --out "$data" --frames 200 --only cu_eam
    "$ddgnn" convert --overwrite "$data/cu_eam.extxyz" "$data/cu_eam.h5"
  }
else
  data=data
  sets=(cu_eam cu_eam_strain si_sw si_sw_strain ethanol molecules)
  for s in "${sets[@]}"; do
    [ -f "$data/$s.h5" ] && continue
    step "generating $s"
    [ "$s" = ethanol ] || [ "$s" = molecules ] && bash jobs/build.sh ddgnn-xtb-md
    bash jobs/data/generate.sh --out "$data" --only "$s" --xtb-md build/jobs/data/ddgnn-xtb-md
    "$ddgnn" convert --overwrite "$data/$s.extxyz" "$data/$s.h5"
  done
fi

# ---- 1. loader backends ----
step "loader backends"
grid=$out/loader_backends.csv
rm -f "$grid.partial"
if [ "$quick" = 1 ]; then
  ranks=(1 2)
  bench=(--sample-bytes 1024 65536 --batch 16 64 --repetitions 5 --mib-per-rank 8)
else
  ranks=(1 2 4 8)
  bench=(--repetitions 30 --mib-per-rank 32)
fi
for p in "${ranks[@]}"; do
  mpiexec -n "$p" --oversubscribe --bind-to none "$ddgnn" bench-loader --out "$grid.partial" \
    "${bench[@]}" > /dev/null
done
mv "$grid.partial" "$grid"
python3 jobs/figures.py loader "$grid" --out "$out/loader_backends.png"

# ---- 2. auto against every single backend ----
# auto's pick is replayed from each configuration's first repetitions and judged on the others.
step "auto against every single backend"
auto_grid=$out/auto_backends.csv
if [ "$quick" = 1 ]; then
  rm -f "$auto_grid.partial"
  for p in 1 2; do
    mpiexec -n "$p" --oversubscribe --bind-to none "$ddgnn" bench-loader \
      --out "$auto_grid.partial" --sample-bytes 64 65536 --batch 16 1024 --repetitions 20 \
      --mib-per-rank 8 > /dev/null
  done
  mv "$auto_grid.partial" "$auto_grid"
else
  bash bench/loader_grid.sh --out "$auto_grid" > "$work/auto_backends.log"
fi
python3 jobs/figures.py auto "$auto_grid" --out "$out/auto_backends.png" \
  --table "$out/auto_backends.md"

# ---- 3. training scaling: campaigns ----
# The specs of jobs/campaigns/, with this run's data, folder and (quick) fewer points. One epoch
# of the first 200 frames (160 training graphs) is enough to time the steps of every mpnn_type.
campaign_h5=$data/cu_eam.h5
if [ "$quick" = 0 ] && [ -f "$data/cu_eam.extxyz" ]; then
  campaign_h5=$work/cu_eam_200.h5
  awk -v n=200 'c == 0 { if (f == n) exit; c = $1 + 2; f++ } { print; c-- }' "$data/cu_eam.extxyz" |
    "$ddgnn" convert --overwrite - "$campaign_h5" > /dev/null
fi
derive() {  # derive SPEC OUT_SPEC
  python3 - "$1" "$2" "$campaign_h5" "$work/campaigns" "$quick" <<'EOF'
import json, os, sys
spec_path, out, h5, folder, quick = sys.argv[1:]
spec = json.load(open(spec_path))
spec["set"]["Dataset.path"] = h5
spec["directory"] = os.path.join(folder, spec["name"])
if quick == "1":
    if "grid" in spec:
        spec["grid"]["Architecture.mpnn_type"] = ["SchNet", "GIN"]
        spec["ranks"] = [1, 2]
    spec["points"] = [p for p in spec.get("points", []) if p.get("ranks", 1) <= 2]
    spec["set"]["Training.perc_train"] = 0.5
json.dump(spec, open(out, "w"), indent=1)
EOF
}
for name in train_weak train_strong; do
  step "campaign $name"
  derive "jobs/campaigns/$name.json" "$work/$name.json"
  # A fresh measurement each time: a campaign directory left by an earlier spec or data set would
  # be refused (or, with the same spec, its points skipped as done).
  rm -rf "$work/campaigns/$name"
  python3 jobs/campaign.py run --local "$work/$name.json" > "$work/$name.log" 2>&1 || {
    echo "results.sh: some points of $name failed ($work/$name.log):" >&2
    python3 jobs/campaign.py status "$work/$name.json" | grep failed >&2 || tail -n 3 "$work/$name.log" >&2
  }
  python3 jobs/campaign.py collect "$work/$name.json" --out "$out/$name.csv"
  python3 jobs/figures.py scaling "$out/$name.csv" --out "$out/$name.png"
done

# ---- 4. learning curves and parity plots of the bundled configs ----
# Every configs/*.json on its own data set, two trainings at a time (one thread each).
if [ "$quick" = 1 ]; then
  configs=(cu_eam_schnet)
  seconds=15
else
  configs=()
  for f in configs/*.json; do configs+=("$(basename "$f" .json)"); done
  seconds=210
fi
learn() {  # learn CONFIG: train, evaluate, parity plot
  local c=$1 run=$work/learning/$1
  local path=()
  [ "$quick" = 1 ] && path=(--set "Dataset.path=$data/cu_eam.h5")
  "$ddgnn" train --config "configs/$c.json" --overwrite "${path[@]}" \
    --set "Training.time_limit_s=$seconds" --set "Output.run_dir=$run" \
    --set Output.progress=lines > "$work/learning_$c.log" 2>&1 &&
    "$ddgnn" evaluate --run "$run" > /dev/null &&
    cp "$run/metrics.csv" "$out/learning_$c.csv" &&
    python3 jobs/parity_plot.py "$run/eval_test" --out "$out/parity_$c.png" --title "$c" > /dev/null
}
runs=()
for ((i = 0; i < ${#configs[@]}; i += 2)); do
  pair=("${configs[@]:i:2}")
  step "training ${pair[*]} for $seconds s"
  pids=()
  for c in "${pair[@]}"; do
    learn "$c" &
    pids+=($!)
    runs+=("$work/learning/$c")
  done
  for k in "${!pids[@]}"; do
    wait "${pids[$k]}" || { echo "results.sh: training ${pair[$k]} failed: $work/learning_${pair[$k]}.log" >&2; exit 1; }
  done
done
python3 jobs/figures.py learning "${runs[@]}" --time --out "$out/learning.png"
# ---- 5. simulate against published and measured figures; scaling to 16,384 ranks ----
step "simulate"
python3 jobs/simulate_check.py published --ddgnn "$ddgnn" --models results/tuner_models.json \
  --out "$out/simulate_published.csv" > "$out/simulate_published.md"
python3 jobs/simulate_check.py measured --ddgnn "$ddgnn" --models results/tuner_models.json \
  --measured results/train_scaling.csv --config cu_eam_schnet.json --parameters 24065 \
  --out "$out/simulate_vs_train_scaling.csv" > "$out/simulate_vs_train_scaling.md"
if [ "$quick" = 1 ]; then platforms=frontier; else platforms=perlmutter,frontier; fi
python3 jobs/simulate_scaling.py run --ddgnn "$ddgnn" --models results/tuner_models.json \
  --platforms "$platforms" --out "$out/simulate_scaling.png"

step "done: figures in $out"
