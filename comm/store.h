// The distributed in-memory store, as bytes: every rank of a loader group holds one contiguous
// partition of the samples (packed records, loader/packed.h) in memory that MPI can expose
// (MPI_Win_allocate), with the offsets of its own records. Fetchers (comm/fetch.h) read it.
//
// Metadata per rank is O(N/P + P), never O(N): the partition is arithmetic (rank r owns ids
// [floor(N r / P), floor(N (r + 1) / P)), so owner(i) is computed, not looked up), and a
// record's size and offset are known only to its owner — a fetcher asks the owner for them
// (`rma` reads them from the owner's offset window, `collective` gets them in the reply).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace ddgnn {

// Contiguous balanced partition of n items over p parts.
struct Partition {
  int64_t n = 0;
  int p = 1;
  int64_t first(int r) const { return r >= p ? n : n * r / p; }
  int64_t count(int r) const { return first(r + 1) - first(r); }
  // The part that holds item i (0 <= i < n).
  int owner(int64_t i) const;
};

// A replica group: the ranks of `world` that hold one full copy of the dataset between them
// (HydraGNN's ddstore_width). width = 0 or >= the world size: one group of every rank; otherwise
// ranks [k width, (k + 1) width) form group k (the world size must be a multiple of width).
// Fetches stay inside a group.
class LoaderGroup {
 public:
  LoaderGroup(MPI_Comm world, int width);
  MPI_Comm comm() const { return m_comm.get(); }
  int rank() const { return m_comm.rank(); }
  int size() const { return m_comm.size(); }
  int index() const { return m_index; }  // which group (0-based)
  int count() const { return m_count; }  // how many groups

 private:
  Communicator m_comm;
  int m_index = 0, m_count = 1;
};

struct StoreOptions {
  int64_t budget_bytes = 0;  // > 0: refuse a partition that needs more on any rank
  // Node shared memory (the `shm` backend): the records live in one node-level window
  // (MPI_Win_allocate_shared over the ranks of a node), which the node's ranks read by pointer;
  // ranks on other nodes reach them through a window created over that memory.
  bool shared = false;
  // A shared store with a group-wide window even when the group is one node, so that the `rma`
  // and `collective` fetchers can read it too (the online switcher's candidates share one store).
  bool one_sided = false;
  // 0: nodes are what MPI_COMM_TYPE_SHARED says. k > 0: ranks [j k, (j + 1) k) of the group
  // count as one node (to test the cross-node path on one machine).
  int node_size = 0;
  // The communicator of all replica groups (LoaderGroup's world) when there are several.
  // Windows of disjoint communicators are then created in turns: Open MPI 4.1 names the
  // shared-memory file of a window by the communicator's context id, which the groups of one
  // MPI_Comm_split share, so concurrent creation on one node collides (ompi issue #9492).
  MPI_Comm world = MPI_COMM_NULL;
};

// This rank's partition, in window memory. Collective over the group at construction and
// destruction (MPI_Win_allocate or MPI_Win_allocate_shared / MPI_Win_free).
class ByteStore {
 public:
  // n_total records in all; this rank holds ids partition().first(rank) .. + count, whose
  // record sizes are `sizes`; the records' bytes are written by the caller through data()
  // after construction. Throws a ConfigError, before allocating, when this rank's bytes exceed
  // options.budget_bytes (> 0), naming the figure it would need.
  ByteStore(MPI_Comm group, int64_t n_total, const std::vector<int64_t>& sizes,
            const StoreOptions& options = {});
  ByteStore(const ByteStore&) = delete;
  ByteStore& operator=(const ByteStore&) = delete;

  MPI_Comm comm() const { return m_comm; }
  int rank() const { return m_rank; }
  int size() const { return m_size; }
  const Partition& partition() const { return m_part; }
  int64_t first() const { return m_part.first(m_rank); }
  int64_t count() const { return m_part.count(m_rank); }
  uint8_t* data() { return m_bytes; }
  const uint8_t* data() const { return m_bytes; }
  int64_t n_bytes() const { return m_n_bytes; }
  // [count + 1] byte offsets of this rank's records in data().
  const int64_t* offsets() const { return m_offsets; }
  // Group-wide windows for one-sided access (MPI_WIN_NULL for a shared store whose group is
  // one node: nothing is remote).
  MPI_Win byte_window() const { return m_byte_win.get(); }
  MPI_Win offset_window() const { return m_offset_win.get(); }
  // Shared store: the node's ranks, and for group rank r on this node its records and offsets
  // (nullptr for ranks on other nodes).
  bool shared() const { return m_shared; }
  const uint8_t* node_bytes(int r) const { return m_node_bytes[static_cast<size_t>(r)]; }
  const int64_t* node_offsets(int r) const { return m_node_offsets[static_cast<size_t>(r)]; }
  // Collective: call once the records are written through data(), before any fetch (the
  // node's ranks read them by pointer; the barrier orders the writes before those reads).
  void ready();
  // Total bytes over the group (an allreduce, for the load log).
  int64_t group_bytes() const;

 private:
  MPI_Comm m_comm;
  int m_rank = 0, m_size = 1;
  Partition m_part;
  uint8_t* m_bytes = nullptr;
  int64_t* m_offsets = nullptr;
  int64_t m_n_bytes = 0;
  bool m_shared = false;
  // Freed in reverse order: the group windows, then the node windows, then the node.
  Communicator m_node;
  Window m_shm_byte_win, m_shm_offset_win;
  Window m_byte_win, m_offset_win;
  std::vector<const uint8_t*> m_node_bytes;
  std::vector<const int64_t*> m_node_offsets;
};

}  // namespace ddgnn
