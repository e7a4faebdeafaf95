#!/usr/bin/env bash
# Helpers for the ctest tests of tests/data/tests.cmake: run a command that must fail with a given
# message (and leave no output file behind), check that a label check rejects corrupted forces, and
# regenerate a dataset into a second folder and compare the two files byte for byte.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() {
  cat >&2 <<EOF
usage: test_helpers.sh fail REGEX CMD [ARGS...]        CMD must exit non-zero, print REGEX
       test_helpers.sh fail-leaves-nothing OUT REGEX CMD [ARGS...]
                                                       fail, and neither OUT nor a hidden
                                                       .OUT* temporary exists afterwards
       test_helpers.sh corrupt-forces IN OUT DELTA     OUT = IN with DELTA eV/A added to every fx
       test_helpers.sh fd-rejects IN OUT DELTA REGEX CHECK [ARGS...]
                                                       corrupt-forces, then CHECK (where {} in
                                                       ARGS is OUT) must fail printing REGEX
       test_helpers.sh rerun DIR_A DIR_B NAME [GENERATE.SH ARGS...]
                                                       regenerate NAME into DIR_B, cmp with DIR_A
EOF
  exit 2
}

[[ $# -ge 1 ]] || usage
case "$1" in
  fail)
    [[ $# -ge 3 ]] || usage
    regex="$2"
    shift 2
    rc=0
    out=$("$@" 2>&1) || rc=$?
    printf '%s\n' "$out"
    if [[ $rc -eq 0 ]]; then
      echo "test_helpers.sh: expected a non-zero exit from: $*" >&2
      exit 1
    fi
    if ! grep -qE -- "$regex" <<<"$out"; then
      echo "test_helpers.sh: exit $rc as expected, but no output line matches '$regex'" >&2
      exit 1
    fi
    echo "test_helpers.sh: failed as expected (exit $rc)"
    ;;
  fail-leaves-nothing)
    [[ $# -ge 4 ]] || usage
    out="$2"
    rm -f "$out"
    shift 2
    "$BASH" "$0" fail "$@"
    left=$(find "$(dirname "$out")" -maxdepth 1 \( -name "$(basename "$out")*" -o \
      -name ".$(basename "$out")*" \) -print)
    if [[ -n "$left" ]]; then
      echo "test_helpers.sh: the failed command left behind: $left" >&2
      exit 1
    fi
    echo "test_helpers.sh: no output left behind"
    ;;
  corrupt-forces)
    [[ $# -eq 4 ]] || usage
    [[ -f "$2" ]] || { echo "test_helpers.sh: no file '$2'" >&2; exit 1; }
    awk -v d="$4" 'NF == 7 && $1 ~ /^[A-Z][a-z]?$/ {
      printf "%s %.10f %.10f %.10f %.10f %.10f %.10f\n", $1, $2, $3, $4, $5 + d, $6, $7; next }
      { print }' "$2" >"$3"
    ;;
  fd-rejects)
    [[ $# -ge 6 ]] || usage
    bad="$3"
    regex="$5"
    "$BASH" "$0" corrupt-forces "$2" "$bad" "$4"
    shift 5
    exec "$BASH" "$0" fail "$regex" "${@//\{\}/$bad}"
    ;;
  rerun)
    [[ $# -ge 4 ]] || usage
    a="$2/$4.extxyz"
    b="$3/$4.extxyz"
    name="$4"
    shift 4
    [[ -f "$a" ]] || { echo "test_helpers.sh: no first run '$a'" >&2; exit 1; }
    rm -f "$b"
    "$BASH" "$here/generate.sh" --out "$(dirname "$b")" --only "$name" "$@"
    sha256sum "$a" "$b"
    if ! cmp "$a" "$b"; then
      echo "test_helpers.sh: the rerun of $name is not byte-identical to the first run" >&2
      exit 1
    fi
    echo "test_helpers.sh: $name rerun is byte-identical"
    ;;
  *) usage ;;
esac
