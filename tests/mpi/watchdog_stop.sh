#!/bin/sh
# The watchdog's abort end to end (tests/CMakeLists.txt: mpi.watchdog_stop, mpi.watchdog_busy):
# runs tests/mpi/watchdog_stop_main.cpp on 3 ranks under a 60 s guard, then prints what ctest's
# regular expressions check: the job's output, whether its status was non-zero, whether it ended
# well before the guard, and whether any of its processes (pid files written by the ranks) is
# left behind.
# usage: watchdog_stop.sh <mpiexec> <watchdog_stop_main> stop|busy
mpiexec=$1
program=$2
mode=$3
pids=$(mktemp -d /tmp/ddgnn_watchdog_XXXXXX)
start=$(date +%s)
timeout 60 "$mpiexec" -n 3 --oversubscribe "$program" "$mode" "$pids" 2>&1
status=$?
seconds=$(($(date +%s) - start))
echo "exit code $status after $seconds s; pid files: $(ls "$pids" | tr '\n' ' ')"
if [ "$status" -ne 0 ]; then echo "status: non-zero"; else echo "status: zero"; fi
# Timeout 2 s, a poll, a grace of 1 s, the abort: well under 30 s (124: the guard fired).
if [ "$status" -ne 124 ] && [ "$seconds" -lt 30 ]; then echo "ended: in time"; else echo "ended: too late"; fi
sleep 1  # processes that mpiexec killed may take a moment to be reaped
left=""
for f in "$pids"/rank*.pid; do
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  # A live process of the job: still this program (the pid not reused), not a zombie that its
  # parent has yet to reap.
  if grep -q '^[0-9]* (watchdog_stop_m) [^Z]' "/proc/$pid/stat" 2>/dev/null; then
    left="$left $(basename "$f" .pid):$pid($(cut -d' ' -f3 "/proc/$pid/stat"))"
  fi
done
echo "left behind:${left:- none}"
rm -rf "$pids"
