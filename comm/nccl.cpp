// NCCL communicator and CUDA stream wrappers; every CUDA/NCCL status checked with file:line.
#include "comm/nccl.h"

#include "comm/mpi.h"
#include "core/error.h"

namespace ddgnn {

void cuda_fail(const char* expr, const char* file, int line, cudaError_t code) {
  throw CommError(std::string("CUDA call `") + expr + "` failed at " + file + ":" +
                      std::to_string(line) + ": " + cudaGetErrorString(code),
                  "check that a GPU is visible to this rank (CUDA_VISIBLE_DEVICES)");
}

void nccl_fail(const char* expr, const char* file, int line, ncclResult_t code) {
  throw CommError(std::string("NCCL call `") + expr + "` failed at " + file + ":" +
                      std::to_string(line) + ": " + ncclGetErrorString(code),
                  "rerun with NCCL_DEBUG=WARN for NCCL's own diagnosis");
}

NcclComm::NcclComm(MPI_Comm comm, int device) {
  MPI_CHECK(MPI_Comm_rank(comm, &m_rank));
  MPI_CHECK(MPI_Comm_size(comm, &m_size));
  CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  if (m_rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm));
  CUDA_CHECK(cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking));
  NCCL_CHECK(ncclCommInitRank(&m_comm, m_size, id, m_rank));
}

NcclComm::~NcclComm() {
  if (m_comm) ncclCommDestroy(m_comm);  // destructors never throw
  if (m_stream) cudaStreamDestroy(m_stream);
}

void NcclComm::all_reduce_sum(float* device_data, size_t count) {
  NCCL_CHECK(ncclAllReduce(device_data, device_data, count, ncclFloat, ncclSum, m_comm, m_stream));
}

void NcclComm::synchronize() {
  CUDA_CHECK(cudaStreamSynchronize(m_stream));
}

}  // namespace ddgnn
