// Stop requests by signal: SIGTERM (a batch system's time limit, `kill`, mpiexec passing on its
// own), SIGINT (Ctrl-C) and SIGUSR1 (Slurm's --signal) ask a run to stop at the next step; a
// second one of them ends the process at once.
#pragma once

namespace ddgnn {

// Installs the handlers (idempotent).
void install_stop_handlers();

// 0, or the first signal that asked this process to stop.
int stop_signal();

// "SIGTERM", "SIGINT", "SIGUSR1", or "signal N".
const char* signal_name(int signal);

}  // namespace ddgnn
