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

// One recorded call: the op's name and what its arguments say about where its data goes.
struct AtenCall {
  std::string name;
  bool has_device = false;  // a Device among the arguments (to, _to_copy: a move between devices)
  bool has_size = false;    // repeat_interleave: its output size given (or a repeat count)
  std::string shapes;       // the sizes of its tensor arguments, "[3, 4] [] -"
};

// The ATen operations that fn calls on this thread (nested ones included), in order, with their
// arguments read as AtenCall says.
inline std::vector<AtenCall> aten_calls_with_arguments(const std::function<void()>& fn) {
  static std::mutex mutex;  // the autograd engine's device threads record too (as aten_calls)
  static std::vector<AtenCall> calls;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    calls.clear();
  }
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction& f) -> std::unique_ptr<at::ObserverContext> {
            AtenCall c;
            c.name = f.name();
            const auto inputs = f.inputs();
            for (const auto& v : inputs) {
              c.has_device = c.has_device || v.isDevice();
              if (!v.isTensor()) continue;
              const at::Tensor& t = v.toTensor();
              if (!t.defined()) {
                c.shapes += "- ";
                continue;
              }
              c.shapes += "[";
              for (int64_t d = 0; d < t.dim(); ++d)
                c.shapes += (d ? ", " : "") + std::to_string(t.size(d));
              c.shapes += "] ";
            }
            c.has_size = !inputs.empty() &&
                         (inputs.back().isInt() || (inputs.size() >= 2 && inputs[1].isInt()));
            const std::lock_guard<std::mutex> lock(mutex);
            calls.push_back(std::move(c));
            return nullptr;
          },
          [](const at::RecordFunction&, at::ObserverContext*) {})
          .needsInputs(true)
          .scopes({at::RecordScope::FUNCTION}));
  fn();
  at::removeCallback(handle);
  const std::lock_guard<std::mutex> lock(mutex);
  return calls;
}

inline bool called(const std::vector<std::string>& names, const std::string& op) {
  return std::find(names.begin(), names.end(), op) != names.end();
}

}  // namespace ddgnn::testing
