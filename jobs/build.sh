#!/usr/bin/env bash
# Configures and builds ddgnn (Release) on every core. Arguments name the targets to build
# (default: everything, tests and benchmarks included). CMAKE_ARGS adds -D options.
#   jobs/build.sh [targets...]         CPU build against Debian's LibTorch, into ./build
#   jobs/build.sh --gpu [targets...]   GPU build into ./build-gpu against the CUDA LibTorch of the
#                                      python3 on PATH (torch.utils.cmake_prefix_path) and the NCCL
#                                      of that install (the nvidia-nccl wheel) or of CUDA_HOME;
#                                      sources .gpu_deps/env.sh first when it exists (the libraries
#                                      jobs/gpu/fetch_deps.sh unpacks for a machine without them);
#                                      LibTorch's headers precompiled (DDGNN_TORCH_PCH)
set -euo pipefail
cd "$(dirname "$0")/.."
cores=$(bash jobs/cores.sh)  # not nproc: it reads OMP_NUM_THREADS
build=build
extra=()
if [ "${1:-}" = "--gpu" ]; then
  shift
  build=build-gpu
  if [ -f .gpu_deps/env.sh ]; then
    # shellcheck disable=SC1091
    . .gpu_deps/env.sh
  fi
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  nccl_home=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
  [ -n "$nccl_home" ] && export NCCL_HOME="$nccl_home"
  extra+=("-DCMAKE_PREFIX_PATH=$torch_prefix;${CMAKE_PREFIX_PATH:-}" -DDDGNN_REQUIRE_CUDA=ON
          -DDDGNN_TORCH_PCH=ON)
  command -v ninja >/dev/null && extra+=(-G Ninja)
fi
# shellcheck disable=SC2086
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${extra[@]}" ${CMAKE_ARGS:-} >/dev/null
if [ $# -gt 0 ]; then
  cmake --build "$build" -j"$cores" --target "$@"
else
  cmake --build "$build" -j"$cores"
fi
echo "build: ./$build/app/ddgnn"
