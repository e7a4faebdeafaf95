#!/usr/bin/env bash
# Training throughput of `ddgnn train` over ranks and loader backends (a benchmark: prints
# figures, never part of the tests). For each (config, ranks, backend): graphs/s of the last
# epoch, ms per step split by phase (metrics.csv), and how long the step waited for its batch
# with prefetching on (the loader on the critical path) against the time the loader worked.
#   bench/train_scaling.sh [--config C] [--ranks "1 2 4"] [--backends "shm rma collective"]
#                          [--epochs N] [--batch B] [--prefetch D] [--out results/x.csv]
# The global batch stays B (each of P ranks takes B/P graphs), so every row trains the same
# model the same way; only the speed differs.
set -euo pipefail
cd "$(dirname "$0")/.."
config=configs/cu_eam_schnet.json
ranks="1 2 4"
backends="shm rma collective replicated file"
epochs=2
batch=4
prefetch=2
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --backends) backends=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --prefetch) prefetch=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "train_scaling.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rows="$tmp/rows.csv"
echo "config,ranks,backend,batch_per_rank,prefetch,graphs_per_s,step_ms,load_ms,fetch_ms,graph_ms,forward_ms,forces_ms,backward_ms,sync_ms,optimizer_ms,peak_rss_mb" >"$rows"
for p in $ranks; do
  for backend in $backends; do
    [ "$p" = 1 ] && [ "$backend" != "${backends%% *}" ] && continue  # one rank: one backend
    run="$tmp/run_${p}_${backend}"
    b=$((batch / p))
    [ "$b" -ge 1 ] || { echo "skip P=$p: batch $batch < ranks" >&2; continue; }
    mpiexec -n "$p" --oversubscribe --bind-to none build/app/ddgnn train -c "$config" \
      --overwrite --set Output.run_dir="$run" --set Training.num_epoch="$epochs" \
      --set Training.batch_size="$b" --set Loader.backend="$backend" \
      --set Loader.prefetch_depth="$prefetch" --set Training.time_limit_s=100000 \
      --set Output.trace_steps=0 --set Verbosity.level=0 >"$tmp/log" 2>&1 ||
      { cat "$tmp/log" >&2; exit 1; }
    python3 - "$run/metrics.csv" "$config" "$p" "$backend" "$b" "$prefetch" >>"$rows" <<'PY'
import csv, sys
path, config, p, backend, b, prefetch = sys.argv[1:]
row = list(csv.DictReader(open(path)))[-1]
steps = float(row["steps"])
ms = lambda k: f'{1e3 * float(row[k]) / steps:.2f}'
step = 1e3 * (float(row["epoch_s"]) - float(row["eval_s"]) - float(row["checkpoint_s"])) / steps
print(",".join([config.split("/")[-1], p, backend, b, prefetch, f'{float(row["graphs_per_s"]):.1f}',
                f"{step:.2f}"] + [ms(k) for k in ("load_s", "fetch_s", "graph_s", "forward_s",
                "forces_s", "backward_s", "sync_s", "optimizer_s")] + [f'{float(row["peak_rss_mb"]):.0f}']))
PY
  done
done
column -s, -t "$rows"
if [ -n "$out" ]; then
  [ -f "$out" ] || head -1 "$rows" >"$out"
  tail -n +2 "$rows" >>"$out"
fi
