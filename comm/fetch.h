// Fetchers: sample records by global id from the ByteStore of a loader group, one class per
// backend, all reading the same store (switching backend moves no data):
//   rma         MPI one-sided: passive target (MPI_Win_lock_all once), per batch the owners'
//               offsets, then the payloads, each phase one flush; no collective call.
//   collective  every rank sends its requests to the owners (MPI_Alltoallv), owners reply with
//               sizes and then payloads (MPI_Alltoallv in rounds of at most round_bytes per
//               peer pair). Collective: every rank of the group calls fetch the same number of
//               times (the sampler gives every rank the same number of steps).
//   shm         a store in node shared memory (StoreOptions::shared): the node's records by
//               pointer (a memcpy, no MPI call), other nodes' through rma.
//   replicated  the store holds every id (a store over MPI_COMM_SELF): a local copy.
// Bytes only: the records' layout is loader/packed.h's business.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/store.h"
#include "core/backend.h"

namespace ddgnn {

// Records of a fetch, in request order: record k is bytes[offsets[k], offsets[k + 1]).
struct Fetched {
  std::vector<uint8_t> bytes;
  std::vector<int64_t> offsets;  // [n_ids + 1]
};

class Fetcher {
 public:
  virtual ~Fetcher() = default;
  virtual Backend backend() const = 0;
  // True when every rank of the group must call fetch together.
  virtual bool collective() const = 0;
  // ids: global ids in [0, n_total), any order, repeats allowed (none is an empty request,
  // which a collective fetch still has to make). A bad id is an Error naming it.
  virtual void fetch(const int64_t* ids, int64_t n, Fetched& out) = 0;
};

struct FetcherOptions {
  int64_t round_bytes = int64_t(64) << 20;  // collective: cap per peer pair and round
};

// The fetcher of an in-memory backend (rma, collective, shm, replicated; see above) over `store`,
// which must outlive it; file and nccl are a ConfigError. Training makes its fetchers through
// loader/store.h's make_fetcher, which adds `file`.
std::unique_ptr<Fetcher> make_store_fetcher(Backend backend, ByteStore& store,
                                            const FetcherOptions& options = {});

}  // namespace ddgnn
