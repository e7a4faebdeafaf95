// The byte store in MPI window memory, the arithmetic partition and replica groups.
#include "comm/store.h"

#include "core/alloc.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <string>

#include "comm/mpi.h"
#include "core/error.h"

namespace ddgnn {

int Partition::owner(int64_t i) const {
  // first(r) = floor(n r / p) is non-decreasing in r; start from the estimate and step.
  int r = n > 0 ? int(std::min<int64_t>(p - 1, (i * p) / n)) : 0;
  while (r + 1 < p && first(r + 1) <= i) ++r;
  while (r > 0 && first(r) > i) --r;
  return r;
}

LoaderGroup::LoaderGroup(MPI_Comm world, int width) {
  int world_rank = 0, world_size = 1;
  MPI_CHECK(MPI_Comm_rank(world, &world_rank));
  MPI_CHECK(MPI_Comm_size(world, &world_size));
  if (width <= 0 || width >= world_size) width = world_size;
  if (world_size % width != 0)
    throw ConfigError("Loader.width: " + std::to_string(width) + " does not divide the " +
                          std::to_string(world_size) + " ranks",
                      "use a width that divides the number of ranks (0: one group of all)");
  m_index = world_rank / width;
  m_count = world_size / width;
  m_comm = Communicator::split(world, m_index, world_rank);
}

namespace {

// Runs `create` on every rank, one communicator of the disjoint `sub` communicators that cover
// `world` at a time (a barrier over `world` between turns), so that their windows are never
// created concurrently. An error on a rank stops every rank (no one is left in a barrier).
void in_turns(MPI_Comm world, MPI_Comm sub, const std::function<void()>& create) {
  int sub_rank = 0, world_rank = 0;
  MPI_CHECK(MPI_Comm_rank(sub, &sub_rank));
  MPI_CHECK(MPI_Comm_rank(world, &world_rank));
  // My communicator's ordinal: the number of leaders (sub rank 0) before mine in world order.
  int leader = sub_rank == 0 ? 1 : 0, before = 0, total = 0;
  MPI_CHECK(MPI_Exscan(&leader, &before, 1, MPI_INT, MPI_SUM, world));
  if (world_rank == 0) before = 0;  // MPI_Exscan leaves rank 0's result undefined
  MPI_CHECK(MPI_Allreduce(&leader, &total, 1, MPI_INT, MPI_SUM, world));
  MPI_CHECK(MPI_Bcast(&before, 1, MPI_INT, 0, sub));
  std::exception_ptr failed;
  for (int turn = 0; turn < total; ++turn) {
    if (turn == before) try {
        create();
      } catch (...) {
        failed = std::current_exception();
      }
    if (total > 1) MPI_CHECK(MPI_Barrier(world));
  }
  throw_if_any_failed(world, failed);
}

}  // namespace

ByteStore::ByteStore(MPI_Comm group, int64_t n_total, const std::vector<int64_t>& sizes,
                     const StoreOptions& options)
    : m_comm(group), m_shared(options.shared) {
  MPI_CHECK(MPI_Comm_rank(group, &m_rank));
  MPI_CHECK(MPI_Comm_size(group, &m_size));
  m_part = Partition{n_total, m_size};
  if (int64_t(sizes.size()) != count())
    throw Error("ByteStore: " + std::to_string(sizes.size()) + " record sizes for the " +
                std::to_string(count()) + " records of rank " + std::to_string(m_rank));
  for (int64_t s : sizes) m_n_bytes += s;
  // Every rank decides together, so that no rank is left waiting in a collective allocation.
  const int64_t need = m_n_bytes + 8 * (count() + 1);
  int64_t worst = need;
  MPI_CHECK(MPI_Allreduce(&need, &worst, 1, MPI_INT64_T, MPI_MAX, group));
  if (options.budget_bytes > 0 && worst > options.budget_bytes)
    throw ConfigError("the dataset needs " + std::to_string(worst / (1 << 20)) +
                          " MiB on the most loaded rank of its loader group, over the budget of " +
                          std::to_string(options.budget_bytes / (1 << 20)) + " MiB",
                      "use more ranks per replica group (Loader.width), or raise "
                      "Loader.memory_budget_gb");
  const MPI_Aint byte_size = MPI_Aint(std::max<int64_t>(m_n_bytes, 1));
  const MPI_Aint offset_size = MPI_Aint(8 * (count() + 1));
  const MPI_Comm turns = options.world != MPI_COMM_NULL ? options.world : group;
  if (!m_shared) {
    in_turns(turns, group, [&] {
      m_byte_win = Window::allocate(byte_size, 1, group, &m_bytes);
      m_offset_win = Window::allocate(offset_size, 8, group, &m_offsets);
    });
    prepare_store_memory(m_bytes, size_t(byte_size));  // before the loader first writes it
  } else {
    m_node = options.node_size > 0 ? Communicator::split(group, m_rank / options.node_size, m_rank)
                                   : Communicator::split_node(group, m_rank);
    in_turns(turns, m_node.get(), [&] {
      m_shm_byte_win = Window::allocate_shared(byte_size, 1, m_node.get(), &m_bytes);
      m_shm_offset_win = Window::allocate_shared(offset_size, 8, m_node.get(), &m_offsets);
    });
    prepare_store_memory(m_bytes, size_t(byte_size));
    // Ranks elsewhere reach this memory one-sidedly (only when the group spans several nodes).
    int spans = m_node.size() < m_size ? 1 : 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &spans, 1, MPI_INT, MPI_MAX, group));
    if (spans || options.one_sided)
      in_turns(turns, group, [&] {
        m_byte_win = Window::create(m_bytes, byte_size, 1, group);
        m_offset_win = Window::create(m_offsets, offset_size, 8, group);
      });
  }
  m_offsets[0] = 0;
  for (int64_t i = 0; i < count(); ++i)
    m_offsets[i + 1] = m_offsets[i] + sizes[static_cast<size_t>(i)];
  if (m_shared) {
    // Base addresses of the node peers' segments, by group rank.
    m_node_bytes.assign(static_cast<size_t>(m_size), nullptr);
    m_node_offsets.assign(static_cast<size_t>(m_size), nullptr);
    MPI_Group group_g, node_g;
    MPI_CHECK(MPI_Comm_group(group, &group_g));
    MPI_CHECK(MPI_Comm_group(m_node.get(), &node_g));
    for (int r = 0; r < m_size; ++r) {
      int nr = MPI_UNDEFINED;
      MPI_CHECK(MPI_Group_translate_ranks(group_g, 1, &r, node_g, &nr));
      if (nr == MPI_UNDEFINED) continue;
      MPI_Aint size = 0;
      int disp = 0;
      void* base = nullptr;
      MPI_CHECK(MPI_Win_shared_query(m_shm_byte_win.get(), nr, &size, &disp, &base));
      m_node_bytes[static_cast<size_t>(r)] = static_cast<const uint8_t*>(base);
      MPI_CHECK(MPI_Win_shared_query(m_shm_offset_win.get(), nr, &size, &disp, &base));
      m_node_offsets[static_cast<size_t>(r)] = static_cast<const int64_t*>(base);
    }
    MPI_Group_free(&group_g);
    MPI_Group_free(&node_g);
  }
}

void ByteStore::ready() {
  for (const Window* w : {&m_shm_byte_win, &m_shm_offset_win})
    if (*w) {
      MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, w->get()));
      MPI_CHECK(MPI_Win_sync(w->get()));
      MPI_CHECK(MPI_Win_unlock_all(w->get()));
    }
  MPI_CHECK(MPI_Barrier(m_comm));
  // One passive-target epoch for the store's life: fetches only get and flush.
  m_byte_win.lock_all();
  m_offset_win.lock_all();
}

int64_t ByteStore::group_bytes() const {
  int64_t total = 0;
  MPI_CHECK(MPI_Allreduce(&m_n_bytes, &total, 1, MPI_INT64_T, MPI_SUM, m_comm));
  return total;
}

}  // namespace ddgnn
