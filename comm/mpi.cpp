// MPI environment, error reporting with file:line, and the job-wide abort.
#include "comm/mpi.h"

#include <cstdio>

#include "comm/communicator.h"
#include "core/checksum.h"
#include "core/error.h"
#include "core/log.h"

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

int run_under_mpi(const std::function<void(const MpiEnvironment&)>& body) {
  int argc = 0;
  char** argv = nullptr;
  MpiEnvironment env(&argc, &argv);
  try {
    set_log_rank(env.rank());
    body(env);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", error_line(e, env.size() > 1 ? env.rank() : -1).c_str());
    std::fflush(stderr);
    abort_job(1);
    return 1;
  }
  return 0;
}

int comm_rank(MPI_Comm comm) {
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &r));
  return r;
}

int comm_size(MPI_Comm comm) {
  int n = 1;
  MPI_CHECK(MPI_Comm_size(comm, &n));
  return n;
}

int ranks_on_node(MPI_Comm comm) {
  return Communicator::split_node(comm, 0).size();
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

void throw_if_any_failed(MPI_Comm comm, const std::exception_ptr& local) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  int first = local ? rank : size;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) return;
  std::string message;
  if (rank == first) try {
      std::rethrow_exception(local);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
      message = "unknown exception";
    }
  int len = int(message.size());
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, first, comm));
  message.resize(static_cast<size_t>(len));
  MPI_CHECK(MPI_Bcast(message.data(), len, MPI_CHAR, first, comm));
  if (local) std::rethrow_exception(local);
  throw CommError("rank " + std::to_string(first) + " failed: " + message,
                  "see that rank's error; this rank stopped with it");
}

TextAgreement compare_with_root(MPI_Comm comm, const std::string& text) {
  const int size = comm_size(comm);
  const uint64_t mine[2] = {crc32(text.data(), text.size()), uint64_t(text.size())};
  std::vector<uint64_t> all(2 * size_t(size));
  MPI_CHECK(MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, comm));
  TextAgreement out;
  for (int r = 1; r < size; ++r)
    if (all[2 * size_t(r)] != all[0] || all[2 * size_t(r) + 1] != all[1])
      out.differing.push_back(r);
  if (out.differing.empty()) return out;
  const int rank = comm_rank(comm), first = out.differing[0];
  out.root_text = rank == 0 ? text : std::string(size_t(all[1]), '\0');
  MPI_CHECK(MPI_Bcast(out.root_text.data(), int(all[1]), MPI_CHAR, 0, comm));
  out.first_text = rank == first ? text : std::string(size_t(all[2 * size_t(first) + 1]), '\0');
  MPI_CHECK(MPI_Bcast(out.first_text.data(), int(out.first_text.size()), MPI_CHAR, first, comm));
  return out;
}

}  // namespace ddgnn
