// MPI environment, error reporting with file:line, and the job-wide abort.
#include "comm/mpi.h"

#include "core/error.h"

namespace ddgnn {

void mpi_fail(const char* expr, const char* file, int line, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  throw CommError(std::string("MPI call `") + expr + "` failed at " + file + ":" +
                      std::to_string(line) + ": " + std::string(text, size_t(len)),
                  "check the launcher (mpirun/srun) and that every rank runs the same command");
}

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &m_thread_level));
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &m_rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &m_size));
}

MpiEnvironment::~MpiEnvironment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();  // destructors never throw
}

bool mpi_active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

int world_rank_or_none() {
  if (!mpi_active()) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size_or_one() {
  if (!mpi_active()) return 1;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

void abort_job(int code) {
  if (world_size_or_one() > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

}  // namespace ddgnn
