#!/usr/bin/env bash
# Configures and builds ddgnn (Release) into ./build on every core. Arguments name the targets
# to build (default: everything, tests and benchmarks included). CMAKE_ARGS adds -D options.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC2086
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
if [ $# -gt 0 ]; then
  cmake --build build -j"$(nproc)" --target "$@"
else
  cmake --build build -j"$(nproc)"
fi
echo "build: ./build/app/ddgnn"
