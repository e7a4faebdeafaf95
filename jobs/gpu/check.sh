#!/usr/bin/env bash
# The short GPU check, for a lease of a few minutes: builds the GPU binary, the GPU tests and the
# training benchmark (jobs/build.sh --gpu ddgnn test_gpu bench_train), runs the tests (first the
# step's: no synchronisation inside a step, the uploaded batch, the replayed step equal to the eager
# one; then the CUDA kernels against their ATen versions and the rest), then measures in one run,
# side by side: the training step of SchNet on shapes (a) and (b) and of MACE on (a) eager, on
# padded batches and replayed as CUDA graphs (bench_train step=train|static|graphs), the
# benchmark's own loop, and the PyTorch Geometric loop (bench/pyg_baseline.py); then, while time
# is left, trains ethanol (data/ethanol.h5) on the GPU with SchNet and with the GPU MACE config,
# each with the GPU's utilisation sampled by nvidia-smi every 200 ms. Every log and figure goes to
# the output folder; summary.txt gathers the figures. Stops itself before the deadline.
# usage: jobs/gpu/check.sh [out_dir=gpu_out] [deadline_s=560] [bench_steps=20] [train_s=50]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:-gpu_out}
deadline=${2:-560}
steps=${3:-20}
train_s=${4:-50}
mkdir -p "$out"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1
left() { echo $((deadline - SECONDS)); }
summary="$out/summary.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
cp "$out/gpu.txt" "$summary"
echo "== build (t = ${SECONDS} s)"
timeout $(($(left) - 60)) bash jobs/build.sh --gpu ddgnn test_gpu bench_train > "$out/build.log" 2>&1
rc=$?
[ -f build-gpu/.ninja_log ] && cp build-gpu/.ninja_log "$out/ninja_log.txt"
if [ $rc -ne 0 ]; then
  echo "build failed or ran out of time (t = ${SECONDS} s)"
  grep -E "error|Error|FAILED" "$out/build.log" | head -30
  tail -5 "$out/build.log"
  exit 1
fi
echo "build: ${SECONDS} s" >> "$summary"
# shellcheck disable=SC1091
[ -f .gpu_deps/env.sh ] && . .gpu_deps/env.sh
tests() {  # label filter seconds
  echo "== GPU tests: $1 (t = ${SECONDS} s)"
  timeout "$3" ./build-gpu/tests/test_gpu --gtest_filter="$2" 2>&1 | tee "$out/test_gpu_$1.log" |
    grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which|which is|relative|difference|error|synchronised|calls with the CUDA kernels" | head -60
  grep -E "^\[ *(PASSED|FAILED) " "$out/test_gpu_$1.log" | sed "s/^/tests $1: /" >> "$summary"
}
tests step 'GpuStep.*' $(($(left) < 120 ? $(left) - 5 : 120))
if [ "$(left)" -gt 200 ]; then tests rest '-GpuStep.*' 90; fi
bench() {  # name args...
  local name=$1
  shift
  timeout 90 ./build-gpu/bench/bench_train "$@" 2>&1 | tee "$out/bench_$name.txt" |
    grep -E "^\(|graphs/s" | sed "s/^/$name: /" | tee -a "$summary"
}
echo "== the step eager, padded, replayed; the benchmark's loop; PyTorch Geometric (t = ${SECONDS} s)"
if [ "$(left)" -gt 150 ]; then
  bench loop "$steps" SchNet ab - cuda
  bench train "$steps" SchNet ab - cuda step=train
  bench static "$steps" SchNet ab - cuda step=static
  bench graphs "$steps" SchNet ab - cuda step=graphs
  timeout 60 python3 bench/pyg_baseline.py "$steps" ab cuda fp32 2>&1 | tee "$out/pyg.txt" |
    grep -iE "graphs/s|^\(" | sed "s/^/pyg: /" | tee -a "$summary"
fi
if [ "$(left)" -gt 120 ]; then
  bench mace_train "$steps" MACE ac - cuda step=train
  bench mace_graphs "$steps" MACE ac - cuda step=graphs
fi
# train_gpu name config seconds [--set ...]: ddgnn train on the GPU, its utilisation sampled.
train_gpu() {
  local name=$1 config=$2 seconds=$3
  shift 3
  echo "== $name on the GPU for ${seconds} s (t = ${SECONDS} s)"
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 \
    > "$out/util_$name.csv" &
  local smi=$!
  ./build-gpu/app/ddgnn train -c "$config" --overwrite --set Runtime.device=cuda \
    --set NeuralNetwork.Training.time_limit_s="$seconds" --set Output.run_dir="runs/gpu_$name" \
    "$@" 2>&1 | tail -n 15 | tee "$out/train_$name.log"
  kill "$smi"
  cp "runs/gpu_$name/metrics.csv" "$out/metrics_$name.csv" 2>/dev/null
  python3 - "$out/util_$name.csv" "$name" >> "$summary" <<'PY'
import sys
rows = [l.split(",") for l in open(sys.argv[1]) if l.strip()]
busy = [float(r[0]) for r in rows]
mem = [float(r[1]) for r in rows]
# the first 10 s (start-up, the static shapes, the warm-up and captures) apart
steady = busy[50:] if len(busy) > 100 else busy
print(f"{sys.argv[2]}: GPU busy {sum(steady) / max(len(steady), 1):.0f}% over {len(steady)} samples "
      f"after the first 10 s ({sum(busy) / max(len(busy), 1):.0f}% over all {len(busy)}), "
      f"peak memory {max(mem, default=0):.0f} MiB")
PY
  grep -E "test .*force|replayed|static shapes" "$out/train_$name.log" | sed "s/^/$name: /" >> "$summary"
}
if [ -f data/ethanol.h5 ]; then
  for run in schnet mace; do
    [ "$(left)" -gt 40 ] || break
    s=$(($(left) - 25))
    [ "$s" -gt "$train_s" ] && s=$train_s
    if [ $run = schnet ]; then
      train_gpu ethanol_schnet configs/ethanol_schnet.json "$s" --set Runtime.cuda_graphs=true \
        --set NeuralNetwork.Training.batch_size=32 --set Output.read_every_steps=50
    else
      train_gpu ethanol_mace_gpu configs/ethanol_mace_gpu.json "$s"
    fi
  done
else
  echo "no data/ethanol.h5 (bash jobs/main.sh makes it): no training on the GPU" | tee -a "$summary"
fi
echo "== done (t = ${SECONDS} s)"
cat "$summary"
