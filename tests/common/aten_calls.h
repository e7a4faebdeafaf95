// The ATen operations a piece of code calls, recorded by a thread-local RecordFunction callback:
// tests that a fused path makes no (or batched) ATen calls where the plain path makes many.
#pragma once

#include <ATen/record_function.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ddgnn::testing {

// The names ("aten::add_", ...) of the ATen operations that fn calls, in order: on this thread
// and on the autograd engine's device threads working for it (a CUDA backward runs there; they
// inherit the callback with the graph task's thread-local state). Named launches of ddgnn's own
// kernels (RECORD_FUNCTION, e.g. "ddgnn::cuda::segment_sum") are listed too.
inline std::vector<std::string> aten_calls(const std::function<void()>& fn) {
  static std::mutex mutex;
  static std::vector<std::string> names;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    names.clear();
  }
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction& f) -> std::unique_ptr<at::ObserverContext> {
            const std::lock_guard<std::mutex> lock(mutex);
            names.emplace_back(f.name());
            return nullptr;
          },
          [](const at::RecordFunction&, at::ObserverContext*) {})
          .scopes({at::RecordScope::FUNCTION}));
  fn();
  at::removeCallback(handle);
  const std::lock_guard<std::mutex> lock(mutex);
  return names;
}

inline bool called(const std::vector<std::string>& names, const std::string& op) {
  return std::find(names.begin(), names.end(), op) != names.end();
}

}  // namespace ddgnn::testing
