#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs the whole test suite and
# compiles the GPU build's sources where a CUDA toolkit is (jobs/gpu/syntax_check.sh); then the
# suite's torch-free part (core, comm, loader, tuner, config, their MPI tests, the data tests with
# convert and info) again under AddressSanitizer + UndefinedBehaviorSanitizer (clang,
# ./build-sanitize), each libFuzzer target for 30 s (jobs/fuzz.sh), and ddgnn's own threads (the
# prefetch pipeline, the hang watchdog on 1-4 ranks) under ThreadSanitizer (./build-tsan). Any
# failure, sanitizer report or fuzz crash fails it.
#   jobs/test.sh              all of it (what CI runs)
#   jobs/test.sh --sanitize   only the sanitizer build, its tests and the fuzz runs
set -euo pipefail
cd "$(dirname "$0")/.."
cores=$(bash jobs/cores.sh)  # not nproc: it reads OMP_NUM_THREADS
bash jobs/install_deps.sh
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1
if [ "${1:-}" != "--sanitize" ]; then
  bash jobs/build.sh
  # One test per core, except the tests of several MPI ranks (labels train and mpi: oversubscribed
  # ranks, the online tuner's timings, signals and watchdogs), which run one at a time after.
  (cd build && ctest --output-on-failure -j"$cores" --timeout 600 -LE '^(train|mpi)$')
  (cd build && ctest --output-on-failure --timeout 600 -L '^(train|mpi)$')
  # The GPU build's sources compiled where a CUDA toolkit is (skipped, with a message, where not).
  bash jobs/gpu/syntax_check.sh build
fi

# Sanitizers: the build jobs/fuzz.sh uses, with its tests. HDF5 keeps allocations until exit by
# design (jobs/lsan.supp names it); Open MPI's plugins leave allocations that LeakSanitizer cannot
# attribute (unloaded modules), so the MPI tests run with leak detection off, the rest with it on.
CC=clang CXX=clang++ cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDDGNN_FUZZ=ON -DDDGNN_WITH_TORCH=OFF -DDDGNN_WITH_CUDA=OFF -DDDGNN_BUILD_BENCH=OFF >/dev/null
cmake --build build-sanitize -j"$cores"
export LSAN_OPTIONS="suppressions=$PWD/jobs/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS=print_stacktrace=1
(cd build-sanitize && ctest --output-on-failure -j"$cores" --timeout 600 \
  -L '^(core|loader|tuner|config|data|threads)$')
(cd build-sanitize && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure --timeout 600 \
  -L '^(comm|mpi)$')
bash jobs/fuzz.sh --seconds 30

# ThreadSanitizer: Open MPI is not instrumented; jobs/tsan.supp names its internals, one by one.
CC=clang CXX=clang++ cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDDGNN_SANITIZE=thread -DDDGNN_WITH_TORCH=OFF -DDDGNN_WITH_CUDA=OFF -DDDGNN_BUILD_BENCH=OFF \
  >/dev/null
cmake --build build-tsan -j"$cores" --target test_threads test_mpi_watchdog watchdog_stop_main
# Without address-space randomisation where the system allows it: ThreadSanitizer's fixed shadow
# layout fails to start under some kernels' larger mmap randomisation.
norandom=()
if setarch "$(uname -m)" -R true 2>/dev/null; then norandom=(setarch "$(uname -m)" -R); fi
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/../jobs/tsan.supp" \
  "${norandom[@]}" ctest --output-on-failure --timeout 600 -R '^(threads\.|mpi\.watchdog)')
