#!/usr/bin/env bash
# Generates the reference datasets of jobs/data/datasets.py as extended XYZ files: LAMMPS MD for
# cu_eam, cuni_eam, si_sw and the strained cu_eam_strain, si_sw_strain (gen_lammps.py) and
# GFN2-xTB MD for ethanol, aspirin (ddgnn-xtb-md); on request (--only molecules) short GFN2-xTB MD
# runs of a few hundred small molecules from SMILES (gen_molecules.py, RDKit).
# Fixed seeds and one thread per job: reruns give byte-identical files. See jobs/data/README.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

die() {
  echo "generate.sh: error: $*" >&2
  exit 1
}

read -r default_frames large_frames default_names all_names per_molecule < <(python3 -c "import sys
sys.path.insert(0, '$here')
import datasets as d
print(d.DEFAULT_FRAMES, d.LARGE_FRAMES, ','.join(d.NAMES), ','.join(d.ALL_NAMES),
      d.MOLECULES['molecules']['per_molecule'])") ||
  die "cannot read $here/datasets.py with python3"

usage() {
  cat <<EOF
usage: generate.sh [--out DIR] [--frames N] [--only NAME[,NAME...]] [--large]
                   [--xtb-md PATH] [--lmp PATH] [--jobs J] [--molecules M] [--per-molecule K]
  --out DIR      output folder, one NAME.extxyz per dataset (default: data, relative to the
                 current folder)
  --frames N     frames per trajectory dataset (default $default_frames; not the molecules set)
  --large        $large_frames frames per trajectory dataset (README lists the times)
  --only LIST    comma-separated subset of: $all_names
                 (default: $default_names)
  --molecules M  molecules set: only the first M molecules of jobs/data/molecules.smi
                 (default all)
  --per-molecule K  molecules set: frames per molecule (default $per_molecule); it has M x K
                 frames, whatever --frames says
  --xtb-md PATH  ddgnn-xtb-md binary (default: \$DDGNN_XTB_MD, else
                 $repo/build/jobs/data/ddgnn-xtb-md)
  --lmp PATH     LAMMPS binary (default: \$LMP, else lmp on PATH)
  --jobs J       datasets generated at the same time, one thread each (default 2); the
                 molecules set also runs J molecules at a time
EOF
}

out=data
frames=""
only=""
molecules=""
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
    --out | --frames | --only | --xtb-md | --lmp | --jobs | --molecules | --per-molecule)
      [[ $# -ge 2 ]] || die "option $1 needs a value (see --help)"
      case "$1" in
        --out) out="$2" ;;
        --frames) frames="$2" ;;
        --only) only="$2" ;;
        --xtb-md) xtb_md="$2" ;;
        --lmp) lmp="$2" ;;
        --jobs) jobs="$2" ;;
        --molecules) molecules="$2" ;;
        --per-molecule) per_molecule="$2" ;;
      esac
      shift 2
      ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

frames_given=0
[[ -z "$frames" && $large == 0 ]] || frames_given=1
if [[ -z "$frames" ]]; then
  if [[ $large == 1 ]]; then frames=$large_frames; else frames=$default_frames; fi
fi
[[ "$frames" =~ ^[0-9]+$ && "$frames" -ge 1 ]] ||
  die "--frames expects a positive integer, got '$frames'"
[[ "$jobs" =~ ^[0-9]+$ && "$jobs" -ge 1 ]] || die "--jobs expects a positive integer, got '$jobs'"
[[ -z "$molecules" || ("$molecules" =~ ^[0-9]+$ && "$molecules" -ge 1) ]] ||
  die "--molecules expects a positive integer, got '$molecules'"
[[ "$per_molecule" =~ ^[0-9]+$ && "$per_molecule" -ge 1 ]] ||
  die "--per-molecule expects a positive integer, got '$per_molecule'"

IFS=',' read -r -a names <<<"${only:-$default_names}"
[[ ${#names[@]} -gt 0 ]] || die "--only got an empty list; known datasets: $all_names"
xtb_names=()
lmp_names=()
mol_names=()
for n in "${names[@]}"; do
  kind=$(python3 "$here/datasets.py" kind "$n" 2>&1) || die "${kind#datasets.py: error: }"
  case "$kind" in
    xtb) xtb_names+=("$n") ;;
    xtb-molecules) mol_names+=("$n") ;;
    *) lmp_names+=("$n") ;;
  esac
done

# One thread everywhere: bit-identical reruns (OpenMP / BLAS reductions change with threads).
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
export OMP_STACKSIZE="${OMP_STACKSIZE:-64M}"

if [[ ${#xtb_names[@]} -gt 0 || ${#mol_names[@]} -gt 0 ]]; then
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

# The molecules set: M molecules x K frames. gen_molecules.py needs RDKit (Debian's python3-rdkit;
# it re-runs itself with /usr/bin/python3) and checks the SMILES file before anything runs.
mol_args=(--per-molecule "$per_molecule")
[[ -z "$molecules" ]] || mol_args+=(--molecules "$molecules")
mol_frames=0
if [[ ${#mol_names[@]} -gt 0 ]]; then
  mol_count=$(python3 "$here/gen_molecules.py" --count "${mol_args[@]}" 2>&1) ||
    die "${mol_count#gen_molecules.py: error: }"
  mol_frames=$((mol_count * per_molecule))
  if [[ $frames_given == 1 ]]; then
    echo "generate.sh: note: --frames and --large do not apply to the molecules set" \
      "($mol_count molecules x $per_molecule frames; see --molecules, --per-molecule)"
  fi
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
  local t0 rc=0 expected="$frames"
  t0=$(now_us)
  if [[ "$kind" == xtb-molecules ]]; then
    expected=$mol_frames
    python3 "$here/gen_molecules.py" --out "$tmp" --xtb-md "$xtb_md" --jobs "$jobs" \
      "${mol_args[@]}" >"$log" 2>&1 || rc=$?
  elif [[ "$kind" == xtb ]]; then
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
  if [[ "$kind" == xtb-molecules ]]; then # the range of atoms over the molecules
    atoms=$(awk '/Properties=/ { n = prev + 0; lo = (lo == "" || n < lo) ? n : lo
                                 hi = (n > hi) ? n : hi } { prev = $0 }
                 END { print lo "-" hi }' "$tmp")
  else
    atoms=$(head -n 1 "$tmp")
  fi
  if [[ "$got" != "$expected" ]]; then
    echo "generate.sh: error: dataset $name: $tmp has $got frames, expected $expected" >&2
    rm -f "$tmp" "$log"
    return 1
  fi
  mv -f "$tmp" "$final"
  local detail=""
  if [[ "$kind" == xtb-molecules ]]; then # its summary line, less the temporary name
    detail=$(sed -n 's/^gen_molecules.py: \(.*\) -> .*/  \1/p' "$log")
  fi
  rm -f "$log"
  printf '%-9s %7d frames %4s atoms %7s s  %s\n%s' "$name" "$got" "$atoms" \
    "$(seconds_since "$t0")" "$final" "${detail:+$detail$'\n'}"
}

# The molecules and xtb sets (the longest) first; at most $jobs datasets at a time.
if [[ ${#mol_names[@]} -eq ${#names[@]} ]]; then
  echo "generate.sh: molecules, $mol_count molecules x $per_molecule frames, $jobs at a time" \
    "-> $out"
else
  echo "generate.sh: ${#names[@]} dataset(s), $frames frames each, $jobs at a time -> $out"
fi
start=$(now_us)
failed=0
running=0
for job in "${mol_names[@]/%/:xtb-molecules}" "${xtb_names[@]/%/:xtb}" \
  "${lmp_names[@]/%/:lammps}"; do
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
