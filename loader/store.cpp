// Loading a dataset partition into the byte store, and fetching graphs from it.
#include "loader/store.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "comm/mpi.h"
#include "core/alloc.h"
#include "core/error.h"
#include "loader/packed.h"

namespace ddgnn {

namespace {

constexpr int64_t kLoadChunkGraphs = 65536;  // read and packed at a time

}  // namespace

StoreLoad load_store(const Dataset& dataset, MPI_Comm group, const StoreOptions& options,
                     bool compact) {
  const auto t0 = std::chrono::steady_clock::now();
  int rank = 0, size = 1;
  MPI_Comm_rank(group, &rank);
  MPI_Comm_size(group, &size);
  const Partition part{dataset.n_graphs(), size};
  const int64_t first = part.first(rank), count = part.count(rank);
  // A file of records (format version 4) gives their sizes from its offsets: the window is
  // allocated first and the records read into it chunk by chunk, so that the part is held once
  // plus one chunk. An older file's records are made as its arrays are read, in chunks, then
  // copied into the window chunk by chunk, each freed once copied. A rank that cannot read its
  // part (a checksum mismatch, say) reports it, and every other rank stops with it instead of
  // waiting in a collective.
  const bool direct = compact && dataset.format_version() >= 4;
  std::vector<std::vector<uint8_t>> chunks;
  std::vector<int64_t> sizes;
  std::exception_ptr failed;
  try {
    if (direct) {
      sizes = dataset.stored_record_sizes(first, count);
    } else {
      sizes.reserve(size_t(count));
      for (int64_t c0 = 0; c0 < count; c0 += kLoadChunkGraphs) {
        std::vector<uint8_t>& records = chunks.emplace_back();
        const std::vector<int64_t> offsets = dataset.read_records(
            first + c0, std::min(kLoadChunkGraphs, count - c0), records, compact);
        for (size_t i = 0; i + 1 < offsets.size(); ++i)
          sizes.push_back(offsets[i + 1] - offsets[i]);
      }
    }
  } catch (...) {
    failed = std::current_exception();
  }
  throw_if_any_failed(group, failed);
  StoreLoad out;
  out.store = std::make_unique<ByteStore>(group, dataset.n_graphs(), sizes, options);
  size_t at = 0;
  if (direct) {
    try {
      for (int64_t c0 = 0; c0 < count; c0 += kLoadChunkGraphs) {
        const int64_t n = std::min(kLoadChunkGraphs, count - c0);
        int64_t bytes = 0;
        for (int64_t i = 0; i < n; ++i) bytes += sizes[size_t(c0 + i)];
        dataset.read_records_into(first + c0, n, out.store->data() + at, bytes);
        at += size_t(bytes);
      }
    } catch (...) {
      failed = std::current_exception();
    }
    throw_if_any_failed(group, failed);
  } else {
    for (auto& c : chunks) {
      if (!c.empty()) std::memcpy(out.store->data() + at, c.data(), c.size());
      at += c.size();
      std::vector<uint8_t>().swap(c);
      release_free_memory();  // the chunk's pages go as the window's come
    }
  }
  out.store->ready();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

namespace {

class FileFetcher : public Fetcher {
 public:
  FileFetcher(const Dataset& dataset, bool compact) : m_dataset(dataset), m_compact(compact) {}
  Backend backend() const override { return Backend::kFile; }
  bool collective() const override { return false; }
  void fetch(const int64_t* ids, int64_t n, Fetched& out) override {
    out.bytes.clear();
    out.offsets.assign(1, 0);
    for (int64_t k = 0; k < n;) {
      if (ids[k] < 0 || ids[k] >= m_dataset.n_graphs())
        throw Error("fetch: sample id " + std::to_string(ids[k]) +
                    " is outside the dataset (0 .. " + std::to_string(m_dataset.n_graphs() - 1) +
                    ")");
      int64_t len = 1;
      while (k + len < n && ids[k + len] == ids[k] + len && ids[k + len] < m_dataset.n_graphs())
        ++len;
      const size_t at = out.bytes.size();
      const std::vector<int64_t> off = m_dataset.read_records(ids[k], len, out.bytes, m_compact);
      for (int64_t j = 0; j < len; ++j)
        out.offsets.push_back(int64_t(at) + off[static_cast<size_t>(j + 1)]);
      k += len;
    }
  }

 private:
  const Dataset& m_dataset;
  bool m_compact;
};

}  // namespace

std::unique_ptr<Fetcher> make_fetcher(Backend backend, const Dataset& dataset, ByteStore* store,
                                      const FetcherOptions& options, bool compact) {
  if (backend == Backend::kFile) return std::make_unique<FileFetcher>(dataset, compact);
  if (!store)
    throw Error("loader: backend " + to_string(backend) + " needs the dataset in a store",
                "load it with load_store first");
  return make_store_fetcher(backend, *store, options);
}

GraphBlock fetch_graphs(Fetcher& fetcher, const std::vector<int64_t>& ids, const Dataset& dataset,
                        double* fetch_seconds, int64_t* fetch_bytes) {
  Fetched f;
  const auto t0 = std::chrono::steady_clock::now();
  fetcher.fetch(ids.data(), int64_t(ids.size()), f);
  if (fetch_seconds)
    *fetch_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (fetch_bytes) *fetch_bytes = int64_t(f.bytes.size());
  GraphBlock block = unpack_records(f.bytes.data(), f.offsets.data(), int64_t(ids.size()),
                                    dataset.extra_columns(), dataset.graph_columns());
  block.graph_ids = ids;
  return block;
}

}  // namespace ddgnn
