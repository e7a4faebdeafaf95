#!/usr/bin/env bash
# The loader backends' benchmark grid that `ddgnn tune` fits the cost models to (a benchmark:
# prints figures, never part of the tests): `ddgnn bench-loader` over six launches on one node,
# 1, 2, 4 and 8 ranks, in one group or in groups of half the ranks (4 and 8 ranks oversubscribe
# a 2-core machine), every cell measured with every backend in turn.
#   bench/loader_grid.sh --out results/grid.csv [other bench-loader options,
#                        e.g. --backends rma collective]
# Defaults: records of 64 B to 1 MiB (a small molecule's graph to a large crystal's), batches of
# 16 to 4096, batches up to 64 MiB, 60 repetitions (fewer where a cell would pass 10 s).
# The output is replaced, never appended to: a grid is one measurement of one machine state.
set -euo pipefail
cd "$(dirname "$0")/.."
out=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    *) extra+=("$1"); shift ;;
  esac
done
if [ -z "$out" ]; then
  echo "loader_grid.sh: say where the grid goes: --out FILE.csv" >&2
  exit 2
fi
ddgnn=${DDGNN:-./build/app/ddgnn}
[ -x "$ddgnn" ] || { echo "loader_grid.sh: $ddgnn not built (cmake --build build)" >&2; exit 2; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
export OMPI_MCA_osc=${OMPI_MCA_osc:-^rdma}
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
tmp="$out.partial"
rm -f "$tmp"
trap 'rm -f "$tmp"' EXIT
start=$(date +%s)
for launch in "1 0" "2 0" "4 0" "4 2" "8 0" "8 4"; do
  set -- $launch
  mpiexec -n "$1" --oversubscribe --bind-to none "$ddgnn" bench-loader --mib-per-rank 16 \
    --width "$2" --sample-bytes 64 256 1024 4096 65536 1048576 --batch 16 64 256 1024 4096 \
    --max-batch-mib 64 --repetitions 60 --max-seconds-per-cell 10 ${extra[@]+"${extra[@]}"} \
    --out "$tmp"
done
mv "$tmp" "$out"
trap - EXIT
echo "loader_grid.sh: $out ($(($(tail -n +2 "$out" | wc -l))) rows) in $(($(date +%s) - start)) s"
