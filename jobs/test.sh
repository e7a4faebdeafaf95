#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash jobs/install_deps.sh
bash jobs/build.sh
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
