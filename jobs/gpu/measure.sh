#!/usr/bin/env bash
# The GPU measurements of results/gpu.md in one go, on a GPU machine with PyTorch (CUDA) and
# PyTorch Geometric: builds the GPU binary (jobs/build.sh --gpu), runs the GPU tests, then training
# throughput of every mpnn_type on shapes (a) and (b) beside the PyTorch Geometric loop
# (bench/pyg_baseline.py) on the same GPU, then `ddgnn train` on the GPU with the utilisation
# sampled by nvidia-smi. Data sets (data/*.h5) are used where present.
# usage: jobs/gpu/measure.sh [out_dir=gpu_out] [steps=30]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-gpu_out}
steps=${2:-30}
mkdir -p "$out"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
CMAKE_ARGS="${CMAKE_ARGS:-}" timeout "${BUILD_TIMEOUT:-1800}" bash jobs/build.sh --gpu ddgnn bench_train test_gpu > "$out/build.log" 2>&1 ||
  { grep -E "error|FAILED" "$out/build.log" | head -40; exit 1; }
[ -f .gpu_deps/env.sh ] && . .gpu_deps/env.sh
echo "== GPU tests (t = ${SECONDS} s)"
timeout 120 ./build-gpu/tests/test_gpu 2>&1 | tee "$out/test_gpu.log" | grep -E "OK|FAILED|Failure|Expected|Which|relative|PASSED|SKIPPED|error" | head -60
echo "== training throughput, ddgnn (C++) and PyTorch Geometric, same GPU, same run (t = ${SECONDS} s)"
./build-gpu/bench/bench_train "$steps" all ab - cuda 2>&1 | tee "$out/bench_train_cuda.txt"
./build-gpu/bench/bench_train "$steps" all ab - cuda bf16 2>&1 | tee "$out/bench_train_cuda_bf16.txt"
python3 bench/pyg_baseline.py "$steps" ab cuda fp32 2>&1 | tee "$out/pyg_fp32.txt"
python3 bench/pyg_baseline.py "$steps" ab cuda bf16 2>&1 | tee "$out/pyg_bf16.txt"
./build-gpu/bench/bench_train "$steps" SchNet ab - cuda 2>&1 | tee "$out/bench_train_cuda_again.txt"
# Training on the GPU (data/ethanol.h5 from jobs/main.sh): the bundled config with the device set,
# the GPU's utilisation sampled every 200 ms by nvidia-smi while it runs.
train_gpu() {  # name config seconds [--set ...]
  local name=$1 config=$2 seconds=$3
  shift 3
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 \
    > "$out/util_$name.csv" &
  local smi=$!
  ./build-gpu/app/ddgnn train -c "$config" --overwrite --set Runtime.device=cuda \
    --set NeuralNetwork.Training.time_limit_s="$seconds" --set Output.run_dir="runs/gpu_$name" \
    "$@" 2>&1 | tail -n 12 | tee "$out/train_$name.log"
  kill "$smi"
  cp "runs/gpu_$name/metrics.csv" "$out/metrics_$name.csv"
  python3 - "$out/util_$name.csv" <<'PY'
import sys
rows = [l.split(",") for l in open(sys.argv[1]) if l.strip()]
busy = [float(r[0]) for r in rows]
mem = [float(r[1]) for r in rows]
steady = busy[len(busy) // 5: len(busy) - len(busy) // 10] or busy
print(f"GPU busy (nvidia-smi utilization.gpu): steady-state mean {sum(steady) / len(steady):.0f}% "
      f"over {len(steady)} samples; peak memory used {max(mem):.0f} MiB")
PY
}
if [ -f data/ethanol.h5 ]; then
  echo "== ethanol on the GPU (t = ${SECONDS} s)"
  train_gpu ethanol configs/ethanol_schnet.json "${ETHANOL_SECONDS:-57}" ${ETHANOL_SET:-}
fi
if [ -f data/cu_eam.h5 ]; then
  echo "== Cu EAM on the GPU (t = ${SECONDS} s)"
  train_gpu cu configs/cu_eam_schnet.json "${CU_SECONDS:-174}" ${CU_SET:-}
fi
