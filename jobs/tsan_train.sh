#!/usr/bin/env bash
# ThreadSanitizer on the training binary itself (LibTorch linked, not instrumented): builds
# ./build-tsan-torch with clang and -fsanitize=thread, then trains on several ranks with
# Loader.backend auto, so that the online switcher explores every backend and switches while
# each rank's prefetch thread fetches batches ahead. Any report fails the script; Open MPI's and
# UCX's own internals are suppressed one by one in jobs/tsan.supp. Not part of jobs/test.sh (the
# build takes about 25 minutes on 2 cores); the results are in results/hardening.md.
#   bash jobs/tsan_train.sh DATASET.h5        e.g. a 200-frame cu_eam set
set -euo pipefail
cd "$(dirname "$0")/.."
cores=$(bash jobs/cores.sh)  # not nproc: it reads OMP_NUM_THREADS
data=${1:?usage: jobs/tsan_train.sh DATASET.h5 (a small periodic set, e.g. 200 frames of cu_eam)}
CC=clang CXX=clang++ cmake -S . -B build-tsan-torch -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDDGNN_SANITIZE=thread -DDDGNN_WITH_TORCH=ON -DDDGNN_WITH_CUDA=OFF -DDDGNN_BUILD_BENCH=OFF \
  -DDDGNN_BUILD_TESTS=OFF > /dev/null
cmake --build build-tsan-torch -j"$cores" --target ddgnn
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_osc=^rdma
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
setarch=()
setarch -R true 2> /dev/null && setarch=(setarch -R)  # TSan wants a fixed address space layout
reports=$(mktemp -d -t ddgnn-tsan-XXXXXX)
status=0
# 3 ranks in one group, the tuner choosing among all backends once; 4 ranks in 2 replica groups,
# re-exploring every epoch among three (so that it switches while batches are prefetched).
for case in "3 0" "4 2"; do
  set -- $case
  more=()
  [ "$1" = 4 ] && more=(--set 'Tuner.candidates=["collective","rma","file"]'
                        --set Tuner.recheck_every_epochs=1)
  echo "== $1 ranks, Loader.width $2, backend auto ${more[*]}"
  "${setarch[@]}" mpiexec -n "$1" --oversubscribe --bind-to none \
    -x TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 suppressions=$PWD/jobs/tsan.supp log_path=$reports/r$1" \
    ./build-tsan-torch/app/ddgnn train --config configs/cu_eam_schnet.json --overwrite \
    --set "Dataset.path=$data" --set Training.num_epoch=3 --set Training.time_limit_s=3600 \
    --set Training.batch_size=2 --set Loader.backend=auto --set "Loader.width=$2" \
    --set "Output.run_dir=$reports/run$1" --set Output.progress=lines "${more[@]}" \
    > "$reports/log$1" 2>&1 \
    || status=1
  grep -E "tuner|best epoch" "$reports/log$1" || true
done
if ls "$reports"/r[0-9]* > /dev/null 2>&1; then
  grep -h "WARNING: ThreadSanitizer" "$reports"/r[0-9]* | sort | uniq -c
  echo "tsan_train.sh: reports in $reports" >&2
  exit 1
fi
[ "$status" = 0 ] || { echo "tsan_train.sh: a run failed: see $reports/log*" >&2; exit 1; }
echo "tsan_train.sh: no ThreadSanitizer report"
