// Bucketed non-blocking all-reduce.
#include "comm/allreduce.h"

#include <climits>
#include <string>

#include "comm/mpi.h"
#include "core/error.h"

namespace ddgnn {

BucketedAllreduce::BucketedAllreduce(MPI_Comm comm, MPI_Datatype type,
                                     const std::vector<int64_t>& bucket_elems)
    : BucketedAllreduce(comm, type, std::vector<void*>(bucket_elems.size(), nullptr),
                        bucket_elems) {
  m_storage.resize(m_elems.size());
  for (size_t i = 0; i < m_elems.size(); ++i) {
    m_storage[i].assign(static_cast<size_t>(m_elems[i] * m_type_size), 0);
    m_data[i] = m_storage[i].data();
  }
}

BucketedAllreduce::BucketedAllreduce(MPI_Comm comm, MPI_Datatype type,
                                     const std::vector<void*>& buckets,
                                     const std::vector<int64_t>& bucket_elems)
    : m_comm(comm), m_type(type), m_elems(bucket_elems), m_data(buckets) {
  MPI_CHECK(MPI_Type_size(type, &m_type_size));
  if (m_data.size() != m_elems.size())
    throw Error("BucketedAllreduce: " + std::to_string(m_data.size()) + " buffers for " +
                std::to_string(m_elems.size()) + " buckets");
  for (int64_t n : m_elems)
    if (n < 0 || n > INT_MAX)
      throw Error("BucketedAllreduce: a bucket of " + std::to_string(n) + " values");
  m_requests.assign(m_elems.size(), MPI_REQUEST_NULL);
  m_ready.assign(m_elems.size(), false);
}

BucketedAllreduce::~BucketedAllreduce() {
  if (!mpi_active()) return;
  for (MPI_Request& r : m_requests)
    if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
}

void BucketedAllreduce::ready(size_t i) {
  m_ready[i] = true;
  while (m_next < m_elems.size() && m_ready[m_next]) {
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, m_data[m_next], int(m_elems[m_next]), m_type, MPI_SUM,
                             m_comm, &m_requests[m_next]));
    ++m_next;
  }
}

void BucketedAllreduce::wait_all() {
  for (size_t i = 0; i < m_elems.size(); ++i) m_ready[i] = true;
  if (m_next < m_elems.size()) ready(m_next);
  MPI_CHECK(MPI_Waitall(int(m_requests.size()), m_requests.data(), MPI_STATUSES_IGNORE));
  m_ready.assign(m_elems.size(), false);
  m_next = 0;
}

}  // namespace ddgnn
