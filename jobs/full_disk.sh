#!/usr/bin/env bash
# A disk that fills under training, for real: the run directory on a small tmpfs. Trains one epoch
# with room to spare, shrinks the tmpfs to what the run uses plus a little, continues the run, and
# checks what must hold: a non-zero exit with a message that names the file and the full disk, no
# temporary left, the last checkpoint written before still loads (`ddgnn evaluate` on it), and
# once space is freed the run resumes and finishes.
# Needs the right to mount (root); not part of jobs/test.sh (the test suite has the same case
# with a file-size limit: Checkpoint.ADiskThatFillsDuringACheckpointStopsTheRunCleanly).
# RANKS=2 runs the second and third runs on that many ranks (mpiexec): every rank must exit.
#   bash jobs/full_disk.sh DATA.h5 [CONFIG=configs/cu_eam_schnet.json]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
data=${1:?usage: jobs/full_disk.sh DATA.h5 [CONFIG]}
config=${2:-configs/cu_eam_schnet.json}
ddgnn=${DDGNN:-./build/app/ddgnn}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 OMPI_MCA_osc=^rdma
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
launch=()
if [ "${RANKS:-1}" -gt 1 ]; then launch=(timeout 300 mpiexec -n "$RANKS" --oversubscribe --bind-to none); fi
mnt=$(mktemp -d -t ddgnn-full-XXXXXX)
out=$(mktemp -d -t ddgnn-full-out-XXXXXX)
mount -t tmpfs -o size=64m tmpfs "$mnt" ||
  { echo "full_disk.sh: cannot mount a tmpfs on $mnt (needs root or CAP_SYS_ADMIN)" >&2; exit 2; }
trap 'umount "$mnt"; rmdir "$mnt"; rm -rf "$out"' EXIT
fail=0
check() {  # check DESCRIPTION COMMAND...
  if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1"; fail=1; fi
}
run=$mnt/run
args=(train -c "$config" --set Dataset.path="$data" --set Output.run_dir="$run"
  --set Training.Scheduler.type=none --set Training.batch_size=4 --set Tuner.enabled=false
  --set Loader.backend=replicated --set Runtime.intra_op_threads=1)
"$ddgnn" "${args[@]}" --set Training.num_epoch=1 > "$out/first.log" 2>&1
check "the first epoch trains with room to spare" grep -q "best epoch 1" "$out/first.log"
used_kib=$(du -sk "$mnt" | cut -f1)
# Room for the trace, the metrics rows and the events (tens of KiB), not for another checkpoint
# (hundreds of KiB): the disk fills while the checkpoint of epoch 2 is written.
size_kib=$((used_kib + 160))
mount -o remount,size=${size_kib}k "$mnt"
echo "tmpfs: ${used_kib} KiB used by one epoch, shrunk to ${size_kib} KiB"
"${launch[@]}" "$ddgnn" "${args[@]}" --set Training.num_epoch=5 --set Training.continue=1 > "$out/second.log" 2>&1
rc=$?
tail -n 3 "$out/second.log"
check "the run that fills the disk exits non-zero, every rank (status $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "its message names the full disk" grep -q "No space left on device" "$out/second.log"
check "no internal error or stack trace" bash -c "! grep -qi 'internal error\|terminate called\|Exception raised from' '$out/second.log'"
tmp=$(find "$run" -name '*.tmp*' | head -3)
check "no temporary left in the run directory${tmp:+ ($tmp)}" test -z "$tmp"
cp -r "$run" "$out/run"
"$ddgnn" evaluate --checkpoint "$out/run/checkpoints/epoch_00001.pt" --out "$out/eval" \
  > "$out/eval.log" 2>&1
check "the checkpoint of epoch 1 loads and evaluates" grep -q "force MAE\|F MAE\|meV" "$out/eval.log"
mount -o remount,size=64m "$mnt"
"${launch[@]}" "$ddgnn" "${args[@]}" --set Training.num_epoch=3 --set Training.continue=1 > "$out/third.log" 2>&1
check "with space freed, the run resumes and finishes" grep -q "best epoch" "$out/third.log"
if [ "$fail" = 0 ]; then
  echo "full_disk.sh: all checks hold"
else
  echo "full_disk.sh: logs in $out kept"
  trap 'umount "$mnt"; rmdir "$mnt"' EXIT
fi
exit "$fail"
