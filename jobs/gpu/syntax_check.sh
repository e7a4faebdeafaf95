#!/usr/bin/env bash
# Compile check of the GPU build's sources on a machine with a CUDA toolkit but without a CUDA
# LibTorch (a CPU machine, where the GPU build cannot be configured):
#  (a) every .cu file compiled by nvcc to an object for sm_80 and sm_90 (ARCHS), warnings and
#      register spills as errors;
#  (b) g++ -fsyntax-only of every C++ source compiled only in the GPU build (model/cuda/*.cpp but
#      the CPU build's stand-ins, train/cuda_glue.cpp) and of every source with branches for it
#      (#ifdef DDGNN_TORCH_CUDA, DDGNN_CUDA_KERNELS or DDGNN_HAVE_NCCL, all three defined), against
#      Debian's LibTorch headers and the toolkit's, with a shim for the one generated header Debian
#      lacks (c10/cuda/impl/cuda_cmake_macros.h); warnings as errors;
#  (c) the GPU build's CMake path: configured with a stand-in for the CUDA libraries of LibTorch
#      (TORCH_CUDA_LIBRARIES, which Debian's leaves unset), and its CUDA kernels' library built.
# Skips (exit 0, with a message) where nvcc is absent, and skips (b) where nvcc's include folders
# lack the runtime headers; exits non-zero on any compile error.
# usage: jobs/gpu/syntax_check.sh [build_dir=build]
#   build_dir: a configured CPU build, for its generated headers (configured into a temporary
#   folder when it has none). NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc),
#   ARCHS (default "80 90") and JOBS (default: jobs/cores.sh) override.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$nvcc" ]; then
  echo "syntax_check: skipped: no nvcc (CUDA toolkit) here; set NVCC=/path/to/nvcc to check"
  exit 0
fi
# The toolkit's include folders as nvcc itself passes them (INCLUDES and SYSTEM_INCLUDES of its
# dry run: targets/<arch>/include and its cccl, wherever the toolkit is laid out), else the
# include folder beside nvcc's bin.
mapfile -t cuda_includes < <("$nvcc" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 |
  sed -n 's/^#\$ \(SYSTEM_\)\{0,1\}INCLUDES=//p' | grep -oE '(-I|")/[^" ]+' | sed 's/^-I//; s/^"//')
cuda_includes+=("$(dirname "$(dirname "$(readlink -f "$nvcc")")")/include")
cuda_isystem=()
have_runtime_header=0
for d in "${cuda_includes[@]}"; do
  [ -d "$d" ] || continue
  cuda_isystem+=(-isystem "$d")
  [ -f "$d/cuda_runtime_api.h" ] && have_runtime_header=1
done
jobs=${JOBS:-$(bash jobs/cores.sh)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

build=${1:-build}
if [ ! -f "$build/generated/core/version.h" ]; then
  build=$tmp/build
  echo "syntax_check: configuring a CPU build in $build for its generated headers"
  cmake -S . -B "$build" -DDDGNN_BUILD_TESTS=OFF -DDDGNN_BUILD_BENCH=OFF >"$tmp/cmake.log" 2>&1 ||
    { tail -20 "$tmp/cmake.log"; echo "syntax_check: cmake failed"; exit 1; }
fi
# The header that a CUDA build of LibTorch generates and Debian's CPU build does not ship.
mkdir -p "$tmp/shim/c10/cuda/impl"
printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' >"$tmp/shim/c10/cuda/impl/cuda_cmake_macros.h"

# The sources matching each path pattern (* spans folders), outside build folders.
list() {
  local pattern
  for pattern; do
    find . -type d \( -name .git -o -name 'build*' -o -name .gpu_deps \) -prune -o -type f \
      -path "./$pattern" -print
  done | sed 's|^\./||'
}
mapfile -t cu_files < <(list '*.cu' | sort)
mapfile -t cpp_files < <( {
  list 'model/cuda/*.cpp' | grep -v '/no_cuda\.cpp$'
  echo train/cuda_glue.cpp
  list '*.cpp' | xargs grep -lE 'DDGNN_(TORCH_CUDA|CUDA_KERNELS|HAVE_NCCL)'
} | sort -u)

gencode=()
for a in ${ARCHS:-80 90}; do gencode+=(-gencode "arch=compute_$a,code=sm_$a"); done
nvcc_flags=(-std=c++17 -O3 -I. "${gencode[@]}" -Werror all-warnings "-Xcompiler=-Wall,-Wextra"
            "-Xptxas=-warn-spills,-warn-lmem-usage")
gxx_flags=(-std=c++17 -fsyntax-only -Wall -Wextra -Wno-unused-parameter -Werror
           -DDDGNN_TORCH_CUDA=1 -DDDGNN_CUDA_KERNELS=1 -DDDGNN_HAVE_NCCL=1
           -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1
           -DDDGNN_SOURCE_DIR='"."' -DDDGNN_BINARY='"ddgnn"' -DDDGNN_MPIEXEC='"mpiexec"'
           -I. -I"$build/generated" -isystem "$tmp/shim" -isystem /usr/include/torch/csrc/api/include
           "${cuda_isystem[@]}" -isystem /usr/lib/x86_64-linux-gnu/openmpi/include
           -isystem /usr/include/hdf5/serial)

# check <name> <command...>: runs the command in the background, at most $jobs at a time; its
# output goes to a log, and a failure is recorded.
mkdir -p "$tmp/logs" "$tmp/obj"
n=0
check() {
  local name=$1
  shift
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  local log="$tmp/logs/$n.log"
  n=$((n + 1))
  { if "$@" >"$log" 2>&1; then echo "ok      $name"; else echo "FAILED  $name" && touch "$log.failed"; fi; } &
}
version=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
echo "syntax_check: nvcc $version, ${#cu_files[@]} .cu files (ARCHS ${ARCHS:-80 90});" \
  "g++ -fsyntax-only, ${#cpp_files[@]} .cpp files; CMake's GPU path"
for f in "${cu_files[@]}"; do
  check "nvcc    $f" "$nvcc" "${nvcc_flags[@]}" -c "$f" -o "$tmp/obj/$(basename "$f").o"
done
if [ "$have_runtime_header" = 1 ]; then
  for f in "${cpp_files[@]}"; do
    check "g++     $f" g++ "${gxx_flags[@]}" "$f"
  done
else
  echo "syntax_check: g++ checks skipped: no cuda_runtime_api.h in nvcc's include folders" \
    "(${cuda_includes[*]}); a toolkit without its runtime headers"
fi
# (c) after (a) and (b): the GPU build's configure step, then nvcc through CMake's flags.
gpu_build() {
  cmake -S . -B "$tmp/gpu-build" -DTORCH_CUDA_LIBRARIES=stand-in -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DDDGNN_BUILD_TESTS=OFF -DDDGNN_BUILD_BENCH=OFF &&
    grep -q '^CMAKE_CUDA_COMPILER:' "$tmp/gpu-build/CMakeCache.txt" &&
    cmake --build "$tmp/gpu-build" -j"$jobs" --target ddgnn_cuda_kernels
}
wait
check "cmake   GPU build: configure, ddgnn_cuda_kernels" gpu_build
wait
failed=0
for log in "$tmp"/logs/*.log; do
  if [ -e "$log.failed" ]; then
    failed=$((failed + 1))
    head -40 "$log"
  fi
done
if [ "$failed" -gt 0 ]; then
  echo "syntax_check: $failed of $n compiles failed"
  exit 1
fi
echo "syntax_check: all $n compiles passed"
