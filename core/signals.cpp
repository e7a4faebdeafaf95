// The stop-request flag and its async-signal-safe handler (core/signals.h).
#include "core/signals.h"

#include <signal.h>
#include <atomic>

#include <csignal>
#include <cstdio>
#include <initializer_list>

namespace ddgnn {

namespace {

std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");

extern "C" void on_stop_signal(int signal) {
  int none = 0;
  if (!g_stop.compare_exchange_strong(none, signal)) {
    std::signal(signal, SIG_DFL);  // asked twice: stop now
    std::raise(signal);
  }
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int s : {SIGTERM, SIGINT, SIGUSR1}) sigaction(s, &action, nullptr);
}

int stop_signal() {
  return g_stop.load();
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    default: {
      static thread_local char buf[24];
      std::snprintf(buf, sizeof buf, "signal %d", signal);
      return buf;
    }
  }
}

}  // namespace ddgnn
