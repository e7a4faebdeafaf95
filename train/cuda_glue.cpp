// CUDA and NCCL glue of training (train/cuda_glue.h); GPU build only.
#include "train/cuda_glue.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include "core/error.h"
#ifdef DDGNN_HAVE_NCCL
#include "comm/nccl.h"
#endif

namespace ddgnn {

namespace {

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess)
    throw CommError(std::string(what) + ": " + cudaGetErrorString(rc),
                    "check that a GPU is visible to this rank (CUDA_VISIBLE_DEVICES)");
}

}  // namespace

std::string set_cuda_device(int index) {
  check(cudaSetDevice(index), "cudaSetDevice");
  char bus[64] = {0};
  check(cudaDeviceGetPCIBusId(bus, sizeof bus - 1, index), "cudaDeviceGetPCIBusId");
  return bus;
}

std::string gpu_name(int index) {
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  return prop.name;
}

#ifdef DDGNN_HAVE_NCCL

namespace {

// Ranges of the flat gradient buffer all-reduced in place by NCCL on its own stream, which waits
// (an event) for the work the backward's stream enqueued before the bucket was ready; wait_all
// makes the current stream wait for NCCL's. No host synchronisation.
class NcclBuckets : public GradBuckets {
 public:
  NcclBuckets(MPI_Comm comm, const at::Tensor& grads, const std::vector<int64_t>& elems)
      : m_nccl(comm, grads.device().index()),
        m_type(grads.scalar_type() == at::kDouble ? ncclDouble : ncclFloat) {
    int64_t offset = 0;
    for (int64_t n : elems) {
      m_buckets.push_back(grads.narrow(0, offset, n));
      offset += n;
    }
    m_ready.assign(elems.size(), false);
    CUDA_CHECK(cudaEventCreateWithFlags(&m_event, cudaEventDisableTiming));
  }
  ~NcclBuckets() override { cudaEventDestroy(m_event); }

  const at::Tensor& bucket(size_t i) override { return m_buckets[i]; }

  void ready(size_t i) override {
    m_ready[i] = true;
    if (i != m_next) return;
    // The gradients written on the current stream so far, then the all-reduces in order.
    CUDA_CHECK(cudaEventRecord(m_event, c10::cuda::getCurrentCUDAStream().stream()));
    CUDA_CHECK(cudaStreamWaitEvent(m_nccl.stream(), m_event, 0));
    while (m_next < m_buckets.size() && m_ready[m_next]) start(m_next++);
  }

  void wait_all() override {
    for (size_t i = 0; i < m_buckets.size(); ++i) m_ready[i] = true;
    if (m_next < m_buckets.size()) {
      CUDA_CHECK(cudaEventRecord(m_event, c10::cuda::getCurrentCUDAStream().stream()));
      CUDA_CHECK(cudaStreamWaitEvent(m_nccl.stream(), m_event, 0));
      while (m_next < m_buckets.size()) start(m_next++);
    }
    CUDA_CHECK(cudaEventRecord(m_event, m_nccl.stream()));
    CUDA_CHECK(cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream().stream(), m_event, 0));
    m_ready.assign(m_buckets.size(), false);
    m_next = 0;
  }

 private:
  void start(size_t i) {
    NCCL_CHECK(ncclAllReduce(m_buckets[i].data_ptr(), m_buckets[i].data_ptr(),
                             size_t(m_buckets[i].numel()), m_type, ncclSum, m_nccl.get(),
                             m_nccl.stream()));
  }

  NcclComm m_nccl;
  ncclDataType_t m_type;
  std::vector<at::Tensor> m_buckets;
  std::vector<bool> m_ready;
  size_t m_next = 0;
  cudaEvent_t m_event = nullptr;
};

}  // namespace

std::unique_ptr<GradBuckets> make_nccl_buckets(MPI_Comm comm, const at::Tensor& grads,
                                               const std::vector<int64_t>& bucket_elems) {
  return std::make_unique<NcclBuckets>(comm, grads, bucket_elems);
}

#endif

}  // namespace ddgnn
