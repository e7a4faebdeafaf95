// MPI gradient buckets and the factory (train/grad_buckets.h).
#include "train/grad_buckets.h"

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "comm/allreduce.h"
#include "core/error.h"
#ifdef DDGNN_TORCH_CUDA
#include "train/cuda_glue.h"
#endif

namespace ddgnn {

namespace {

// Ranges of the flat gradient buffer summed by MPI_Iallreduce (comm/allreduce.h): on the CPU in
// place; on a GPU each bucket is copied to a host buffer when ready and back after the sum (the
// copies wait for the device: a fallback for GPUs without NCCL between them).
class MpiBuckets : public GradBuckets {
 public:
  MpiBuckets(MPI_Comm comm, const at::Tensor& grads, const std::vector<int64_t>& elems)
      : m_on_host(grads.device().is_cpu()) {
    int64_t offset = 0;
    std::vector<void*> data;
    for (int64_t n : elems) {
      m_buckets.push_back(grads.narrow(0, offset, n));
      data.push_back(m_buckets.back().data_ptr());
      offset += n;
    }
    const MPI_Datatype type = grads.scalar_type() == at::kDouble ? MPI_DOUBLE : MPI_FLOAT;
    if (m_on_host) {
      m_sum = std::make_unique<BucketedAllreduce>(comm, type, data, elems);
    } else {
      m_sum = std::make_unique<BucketedAllreduce>(comm, type, elems);
      const auto host = grads.options().device(at::kCPU);
      for (size_t i = 0; i < elems.size(); ++i)
        m_host.push_back(at::from_blob(m_sum->data(i), {elems[i]}, host));
    }
  }

  const at::Tensor& bucket(size_t i) override { return m_buckets[i]; }

  void ready(size_t i) override {
    if (!m_on_host) m_host[i].copy_(m_buckets[i]);
    m_sum->ready(i);
  }

  void wait_all() override {
    m_sum->wait_all();
    if (!m_on_host)
      for (size_t i = 0; i < m_buckets.size(); ++i) m_buckets[i].copy_(m_host[i], true);
  }

 private:
  bool m_on_host;
  std::vector<at::Tensor> m_buckets, m_host;
  std::unique_ptr<BucketedAllreduce> m_sum;
};

}  // namespace

std::unique_ptr<GradBuckets> make_grad_buckets(GradSync sync, MPI_Comm comm,
                                               const at::Tensor& grads,
                                               const std::vector<int64_t>& bucket_elems) {
  if (grads.scalar_type() != at::kFloat && grads.scalar_type() != at::kDouble)
    throw Error("gradient buckets: parameters must be float32 or float64");
  int64_t total = 0;
  for (int64_t n : bucket_elems) total += n;
  if (grads.dim() != 1 || !grads.is_contiguous() || grads.numel() != total)
    throw Error("gradient buckets: " + std::to_string(total) +
                " values in buckets over a buffer of " + std::to_string(grads.numel()));
  if (sync != GradSync::kNccl) return std::make_unique<MpiBuckets>(comm, grads, bucket_elems);
#if defined(DDGNN_TORCH_CUDA) && defined(DDGNN_HAVE_NCCL)
  return make_nccl_buckets(comm, grads, bucket_elems);
#else
  throw ConfigError("Comm.grad_sync: \"nccl\", but this ddgnn was built without NCCL",
                    "build the GPU binary with `jobs/build.sh --gpu`, or set Comm.grad_sync to "
                    "\"mpi\"");
#endif
}

}  // namespace ddgnn
