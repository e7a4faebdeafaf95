// Packing graphs to byte records and back (layout in packed.h).
#include "loader/packed.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace ddgnn {

namespace {

int64_t pad8(int64_t n) {
  return (n + 7) / 8 * 8;
}

int32_t extra_width_of(const std::vector<ColumnInfo>& extra) {
  int32_t w = 0;
  for (const auto& c : extra) w += c.n_cols;
  return w;
}

// Widths (doubles per atom) of a block's extra columns, from their sizes.
std::vector<int32_t> extra_widths(const GraphBlock& block) {
  int64_t total_atoms = 0;
  for (size_t i = 0; i < block.n_graphs(); ++i) total_atoms += block.n_atoms[i];
  std::vector<int32_t> widths;
  for (const auto& e : block.extra)
    widths.push_back(total_atoms > 0 ? int32_t(int64_t(e.size()) / total_atoms) : 0);
  return widths;
}

// Widths (doubles per graph) of a block's per-structure columns.
std::vector<int32_t> graph_widths(const GraphBlock& block) {
  const int64_t n = int64_t(block.n_graphs());
  std::vector<int32_t> widths;
  for (const auto& e : block.graph_extra)
    widths.push_back(n > 0 ? int32_t(int64_t(e.size()) / n) : 0);
  return widths;
}

int32_t sum(const std::vector<int32_t>& widths) {
  int32_t w = 0;
  for (int32_t x : widths) w += x;
  return w;
}

}  // namespace

int64_t packed_size(int64_t n_atoms, bool has_forces, int32_t extra_width, int32_t graph_width) {
  return int64_t(sizeof(PackedHeader)) + pad8(n_atoms) +
         8 * n_atoms * (3 + (has_forces ? 3 : 0) + extra_width) + 8 * int64_t(graph_width);
}

std::vector<int64_t> packed_offsets(const GraphBlock& block) {
  const bool forces = !block.forces.empty();
  const int32_t width = sum(extra_widths(block)), gwidth = sum(graph_widths(block));
  std::vector<int64_t> off(block.n_graphs() + 1, 0);
  for (size_t i = 0; i < block.n_graphs(); ++i)
    off[i + 1] = off[i] + packed_size(block.n_atoms[i], forces, width, gwidth);
  return off;
}

void pack_block(const GraphBlock& block, const std::vector<int64_t>& offsets, uint8_t* out) {
  const bool forces = !block.forces.empty();
  const std::vector<int32_t> widths = extra_widths(block), gwidths = graph_widths(block);
  const int32_t width = sum(widths), gwidth = sum(gwidths);
  for (size_t i = 0; i < block.n_graphs(); ++i) {
    uint8_t* rec = out + offsets[i];
    const int64_t n = block.n_atoms[i], a0 = block.atom_start[i];
    PackedHeader h;
    h.n_atoms = int32_t(n);
    h.config_type = block.config_type.empty() ? 0 : block.config_type[i];
    h.has_forces = forces ? 1 : 0;
    for (int k = 0; k < 3; ++k) h.pbc[k] = block.pbc[3 * i + k];
    h.extra_width = width;
    h.graph_width = gwidth;
    h.energy = block.energy[i];
    std::memcpy(h.cell, &block.cell[9 * i], sizeof h.cell);
    if (!block.stress.empty()) std::memcpy(h.stress, &block.stress[9 * i], sizeof h.stress);
    std::memcpy(rec, &h, sizeof h);
    uint8_t* p = rec + sizeof h;
    std::memset(p, 0, size_t(pad8(n)));
    std::memcpy(p, &block.z[size_t(a0)], size_t(n));
    p += pad8(n);
    std::memcpy(p, &block.pos[size_t(3 * a0)], size_t(24 * n));
    p += 24 * n;
    if (forces) {
      std::memcpy(p, &block.forces[size_t(3 * a0)], size_t(24 * n));
      p += 24 * n;
    }
    for (size_t c = 0; c < block.extra.size(); ++c) {
      const int64_t w = widths[c];
      std::memcpy(p, &block.extra[c][size_t(w * a0)], size_t(8 * w * n));
      p += 8 * w * n;
    }
    for (size_t c = 0; c < block.graph_extra.size(); ++c) {
      const int64_t w = gwidths[c];
      std::memcpy(p, &block.graph_extra[c][size_t(w) * i], size_t(8 * w));
      p += 8 * w;
    }
  }
}

GraphBlock unpack_records(const uint8_t* data, const int64_t* offsets, int64_t n,
                          const std::vector<ColumnInfo>& extra,
                          const std::vector<ColumnInfo>& graph_extra) {
  GraphBlock b;
  b.first = -1;
  const int32_t width = extra_width_of(extra), gwidth = extra_width_of(graph_extra);
  int64_t total_atoms = 0;
  std::vector<PackedHeader> headers(static_cast<size_t>(n));
  bool forces = false;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t size = offsets[i + 1] - offsets[i];
    const std::string where = "record " + std::to_string(i + 1) + " of " + std::to_string(n) + ": ";
    if (size < int64_t(sizeof(PackedHeader)))
      throw DataError(where + std::to_string(size) + " bytes, shorter than a header",
                      "the sender and receiver disagree on the store's layout");
    std::memcpy(&headers[size_t(i)], data + offsets[i], sizeof(PackedHeader));
    const PackedHeader& h = headers[size_t(i)];
    if (i == 0) forces = h.has_forces != 0;
    if (h.n_atoms < 0 || h.extra_width != width || h.graph_width != gwidth ||
        (h.has_forces != 0) != forces || packed_size(h.n_atoms, forces, width, gwidth) != size)
      throw DataError(where + "header (" + std::to_string(h.n_atoms) + " atoms) does not match " +
                          std::to_string(size) + " bytes",
                      "the record is corrupted or from another dataset");
    total_atoms += h.n_atoms;
  }
  b.atom_start.resize(static_cast<size_t>(n));
  b.n_atoms.resize(static_cast<size_t>(n));
  b.energy.resize(static_cast<size_t>(n));
  b.cell.resize(size_t(9 * n));
  b.pbc.resize(size_t(3 * n));
  b.stress.resize(size_t(9 * n));
  b.config_type.resize(static_cast<size_t>(n));
  b.z.resize(static_cast<size_t>(total_atoms));
  b.pos.resize(size_t(3 * total_atoms));
  if (forces) b.forces.resize(size_t(3 * total_atoms));
  b.extra.resize(extra.size());
  for (size_t c = 0; c < extra.size(); ++c)
    b.extra[c].resize(size_t(extra[c].n_cols * total_atoms));
  b.graph_extra.resize(graph_extra.size());
  for (size_t c = 0; c < graph_extra.size(); ++c)
    b.graph_extra[c].resize(size_t(graph_extra[c].n_cols * n));
  int64_t a0 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const PackedHeader& h = headers[size_t(i)];
    const int64_t na = h.n_atoms;
    b.atom_start[size_t(i)] = a0;
    b.n_atoms[size_t(i)] = h.n_atoms;
    b.energy[size_t(i)] = h.energy;
    b.config_type[size_t(i)] = h.config_type;
    std::memcpy(&b.cell[size_t(9 * i)], h.cell, sizeof h.cell);
    std::memcpy(&b.stress[size_t(9 * i)], h.stress, sizeof h.stress);
    for (int k = 0; k < 3; ++k) b.pbc[size_t(3 * i + k)] = h.pbc[k];
    const uint8_t* p = data + offsets[i] + sizeof(PackedHeader);
    std::memcpy(&b.z[size_t(a0)], p, size_t(na));
    p += pad8(na);
    std::memcpy(&b.pos[size_t(3 * a0)], p, size_t(24 * na));
    p += 24 * na;
    if (forces) {
      std::memcpy(&b.forces[size_t(3 * a0)], p, size_t(24 * na));
      p += 24 * na;
    }
    for (size_t c = 0; c < extra.size(); ++c) {
      const int64_t w = extra[c].n_cols;
      std::memcpy(&b.extra[c][size_t(w * a0)], p, size_t(8 * w * na));
      p += 8 * w * na;
    }
    for (size_t c = 0; c < graph_extra.size(); ++c) {
      const int64_t w = graph_extra[c].n_cols;
      std::memcpy(&b.graph_extra[c][size_t(w * i)], p, size_t(8 * w));
      p += 8 * w;
    }
    a0 += na;
  }
  return b;
}

}  // namespace ddgnn
