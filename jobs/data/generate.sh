#!/usr/bin/env bash
# Generates the reference datasets of jobs/data/datasets.py as extended XYZ files: LAMMPS MD for
# cu_eam, cuni_eam, si_sw and the strained cu_eam_strain, si_sw_strain (gen_lammps.py) and
# GFN2-xTB MD for ethanol, aspirin (ddgnn-xtb-md).
# Fixed seeds and one thread per job: reruns give byte-identical files. See jobs/data/README.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

die() {
  echo "generate.sh: error: $*" >&2
  exit 1
}

read -r default_frames large_frames all_names < <(python3 -c "import sys
sys.path.insert(0, '$here')
import datasets as d
print(d.DEFAULT_FRAMES, d.LARGE_FRAMES, ','.join(d.NAMES))") ||
  die "cannot read $here/datasets.py with python3"

usage() {
  cat <<EOF
usage: generate.sh [--out DIR] [--frames N] [--only NAME[,NAME...]] [--large]
                   [--xtb-md PATH] [--lmp PATH] [--jobs J]
  --out DIR      output folder, one NAME.extxyz per dataset (default: data, relative to the
                 current folder)
  --frames N     frames per dataset (default $default_frames)
  --large        $large_frames frames per dataset, each set (README lists the times)
  --only LIST    comma-separated subset of: $all_names
  --xtb-md PATH  ddgnn-xtb-md binary (default: \$DDGNN_XTB_MD, else
                 $repo/build/jobs/data/ddgnn-xtb-md)
  --lmp PATH     LAMMPS binary (default: \$LMP, else lmp on PATH)
  --jobs J       datasets generated at the same time, one thread each (default 2)
EOF
}

out=data
frames=""
only=""
large=0
xtb_md="${DDGNN_XTB_MD:-$repo/build/jobs/data/ddgnn-xtb-md}"
lmp="${LMP:-lmp}"
jobs=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h | --help)
      usage
      exit 0
      ;;
    --large)
      large=1
      shift
      ;;
    --out | --frames | --only | --xtb-md | --lmp | --jobs)
      [[ $# -ge 2 ]] || die "option $1 needs a value (see --help)"
      case "$1" in
        --out) out="$2" ;;
        --frames) frames="$2" ;;
        --only) only="$2" ;;
        --xtb-md) xtb_md="$2" ;;
        --lmp) lmp="$2" ;;
        --jobs) jobs="$2" ;;
      esac
      shift 2
      ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

if [[ -z "$frames" ]]; then
  if [[ $large == 1 ]]; then frames=$large_frames; else frames=$default_frames; fi
fi
[[ "$frames" =~ ^[0-9]+$ && "$frames" -ge 1 ]] ||
  die "--frames expects a positive integer, got '$frames'"
[[ "$jobs" =~ ^[0-9]+$ && "$jobs" -ge 1 ]] || die "--jobs expects a positive integer, got '$jobs'"

IFS=',' read -r -a names <<<"${only:-$all_names}"
[[ ${#names[@]} -gt 0 ]] || die "--only got an empty list; known datasets: $all_names"
xtb_names=()
lmp_names=()
for n in "${names[@]}"; do
  kind=$(python3 "$here/datasets.py" kind "$n" 2>&1) || die "${kind#datasets.py: error: }"
  if [[ "$kind" == xtb ]]; then xtb_names+=("$n"); else lmp_names+=("$n"); fi
done

# One thread everywhere: bit-identical reruns (OpenMP / BLAS reductions change with threads).
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
export OMP_STACKSIZE="${OMP_STACKSIZE:-64M}"

if [[ ${#xtb_names[@]} -gt 0 ]]; then
  [[ -x "$xtb_md" && ! -d "$xtb_md" ]] ||
    die "xtb driver '$xtb_md' not found or not executable; build it with" \
      "\`cmake --build build --target ddgnn-xtb-md\` (needs libxtb-dev), then pass" \
      "--xtb-md PATH or set DDGNN_XTB_MD"
  xtb_md="$(cd "$(dirname "$xtb_md")" && pwd)/$(basename "$xtb_md")"
fi
if [[ ${#lmp_names[@]} -gt 0 ]]; then
  command -v "$lmp" >/dev/null 2>&1 ||
    die "LAMMPS binary '$lmp' not found; install the Debian package \`lammps\` or pass --lmp PATH"
fi

mkdir -p "$out" || die "cannot create the output folder '$out'"
out="$(cd "$out" && pwd)"

tmp_tag="tmp.$$"
cleanup() { rm -f "$out"/.*."$tmp_tag" "$out"/.*."$tmp_tag".tmp; }
trap cleanup EXIT
trap 'kill $(jobs -p) 2>/dev/null; exit 130' INT TERM

now_us() { echo "${EPOCHREALTIME/./}"; }
seconds_since() { # microsecond stamp -> "12.3"
  local us=$(($(now_us) - $1))
  printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000))
}

# Generates one dataset into $out/NAME.extxyz via a temporary name; prints one summary line.
gen_one() {
  local name="$1" kind="$2"
  local final="$out/$name.extxyz"
  local tmp="$out/.$name.extxyz.$tmp_tag"
  local log="$out/.$name.log.$tmp_tag"
  local t0 rc=0
  t0=$(now_us)
  if [[ "$kind" == xtb ]]; then
    local args
    mapfile -t args < <(python3 "$here/datasets.py" xtb-args "$name")
    "$xtb_md" "${args[@]}" --frames "$frames" --out "$tmp" >"$log" 2>&1 || rc=$?
  else
    python3 "$here/gen_lammps.py" "$name" --frames "$frames" --out "$tmp" --lmp "$lmp" \
      >"$log" 2>&1 || rc=$?
  fi
  if [[ $rc -ne 0 ]]; then
    {
      echo "generate.sh: error: dataset $name failed (exit $rc); its output:"
      sed 's/^/  | /' "$log"
    } >&2
    rm -f "$tmp" "$log"
    return 1
  fi
  local got atoms
  got=$(grep -c 'Properties=' "$tmp" || true)
  atoms=$(head -n 1 "$tmp")
  if [[ "$got" != "$frames" ]]; then
    echo "generate.sh: error: dataset $name: $tmp has $got frames, expected $frames" >&2
    rm -f "$tmp" "$log"
    return 1
  fi
  mv -f "$tmp" "$final"
  rm -f "$log"
  printf '%-9s %7d frames %4d atoms %7s s  %s\n' "$name" "$got" "$atoms" \
    "$(seconds_since "$t0")" "$final"
}

# The xtb sets (the longest) first; at most $jobs datasets at a time.
echo "generate.sh: ${#names[@]} dataset(s), $frames frames each, $jobs at a time -> $out"
start=$(now_us)
failed=0
running=0
for job in "${xtb_names[@]/%/:xtb}" "${lmp_names[@]/%/:lammps}"; do
  if [[ $running -ge $jobs ]]; then
    wait -n || failed=$((failed + 1))
    running=$((running - 1))
  fi
  gen_one "${job%:*}" "${job#*:}" &
  running=$((running + 1))
done
while [[ $running -gt 0 ]]; do
  wait -n || failed=$((failed + 1))
  running=$((running - 1))
done
if [[ $failed -gt 0 ]]; then
  die "$failed of ${#names[@]} dataset(s) failed (see above); any others are in $out"
fi
echo "generate.sh: ${#names[@]} dataset(s) done in $(seconds_since "$start") s"
