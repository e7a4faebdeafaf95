#!/usr/bin/env bash
# The short GPU check, for a lease of a few minutes: builds the GPU binary, the GPU tests and the
# training benchmark (jobs/build.sh --gpu ddgnn test_gpu bench_train), runs the tests (the CUDA
# kernels of model/cuda/ against their ATen versions among them, with their call counts), measures
# every mpnn_type's training throughput in float32 beside the PyTorch Geometric loop
# (bench/pyg_baseline.py) on the same GPU, then bf16 for three types and PyG's bf16, one profiler
# trace of SchNet on shape (a), then, while time is left, trains the bundled ethanol config on
# the GPU with its utilisation sampled by nvidia-smi. Logs go to the output folder.
# Stops itself before the deadline.
# usage: jobs/gpu/check.sh [out_dir=gpu_out] [deadline_s=560] [bench_steps=10] [train_s=57]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${1:-gpu_out}
deadline=${2:-560}
steps=${3:-10}
train_s=${4:-57}
mkdir -p "$out"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1
left() { echo $((deadline - SECONDS)); }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
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
# shellcheck disable=SC1091
[ -f .gpu_deps/env.sh ] && . .gpu_deps/env.sh
echo "== GPU tests (t = ${SECONDS} s)"
timeout $(($(left) < 150 ? $(left) - 5 : 150)) ./build-gpu/tests/test_gpu 2>&1 | tee "$out/test_gpu.log" |
  grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which|which is|relative|difference|error|calls with the CUDA kernels" | head -80
echo "== training throughput, every mpnn_type, float32, then PyTorch Geometric (t = ${SECONDS} s)"
if [ "$(left)" -gt 120 ]; then
  timeout $(($(left) - 90)) ./build-gpu/bench/bench_train "$steps" all ab - cuda 2>&1 | tee "$out/bench.txt"
fi
if [ "$(left)" -gt 90 ]; then
  timeout 60 python3 bench/pyg_baseline.py "$steps" ab cuda fp32 2>&1 | tee "$out/pyg.txt"
fi
echo "== bf16 (t = ${SECONDS} s)"
if [ "$(left)" -gt 100 ]; then
  timeout 60 ./build-gpu/bench/bench_train "$steps" SchNet,PAINN,MACE ab - cuda bf16 2>&1 | tee -a "$out/bench.txt"
  timeout 40 python3 bench/pyg_baseline.py "$steps" ab cuda bf16 2>&1 | tee -a "$out/pyg.txt"
fi
if [ "$(left)" -gt 90 ]; then
  timeout 30 ./build-gpu/bench/bench_train 5 SchNet a "$out/trace" cuda 2>&1 | tail -n 3
fi
if [ "$(left)" -gt 45 ] && [ -f data/ethanol.h5 ]; then
  s=$(($(left) - 25))
  [ "$s" -gt "$train_s" ] && s=$train_s
  echo "== ethanol on the GPU for ${s} s (t = ${SECONDS} s)"
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 \
    > "$out/util_ethanol.csv" &
  smi=$!
  ./build-gpu/app/ddgnn train -c configs/ethanol_schnet.json --overwrite --set Runtime.device=cuda \
    --set NeuralNetwork.Training.time_limit_s="$s" --set Output.run_dir=runs/gpu_ethanol 2>&1 |
    tail -n 15 | tee "$out/train_ethanol.log"
  kill "$smi"
  cp runs/gpu_ethanol/metrics.csv "$out/metrics_ethanol.csv" 2>/dev/null
  if [ "$(left)" -gt 15 ]; then
    timeout 15 ./build-gpu/app/ddgnn evaluate --run runs/gpu_ethanol 2>&1 |
      tail -n 8 | tee "$out/eval_ethanol.log"
  fi
fi
echo "== done (t = ${SECONDS} s)"
