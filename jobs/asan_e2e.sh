#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer on the ddgnn binary with LibTorch (linked, not
# instrumented): builds ./build-asan-torch with clang, then runs every subcommand end to end on
# real data: convert, info, train with each mpnn_type, PAINN with the stress, a smooth neighbour
# cap and the polynomial envelope, two ranks with the online switcher, evaluate, resume,
# bench-loader, tune, simulate, config. Any sanitizer report fails the script (leak detection is
# off: LibTorch's and Open MPI's allocations at exit are not ours to free). Not part of
# jobs/test.sh (the build takes about 25 minutes on 2 cores); results in results/hardening.md.
#   bash jobs/asan_e2e.sh FRAMES.extxyz        e.g. 200 frames of cu_eam (jobs/data/generate.sh)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
cores=$(bash jobs/cores.sh)  # not nproc: it reads OMP_NUM_THREADS
xyz=${1:?usage: jobs/asan_e2e.sh FRAMES.extxyz (a small periodic set with forces and stress)}
CC=clang CXX=clang++ cmake -S . -B build-asan-torch -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDDGNN_SANITIZE=address,undefined -DDDGNN_WITH_TORCH=ON -DDDGNN_WITH_CUDA=OFF \
  -DDDGNN_BUILD_BENCH=OFF -DDDGNN_BUILD_TESTS=OFF > /dev/null || exit 1
cmake --build build-asan-torch -j"$cores" --target ddgnn || exit 1
b=./build-asan-torch/app/ddgnn
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OMPI_MCA_osc=^rdma
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
w=$(mktemp -d -t ddgnn-asan-XXXXXX)
reports=0 failed=0
run() {  # run EXPECTED_STATUS COMMAND...
  local want=$1
  shift
  echo "== $*"
  "$@" > "$w/last.log" 2>&1
  local rc=$?
  if grep -q "ERROR: AddressSanitizer\|runtime error:" "$w/last.log"; then
    grep -m3 -A8 "ERROR: AddressSanitizer\|runtime error:" "$w/last.log"
    reports=$((reports + 1))
  fi
  [ "$rc" = "$want" ] || { echo "   exit $rc, expected $want"; failed=$((failed + 1)); }
  tail -n 1 "$w/last.log" | cut -c1-160
}
train=(--set "Dataset.path=$w/d.h5" --set Training.time_limit_s=3600 --set Output.progress=lines)
run 0 "$b" convert "$xyz" "$w/d.h5"
run 0 "$b" info "$w/d.h5"
for m in SchNet PAINN EGNN CGCNN GIN PNA; do
  run 0 "$b" train --config configs/cu_eam_schnet.json "${train[@]}" --set Training.num_epoch=2 \
    --set "Architecture.mpnn_type=$m" --set Training.batch_size=4 --set "Output.run_dir=$w/$m"
done
run 0 "$b" train --config configs/si_sw_painn.json "${train[@]}" --set Training.num_epoch=1 \
  --set Architecture.stress_weight=1 --set Architecture.smooth_neighbour_cap=true \
  --set Architecture.max_neighbours=20 --set Architecture.radial_envelope=polynomial \
  --set "Output.run_dir=$w/painn_cap"
run 0 mpiexec -n 2 --oversubscribe --bind-to none "$b" train --config configs/cu_eam_schnet.json \
  "${train[@]}" --set Training.num_epoch=2 --set Loader.backend=auto --set "Output.run_dir=$w/mpi"
run 0 "$b" evaluate --run "$w/SchNet" --split all
run 0 "$b" train --config configs/cu_eam_schnet.json "${train[@]}" --set Training.num_epoch=3 \
  --set "Output.run_dir=$w/SchNet" --set Training.continue=1
run 0 mpiexec -n 2 --oversubscribe "$b" bench-loader --out "$w/grid.csv" --sample-bytes 1024 \
  --batch 16 --repetitions 3 --mib-per-rank 4
run 0 "$b" tune -m results/loader_grid_full.csv --out "$w/models.json"
run 0 "$b" simulate --models "$w/models.json" --platform summit --out "$w/sim.csv"
run 1 "$b" config --config configs/cu_eam_schnet.json --set Training.time_limit_s=0
echo "asan_e2e.sh: $reports command(s) with a sanitizer report, $failed with another exit status"
[ "$reports" = 0 ] && [ "$failed" = 0 ]
