#!/usr/bin/env bash
# Runs `ddgnn train` on P ranks with the thread hygiene that several ranks per node need:
# sleeping OpenMP waits, OpenBLAS and OpenMP threads set explicitly, Open MPI allowed as root
# (containers). Inside a Slurm allocation it launches with srun, else with mpiexec (stop that
# with kill -USR1 PID: mpiexec passes SIGUSR1 on, while after a SIGTERM it kills the ranks 1 s later).
#   jobs/train.sh -n 4 --config configs/cu_eam_schnet.json [more ddgnn train arguments]
#   THREADS=2 jobs/train.sh -n 2 --config c.json      # intra-op threads per rank (default: auto)
set -euo pipefail
cd "$(dirname "$0")/.."
np=1
if [ "${1:-}" = "-n" ]; then np=$2; shift 2; fi
[ "$np" -ge 1 ] 2>/dev/null || { echo "jobs/train.sh: -n needs a positive rank count" >&2; exit 2; }
bin=${DDGNN:-./build/app/ddgnn}
[ -x "$bin" ] || { echo "jobs/train.sh: $bin not built: run bash jobs/build.sh ddgnn" >&2; exit 1; }
threads=${THREADS:-0}
export OMP_WAIT_POLICY=PASSIVE
export OMP_NUM_THREADS=${threads/#0/1} OPENBLAS_NUM_THREADS=1
set_threads=()
[ "$threads" != 0 ] && set_threads=(--set "Runtime.intra_op_threads=$threads")
if [ -n "${SLURM_JOB_ID:-}" ]; then
  exec srun --ntasks="$np" --cpu-bind=cores "$bin" train "$@" "${set_threads[@]}"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One node: windows in shared memory through osc/sm (Open MPI 4.1 prefers osc/rdma, whose large
# gets reach 60% of memcpy here against 96-126% for sm: results/loader_backends.md).
export OMPI_MCA_osc=${OMPI_MCA_osc:-^rdma}
# Unbound: each rank's prefetch thread may use a core its compute thread leaves idle; more ranks
# than cores need --oversubscribe (Open MPI then yields when idle instead of spinning).
exec mpiexec -n "$np" --oversubscribe --bind-to none "$bin" train "$@" "${set_threads[@]}"
