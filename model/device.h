// Which version of the model's kernels runs for a tensor: the fused CPU kernels (raw loops over
// contiguous memory, custom autograd functions with hand-written derivatives), the CUDA kernels
// behind the same autograd functions (GPU build; the segment family and SchNet's filter,
// model/cuda/), or their device-agnostic versions made of ATen ops (index_select, index_add,
// elementwise ops), which run on any device and are differentiable to any order through
// autograd. Every op with a fused kernel asks fused_kernels() (and, where it has CUDA kernels,
// cuda_kernels()) of its main operand first.
#pragma once

#include <ATen/core/Tensor.h>

namespace ddgnn {

// True when the fused CPU kernels run for `t`: t is on the CPU, not in a reduced precision
// (bfloat16, half), and neither generic kernels are forced nor autocast is on.
bool fused_kernels(const at::Tensor& t);

// True when the CUDA kernels run for `t`: a build with them (the GPU build, DDGNN_CUDA_KERNELS),
// t on a CUDA device in float32 or float64, and neither generic kernels forced nor autocast on
// there. Always false in the CPU build.
bool cuda_kernels(const at::Tensor& t);

// While one exists (process-wide, any thread), the device-agnostic versions run on the CPU and on
// CUDA devices too: the tests compare them with the fused and CUDA kernels, and the benchmarks
// time them. Nests; not meant to be toggled while another thread is training.
class GenericKernels {
 public:
  GenericKernels();
  ~GenericKernels();
  GenericKernels(const GenericKernels&) = delete;
  GenericKernels& operator=(const GenericKernels&) = delete;
};

// While one exists with `on` true, LibTorch's autocast runs on `device` with bfloat16: matrix
// products (linear, matmul) take bfloat16 copies of their float32 inputs and weights, the ops
// autocast keeps in float32 stay there, and the float32 weights remain the master copy. Restores
// the previous autocast state on exit. On the CPU the fused kernels step aside meanwhile.
class Bf16Autocast {
 public:
  Bf16Autocast(c10::DeviceType device, bool on);
  ~Bf16Autocast();
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  c10::DeviceType m_device;
  bool m_on, m_was_enabled = false;
  c10::ScalarType m_was_dtype = c10::ScalarType::Float;
};

// Suspends Bf16Autocast on `device` for a scope: a region whose products must stay in float32
// (MACE's body-order products, whose bfloat16 rounding errors multiply). Inputs already in
// bfloat16 must be cast by the caller.
class AutocastOff {
 public:
  explicit AutocastOff(c10::DeviceType device);
  ~AutocastOff();
  AutocastOff(const AutocastOff&) = delete;
  AutocastOff& operator=(const AutocastOff&) = delete;

 private:
  c10::DeviceType m_device;
  bool m_was_enabled;
};

}  // namespace ddgnn
