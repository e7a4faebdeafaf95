#!/usr/bin/env bash
# Fuzzes the parsers of untrusted input with libFuzzer: the extended XYZ reader
# (fuzz/fuzz_extxyz.cpp), the config loader with --set overrides (fuzz/fuzz_config.cpp) and the
# dataset reader on files with sound HDF5 structure and crafted content (fuzz/fuzz_dataset.cpp)
# and the exact array encodings' decoder and round trip (fuzz/fuzz_codec.cpp).
# Builds them with clang into ./build-sanitize (address + undefined sanitizers, the build of
# `jobs/test.sh --sanitize`), runs each for SECONDS on the checked-in seed corpus (fuzz/corpus/)
# plus what earlier runs found (build-sanitize/corpus/), and prints per target: executions,
# executions/s, coverage (edges, features), corpus size, crashes. Exits 1 if any target crashed;
# the input is kept under build-sanitize/crashes/<target>/ (add it to a regression test).
#   jobs/fuzz.sh                       60 s per target (what the test suite runs)
#   jobs/fuzz.sh --seconds 900         an hour for the four
#   jobs/fuzz.sh --seconds 30 config   one target
set -euo pipefail
cd "$(dirname "$0")/.."
cores=$(bash jobs/cores.sh)  # not nproc: it reads OMP_NUM_THREADS
seconds=60
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds)
      [ $# -ge 2 ] || { echo "fuzz.sh: --seconds needs a value" >&2; exit 2; }
      seconds="$2"
      shift 2
      ;;
    extxyz | config | dataset | codec)
      targets+=("$1")
      shift
      ;;
    *)
      echo "fuzz.sh: unknown argument '$1' (targets: extxyz config dataset codec; --seconds S)" >&2
      exit 2
      ;;
  esac
done
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -ge 1 ]] || {
  echo "fuzz.sh: --seconds expects a positive integer, got '$seconds'" >&2
  exit 2
}
[ ${#targets[@]} -gt 0 ] || targets=(extxyz config dataset codec)

build="build-sanitize"
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDGNN_FUZZ=ON \
  -DDDGNN_WITH_TORCH=OFF -DDDGNN_WITH_CUDA=OFF -DDDGNN_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$cores" --target "${targets[@]/#/fuzz_}"

status=0
printf '%-8s %12s %10s %8s %9s %7s %8s\n' target executions "exec/s" edges features corpus crashes
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  crashes="$build/crashes/$t"
  mkdir -p "$corpus" "$crashes"
  log="$build/fuzz_$t.log"
  set +e
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=20 \
    -rss_limit_mb=2048 -artifact_prefix="$crashes/" "$corpus" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep 'stat::number_of_executed_units:' "$log" | awk '{print $2}' | tail -1)
  rate=$(grep 'stat::average_exec_per_sec:' "$log" | awk '{print $2}' | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' "$log" | tail -1)
  n_crash=$(find "$crashes" -type f | wc -l)
  printf '%-8s %12s %10s %8s %9s %7s %8s\n' "$t" "${execs:-?}" "${rate:-?}" \
    "$(echo "$cov" | awk '{print $2}')" "$(echo "$cov" | awk '{print $4}')" \
    "$(echo "$cov" | awk '{print $6}')" "$n_crash"
  if [ $rc -ne 0 ] || [ "$n_crash" -gt 0 ]; then
    echo "fuzz.sh: fuzz_$t failed (exit $rc); its log: $log; inputs: $crashes" >&2
    grep -E 'ERROR|SUMMARY|not a ddgnn::Error|runtime error' "$log" | head -5 >&2 || true
    status=1
  fi
done
exit $status
