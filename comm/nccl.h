// NCCL and CUDA as RAII (compiled only when CUDA and NCCL are found): CUDA_CHECK / NCCL_CHECK with
// file:line, a communicator built from an MPI communicator, and a stream. Moves bytes only.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cstddef>

namespace ddgnn {

[[noreturn]] void cuda_fail(const char* expr, const char* file, int line, cudaError_t code);
[[noreturn]] void nccl_fail(const char* expr, const char* file, int line, ncclResult_t code);

#define CUDA_CHECK(expr)                                             \
  do {                                                               \
    cudaError_t cuda_check_rc_ = (expr);                             \
    if (cuda_check_rc_ != cudaSuccess)                               \
      ::ddgnn::cuda_fail(#expr, __FILE__, __LINE__, cuda_check_rc_); \
  } while (0)

#define NCCL_CHECK(expr)                                             \
  do {                                                               \
    ncclResult_t nccl_check_rc_ = (expr);                            \
    if (nccl_check_rc_ != ncclSuccess)                               \
      ::ddgnn::nccl_fail(#expr, __FILE__, __LINE__, nccl_check_rc_); \
  } while (0)

// One NCCL communicator over the ranks of `comm` (rank 0 makes the unique id, MPI broadcasts it),
// on the CUDA device `device`, with its own non-blocking stream.
class NcclComm {
 public:
  NcclComm(MPI_Comm comm, int device);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  ncclComm_t get() const { return m_comm; }
  cudaStream_t stream() const { return m_stream; }
  int rank() const { return m_rank; }
  int size() const { return m_size; }

  // In-place sum all-reduce of `count` floats on the device, enqueued on stream().
  void all_reduce_sum(float* device_data, size_t count);
  // Blocks until the work enqueued on stream() is done.
  void synchronize();

 private:
  ncclComm_t m_comm = nullptr;
  cudaStream_t m_stream = nullptr;
  int m_rank = 0, m_size = 1;
};

}  // namespace ddgnn
