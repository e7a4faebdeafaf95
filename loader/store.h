// Loading a dataset into the distributed in-memory store: each rank of a loader group reads only
// its contiguous part of the HDF5 file (hyperslab reads through Dataset::read_records) into
// window memory (comm/store.h) as records (loader/packed.h). Fetched records come back as
// GraphBlocks.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/fetch.h"
#include "comm/store.h"
#include "loader/dataset.h"

namespace ddgnn {

struct StoreLoad {
  std::unique_ptr<ByteStore> store;
  double seconds = 0.0;  // this rank's read + pack time
};

// Collective over `group`: rank r of the group loads graphs partition().first(r) .. + count of
// `dataset`. With `replicated` pass MPI_COMM_SELF: this rank loads everything. A budget
// (options.budget_bytes > 0) refuses, with a ConfigError on every rank before allocating, a
// partition that would not fit; options.shared puts it in node shared memory (`shm`). `compact`:
// the records' arrays in their exact compact encodings (loader/array_codec.h), else as float64
// (Loader.compact_records false: to measure what the encodings cost). Read in chunks of 65,536
// graphs: the partition is held once, as records, plus one chunk (a file of records, format
// version 4, is read straight into the window its offsets size; an older one is packed first).
StoreLoad load_store(const Dataset& dataset, MPI_Comm group, const StoreOptions& options = {},
                     bool compact = true);

// The fetcher of any backend but nccl: `file` reads every fetch's records from the HDF5 file
// (runs of consecutive ids as one read), packs and returns them, with no store and no
// communication (the file-I/O baseline); the others read `store` (comm/fetch.h), which they need.
// The dataset and the store must outlive the fetcher.
std::unique_ptr<Fetcher> make_fetcher(Backend backend, const Dataset& dataset, ByteStore* store,
                                      const FetcherOptions& options = {}, bool compact = true);

// Fetches `ids` through `fetcher` and unpacks them, in request order (graph_ids = ids), with
// `dataset`'s extra columns. `fetch_seconds` and `fetch_bytes`, when given, receive the
// fetcher's time (moving the records, not unpacking them) and the record bytes it moved.
GraphBlock fetch_graphs(Fetcher& fetcher, const std::vector<int64_t>& ids, const Dataset& dataset,
                        double* fetch_seconds = nullptr, int64_t* fetch_bytes = nullptr);

}  // namespace ddgnn
