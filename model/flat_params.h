// Parameters laid out in flat buffers (PyTorch DDP's gradient_as_bucket_view, apex's flat
// weights): each parameter's values and gradient are views into one contiguous buffer per device
// and dtype, so that the optimizer, clipping, the weight average, the zeroing of the gradients
// and their all-reduce each run a few ATen operations over one tensor instead of some per
// parameter. The views are plain tensors sharing the buffer's storage (not autograd views), so
// autograd's AccumulateGrad adds a backward's gradients into the buffer in place.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ddgnn {

// One device and dtype's parameters in their flat buffers.
struct FlatParameters {
  at::Tensor values, grads;      // [n] each, of the parameters' dtype and device
  std::vector<size_t> params;    // indices into the parameter list, in buffer order
  std::vector<int64_t> offsets;  // [params.size()] the first element of each in the buffers
};

// Lays out the parameters that require a gradient (dense, floating point, any shapes) in flat
// buffers, one per device and dtype: their values move into the values buffer (the tensors stay
// the same objects, so modules, optimizers and autograd still hold them) and their gradients
// become views into the gradient buffer (zero where undefined, the values kept where defined).
// Buffer order: the parameters in reverse (the order in which backward finishes them), those whose
// size is a multiple of 64 bytes first, so that these start on 64-byte boundaries. A device and
// dtype whose parameters' values and gradients already lie so (an earlier call: DataParallel's,
// then make_optimizer's) keeps its buffers: the call then changes nothing. Parameters whose
// gradient is undefined after this (another leaf's .grad() reassigned) no longer count as laid
// out; the users below check and take their per-parameter paths for them.
std::vector<FlatParameters> flatten_parameters(const std::vector<at::Tensor>& params);

// The layout of `params` (all of one device and dtype) when their values and gradients tile two
// flat ranges alike (as flatten_parameters leaves them); `values` undefined otherwise. Host work
// only, no ATen call, until the two ranges' tensors are made when found.
FlatParameters find_flat(const std::vector<at::Tensor>& params);

// Whether params[i]'s values and gradient are still at their places in `flat` for every i of
// flat.params (host pointer comparisons, no ATen call).
bool still_flat(const FlatParameters& flat, const std::vector<at::Tensor>& params);

// The 1-d tensor over the storage range that `tensors` (dense, contiguous, of one dtype and
// device, not overlapping) cover exactly, in any order; undefined when they do not (another
// storage, a gap, a strided tensor) or the list is empty.
at::Tensor covered_range(const std::vector<at::Tensor>& tensors);

// The indices of `params` grouped by device and dtype, each group in order, the groups in the
// order of their first member.
std::vector<std::vector<size_t>> by_device_and_dtype(const std::vector<at::Tensor>& params);

// A contiguous tensor of shape `sizes` over flat[offset ...] (flat: 1-d, contiguous), sharing its
// storage without being an autograd view (which in-place detach_, as Optimizer::zero_grad does,
// refuses).
at::Tensor alias_of(const at::Tensor& flat, int64_t offset, at::IntArrayRef sizes);

}  // namespace ddgnn
