// The ATen operations a piece of code calls, recorded by a thread-local RecordFunction callback:
// tests that a fused path makes no (or batched) ATen calls where the plain path makes many.
#pragma once

#include <ATen/record_function.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ddgnn::testing {

// The names ("aten::add_", ...) of the ATen operations that fn calls on this thread, in order.
inline std::vector<std::string> aten_calls(const std::function<void()>& fn) {
  static thread_local std::vector<std::string> names;
  names.clear();
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction& f) -> std::unique_ptr<at::ObserverContext> {
            names.emplace_back(f.name());
            return nullptr;
          },
          [](const at::RecordFunction&, at::ObserverContext*) {})
          .scopes({at::RecordScope::FUNCTION}));
  fn();
  at::removeCallback(handle);
  return names;
}

inline bool called(const std::vector<std::string>& names, const std::string& op) {
  return std::find(names.begin(), names.end(), op) != names.end();
}

}  // namespace ddgnn::testing
