// The byte store in MPI window memory, the arithmetic partition and replica groups.
#include "comm/store.h"

#include <algorithm>
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
  MPI_CHECK(MPI_Comm_split(world, m_index, world_rank, &m_comm));
  MPI_CHECK(MPI_Comm_set_errhandler(m_comm, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(m_comm, &m_rank));
  MPI_CHECK(MPI_Comm_size(m_comm, &m_size));
}

LoaderGroup::~LoaderGroup() {
  if (m_comm != MPI_COMM_NULL && mpi_active()) MPI_Comm_free(&m_comm);
}

ByteStore::ByteStore(MPI_Comm group, int64_t n_total, const std::vector<int64_t>& sizes,
                     int64_t budget_bytes)
    : m_comm(group) {
  MPI_CHECK(MPI_Comm_rank(group, &m_rank));
  MPI_CHECK(MPI_Comm_size(group, &m_size));
  m_part = Partition{n_total, m_size};
  if (int64_t(sizes.size()) != count())
    throw Error("ByteStore: " + std::to_string(sizes.size()) + " record sizes for the " +
                std::to_string(count()) + " records of rank " + std::to_string(m_rank));
  for (int64_t s : sizes) m_n_bytes += s;
  // Every rank decides together, so that no rank is left waiting in MPI_Win_allocate.
  const int64_t need = m_n_bytes + 8 * (count() + 1);
  int64_t worst = need;
  MPI_CHECK(MPI_Allreduce(&need, &worst, 1, MPI_INT64_T, MPI_MAX, group));
  if (budget_bytes > 0 && worst > budget_bytes)
    throw ConfigError("the dataset needs " + std::to_string(worst / (1 << 20)) +
                          " MiB on the most loaded rank of its loader group, over the budget of " +
                          std::to_string(budget_bytes / (1 << 20)) + " MiB",
                      "use more ranks per replica group (Loader.width), or raise "
                      "Loader.memory_budget_mb");
  MPI_Info info;
  MPI_CHECK(MPI_Info_create(&info));
  // Only passive-target epochs with lock_all: the implementation may skip lock bookkeeping.
  MPI_CHECK(MPI_Info_set(info, "same_disp_unit", "true"));
  MPI_CHECK(MPI_Win_allocate(MPI_Aint(std::max<int64_t>(m_n_bytes, 1)), 1, info, group, &m_bytes,
                             &m_byte_win));
  MPI_CHECK(
      MPI_Win_allocate(MPI_Aint(8 * (count() + 1)), 8, info, group, &m_offsets, &m_offset_win));
  MPI_Info_free(&info);
  MPI_CHECK(MPI_Win_set_errhandler(m_byte_win, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Win_set_errhandler(m_offset_win, MPI_ERRORS_RETURN));
  m_offsets[0] = 0;
  for (int64_t i = 0; i < count(); ++i) m_offsets[i + 1] = m_offsets[i] + sizes[size_t(i)];
}

ByteStore::~ByteStore() {
  if (!mpi_active()) return;
  if (m_offset_win != MPI_WIN_NULL) MPI_Win_free(&m_offset_win);
  if (m_byte_win != MPI_WIN_NULL) MPI_Win_free(&m_byte_win);
}

int64_t ByteStore::group_bytes() const {
  int64_t total = 0;
  MPI_CHECK(MPI_Allreduce(&m_n_bytes, &total, 1, MPI_INT64_T, MPI_SUM, m_comm));
  return total;
}

}  // namespace ddgnn
