// A SegmentIndex kept in an autograd context by value (handles to its tensors, no copy of the
// data): a fused function's backward, and the functions that backward builds, never depend on the
// caller keeping its map alive (DimeNet's triplet maps live only as long as one layer's forward).
// For the .cpp files that define autograd functions over segment maps.
#pragma once

#include <torch/csrc/autograd/custom_function.h>

#include <string>

#include "model/segment.h"

namespace ddgnn {

inline void save_index(torch::autograd::AutogradContext* ctx, const std::string& key,
                       const SegmentIndex* s) {
  ctx->saved_data[key + ".index"] = s->index;
  if (s->order.defined()) ctx->saved_data[key + ".order"] = s->order;
  ctx->saved_data[key + ".ptr"] = s->ptr;
  ctx->saved_data[key + ".rows"] = s->n_rows;
}

inline SegmentIndex saved_index(torch::autograd::AutogradContext* ctx, const std::string& key) {
  SegmentIndex s;
  s.index = ctx->saved_data[key + ".index"].toTensor();
  const auto order = ctx->saved_data.find(key + ".order");
  if (order != ctx->saved_data.end()) s.order = order->second.toTensor();
  s.ptr = ctx->saved_data[key + ".ptr"].toTensor();
  s.n_rows = ctx->saved_data[key + ".rows"].toInt();
  return s;
}

}  // namespace ddgnn
