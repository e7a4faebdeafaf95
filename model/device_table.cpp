// Constant tables kept on each device (model/device_table.h).
#include "model/device_table.h"

#include <ATen/ATen.h>

namespace ddgnn {

const at::Tensor& DeviceTables::get(int slot, c10::Device device, c10::ScalarType dtype,
                                    const std::function<at::Tensor()>& make) const {
  std::lock_guard<std::mutex> lock(m_mutex);
  for (const auto& c : m_copies)
    if (c->slot == slot && c->device == device && c->dtype == dtype) return c->tensor;
  at::Tensor t = make().to(device, dtype).contiguous();
  m_copies.push_back(std::make_unique<Copy>(Copy{slot, device, dtype, std::move(t)}));
  return m_copies.back()->tensor;
}

}  // namespace ddgnn
