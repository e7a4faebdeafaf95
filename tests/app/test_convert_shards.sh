#!/usr/bin/env bash
# jobs/convert_shards.sh end to end: three shards of other systems (a Cu cell, water, H2)
# converted side by side into one folder, the list printed and written for Dataset.path; a shard
# that is not extxyz fails the script, named, and leaves no dataset file.
#   tests/app/test_convert_shards.sh DDGNN WORKDIR
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$1"
work="$2"
rm -rf "$work"
mkdir -p "$work/in"
for k in 0 1 2 3 4 5; do
  printf '2\nLattice="3.6 0 0 0 3.6 0 0 0 3.6" Properties=species:S:1:pos:R:3:forces:R:3 energy=-%d.5 pbc="T T T"\nCu 0 0 0 0.01 0 0\nCu 1.8 1.8 0.%d -0.01 0 0\n' "$((7 + k))" "$k"
done > "$work/in/cu.extxyz"
for k in 0 1 2 3 4 5; do
  printf '3\nProperties=species:S:1:pos:R:3:forces:R:3 energy=-14.%d\nO 0 0 0 0.1 0 0\nH 0.96 0 0.0%d -0.05 0 0\nH -0.24 0.93 0 -0.05 0 0\n' "$k" "$k"
done > "$work/in/water.extxyz"
for k in 0 1 2 3 4 5; do
  printf '2\nProperties=species:S:1:pos:R:3:forces:R:3 energy=-3.%d\nH 0 0 0 0.2 0 0\nH 0.7%d 0 0 -0.2 0 0\n' "$k" "$k"
done > "$work/in/h2.extxyz"
list=$(bash jobs/convert_shards.sh --jobs 3 --bin "$bin" "$work/out" "$work"/in/*.extxyz)
echo "$list"
for s in cu water h2; do
  [ -f "$work/out/$s.h5" ] || { echo "FAIL: no $s.h5"; exit 1; }
  grep -q "\"$work/out/$s.h5\"" "$work/out/files.json" || { echo "FAIL: $s.h5 not listed"; exit 1; }
done
"$bin" info "$work/out/water.h5" | grep -q "graphs *6" || { echo "FAIL: water.h5 lacks its 6 graphs"; exit 1; }
echo "not a frame" > "$work/in/bad.extxyz"
if bash jobs/convert_shards.sh --bin "$bin" "$work/out2" "$work/in/h2.extxyz" "$work/in/bad.extxyz" 2> "$work/err"; then
  echo "FAIL: a bad shard was accepted"; exit 1
fi
cat "$work/err"
grep -q "convert_shards: $work/in/bad.extxyz failed" "$work/err" || { echo "FAIL: the bad shard is not named"; exit 1; }
[ ! -e "$work/out2/bad.h5" ] || { echo "FAIL: the bad shard left a file"; exit 1; }
echo "convert_shards: OK"
