// Gathers the atoms of the chosen graphs into contiguous arrays and hands them to make_batch.
#include "train/collate.h"

#include <c10/core/ScalarType.h>

#include <ATen/ATen.h>

#include <cmath>
#include <string>

#include "core/error.h"

namespace ddgnn {

GraphBatch collate(const GraphBlock& block, const std::vector<int64_t>& ids,
                   const RadiusGraphOptions& graph_options, c10::ScalarType dtype, bool periodic,
                   c10::Device device) {
  const int64_t n_graphs = static_cast<int64_t>(ids.size());
  if (n_graphs == 0) throw Error("collate: empty batch");
  const bool has_forces = !block.forces.empty();
  std::vector<int64_t> offsets(size_t(n_graphs) + 1, 0);
  for (int64_t g = 0; g < n_graphs; ++g) {
    const int64_t id = ids[size_t(g)];
    if (id < 0 || id >= int64_t(block.n_graphs()))
      throw Error("collate: graph id " + std::to_string(id) + " outside the block of " +
                  std::to_string(block.n_graphs()));
    offsets[size_t(g) + 1] = offsets[size_t(g)] + block.n_atoms[size_t(id)];
  }
  const size_t n_atoms = size_t(offsets.back());
  const size_t n_g = static_cast<size_t>(n_graphs);
  std::vector<uint8_t> z(n_atoms), pbc(3 * n_g);
  std::vector<double> pos(3 * n_atoms), cells(9 * n_g), energy(n_g);
  std::vector<double> forces(has_forces ? 3 * n_atoms : 0);
  for (int64_t g = 0; g < n_graphs; ++g) {
    const size_t id = size_t(ids[size_t(g)]), dst = size_t(offsets[size_t(g)]);
    const size_t src = size_t(block.atom_start[id]), n = size_t(block.n_atoms[id]);
    std::copy_n(block.z.begin() + src, n, z.begin() + dst);
    std::copy_n(block.pos.begin() + 3 * src, 3 * n, pos.begin() + 3 * dst);
    if (has_forces) std::copy_n(block.forces.begin() + 3 * src, 3 * n, forces.begin() + 3 * dst);
    std::copy_n(block.cell.begin() + 9 * id, 9, cells.begin() + 9 * g);
    if (periodic) std::copy_n(block.pbc.begin() + 3 * id, 3, pbc.begin() + 3 * g);
    energy[size_t(g)] = block.energy[id];
  }
  GraphBatch b =
      make_batch(z.data(), pos.data(), offsets.data(), n_graphs, cells.data(), pbc.data(),
                 energy.data(), has_forces ? forces.data() : nullptr, graph_options, dtype, device);
  // Stress where the graph has one and a cell periodic in three directions
  // (GraphBlock::has_stress).
  std::vector<double> stress(9 * n_g, 0.0), mask(n_g, 0.0);
  for (size_t g = 0; g < n_g; ++g) {
    const size_t id = size_t(ids[g]);
    if (!periodic || !block.has_stress(id)) continue;
    std::copy_n(&block.stress[9 * id], 9, stress.begin() + long(9 * g));
    mask[g] = 1.0;
    ++b.n_stress;
  }
  if (b.n_stress > 0) {
    // A copy always: in float64 on the CPU, to() would return the view of these local vectors.
    const auto host = [&](std::vector<double>& v, at::IntArrayRef shape) {
      return at::from_blob(v.data(), shape, at::kDouble)
          .to(dtype, /*non_blocking=*/false, /*copy=*/true)
          .to(device);
    };
    b.stress = host(stress, {n_graphs, 3, 3});
    b.stress_mask = host(mask, {n_graphs});
  }
  return b;
}

}  // namespace ddgnn
