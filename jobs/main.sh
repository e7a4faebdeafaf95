#!/usr/bin/env bash
# The README's main job, end to end on a fresh machine: install, build, generate real data with
# LAMMPS (EAM, Stillinger-Weber) and xtb (GFN2-xTB), convert it to ddgnn datasets, and print
# what is in each. Options go to jobs/data/generate.sh (e.g. --frames 500, --large).
set -euo pipefail
cd "$(dirname "$0")/.."
bash jobs/install_deps.sh
bash jobs/build.sh ddgnn ddgnn-xtb-md
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1
bash jobs/data/generate.sh --out data --xtb-md build/jobs/data/ddgnn-xtb-md "$@"
for name in cu_eam cuni_eam si_sw ethanol aspirin; do
  ./build/app/ddgnn convert --overwrite "data/$name.extxyz" "data/$name.h5"
  ./build/app/ddgnn info "data/$name.h5"
  echo
done
