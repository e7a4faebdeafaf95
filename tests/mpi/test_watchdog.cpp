// The hang watchdog on real MPI ranks (ctest runs this under mpiexec -n 1, 2 and 4): when it is
// off, what this rank's state says in nested scopes and on two threads, and the runs it must
// not stop (any abort fails the whole test). The abort itself: tests/mpi/watchdog_stop.sh.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "../common/mpi_test.h"
#include "comm/mpi.h"
#include "comm/watchdog.h"
#include "core/error.h"

namespace ddgnn {
namespace {

using testing::world_rank;
using testing::world_size;

constexpr double kTimeout = 2.0;  // s; every wait in these tests is far shorter

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The seconds that `state` gives for `label` ("waiting in <label> for X s"), or -1.
double waited_s(const std::string& state, const std::string& label) {
  const std::string key = "waiting in " + label + " for ";
  const size_t at = state.find(key);
  return at == std::string::npos ? -1 : std::stod(state.substr(at + key.size()));
}

void sleep_s(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

// Collectives inside Waiting scopes for `seconds` (the same count on every rank).
void allreduce_for(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (int go = 1; go;) {
    Waiting w("test all-reduce");
    go = std::chrono::steady_clock::now() < end ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &go, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  }
}

TEST(Watchdog, OffWithoutTimeoutOrPeers) {
  for (double timeout : {0.0, -1.0, std::nan("")}) {
    Watchdog w(MPI_COMM_WORLD, timeout);
    EXPECT_FALSE(w.enabled()) << timeout;
    EXPECT_EQ(w.state(), "watchdog off");
    Waiting waiting("test barrier");  // a no-op
    EXPECT_EQ(w.state(), "watchdog off");
  }
  // A lone rank never waits for a peer.
  Watchdog alone(MPI_COMM_SELF, kTimeout);
  EXPECT_FALSE(alone.enabled());
  Watchdog world(MPI_COMM_WORLD, kTimeout);
  EXPECT_EQ(world.enabled(), world_size() > 1);
}

TEST(Watchdog, StateNamesTheInnermostScope) {
  Watchdog w(MPI_COMM_WORLD, kTimeout);
  if (!w.enabled()) GTEST_SKIP() << "one rank: the watchdog is off";
  EXPECT_EQ(w.state(), "busy outside communication");
  {
    Waiting outer("test epoch");
    EXPECT_TRUE(starts_with(w.state(), "waiting in test epoch for 0.")) << w.state();
    {
      Waiting inner("test barrier");
      EXPECT_TRUE(starts_with(w.state(), "waiting in test barrier for 0.")) << w.state();
      EXPECT_EQ(w.state().find("test epoch"), std::string::npos) << w.state();
      MPI_Barrier(MPI_COMM_WORLD);
    }
    EXPECT_TRUE(starts_with(w.state(), "waiting in test epoch for 0.")) << w.state();
  }
  EXPECT_EQ(w.state(), "busy outside communication");
  // The wait counts from the last progress: 0.3 s in one scope (less a tick of the coarse clock
  // and the rounding to 0.1 s; more on a busy machine).
  {
    Waiting waiting("test sleep");
    sleep_s(0.3);
    EXPECT_GE(waited_s(w.state(), "test sleep"), 0.25) << w.state();
    EXPECT_LT(waited_s(w.state(), "test sleep"), kTimeout) << w.state();
  }
}

TEST(Watchdog, StateListsEveryWaitingThread) {
  Watchdog w(MPI_COMM_WORLD, kTimeout);
  if (!w.enabled()) GTEST_SKIP() << "one rank: the watchdog is off";
  std::mutex mutex;
  std::condition_variable cv;
  bool entered = false, release = false;
  std::thread prefetch([&] {
    Waiting waiting("test fetch");
    std::unique_lock<std::mutex> lock(mutex);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return entered; });
  }
  sleep_s(0.2);  // the fetch waits longer than the all-reduce below: it comes first
  {
    Waiting waiting("test all-reduce");
    const std::string state = w.state();
    EXPECT_TRUE(starts_with(state, "waiting in test fetch for ")) << state;
    EXPECT_NE(state.find("; waiting in test all-reduce for "), std::string::npos) << state;
    EXPECT_GE(waited_s(state, "test fetch"), 0.15) << state;
  }
  EXPECT_TRUE(starts_with(w.state(), "waiting in test fetch for ")) << w.state();
  {
    std::lock_guard<std::mutex> lock(mutex);
    release = true;
  }
  cv.notify_all();
  prefetch.join();
  EXPECT_EQ(w.state(), "busy outside communication");
}

TEST(Watchdog, OnePerProcess) {
  Watchdog w(MPI_COMM_WORLD, kTimeout);
  if (!w.enabled()) GTEST_SKIP() << "one rank: the watchdog is off";
  EXPECT_THROW(Watchdog(MPI_COMM_WORLD, kTimeout), CommError);
  // A disabled one does not count.
  Watchdog off(MPI_COMM_WORLD, 0);
  EXPECT_FALSE(off.enabled());
}

// Collectives that finish quickly, for longer than the timeout in all: no abort.
TEST(Watchdog, QuickCollectivesForLongerThanTheTimeout) {
  Watchdog w(MPI_COMM_WORLD, kTimeout);
  w.set_context("test quick collectives");
  allreduce_for(1.5 * kTimeout);
}

// An outer scope held for longer than the timeout while inner scopes come and go: each entry
// and exit is progress.
TEST(Watchdog, ProgressInsideALongScope) {
  Watchdog w(MPI_COMM_WORLD, kTimeout);
  Waiting epoch("test epoch");
  allreduce_for(1.5 * kTimeout);
}

// Every rank computes outside any scope for longer than the timeout, then meets in a barrier:
// not a hang.
TEST(Watchdog, LongComputeOutsideScopes) {
  Watchdog w(MPI_COMM_WORLD, kTimeout);
  sleep_s(kTimeout + 0.5);
  Waiting waiting("test barrier");
  MPI_Barrier(MPI_COMM_WORLD);
}

// The last rank computes for half the timeout while the others already wait in a barrier:
// they wait less than the timeout.
TEST(Watchdog, SlowRankWithinTheTimeout) {
  Watchdog w(MPI_COMM_WORLD, kTimeout);
  if (world_rank() == world_size() - 1) sleep_s(kTimeout / 2);
  Waiting waiting("test barrier");
  MPI_Barrier(MPI_COMM_WORLD);
}

// The cost of one Waiting scope (entered and left), with and without an active watchdog:
// printed, not asserted.
TEST(Watchdog, CostOfAScope) {
  constexpr int kScopes = 2'000'000;
  auto ns_per_scope = [] {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kScopes; ++i) Waiting waiting("test scope");
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
               .count() /
           kScopes;
  };
  const double off = ns_per_scope();
  Watchdog w(MPI_COMM_WORLD, kTimeout);
  const double on = ns_per_scope();
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0)
    std::printf("one Waiting scope: %.1f ns with the watchdog %s, %.1f ns with none\n", on,
                w.enabled() ? "on" : "off (one rank)", off);
}

}  // namespace
}  // namespace ddgnn

int main(int argc, char** argv) {
  return ddgnn::testing::run_mpi_tests(argc, argv);
}
