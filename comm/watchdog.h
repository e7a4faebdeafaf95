// The hang watchdog behind Comm.timeout_s: threads mark where they wait for other ranks
// (`Waiting` scopes); a thread stuck in one for timeout_s makes this rank ask every other rank
// what it is doing, print one report naming the silent ranks, and stop the job (MPI_Abort).
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ddgnn {

struct WaitingSlot;  // one per thread that entered a scope (comm/watchdog.cpp)

// One per process, while training runs. Collective over `world` at construction (it dups the
// communicator, whose point-to-point messages carry the watchdog's queries and answers).
// Disabled (no thread, no communicator, every Waiting a no-op) when timeout_s <= 0, when
// `world` has one rank (a lone rank never waits for a peer: its collectives complete locally),
// or when MPI gives less than MPI_THREAD_MULTIPLE (a warning says so). Destroy it before
// MPI_Finalize. Throws CommError when another enabled Watchdog is alive in this process.
//
// A thread is stuck when it has been inside a Waiting scope with no progress (no scope entered
// or left on that thread) for timeout_s, on the monotonic clock from its last progress, less the
// time this process was stopped: a poll held up by more than a second while the process used
// under a tenth of that time in CPU (SIGSTOP, a suspended job) does not count; a process that
// ran, however slowly (a starved machine, a process stopped now and then between runs), counts
// in full. The watchdog thread polls every min(0.2 s, timeout/10);
// on a stuck thread it sends a query to every other rank, whose watchdog threads answer from
// their poll loops ("waiting in <label> for X s" or "busy outside communication"), waits up to
// min(5, max(1, timeout/2)) s for the answers, prints one report to stderr
//   ddgnn: comm error [rank 0]: rank 0 waits in <label> for 2.1 s with no progress
//          (Comm.timeout_s = 2.0 s) at <context>                       [one line]
//     ranks 2-5: waiting in <label> for 2.0 s to 2.2 s (at <context>)
//     rank 6: busy outside communication (at <context>)
//     did not answer: rank 1 (stopped, hung or dead)
//     — hint: ...
// and calls MPI_Abort(MPI_COMM_WORLD, 1). Several ranks that time out together each print
// their own report; the first abort ends the job.
class Watchdog {
 public:
  Watchdog(MPI_Comm world, double timeout_s);
  ~Watchdog();  // stops and joins the thread, frees the communicator; never throws
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  bool enabled() const { return m_thread.joinable(); }
  // Where the run is, for the reports, e.g. "epoch 3, step 120" (thread-safe).
  void set_context(const std::string& where);
  // This rank's threads as the answers describe them: "waiting in <label> for X s" per thread
  // inside a scope (longest first, "; " between), "busy outside communication" when none is,
  // "watchdog off" when disabled (thread-safe).
  std::string state() const;

 private:
  struct Answer;
  void run() noexcept;
  void serve_queries() noexcept;
  [[noreturn]] void report_and_abort(const std::string& label, double waited_s) noexcept;
  Answer answer() const;
  std::string context() const;

  MPI_Comm m_comm = MPI_COMM_NULL;
  int m_rank = 0, m_size = 1;
  double m_timeout_s = 0;
  // The spans [from, to] (ns, the waits' clock) in which this process was stopped, the latest
  // kStops at most; waits do not count them.
  std::vector<std::pair<long long, long long>> stops() const;
  mutable std::mutex m_stops_mutex;
  std::vector<std::pair<long long, long long>> m_stops;
  int m_query_in = 0;  // buffer of the posted query receive
  MPI_Request m_query_request = MPI_REQUEST_NULL;
  std::vector<std::pair<MPI_Request, std::unique_ptr<Answer>>> m_answer_sends;  // on their way
  mutable std::mutex m_context_mutex;
  std::string m_context;
  std::mutex m_stop_mutex;
  std::condition_variable m_stop_cv;
  bool m_stop = false;
  std::thread m_thread;
};

// RAII: this thread waits in `what` (a string literal, e.g. "gradient all-reduce": only the
// pointer is kept) until the object dies. Uses the process's active Watchdog (none: a no-op,
// one relaxed atomic load). Nestable: the innermost label is reported; entering or leaving any
// scope counts as progress for the thread.
class Waiting {
 public:
  explicit Waiting(const char* what);
  ~Waiting();
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;

 private:
  WaitingSlot* m_slot = nullptr;  // this thread's record, or null when no watchdog was active
  const char* m_outer = nullptr;  // the label to restore on leaving
};

}  // namespace ddgnn
