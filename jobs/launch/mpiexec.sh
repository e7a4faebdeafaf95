#!/bin/bash
# One machine without a batch system: the point's ranks through jobs/train.sh (mpiexec, thread
# hygiene of several ranks per node). Written by `jobs/campaign.py submit` for machine mpiexec;
# run it with bash.
# job @JOB_NAME@, log @LOG@
@SCHEDULER_EXTRA@
set -uo pipefail
cd @WORKDIR@ || exit 1
@ARGS_BLOCK@
DDGNN=@DDGNN@ bash jobs/train.sh -n @RANKS@ "${args[@]}" >> "$base.log" 2>&1
status=$?
echo "$status" > "$base.exit"
exit "$status"
