// The hang watchdog: per-thread Waiting records (a label and the time of the last progress,
// atomics written only by their thread), the poll loop that finds a stuck thread and answers
// other ranks' queries, and the report that names the silent ranks before MPI_Abort.
#include "comm/watchdog.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <utility>

#include "comm/mpi.h"
#include "core/error.h"

namespace ddgnn {

namespace {

constexpr int kQueryTag = 1;   // "what are you doing?" (one int, ignored)
constexpr int kAnswerTag = 2;  // a Watchdog::Answer, as bytes
constexpr const char* kHint =
    "a rank that stops answering blocks every collective: check the node of each rank that did "
    "not answer or is busy outside communication; raise Comm.timeout_s if an operation "
    "legitimately takes longer";

// The clock of the waits: a few ns where Linux has a coarse monotonic clock (ticks of 1-10 ms,
// nothing next to timeouts of seconds), against ~30 ns for steady_clock on a VM's kvm-clock.
long long now_ns() {
#ifdef CLOCK_MONOTONIC_COARSE
  timespec t;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return (long long)t.tv_sec * 1'000'000'000LL + t.tv_nsec;
#else
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
#endif
}

// CPU time of the whole process (every thread), ns.
long long process_cpu_ns() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (long long)t.tv_sec * 1'000'000'000LL + t.tv_nsec;
}

// Stop spans kept (a wait ends or is reported long before this many stops of a second or more).
constexpr size_t kStops = 256;

// The enabled Watchdog of this process, or null: what Waiting looks at first.
std::atomic<Watchdog*> g_active{nullptr};

}  // namespace

// Where one thread waits. Written only by its thread (Waiting), read by the watchdog thread:
// `since_ns` is stored before `label` (release), so a reader that sees a label (acquire) sees a
// time at least as new as that scope's entry.
struct WaitingSlot {
  std::atomic<const char*> label{nullptr};  // innermost scope, null outside every scope
  std::atomic<long long> since_ns{0};       // last scope entered or left on this thread
  WaitingSlot();
  ~WaitingSlot();
};

namespace {

// Every thread's slot (registered on its first scope under an active watchdog, removed when
// the thread ends). Never destroyed: threads may end after static destruction began.
struct Registry {
  std::mutex mutex;
  std::vector<WaitingSlot*> slots;
};
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

WaitingSlot& this_thread_slot() {
  static thread_local WaitingSlot slot;
  return slot;
}

struct ThreadWait {
  const char* label;
  double waited_s;
};

// The threads inside a scope, longest wait first; a wait is the time since the thread's last
// progress less the parts of `stops` (spans in which the process was stopped) after it.
std::vector<ThreadWait> threads_waiting(const std::vector<std::pair<long long, long long>>& stops) {
  std::vector<ThreadWait> out;
  const long long now = now_ns();
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (const WaitingSlot* s : r.slots) {
      const char* label = s->label.load(std::memory_order_acquire);
      if (!label) continue;
      const long long since = s->since_ns.load(std::memory_order_relaxed);
      long long waited = now - since;
      for (const auto& [from, to] : stops) waited -= std::max(0LL, to - std::max(from, since));
      out.push_back({label, double(std::max(0LL, waited)) * 1e-9});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const ThreadWait& a, const ThreadWait& b) { return a.waited_s > b.waited_s; });
  return out;
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", s);
  return text;
}

// "rank 3" or "ranks 1, 3-5, 9" of a sorted list.
std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

template <size_t N>
void copy_text(char (&to)[N], const std::string& from) {
  const size_t n = std::min(from.size(), N - 1);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

// MPI calls of the watchdog thread: a failure is reported and stops the job (never a throw
// there: nothing would catch it, and a rank whose watchdog cannot talk cannot be trusted).
void check_or_abort(int rc, const char* expr, int rank) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  std::fprintf(stderr,
               "ddgnn: comm error [rank %d]: watchdog: MPI call `%s` failed: %.*s — hint: the MPI "
               "library or the network failed; stopping every rank\n",
               rank, expr, len, text);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}
#define WATCHDOG_CHECK(expr) check_or_abort((expr), #expr, m_rank)

}  // namespace

WaitingSlot::WaitingSlot() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.slots.push_back(this);
}

WaitingSlot::~WaitingSlot() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.slots.erase(std::remove(r.slots.begin(), r.slots.end(), this), r.slots.end());
}

// What a rank answers to a query: fixed size, sent as bytes (every rank runs the same binary).
struct Watchdog::Answer {
  double waited_s = -1;  // < 0: busy outside communication
  char label[64] = {};
  char context[120] = {};
};

Watchdog::Watchdog(MPI_Comm world, double timeout_s) : m_timeout_s(timeout_s) {
  m_rank = comm_rank(world);
  m_size = comm_size(world);
  if (!(timeout_s > 0) || m_size == 1) return;
  int level = 0;
  MPI_CHECK(MPI_Query_thread(&level));
  if (level < MPI_THREAD_MULTIPLE) {
    if (m_rank == 0)
      spdlog::warn(
          "Comm.timeout_s: the hang watchdog is off: MPI gives thread level {}, not "
          "MPI_THREAD_MULTIPLE (use an MPI library built with thread support)",
          level);
    return;
  }
  Watchdog* none = nullptr;
  if (!g_active.compare_exchange_strong(none, this))
    throw CommError("a second Watchdog while one is active in this process",
                    "make one Watchdog per process, around the whole training run");
  try {
    MPI_CHECK(MPI_Comm_dup(world, &m_comm));
    MPI_CHECK(
        MPI_Irecv(&m_query_in, 1, MPI_INT, MPI_ANY_SOURCE, kQueryTag, m_comm, &m_query_request));
    m_thread = std::thread(&Watchdog::run, this);
  } catch (...) {
    if (m_query_request != MPI_REQUEST_NULL) {
      MPI_Cancel(&m_query_request);
      MPI_Wait(&m_query_request, MPI_STATUS_IGNORE);
    }
    if (m_comm != MPI_COMM_NULL) MPI_Comm_free(&m_comm);
    g_active = nullptr;
    throw;
  }
}

Watchdog::~Watchdog() {
  if (!m_thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(m_stop_mutex);
    m_stop = true;
  }
  m_stop_cv.notify_all();
  m_thread.join();
  g_active = nullptr;
  if (!mpi_active()) return;  // finalized under us: nothing left to free
  // Destructors never throw: return codes are ignored from here on.
  MPI_Cancel(&m_query_request);
  MPI_Wait(&m_query_request, MPI_STATUS_IGNORE);
  // Answers still on their way go to a rank that is about to stop the job; give them a moment,
  // then let MPI finish them on its own (the few bytes of their buffers are left to it).
  const long long deadline = now_ns() + 1'000'000'000LL;
  for (auto& [request, answer] : m_answer_sends) {
    int done = 0;
    while (!done && now_ns() < deadline) {
      if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!done) {
      MPI_Request_free(&request);
      answer.release();  // MPI may still read it
    }
  }
  MPI_Comm_free(&m_comm);
}

void Watchdog::set_context(const std::string& where) {
  std::lock_guard<std::mutex> lock(m_context_mutex);
  m_context = where;
}

std::string Watchdog::context() const {
  std::lock_guard<std::mutex> lock(m_context_mutex);
  return m_context;
}

std::string Watchdog::state() const {
  if (!enabled()) return "watchdog off";
  const std::vector<ThreadWait> waits = threads_waiting(stops());
  if (waits.empty()) return "busy outside communication";
  std::string out;
  for (const ThreadWait& w : waits) {
    if (!out.empty()) out += "; ";
    out += std::string("waiting in ") + w.label + " for " + seconds_text(w.waited_s);
  }
  return out;
}

Watchdog::Answer Watchdog::answer() const {
  Answer a;
  const std::vector<ThreadWait> waits = threads_waiting(stops());
  if (!waits.empty()) {
    a.waited_s = waits.front().waited_s;
    copy_text(a.label, waits.front().label);
  }
  copy_text(a.context, context());
  return a;
}

std::vector<std::pair<long long, long long>> Watchdog::stops() const {
  std::lock_guard<std::mutex> lock(m_stops_mutex);
  return m_stops;
}

void Watchdog::run() noexcept {
  const auto poll = std::chrono::duration<double>(std::min(0.2, m_timeout_s / 10));
  const long long poll_ns = (long long)(poll.count() * 1e9);
  const long long stall_ns = poll_ns + 1'000'000'000LL;
  long long last_poll = now_ns(), last_cpu = process_cpu_ns();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(m_stop_mutex);
      if (m_stop_cv.wait_for(lock, poll, [this] { return m_stop; })) return;
    }
    const long long now = now_ns(), cpu = process_cpu_ns();
    // Held up past its poll by more than a second while the process used under a tenth of that
    // time in CPU: the process was stopped (SIGSTOP, a suspended job), and no wait counts that
    // span. A process that ran meanwhile (starved, or stopped for part of it) counts it all: a
    // clock that restarted after every delay would never report a rank stopped now and then.
    if (now - last_poll > stall_ns && (cpu - last_cpu) * 10 < now - last_poll) {
      std::lock_guard<std::mutex> lock(m_stops_mutex);
      if (m_stops.size() == kStops) m_stops.erase(m_stops.begin());
      m_stops.emplace_back(last_poll + poll_ns, now);
    }
    last_poll = now;
    last_cpu = cpu;
    serve_queries();
    const std::vector<ThreadWait> waits = threads_waiting(stops());
    if (!waits.empty() && waits.front().waited_s >= m_timeout_s)
      report_and_abort(waits.front().label, waits.front().waited_s);
  }
}

// Answers every query that has arrived, then forgets the answers that have left.
void Watchdog::serve_queries() noexcept {
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    WATCHDOG_CHECK(MPI_Test(&m_query_request, &arrived, &status));
    if (!arrived) break;
    auto a = std::make_unique<Answer>(answer());
    MPI_Request send = MPI_REQUEST_NULL;
    WATCHDOG_CHECK(MPI_Isend(a.get(), int(sizeof(Answer)), MPI_BYTE, status.MPI_SOURCE, kAnswerTag,
                             m_comm, &send));
    m_answer_sends.emplace_back(send, std::move(a));
    WATCHDOG_CHECK(
        MPI_Irecv(&m_query_in, 1, MPI_INT, MPI_ANY_SOURCE, kQueryTag, m_comm, &m_query_request));
  }
  for (size_t i = 0; i < m_answer_sends.size();) {
    int done = 0;
    WATCHDOG_CHECK(MPI_Test(&m_answer_sends[i].first, &done, MPI_STATUS_IGNORE));
    if (done) {
      m_answer_sends[i] = std::move(m_answer_sends.back());
      m_answer_sends.pop_back();
    } else {
      ++i;
    }
  }
}

void Watchdog::report_and_abort(const std::string& label, double waited_s) noexcept {
  // Ask every other rank, then collect answers for the grace period (answering theirs too:
  // ranks stuck in the same collective ask at about the same moment).
  const int query = 0;
  std::vector<Answer> answers(static_cast<size_t>(m_size));
  std::vector<MPI_Request> receives(size_t(m_size), MPI_REQUEST_NULL);
  std::vector<MPI_Request> queries(size_t(m_size), MPI_REQUEST_NULL);
  for (int r = 0; r < m_size; ++r) {
    if (r == m_rank) continue;
    WATCHDOG_CHECK(MPI_Irecv(&answers[size_t(r)], int(sizeof(Answer)), MPI_BYTE, r, kAnswerTag,
                             m_comm, &receives[size_t(r)]));
    WATCHDOG_CHECK(MPI_Isend(&query, 1, MPI_INT, r, kQueryTag, m_comm, &queries[size_t(r)]));
  }
  const double grace_s = std::min(5.0, std::max(1.0, m_timeout_s / 2));
  const long long deadline = now_ns() + (long long)(grace_s * 1e9);
  std::vector<bool> answered(size_t(m_size), false);
  int n_missing = m_size - 1;
  while (n_missing > 0 && now_ns() < deadline) {
    for (int r = 0; r < m_size; ++r) {
      if (r == m_rank || answered[size_t(r)]) continue;
      int done = 0;
      WATCHDOG_CHECK(MPI_Test(&receives[size_t(r)], &done, MPI_STATUS_IGNORE));
      if (done) answered[size_t(r)] = true, --n_missing;
    }
    serve_queries();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  const std::string where = context();
  std::string text = "ddgnn: comm error [rank " + std::to_string(m_rank) + "]: rank " +
                     std::to_string(m_rank) + " waits in " + label + " for " +
                     seconds_text(waited_s) +
                     " with no progress (Comm.timeout_s = " + seconds_text(m_timeout_s) + ")";
  if (!where.empty()) text += " at " + where;
  text += "\n";
  const std::vector<ThreadWait> mine = threads_waiting(stops());
  if (mine.size() > 1) text += "  this rank's threads: " + state() + "\n";
  // Ranks with the same answer (label and context) on one line, in order of their first rank.
  struct Group {
    std::vector<int> ranks;
    double min_s = 1e300, max_s = -1;
  };
  std::map<std::pair<std::string, std::string>, Group> groups;
  std::vector<int> silent;
  for (int r = 0; r < m_size; ++r) {
    if (r == m_rank) continue;
    if (!answered[size_t(r)]) {
      silent.push_back(r);
      continue;
    }
    const Answer& a = answers[size_t(r)];
    Group& g = groups[{a.waited_s < 0 ? "" : a.label, a.context}];
    g.ranks.push_back(r);
    g.min_s = std::min(g.min_s, a.waited_s);
    g.max_s = std::max(g.max_s, a.waited_s);
  }
  std::vector<std::pair<std::pair<std::string, std::string>, Group>> ordered(groups.begin(),
                                                                             groups.end());
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.second.ranks[0] < b.second.ranks[0]; });
  for (const auto& [key, g] : ordered) {
    const auto& [group_label, group_context] = key;
    text += "  " + ranks_text(g.ranks) + ": ";
    if (g.max_s < 0) {
      text += "busy outside communication";
    } else {
      text += "waiting in " + group_label + " for ";
      text += g.min_s + 0.05 < g.max_s ? seconds_text(g.min_s) + " to " + seconds_text(g.max_s)
                                       : seconds_text(g.max_s);
    }
    if (!group_context.empty()) text += " (at " + group_context + ")";
    text += "\n";
  }
  if (silent.empty())
    text += "  every other rank answered\n";
  else
    text += "  did not answer: " + ranks_text(silent) + " (stopped, hung or dead)\n";
  text += std::string("  — hint: ") + kHint + "\n";
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; should it, this rank must not go on
}

Waiting::Waiting(const char* what) {
  if (!g_active.load(std::memory_order_relaxed)) return;
  WaitingSlot& s = this_thread_slot();
  m_slot = &s;
  m_outer = s.label.load(std::memory_order_relaxed);
  s.since_ns.store(now_ns(), std::memory_order_relaxed);
  s.label.store(what ? what : "an unnamed operation", std::memory_order_release);
}

Waiting::~Waiting() {
  if (!m_slot) return;
  m_slot->since_ns.store(now_ns(), std::memory_order_relaxed);
  m_slot->label.store(m_outer, std::memory_order_release);
}

}  // namespace ddgnn
