// One graph as a packed byte record: how samples sit in the in-memory store and travel between
// ranks (edges are never packed; the receiver builds the radius graph). Layout, 8-byte aligned:
//   PackedHeader (n_atoms, config_type, flags, pbc, energy, cell[9], stress[9])
//   z [n_atoms] uint8, zero-padded to a multiple of 8
//   pos [n_atoms, 3] float64, Å
//   forces [n_atoms, 3] float64, eV/Å (when the dataset has forces)
//   each extra column [n_atoms, k] float64, in Dataset::extra_columns() order
//   each per-structure column [k] float64, in Dataset::graph_columns() order
// A record is self-describing apart from the extra columns' widths, which the dataset fixes.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/dataset.h"

namespace ddgnn {

struct PackedHeader {
  int32_t n_atoms = 0;
  int32_t config_type = 0;
  uint8_t has_forces = 0;
  uint8_t pbc[3] = {0, 0, 0};
  int32_t extra_width = 0;  // sum of the extra columns' widths (doubles per atom)
  int32_t graph_width = 0;  // sum of the per-structure columns' widths (doubles per graph)
  int32_t reserved = 0;
  double energy = 0.0;
  double cell[9] = {};
  double stress[9] = {};
};
static_assert(sizeof(PackedHeader) % 8 == 0, "records stay 8-byte aligned");

// Bytes of the record of a graph with n_atoms atoms.
int64_t packed_size(int64_t n_atoms, bool has_forces, int32_t extra_width, int32_t graph_width = 0);

// Byte offsets of every graph of `block` packed back to back: [n_graphs + 1], starting at 0.
std::vector<int64_t> packed_offsets(const GraphBlock& block);

// Writes every graph of `block` at out + offsets[i] (offsets from packed_offsets; `out` holds
// offsets.back() bytes).
void pack_block(const GraphBlock& block, const std::vector<int64_t>& offsets, uint8_t* out);

// Rebuilds a GraphBlock from n records (record i at data + offsets[i], size offsets[i+1] -
// offsets[i]), in that order; `first` is set to -1 (the graphs need not be contiguous). `extra`
// and `graph_extra` give the widths of the per-atom and per-structure columns. A record whose
// size disagrees with its header is a DataError naming its position ("record 3 of 8: ...").
GraphBlock unpack_records(const uint8_t* data, const int64_t* offsets, int64_t n,
                          const std::vector<ColumnInfo>& extra,
                          const std::vector<ColumnInfo>& graph_extra);

}  // namespace ddgnn
