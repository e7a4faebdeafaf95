// Helpers of the tests that run on MPI ranks (tests/mpi/): ranks, a temporary folder that rank 0
// makes and every rank knows, a dataset written once for the job, and the main() that keeps MPI
// up for the whole run and fails every rank when one fails.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <string>

#include "comm/mpi.h"
#include "temp_dir.h"

namespace ddgnn::testing {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

// Rank 0 makes a folder under /tmp and runs `fill` in it (writing a dataset, say); every rank
// gets its path. Collective.
inline std::string shared_temp_dir(const std::function<void(const std::string&)>& fill) {
  std::string dir;
  if (world_rank() == 0) {
    char tmpl[] = "/tmp/ddgnn_mpi_test_XXXXXX";
    dir = mkdtemp(tmpl);
    fill(dir);
  }
  int len = int(dir.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  dir.resize(static_cast<size_t>(len));
  MPI_Bcast(dir.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  return dir;
}

// Collective: waits for every rank, then rank 0 removes the folder.
inline void remove_shared_temp_dir(const std::string& dir) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) remove_tree(dir);
}

// main() of an MPI test: the exit code is non-zero on every rank when a test failed on any.
inline int run_mpi_tests(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  MpiEnvironment env(&argc, &argv);
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return failed;
}

}  // namespace ddgnn::testing
