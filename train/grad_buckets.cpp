// MPI gradient buckets and the factory (train/grad_buckets.h).
#include "train/grad_buckets.h"

#include <ATen/ATen.h>

#include "comm/allreduce.h"
#include "core/error.h"
#ifdef DDGNN_TORCH_CUDA
#include "train/cuda_glue.h"
#endif

namespace ddgnn {

namespace {

// Host buffers summed by MPI_Iallreduce (comm/allreduce.h). On the CPU the buckets are those
// buffers; on a GPU each bucket is a device tensor copied to its buffer when ready and back
// after the sum (the copies wait for the device: a fallback for GPUs without NCCL between them).
class MpiBuckets : public GradBuckets {
 public:
  MpiBuckets(MPI_Comm comm, const at::TensorOptions& options, const std::vector<int64_t>& elems)
      : m_sum(comm, options.dtype() == at::kDouble ? MPI_DOUBLE : MPI_FLOAT, elems),
        m_on_host(options.device().is_cpu()) {
    const auto host = options.device(at::kCPU).requires_grad(false);
    for (size_t i = 0; i < elems.size(); ++i) {
      m_host.push_back(at::from_blob(m_sum.data(i), {elems[i]}, host));
      m_buckets.push_back(m_on_host ? m_host.back() : at::zeros({elems[i]}, options));
    }
  }

  const at::Tensor& bucket(size_t i) override { return m_buckets[i]; }

  void ready(size_t i) override {
    if (!m_on_host) m_host[i].copy_(m_buckets[i]);
    m_sum.ready(i);
  }

  void wait_all() override {
    m_sum.wait_all();
    if (!m_on_host)
      for (size_t i = 0; i < m_buckets.size(); ++i) m_buckets[i].copy_(m_host[i], true);
  }

 private:
  BucketedAllreduce m_sum;
  bool m_on_host;
  std::vector<at::Tensor> m_host, m_buckets;
};

}  // namespace

std::unique_ptr<GradBuckets> make_grad_buckets(GradSync sync, MPI_Comm comm,
                                               const at::TensorOptions& options,
                                               const std::vector<int64_t>& bucket_elems) {
  if (options.dtype() != at::kFloat && options.dtype() != at::kDouble)
    throw Error("gradient buckets: parameters must be float32 or float64");
  if (sync != GradSync::kNccl) return std::make_unique<MpiBuckets>(comm, options, bucket_elems);
#if defined(DDGNN_TORCH_CUDA) && defined(DDGNN_HAVE_NCCL)
  return make_nccl_buckets(comm, options, bucket_elems);
#else
  throw ConfigError("Comm.grad_sync: \"nccl\", but this ddgnn was built without NCCL",
                    "build the GPU binary with `jobs/build.sh --gpu`, or set Comm.grad_sync to "
                    "\"mpi\"");
#endif
}

}  // namespace ddgnn
