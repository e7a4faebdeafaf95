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
CMAKE_ARGS="${CMAKE_ARGS:-}" bash jobs/build.sh --gpu ddgnn bench_train test_gpu > "$out/build.log" 2>&1 ||
  { grep -E "error|FAILED" "$out/build.log" | head -40; exit 1; }
[ -f .gpu_deps/env.sh ] && . .gpu_deps/env.sh
echo "== GPU tests"
./build-gpu/tests/test_gpu 2>&1 | tee "$out/test_gpu.log" | grep -E "OK|FAILED|Failure|Expected|Which|relative|PASSED|SKIPPED|error" | head -60
echo "== training throughput, ddgnn (C++) and PyTorch Geometric, same GPU, same run"
./build-gpu/bench/bench_train "$steps" all ab - cuda 2>&1 | tee "$out/bench_train_cuda.txt"
python3 bench/pyg_baseline.py "$steps" ab cuda fp32 2>&1 | tee "$out/pyg_fp32.txt"
python3 bench/pyg_baseline.py "$steps" ab cuda bf16 2>&1 | tee "$out/pyg_bf16.txt"
./build-gpu/bench/bench_train "$steps" SchNet ab - cuda 2>&1 | tee "$out/bench_train_cuda_again.txt"
