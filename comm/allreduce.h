// Sum of float or double buffers across a communicator in buckets, non-blocking: a bucket is
// started (MPI_Iallreduce, in place) as soon as its owner fills it, and all are waited for at
// the end, so communication overlaps whatever runs between (the rest of the backward pass).
// Bytes and counts only: which tensor lives where is train/ddp.h's business.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace ddgnn {

class BucketedAllreduce {
 public:
  // bucket_elems[i] values of `type` (MPI_FLOAT or MPI_DOUBLE) in bucket i, in memory of its own.
  BucketedAllreduce(MPI_Comm comm, MPI_Datatype type, const std::vector<int64_t>& bucket_elems);
  // The same over the caller's memory: bucket i at buckets[i] (host memory that outlives this).
  BucketedAllreduce(MPI_Comm comm, MPI_Datatype type, const std::vector<void*>& buckets,
                    const std::vector<int64_t>& bucket_elems);
  ~BucketedAllreduce();
  BucketedAllreduce(const BucketedAllreduce&) = delete;
  BucketedAllreduce& operator=(const BucketedAllreduce&) = delete;

  size_t n_buckets() const { return m_elems.size(); }
  void* data(size_t i) { return m_data[i]; }
  int64_t elems(size_t i) const { return m_elems[i]; }
  // Bucket i is filled. Buckets are started in index order on every rank (non-blocking
  // collectives must be issued in the same order everywhere): this starts i and the filled
  // buckets after it once every bucket before i has started.
  void ready(size_t i);
  // Starts what was not started (in order), waits for every bucket, readies the next round.
  void wait_all();

 private:
  MPI_Comm m_comm;
  MPI_Datatype m_type;
  int m_type_size = 4;
  std::vector<int64_t> m_elems;
  std::vector<std::vector<uint8_t>> m_storage;  // empty over the caller's memory
  std::vector<void*> m_data;                    // [bucket]
  std::vector<MPI_Request> m_requests;
  std::vector<bool> m_ready;
  size_t m_next = 0;  // the first bucket not started this round
};

}  // namespace ddgnn
