// MPI environment, error reporting with file:line, and the job-wide abort.
#include "comm/mpi.h"

#include <chrono>
#include <cstdio>
#include <thread>

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

namespace {

// How long a rank whose error another rank reports waits for that rank to stop the job before it
// reports the error itself (the reporting rank may be stuck): long enough for a rank to unwind.
constexpr double kReporterWaitS = 30.0;

// Waits up to `seconds` in a barrier that rank `reporter` never joins: MPI_Abort from that rank
// ends this process in it. Returns when the wait runs out.
void wait_for_reporter(double seconds) {
  MPI_Request request;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &request) != MPI_SUCCESS) return;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int done = 0;
  while (!done && std::chrono::steady_clock::now() < end) {
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

void report_and_stop_job(const std::exception& e) {
  const int rank = world_rank_or_none(), size = world_size_or_one();
  // An error that another rank reports is printed once, by that rank, for the whole job (and
  // without a rank when it is every rank's); this rank prints it only if that rank never stops
  // the job.
  const auto* err = dynamic_cast<const Error*>(&e);
  const int reporter = err ? err->reported_by() : -1;
  const bool delegated = size > 1 && reporter >= 0 && reporter < size;
  if (delegated && reporter != rank) wait_for_reporter(kReporterWaitS);
  const bool whole_job = delegated && reporter == rank;
  std::fprintf(stderr, "%s\n", error_line(e, size > 1 && !whole_job ? rank : -1).c_str());
  std::fflush(stderr);
  abort_job(1);
}

int run_under_mpi(const std::function<void(const MpiEnvironment&)>& body) {
  int argc = 0;
  char** argv = nullptr;
  MpiEnvironment env(&argc, &argv);
  try {
    set_log_rank(env.rank());
    body(env);
  } catch (const std::exception& e) {
    report_and_stop_job(e);
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

namespace {

// The rank in MPI_COMM_WORLD of `rank` of `comm` (-1 if MPI cannot say).
int world_rank_of(MPI_Comm comm, int rank) {
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  int out = -1;
  if (MPI_Comm_group(comm, &group) == MPI_SUCCESS &&
      MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS &&
      MPI_Group_translate_ranks(group, 1, &rank, world, &out) != MPI_SUCCESS)
    out = -1;
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
  return out == MPI_UNDEFINED ? -1 : out;
}

}  // namespace

void throw_if_any_failed(MPI_Comm comm, const std::exception_ptr& local) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  int first = local ? rank : size;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) return;
  // This rank's own message (when it failed); the first failed rank's is sent to all.
  std::string own;
  if (local) try {
      std::rethrow_exception(local);
    } catch (const std::exception& e) {
      own = e.what();
    } catch (...) {
      own = "unknown exception";
    }
  std::string message = rank == first ? own : std::string();
  int len = int(message.size());
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, first, comm));
  message.resize(static_cast<size_t>(len));
  MPI_CHECK(MPI_Bcast(message.data(), len, MPI_CHAR, first, comm));
  // A failed rank whose error reads as the first's leaves the report to that rank; when every
  // rank of the job failed so, the first reports it for the whole job (without a rank).
  const bool same = local && own == message;
  int all_same = same ? 1 : 0;
  const int first_world = world_rank_of(comm, first);
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all_same, 1, MPI_INT, MPI_LAND, comm));
  if (local) try {
      std::rethrow_exception(local);
    } catch (Error& e) {
      if (same && (rank != first || (all_same && size == world_size_or_one())))
        e.set_reported_by(first_world);
      throw;
    }
  CommError echo(
      "rank " + std::to_string(first_world >= 0 ? first_world : first) + " failed: " + message,
      "see that rank's error; this rank stopped with it");
  // That rank prints its own error; this one only if it never stops the job.
  echo.set_reported_by(first_world);
  throw echo;
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
