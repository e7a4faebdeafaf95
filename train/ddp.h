// Data-parallel training: parameters broadcast from rank 0 at the start; the gradients live in one
// flat buffer (model/flat_params.h) cut into buckets, every parameter's .grad() a view into its
// bucket (PyTorch DDP's gradient_as_bucket_view), so that autograd's accumulation in the loss's
// backward writes straight into the buckets. When backward has accumulated the last gradient of a
// bucket (a post hook on each parameter's gradient accumulator: bookkeeping on the host, no
// kernel), the bucket is summed across ranks at once (MPI non-blocking or NCCL on its own stream,
// overlapped with the rest of the backward: train/grad_buckets.h); finish_step starts the rest and
// waits. Each rank's loss carries its share of the step, so the sums are the step's gradients,
// and the optimizer steps the same flat buffer. Buckets hold the parameters in the buffer's order
// (the reverse of the parameters', in which backward finishes them).
#pragma once

#include <ATen/core/Tensor.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "model/flat_params.h"
#include "train/grad_buckets.h"

namespace torch::autograd {
struct Node;
}

namespace ddgnn {

class DataParallel {
 public:
  // params: the model's parameters (same order and shapes on every rank), one dtype and device,
  // all requiring a gradient; laid out in flat buffers here (flatten_parameters), those without
  // an element left out of the sums.
  DataParallel(std::vector<at::Tensor> params, MPI_Comm comm, int64_t bucket_bytes = 25 << 20,
               GradSync sync = GradSync::kMpi);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Rank 0's values into every rank's parameters.
  void broadcast_parameters();
  // Before the loss's backward (gradients zeroed in place, zero_gradients). A gradient found
  // elsewhere than its bucket (set to none or reassigned, e.g. by LibTorch 2's
  // Optimizer::zero_grad) is put back: its values copied in, or zero.
  void begin_step();
  // After backward (at most one, with create_graph false, so that autograd accumulates in place):
  // every parameter's .grad() holds the sum over ranks (a parameter that got no gradient on a rank
  // counts as zero there). A gradient that backward replaced instead of accumulating into is an
  // Error.
  void finish_step();
  // The mean over ranks of each floating-point tensor of `buffers` (batch norms' running
  // statistics, which each rank updates from its own batches), in place; others are left alone.
  void average_buffers(const std::vector<at::Tensor>& buffers);
  // Throws CommError naming the first parameter whose bytes differ from rank 0's.
  void check_identical() const;
  // Bytes in each bucket (for the log).
  std::vector<int64_t> bucket_bytes() const;
  // The flat gradient buffer that the buckets cut: [n] of the parameters' dtype and device.
  const at::Tensor& gradients() const { return m_flat.grads; }
  // Buckets that the last step's backward filled (the rest were filled by finish_step): those
  // whose sum could start while backward ran.
  int64_t filled_in_backward() const { return m_filled_in_backward; }

 private:
  struct Owner;  // what the hooks reach: this object, or nothing once it is gone
  void on_grad(size_t param);
  bool grads_in_place() const;

  std::vector<at::Tensor> m_params;
  MPI_Comm m_comm;
  MPI_Datatype m_type;
  FlatParameters m_flat;
  std::vector<int64_t> m_offset;  // [param] element offset in the flat buffer
  std::unique_ptr<GradBuckets> m_buckets;
  std::vector<size_t> m_bucket_of;  // [param]
  std::vector<int64_t> m_pending;   // [bucket] parameters not yet accumulated this step
  std::vector<bool> m_filled;       // [param]
  std::vector<int64_t> m_pending_init;
  std::shared_ptr<Owner> m_owner;
  std::vector<std::shared_ptr<torch::autograd::Node>> m_accumulators;  // [param]
  std::vector<uintptr_t> m_hooks;                                      // [param]
  bool m_in_step = false;
  int64_t m_filled_in_backward = 0;
};

}  // namespace ddgnn
