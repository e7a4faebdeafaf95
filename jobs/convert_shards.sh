#!/usr/bin/env bash
# Converts many extxyz shards into one dataset file each, one `ddgnn convert` process per shard,
# JOBS at a time, and prints the list of files as Dataset.path takes it (also written to
# OUTDIR/files.json). Each conversion locks only its own output, so they run side by side; a
# failed shard leaves no file and fails the script, naming it.
#   jobs/convert_shards.sh [--jobs J] [--bin ddgnn] OUTDIR SHARD.extxyz... [-- CONVERT OPTIONS]
# e.g. jobs/convert_shards.sh --jobs 8 data/omat omat/*.extxyz -- --energy-key REF_energy
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(bash jobs/cores.sh)
bin=./build/app/ddgnn
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "usage: $0 [--jobs J] [--bin ddgnn] OUTDIR SHARD... [-- CONVERT OPTIONS]" >&2; exit 2; }
out="$1"
shift
shards=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shards+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
options=("$@")
mkdir -p "$out"
# Two shards of one stem would write one file.
dup=$(for s in "${shards[@]}"; do basename "${s%.*}"; done | sort | uniq -d | head -1)
[ -z "$dup" ] || { echo "convert_shards: two shards named $dup" >&2; exit 2; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
status=0
printf '%s\0' "${shards[@]}" |
  xargs -0 -P "$jobs" -I{} sh -c 'in="$1"; shift; b="$1"; shift; o="$1"; shift
    stem=$(basename "${in%.*}")
    if ! "$b" convert "$in" "$o/$stem.h5" "$@" > "$o/$stem.log" 2>&1; then
      echo "convert_shards: $in failed (log: $o/$stem.log):" >&2; tail -3 "$o/$stem.log" >&2; exit 255
    fi' sh {} "$bin" "$out" ${options[@]+"${options[@]}"} || status=1
[ "$status" -eq 0 ] || exit 1
/usr/bin/python3 - "$out" "${shards[@]}" <<'EOF'
import json, os, sys
out = sys.argv[1]
files = [os.path.join(out, os.path.splitext(os.path.basename(s))[0] + ".h5") for s in sys.argv[2:]]
text = json.dumps(files, indent=1)
open(os.path.join(out, "files.json"), "w").write(text + "\n")
print(text)
EOF
