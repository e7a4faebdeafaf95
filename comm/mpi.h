// MPI as RAII: the process environment (init with MPI_THREAD_MULTIPLE, finalize), MPI_CHECK with
// file:line, and the abort path that stops every rank when one fails (so no job hangs).
#pragma once

#include <mpi.h>

#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace ddgnn {

// Throws CommError "MPI call `<expr>` failed at file:line: <MPI error string>".
[[noreturn]] void mpi_fail(const char* expr, const char* file, int line, int code);

#define MPI_CHECK(expr)                                                                            \
  do {                                                                                             \
    int mpi_check_rc_ = (expr);                                                                    \
    if (mpi_check_rc_ != MPI_SUCCESS) ::ddgnn::mpi_fail(#expr, __FILE__, __LINE__, mpi_check_rc_); \
  } while (0)

// Initialises MPI (thread level MULTIPLE: the prefetch thread talks MPI) and finalises it.
// Errors on MPI_COMM_WORLD return codes instead of aborting, so MPI_CHECK can report them.
class MpiEnvironment {
 public:
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment();
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;
  int rank() const { return m_rank; }
  int size() const { return m_size; }
  int thread_level() const { return m_thread_level; }

 private:
  int m_rank = 0, m_size = 1, m_thread_level = 0;
};

// Prints the one line of `e` on stderr (core/error.h; with this rank when more than one runs),
// then MPI_Abort stops every rank that would otherwise wait for this one (nothing to stop for a
// world of one). An error that names another rank as its reporter (Error::reported_by) is left
// to that rank, this one waiting up to 30 s for the abort before it reports the error itself, so
// that a job's error reads once, not once a rank; the reporting rank leaves its rank out of the
// line when the error is every rank's.
void report_and_stop_job(const std::exception& e);

// Runs `body` with MPI initialised and the log told this process's rank. An error is reported
// while MPI is still up, by report_and_stop_job. Returns the exit code (0, or 1 after an error).
int run_under_mpi(const std::function<void(const MpiEnvironment&)>& body);

// Rank and size in a communicator (MPI_CHECKed).
int comm_rank(MPI_Comm comm);
int comm_size(MPI_Comm comm);
// Ranks of `comm` that share this rank's node (MPI_COMM_TYPE_SHARED). Collective.
int ranks_on_node(MPI_Comm comm);

// True between MPI_Init and MPI_Finalize.
bool mpi_active();
// Rank in MPI_COMM_WORLD, or -1 when MPI is not active.
int world_rank_or_none();
// World size, or 1 when MPI is not active.
int world_size_or_one();
// Stops every rank of the job (MPI_Abort) when MPI is active with more than one rank.
void abort_job(int code);

// Collective over `comm`: when any rank's `local` holds an exception, every rank throws — the
// failing ranks their own, the others a CommError quoting the lowest failing rank's message and
// naming that rank as its reporter — so that no rank goes on into a collective that a failed
// rank will never join. A failed rank whose message is the lowest's names that rank too, and
// when every rank of MPI_COMM_WORLD failed with the one message, the lowest names itself (one
// line for the job: a config error that every rank meets, say).
void throw_if_any_failed(MPI_Comm comm, const std::exception_ptr& local);

// Collective: compares every rank's `text` with rank 0's (CRC-32 and length; when any differs,
// rank 0's text and the first differing rank's are sent to all, so that every rank can say the
// same thing). `differing` lists the ranks whose text is not rank 0's.
struct TextAgreement {
  std::vector<int> differing;
  std::string root_text, first_text;  // rank 0's and differing[0]'s, when any differs
};
TextAgreement compare_with_root(MPI_Comm comm, const std::string& text);

}  // namespace ddgnn
