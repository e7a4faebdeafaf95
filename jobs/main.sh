#!/usr/bin/env bash
# The README's main job, end to end on a fresh machine: install, build, generate real data with
# LAMMPS (EAM, Stillinger-Weber) and xtb (GFN2-xTB), convert it to ddgnn datasets, print what is
# in each, then train SchNet on the ethanol set (configs/ethanol_schnet.json, 10 minutes of
# training), evaluate it on the held-out test split and draw the parity plot.
# Options go to jobs/data/generate.sh (e.g. --frames 500, --large). Environment:
#   TRAIN_CONFIG=configs/cu_eam_schnet.json   train that config instead (30 minutes)
#   TRAIN=0                                   stop after the data
set -euo pipefail
cd "$(dirname "$0")/.."
bash jobs/install_deps.sh
bash jobs/build.sh ddgnn ddgnn-xtb-md
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1
bash jobs/data/generate.sh --out data --xtb-md build/jobs/data/ddgnn-xtb-md "$@"
for name in $(python3 jobs/data/datasets.py names); do
  ./build/app/ddgnn convert --overwrite "data/$name.extxyz" "data/$name.h5"
  ./build/app/ddgnn info "data/$name.h5"
  echo
done
if [ "${TRAIN:-1}" = 0 ]; then exit 0; fi

config=${TRAIN_CONFIG:-configs/ethanol_schnet.json}
run_dir=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["Output"]["run_dir"])' "$config")
./build/app/ddgnn train --config "$config" --overwrite
./build/app/ddgnn evaluate --run "$run_dir"
python3 jobs/parity_plot.py "$run_dir/eval_test"
