#!/bin/sh
# The watchdog of ranks that are stopped and continued again and again while they wait
# (tests/CMakeLists.txt: mpi.watchdog_flicker): tests/mpi/watchdog_stop_main.cpp `flicker` on 3
# ranks (timeout 1 s, rank 1 stopped for good) while this script stops ranks 0 and 2 for 1.3 s and
# lets them run for 0.7 s, over and over. Their waits count the time they ran (0.7 s a cycle), so
# one of them must report rank 1 within a few cycles; a clock that restarted after each delay of
# its own thread (over 1.1 s here) would never reach the timeout. RUNS runs (default 20), each
# under a 60 s guard; prints one line a run, then the count reported in time (20 s) and the
# processes left behind.
# usage: watchdog_flicker.sh <mpiexec> <watchdog_stop_main> [RUNS]
mpiexec=$1
program=$2
runs=${3:-20}
in_time=0
left=""
i=0
while [ "$i" -lt "$runs" ]; do
  i=$((i + 1))
  pids=$(mktemp -d /tmp/ddgnn_watchdog_XXXXXX)
  start=$(date +%s%N)
  timeout 60 "$mpiexec" -n 3 --oversubscribe "$program" flicker "$pids" > "$pids/out" 2>&1 &
  job=$!
  # Ranks 0 and 2 once they have written their pid files (after MPI_Init).
  n=0
  while { [ ! -s "$pids/rank0.pid" ] || [ ! -s "$pids/rank2.pid" ]; } && [ "$n" -lt 600 ]; do
    sleep 0.05
    n=$((n + 1))
  done
  p0=$(cat "$pids/rank0.pid" 2>/dev/null)
  p2=$(cat "$pids/rank2.pid" 2>/dev/null)
  while kill -0 "$job" 2>/dev/null; do
    kill -STOP "$p0" "$p2" 2>/dev/null
    sleep 1.3
    kill -CONT "$p0" "$p2" 2>/dev/null
    sleep 0.7
  done
  wait "$job"
  status=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  if [ "$status" -ne 0 ] && [ "$status" -ne 124 ] && [ "$ms" -lt 20000 ] &&
    grep -q "waits in test all-reduce" "$pids/out" &&
    grep -q "did not answer: ranks\{0,1\} [0-9, -]*1" "$pids/out"; then
    in_time=$((in_time + 1))
    echo "run $i: reported in $ms ms"
  else
    echo "run $i: not reported in time (exit code $status after $ms ms):"
    cat "$pids/out"
  fi
  sleep 0.5  # processes that mpiexec killed may take a moment to be reaped
  for f in "$pids"/rank*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if grep -q '^[0-9]* (watchdog_stop_m) [^Z]' "/proc/$pid/stat" 2>/dev/null; then
      left="$left run$i/$(basename "$f" .pid):$pid"
      kill -CONT "$pid" 2>/dev/null
      kill -KILL "$pid" 2>/dev/null
    fi
  done
  rm -rf "$pids"
done
echo "reported in time: $in_time of $runs"
echo "left behind:${left:- none}"
