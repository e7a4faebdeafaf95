#!/bin/bash
# Any machine scheduled by Flux (e.g. LLNL's El Capitan class, or Flux under Slurm): one rank per
# GPU, 4 per node. Written by `jobs/campaign.py submit --launcher flux --machine flux` and
# submitted with `flux batch -N NODES`; the node count is read from the Flux instance.
#FLUX: --job-name=@JOB_NAME@
#FLUX: --time-limit=@TIME_HHMM@h
#FLUX: --output=@LOG@
@SCHEDULER_EXTRA@
set -uo pipefail
cd @WORKDIR@ || exit 1
@ARGS_BLOCK@
nodes=$(flux getattr size) || { echo "not inside a Flux instance" >&2; exit 1; }
per_node=@RANKS_PER_NODE@
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=8 OPENBLAS_NUM_THREADS=1
flux run --nodes="$nodes" --ntasks="$((nodes * per_node))" --gpus-per-task=1 --cores-per-task=8 \
  @DDGNN@ train --set Runtime.intra_op_threads=8 "${args[@]}"
status=$?
echo "$status" > "$base.exit"
exit "$status"
