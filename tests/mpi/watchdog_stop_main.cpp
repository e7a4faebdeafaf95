// A job that hangs on purpose, for the end-to-end test of the watchdog (tests/mpi/watchdog_stop.sh,
// run on 3 ranks): rank 1 stops (`stop`: SIGSTOP, it can no longer answer) or computes for a
// minute outside any Waiting scope (`busy`) while ranks 0 and 2 wait in an all-reduce. `flicker`
// is `stop` with a 1 s timeout, for tests/mpi/watchdog_flicker.sh, which stops and continues
// ranks 0 and 2 again and again while they wait.
#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>

#include "comm/mpi.h"
#include "comm/watchdog.h"

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  if (mode != "stop" && mode != "busy" && mode != "flicker") {
    std::fprintf(stderr, "usage: %s stop|busy|flicker <folder for the ranks' pid files>\n",
                 argv[0]);
    return 2;
  }
  const std::string pid_dir = argv[2];
  ddgnn::MpiEnvironment env(&argc, &argv);
  // The test checks afterwards that none of these processes is left.
  std::ofstream(pid_dir + "/rank" + std::to_string(env.rank()) + ".pid") << getpid() << "\n";
  ddgnn::Watchdog watchdog(MPI_COMM_WORLD, /*timeout_s=*/mode == "flicker" ? 1.0 : 2.0);
  watchdog.set_context("test step 7");
  MPI_Barrier(MPI_COMM_WORLD);
  if (env.rank() == 1) {
    if (mode == "stop" || mode == "flicker") {
      std::raise(SIGSTOP);
      // Continued: Open MPI's mpiexec sends SIGCONT before SIGTERM when it kills the job. Stay
      // out of the all-reduce (whose messages from ranks 0 and 2 may already be here) and wait
      // for the kill, so that a kill path without SIGTERM/SIGKILL leaves this process behind.
      std::fprintf(stderr, "rank 1: continued\n");
      for (;;) pause();
    }
    sleep(60);
  }
  int value = 1;
  {
    ddgnn::Waiting waiting("test all-reduce");
    MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  }
  std::printf("rank %d: the all-reduce finished: the watchdog did not stop the job\n", env.rank());
  return 3;
}
