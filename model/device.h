// Which version of the model's kernels runs for a tensor: the fused CPU kernels (raw loops over
// contiguous memory, custom autograd functions with hand-written derivatives) or their
// device-agnostic versions made of ATen ops (index_select, index_add, elementwise ops), which run
// on any device and are differentiable to any order through autograd. Every op with a fused
// kernel asks fused_kernels() of its main operand first.
#pragma once

#include <ATen/core/Tensor.h>

namespace ddgnn {

// True when the fused CPU kernels run for `t`: t is on the CPU and generic kernels are not forced.
bool fused_kernels(const at::Tensor& t);

// While one exists (process-wide, any thread), the device-agnostic versions run on the CPU too:
// the tests compare them with the fused kernels, and the benchmarks time them. Nests; not meant
// to be toggled while another thread is training.
class GenericKernels {
 public:
  GenericKernels();
  ~GenericKernels();
  GenericKernels(const GenericKernels&) = delete;
  GenericKernels& operator=(const GenericKernels&) = delete;
};

}  // namespace ddgnn
