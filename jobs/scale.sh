#!/usr/bin/env bash
# Training at the scale of many structures on one machine (results/scale.md): makes 10^6 and 10^7
# structures from the repository's sets with fresh perturbations (jobs/scale_data.py), converts
# them (timed), and trains a SchNet on 1, 2 and 4 ranks of each with a 60 s time limit, each rank
# under /usr/bin/time (its peak resident memory); then resumes the 4-rank 10^7 run from its
# checkpoint, and times steps with and without the compact records (Loader.compact_records) on
# the smaller set, interleaved. Every figure goes to runs/scale/scale.csv (one row per run). Minutes to an hour;
# needs about 40 GB of disk and 24 GB of memory for 10^7.
#
#   bash jobs/scale.sh                     # 10^6 and 10^7
#   SIZES="1000000" bash jobs/scale.sh     # 10^6 only
#   LIMIT_ONLY=1 bash jobs/scale.sh        # the time-limited runs alone
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${DDGNN:-./build/app/ddgnn}
py=/usr/bin/python3
out=runs/scale
sizes=${SIZES:-"1000000 10000000"}
limit=${LIMIT:-60}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc=^rdma
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
csv=$out/scale.csv
[ -f "$csv" ] || echo "graphs,ranks,run,compact,first_step_s,wall_s,steps,step_graphs_per_s,store_mib_rank0,rss_mib_rank0_first_step,rss_mib_rank0_end,peak_rss_mib,pss_mib_rank0_first_step,pss_mib_rank0_end,file_gb,convert_s" > "$csv"

config() {  # $1 data file, $2 run dir
  cat <<EOF
{
  "Dataset": {"name": "scale", "path": "$1", "allow_outliers": true},
  "NeuralNetwork": {
    "Architecture": {
      "mpnn_type": "SchNet", "hidden_dim": 64, "num_conv_layers": 3, "radius": 5.0,
      "max_neighbours": 32, "periodic_boundary_conditions": true, "num_gaussians": 32,
      "num_filters": 64, "activation_function": "ssp", "enable_interatomic_potential": true,
      "energy_weight": 1.0, "force_weight": 100.0,
      "output_heads": {"node": {"num_headlayers": 2, "dim_headlayers": [64, 32], "type": "mlp"}}
    },
    "Variables_of_interest": {"output_names": ["energy"], "output_index": [0],
                              "output_dim": [1], "type": ["node"]},
    "Training": {"num_epoch": 10, "batch_size": 32, "perc_train": 0.8,
                 "Optimizer": {"type": "Adam", "learning_rate": 0.001},
                 "time_limit_s": $limit, "seed": 0}
  },
  "Loader": {"backend": "rma"},
  "Output": {"run_dir": "$2", "progress": "lines"},
  "Runtime": {"intra_op_threads": 1}
}
EOF
}

# One run: $1 graphs, $2 ranks, $3 name, then --set arguments. Appends its row.
train() {
  local n=$1 np=$2 name=$3
  shift 3
  local run=$out/run_${n}_${np}_$name log=$out/run_${n}_${np}_$name.log
  [ "$name" = resumed ] || rm -rf "$run"
  config "$out/scale_$n.h5" "$run" > "$out/scale_$n.json"
  local t0 t1
  t0=$(date +%s.%N)
  mpiexec -n "$np" --oversubscribe --bind-to none /usr/bin/time -f "rank maxrss %M KB" \
    "$bin" train -c "$out/scale_$n.json" "$@" > "$log" 2>&1
  t1=$(date +%s.%N)
  $py - "$run" "$log" "$n" "$np" "$name" "$t0" "$t1" "$csv" "$*" "$out/scale_$n.h5" \
    "$out/convert_$n.s" <<'EOF'
import json, os, re, sys
run, log, n, np_, name, t0, t1, csv, sets, h5, conv = sys.argv[1:]
events = [json.loads(l) for l in open(os.path.join(run, "events.jsonl"))]
end = [e for e in events if e["event"] == "run_end"][-1]
start = [e for e in events if e["event"] in ("run_start", "resume")][-1]
text = open(log).read()
rss = [int(x) / 1024 for x in re.findall(r"rank maxrss (\d+) KB", text)]
steps_here = end["steps"] - start.get("step", 0)
# Steps after the first, over the seconds after it (a resumed run's clock goes on from its
# checkpoint's, so only the steps are reported for it).
span = end["elapsed_s"] - end["first_step_s"]
rate = (steps_here - 1) * 32 * int(np_) / span if name != "resumed" and span > 0 else float("nan")
compact = "false" if "compact_records=false" in sets else "true"
store = start["loader"]["bytes_rank0"] / 2**20
with open(csv, "a") as f:
    f.write(f"{n},{np_},{name},{compact},{end['first_step_s']:.1f},{float(t1) - float(t0):.1f},"
            f"{end['steps']},{rate:.0f},{store:.0f},{end['first_step_rss_mb']:.0f},"
            f"{end['rss_mb']:.0f},{max(rss):.0f},"
            f"{end.get('first_step_pss_mb', 0):.0f},{end.get('pss_mb', 0):.0f},"
            f"{os.path.getsize(h5) / 1e9:.2f},{open(conv).read().strip()}\n")
print(f"{n} graphs, {np_} rank(s), {name}: first step {end['first_step_s']:.1f} s, "
      f"{float(t1) - float(t0):.1f} s in all, {steps_here} steps, {rate:.0f} graphs/s after the "
      f"first, store {store:.0f} MiB on rank 0, RSS at the first step "
      f"{end['first_step_rss_mb']:.0f} MiB and at the end {end['rss_mb']:.0f} MiB (rank 0; "
      f"proportional share {end.get('first_step_pss_mb', 0):.0f} and {end.get('pss_mb', 0):.0f}), "
      f"peak RSS {max(rss):.0f} MiB (largest rank)")
EOF
}

for n in $sizes; do
  h5=$out/scale_$n.h5
  if [ ! -f "$h5" ]; then
    shards=$(( n >= 8000000 ? 8 : 2 ))
    [ -d "$out/xyz_$n" ] ||
      $py jobs/scale_data.py --structures "$n" --shards "$shards" --out "$out/xyz_$n"
    t0=$(date +%s.%N)
    "$bin" convert "$out"/xyz_"$n"/shard_*.extxyz "$h5" --overwrite > "$out/convert_$n.log" 2>&1
    echo "$(date +%s.%N) - $t0" | bc | xargs printf "%.1f\n" > "$out/convert_$n.s"
    "$bin" info "$h5" > "$out/info_$n.txt" 2>&1
  fi
  for np in 1 2 4; do train "$n" "$np" limit; done
done
[ "${LIMIT_ONLY:-0}" = 1 ] && { column -s, -t "$csv"; exit 0; }
n=${sizes##* }
# The largest 4-rank run goes on from its time-limit checkpoint (the limit counts the time
# before the resume too: twice it gives the resumed run as long again).
rm -rf "$out/run_${n}_4_resumed"
cp -r "$out/run_${n}_4_limit" "$out/run_${n}_4_resumed"
train "$n" 4 resumed --set Training.continue=1 --set "Output.run_dir=$out/run_${n}_4_resumed" \
  --set "Training.time_limit_s=$((2 * limit))"
# Steps with the compact records against float64 records on the smallest set, interleaved.
n=${sizes%% *}
for k in 1 2 3; do
  train "$n" 4 "compact$k"
  train "$n" 4 "float64_$k" --set Loader.compact_records=false
done
column -s, -t "$csv"
