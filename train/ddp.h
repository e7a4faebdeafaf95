// Data-parallel training: parameters broadcast from rank 0 at the start; every parameter's
// gradient, as autograd produces it in the loss's backward (a hook on the parameter), is scaled
// by this rank's share of the step's graphs and copied into a bucket on the parameters' device;
// a full bucket is summed across ranks at once (MPI non-blocking or NCCL on its own stream,
// overlapped with the rest of the backward: train/grad_buckets.h); finish() writes the sum into
// every .grad().
// Buckets hold parameters in reverse order (the order in which backward finishes them).
#pragma once

#include <ATen/core/Tensor.h>
#include <mpi.h>

#include <memory>
#include <vector>

#include "train/grad_buckets.h"

namespace ddgnn {

class DataParallel {
 public:
  // params: the model's parameters (same order and shapes on every rank), one dtype and device.
  DataParallel(std::vector<at::Tensor> params, MPI_Comm comm, int64_t bucket_bytes = 25 << 20,
               GradSync sync = GradSync::kMpi);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Rank 0's values into every rank's parameters.
  void broadcast_parameters();
  // Before the loss's backward: this rank's weight in the step's average, its graphs over the
  // step's graphs on all ranks (0 for a rank without samples; the weights sum to 1).
  void begin_step(double weight);
  // After backward: every parameter's .grad() becomes the weighted sum over ranks (a parameter
  // that got no gradient on a rank counts as zero there).
  void finish_step();
  // The mean over ranks of each floating-point tensor of `buffers` (batch norms' running
  // statistics, which each rank updates from its own batches), in place; others are left alone.
  void average_buffers(const std::vector<at::Tensor>& buffers);
  // Throws CommError naming the first parameter whose bytes differ from rank 0's.
  void check_identical() const;
  // Bytes in each bucket (for the log).
  std::vector<int64_t> bucket_bytes() const;

 private:
  void on_grad(size_t param, const at::Tensor& grad);
  at::Tensor slot(size_t param);  // the parameter's place in its bucket

  std::vector<at::Tensor> m_params;
  MPI_Comm m_comm;
  MPI_Datatype m_type;
  std::unique_ptr<GradBuckets> m_buckets;
  std::vector<size_t> m_bucket_of;  // [param]
  std::vector<int64_t> m_offset;    // [param] element offset in its bucket
  std::vector<int64_t> m_pending;   // [bucket] parameters not yet filled this step
  std::vector<bool> m_filled;       // [param]
  std::vector<int64_t> m_pending_init;
  double m_weight = 1.0;
  bool m_in_step = false;
};

}  // namespace ddgnn
