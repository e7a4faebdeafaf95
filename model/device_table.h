// Constant tables of the layers (index maps and coefficients of the generic kernels, built on the
// host) kept on each device they are used on: made and uploaded by the first step that needs
// them there, read by every later one, so that a step uploads nothing and never waits for a copy.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace ddgnn {

class DeviceTables {
 public:
  // The table made by `make` (a CPU tensor) on `device` in `dtype`: made, converted and uploaded
  // on the first call for that device and dtype, the same tensor afterwards. `slot` numbers the
  // owner's tables (0, 1, ...). Thread-safe.
  const at::Tensor& get(int slot, c10::Device device, c10::ScalarType dtype,
                        const std::function<at::Tensor()>& make) const;

 private:
  struct Copy {
    int slot;
    c10::Device device;
    c10::ScalarType dtype;
    at::Tensor tensor;
  };
  mutable std::mutex m_mutex;
  mutable std::vector<std::unique_ptr<Copy>> m_copies;  // stable addresses for the references
};

// An owner's tables, shared by its copies (a struct copied into autograd nodes keeps one set).
using SharedDeviceTables = std::shared_ptr<DeviceTables>;

}  // namespace ddgnn
