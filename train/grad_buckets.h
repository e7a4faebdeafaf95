// Gradient buckets summed across ranks, behind one interface: MPI (host buffers, non-blocking
// all-reduce; gradients on a GPU are staged through the host) or NCCL (device buffers, all-reduce
// on a stream of its own that waits for the backward's stream; GPU build only). Buckets are
// started in index order on every rank, as collectives must be.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "config/train_settings.h"

namespace ddgnn {

class GradBuckets {
 public:
  virtual ~GradBuckets() = default;
  // Bucket i as a flat tensor on the gradients' device, of the gradients' dtype.
  virtual const at::Tensor& bucket(size_t i) = 0;
  // Bucket i is filled: starts i and the filled buckets after it once every bucket before i has
  // started.
  virtual void ready(size_t i) = 0;
  // Starts what was not started (in order), and makes the sums visible to what the current stream
  // does next (MPI: waits for them).
  virtual void wait_all() = 0;
};

// bucket_elems[i] values in bucket i; `options` gives the dtype (float32 or float64) and device.
// kMpi everywhere; kNccl only in a build with CUDA and NCCL (device `options.device()`).
std::unique_ptr<GradBuckets> make_grad_buckets(GradSync sync, MPI_Comm comm,
                                               const at::TensorOptions& options,
                                               const std::vector<int64_t>& bucket_elems);

}  // namespace ddgnn
