// The CUDA-only pieces of training, compiled only in the GPU build (DDGNN_TORCH_CUDA): the rank's
// device, its name and PCI bus id, and NCCL gradient buckets. Everything else is written once
// against LibTorch's device API.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "train/grad_buckets.h"

namespace ddgnn {

// Makes `index` the current CUDA device of this process; returns its PCI bus id.
std::string set_cuda_device(int index);
std::string gpu_name(int index);

#ifdef DDGNN_HAVE_NCCL
// Buckets over ranges of the flat gradient buffer `grads` (make_grad_buckets).
std::unique_ptr<GradBuckets> make_nccl_buckets(MPI_Comm comm, const at::Tensor& grads,
                                               const std::vector<int64_t>& bucket_elems);
#endif

}  // namespace ddgnn
