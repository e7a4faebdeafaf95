// Gradient buckets summed across ranks, behind one interface: consecutive ranges of one flat
// gradient buffer (model/flat_params.h, whose views the parameters' .grad() are), summed in place
// by MPI (non-blocking all-reduce of host memory: on the CPU the buffer itself; gradients on a GPU
// are staged through host buffers) or by NCCL (on the device, on a stream of its own that waits
// for the backward's stream; GPU build only). Buckets are started in index order on every rank,
// as collectives must be.
#pragma once

#include <ATen/core/Tensor.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "config/train_settings.h"

namespace ddgnn {

class GradBuckets {
 public:
  virtual ~GradBuckets() = default;
  // Bucket i: a range of the flat gradient buffer.
  virtual const at::Tensor& bucket(size_t i) = 0;
  // Bucket i is filled: starts i and the filled buckets after it once every bucket before i has
  // started.
  virtual void ready(size_t i) = 0;
  // Starts what was not started (in order), and makes the sums visible to what the current stream
  // does next (MPI: waits for them).
  virtual void wait_all() = 0;
};

// Buckets of bucket_elems[i] values each, one after the other over `grads` ([sum of
// bucket_elems], contiguous, float32 or float64, on the gradients' device; it must outlive them).
// kMpi everywhere; kNccl only in a build with CUDA and NCCL.
std::unique_ptr<GradBuckets> make_grad_buckets(GradSync sync, MPI_Comm comm,
                                               const at::Tensor& grads,
                                               const std::vector<int64_t>& bucket_elems);

}  // namespace ddgnn
