// comm/: the MPI environment comes up as a singleton, and a failing MPI call becomes a CommError
// that names the call, file:line and MPI's own message.
#include <gtest/gtest.h>

#include "comm/mpi.h"
#include "core/error.h"

namespace ddgnn {

TEST(Mpi, EnvironmentAndCheckedCalls) {
  int argc = 0;
  char** argv = nullptr;
  {
    MpiEnvironment env(&argc, &argv);
    EXPECT_TRUE(mpi_active());
    EXPECT_EQ(env.rank(), world_rank_or_none());
    EXPECT_EQ(env.size(), world_size_or_one());
    EXPECT_EQ(env.thread_level(), MPI_THREAD_MULTIPLE) << "the prefetch thread needs it";
    int bad_count = 0;
    try {
      // A negative count is an argument error; MPI_ERRORS_RETURN makes it a return code.
      MPI_CHECK(MPI_Bcast(&bad_count, -1, MPI_INT, 0, MPI_COMM_WORLD));
      FAIL() << "no error";
    } catch (const CommError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("MPI_Bcast"), std::string::npos) << what;
      EXPECT_NE(what.find("test_mpi.cpp:"), std::string::npos) << what;
    }
  }
  EXPECT_FALSE(mpi_active());
  EXPECT_EQ(world_rank_or_none(), -1);
}

}  // namespace ddgnn
