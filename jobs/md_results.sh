#!/usr/bin/env bash
# MD stability of trained models (results/md.md): trains ethanol SchNet and MACE and Cu EAM SchNet
# from the shipped configs (MACE for 1500 s and Cu for 1200 s instead of their configs' 3300 and
# 1740, two trainings at a time, one thread each), then runs NVE with each through `ddgnn driver`
# and ASE (jobs/md_stability.py: ten test-split structures, 10 ps at 0.5 fs for ethanol, 1 fs for
# Cu, two runs at a time) and writes results/figures/md_*.csv, md_rdf.png and the table.
#   bash jobs/md_results.sh                 everything (about 1 h 45 min on two cores)
#   bash jobs/md_results.sh --skip-train    the MD only, with the models already in runs/md/
#   bash jobs/md_results.sh --ps 1 --runs 2 a short check
set -euo pipefail
cd "$(dirname "$0")/.."
train=1
ps=10
runs=10
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-train) train=0; shift ;;
    --ps) ps="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    *) echo "md_results.sh: unknown argument '$1' (--skip-train, --ps P, --runs N)" >&2; exit 2 ;;
  esac
done
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
ddgnn=./build/app/ddgnn
py=python3
/usr/bin/python3 -c "import ase" 2> /dev/null && py=/usr/bin/python3
out=results/figures
mkdir -p runs/md "$out"

for s in ethanol cu_eam; do
  [ -f "data/$s.h5" ] && continue
  bash jobs/data/generate.sh --out data --only "$s" --xtb-md build/jobs/data/ddgnn-xtb-md
  "$ddgnn" convert --overwrite "data/$s.extxyz" "data/$s.h5"
done

if [ "$train" = 1 ]; then
  t() { # t NAME CONFIG [--set ...]: one training into runs/md/NAME
    local name=$1 config=$2
    shift 2
    "$ddgnn" train -c "configs/$config.json" --overwrite --set "Output.run_dir=runs/md/$name" \
      --set Output.progress=lines "$@" > "runs/md/$name.log" 2>&1
  }
  (t ethanol_schnet ethanol_schnet && t ethanol_mace ethanol_mace --set Training.time_limit_s=1500) &
  t cu_eam_schnet cu_eam_schnet --set Training.time_limit_s=1200 &
  wait
fi
for m in ethanol_schnet ethanol_mace cu_eam_schnet; do
  "$ddgnn" evaluate --run "runs/md/$m" --threads 1 > "runs/md/$m.eval.txt"
done

"$py" jobs/md_stability.py run --name ethanol_schnet --run runs/md/ethanol_schnet \
  --reference data/ethanol.extxyz --runs "$runs" --ps "$ps" --dt 0.5 --temperature 500 --out "$out"
"$py" jobs/md_stability.py run --name ethanol_mace --run runs/md/ethanol_mace \
  --reference data/ethanol.extxyz --runs "$runs" --ps "$ps" --dt 0.5 --temperature 500 --out "$out"
"$py" jobs/md_stability.py run --name cu_eam_schnet --run runs/md/cu_eam_schnet \
  --reference data/cu_eam.extxyz --reference-stride 10 --runs "$runs" --ps "$ps" --dt 1.0 \
  --temperature 800 --out "$out"
"$py" jobs/md_stability.py report --out "$out" ethanol_schnet ethanol_mace cu_eam_schnet \
  | tee "$out/md_table.md"
