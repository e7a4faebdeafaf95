// Parameters and gradients as views into flat buffers (model/flat_params.h).
#include "model/flat_params.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <unordered_set>
#include <utility>

namespace ddgnn {

namespace {

// Where t's data starts, in bytes.
const char* start_of(const at::Tensor& t) {
  return static_cast<const char*>(t.data_ptr());
}

}  // namespace

namespace {

// Whether `tensors` cover one range of one storage exactly (as covered_range), and which:
// [begin, begin + total) in elements of `first`'s storage. Host work only.
bool covers(const std::vector<at::Tensor>& tensors, const at::Tensor*& first, int64_t& begin,
            int64_t& total) {
  first = nullptr;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // (storage offset, numel)
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || t.layout() != c10::kStrided || !t.has_storage()) return false;
    if (t.numel() == 0) continue;  // covers nothing, wherever it points
    if (!first) first = &t;
    if (!t.is_contiguous() || t.scalar_type() != first->scalar_type() ||
        t.device() != first->device() ||
        t.storage().unsafeGetStorageImpl() != first->storage().unsafeGetStorageImpl())
      return false;
    ranges.emplace_back(t.storage_offset(), t.numel());
  }
  if (!first) return false;
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first != ranges[i - 1].first + ranges[i - 1].second) return false;
  begin = ranges.front().first;
  total = ranges.back().first + ranges.back().second - begin;
  return true;
}

at::Tensor range_of(const at::Tensor& first, int64_t begin, int64_t total) {
  return at::empty({0}, first.options()).set_(first.storage(), begin, {total}, {1});
}

}  // namespace

at::Tensor covered_range(const std::vector<at::Tensor>& tensors) {
  const at::Tensor* first = nullptr;
  int64_t begin = 0, total = 0;
  if (!covers(tensors, first, begin, total)) return {};
  return range_of(*first, begin, total);
}

at::Tensor alias_of(const at::Tensor& flat, int64_t offset, at::IntArrayRef sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  return at::empty({0}, flat.options())
      .set_(flat.storage(), flat.storage_offset() + offset, sizes, strides);
}

FlatParameters find_flat(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> values, grads;
  for (const at::Tensor& p : params) {
    if (!p.defined() || !p.grad().defined() || p.numel() == 0) return {};
    values.push_back(p);
    grads.push_back(p.grad());
  }
  const at::Tensor *first_value = nullptr, *first_grad = nullptr;
  int64_t value_begin = 0, value_total = 0, grad_begin = 0, grad_total = 0;
  if (!covers(values, first_value, value_begin, value_total) ||
      !covers(grads, first_grad, grad_begin, grad_total) || value_total != grad_total)
    return {};
  std::vector<std::pair<int64_t, size_t>> order;  // (offset in the buffers, index)
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t offset = params[i].storage_offset() - value_begin;
    if (params[i].grad().storage_offset() - grad_begin != offset) return {};
    order.emplace_back(offset, i);
  }
  std::sort(order.begin(), order.end());
  FlatParameters f;
  f.values = range_of(*first_value, value_begin, value_total);
  f.grads = range_of(*first_grad, grad_begin, grad_total);
  for (const auto& [offset, i] : order) {
    f.params.push_back(i);
    f.offsets.push_back(offset);
  }
  return f;
}

bool still_flat(const FlatParameters& flat, const std::vector<at::Tensor>& params) {
  if (!flat.values.defined()) return false;
  const char* values = start_of(flat.values);
  const char* grads = start_of(flat.grads);
  const int64_t size = int64_t(flat.values.element_size());
  for (size_t i = 0; i < flat.params.size(); ++i) {
    const at::Tensor& p = params[flat.params[i]];
    const at::Tensor& g = p.grad();
    const int64_t at = flat.offsets[i] * size;
    if (!g.defined() || start_of(p) != values + at || start_of(g) != grads + at ||
        !p.is_contiguous() || !g.is_contiguous() || g.sizes() != p.sizes())
      return false;
  }
  return true;
}

std::vector<FlatParameters> flatten_parameters(const std::vector<at::Tensor>& params) {
  c10::NoGradGuard no_grad;
  // The parameters to lay out, by device and dtype in order of first appearance.
  struct Group {
    c10::Device device;
    c10::ScalarType dtype;
    std::vector<size_t> members;  // indices into params
  };
  std::vector<Group> groups;
  std::unordered_set<const c10::TensorImpl*> seen;
  for (size_t k = 0; k < params.size(); ++k) {
    const at::Tensor& p = params[k];
    if (!p.defined() || !p.requires_grad() || p.layout() != c10::kStrided ||
        !p.is_floating_point() || p.numel() == 0 || !seen.insert(p.unsafeGetTensorImpl()).second)
      continue;
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.device == p.device() && g.dtype == p.scalar_type();
    });
    if (g == groups.end()) g = groups.insert(groups.end(), {p.device(), p.scalar_type(), {}});
    g->members.push_back(k);
  }
  std::vector<FlatParameters> out;
  for (const Group& group : groups) {
    std::vector<at::Tensor> members;
    for (size_t k : group.members) members.push_back(params[k]);
    FlatParameters f = find_flat(members);
    if (!f.values.defined()) {
      // Reverse order, sizes that keep the next start on a 64-byte boundary first.
      std::vector<size_t> order(members.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = order.size() - 1 - i;
      const int64_t size = int64_t(c10::elementSize(group.dtype));
      std::stable_partition(order.begin(), order.end(),
                            [&](size_t i) { return members[i].numel() * size % 64 == 0; });
      int64_t total = 0;
      for (size_t i : order) total += members[i].numel();
      const auto options = at::TensorOptions().dtype(group.dtype).device(group.device);
      f.values = at::empty({total}, options);
      f.grads = at::zeros({total}, options);
      int64_t offset = 0;
      for (size_t i : order) {
        const at::Tensor& p = members[i];
        at::Tensor value = alias_of(f.values, offset, p.sizes());
        at::Tensor grad = alias_of(f.grads, offset, p.sizes());
        value.copy_(p.detach());
        if (p.grad().defined()) grad.copy_(p.grad());
        p.set_data(value);
        p.mutable_grad() = grad;
        f.params.push_back(i);
        f.offsets.push_back(offset);
        offset += p.numel();
      }
    }
    for (size_t& i : f.params) i = group.members[i];  // indices into `params`
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<std::vector<size_t>> by_device_and_dtype(const std::vector<at::Tensor>& params) {
  std::vector<std::vector<size_t>> sets;
  for (size_t k = 0; k < params.size(); ++k) {
    const auto& p = params[k];
    auto set = std::find_if(sets.begin(), sets.end(), [&](const std::vector<size_t>& s) {
      return params[s[0]].device() == p.device() && params[s[0]].scalar_type() == p.scalar_type();
    });
    if (set == sets.end())
      sets.push_back({k});
    else
      set->push_back(k);
  }
  return sets;
}

}  // namespace ddgnn
