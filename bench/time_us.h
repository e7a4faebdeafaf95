// The mean wall time of f in microseconds over `repeats` calls, after one warm-up call.
#pragma once

#include <chrono>
#include <functional>

namespace ddgnn::bench {

inline double time_us(int repeats, const std::function<void()>& f) {
  f();  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; ++r) f();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
         repeats;
}

}  // namespace ddgnn::bench
