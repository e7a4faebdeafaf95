// Loading a dataset partition into the byte store, and fetching graphs from it.
#include "loader/store.h"

#include <chrono>

#include "loader/packed.h"

namespace ddgnn {

StoreLoad load_store(const Dataset& dataset, MPI_Comm group, int64_t budget_bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  int rank = 0, size = 1;
  MPI_Comm_rank(group, &rank);
  MPI_Comm_size(group, &size);
  const Partition part{dataset.n_graphs(), size};
  GraphBlock block;
  if (part.count(rank) > 0) block = dataset.read(part.first(rank), part.count(rank));
  const std::vector<int64_t> offsets = packed_offsets(block);
  std::vector<int64_t> sizes(block.n_graphs());
  for (size_t i = 0; i < sizes.size(); ++i) sizes[i] = offsets[i + 1] - offsets[i];
  StoreLoad out;
  out.store = std::make_unique<ByteStore>(group, dataset.n_graphs(), sizes, budget_bytes);
  pack_block(block, offsets, out.store->data());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

GraphBlock fetch_graphs(Fetcher& fetcher, const std::vector<int64_t>& ids,
                        const std::vector<ColumnInfo>& extra) {
  Fetched f;
  fetcher.fetch(ids.data(), int64_t(ids.size()), f);
  return unpack_records(f.bytes.data(), f.offsets.data(), int64_t(ids.size()), extra);
}

}  // namespace ddgnn
