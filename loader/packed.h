// One graph as a byte record: how samples sit in the in-memory store and travel between ranks
// (edges are never packed; the receiver builds the radius graph). Layout, byte-aligned,
// little-endian:
//   header, 17 bytes: n_atoms int32, config_type int32, flags uint8 (bit 0: forces; bits 1-3:
//     pbc; bit 4: atomic numbers as a palette), extra_width int32 (doubles per atom of the extra
//     columns), graph_width int32 (doubles per graph of the per-structure columns)
//   z: [n_atoms] uint8, or, where smaller (flags bit 4), a palette: byte k, the k distinct atomic
//     numbers in increasing order, then each atom's index into them in ceil(log2 k) bits, packed
//     from the low bit (a one-element crystal: 2 bytes)
//   each float64 array in its cheapest exact encoding (loader/array_codec.h), in this order:
//     energy [1], cell [9] Å, stress [9] eV/Å³, pos [n_atoms, 3] Å, forces [n_atoms, 3] eV/Å
//     (when the dataset has forces), each extra column [n_atoms, k] in Dataset::extra_columns()
//     order, each per-structure column [k] in Dataset::graph_columns() order
// A record gives back every bit it was made from. It is self-describing apart from the
// columns' widths, which the dataset fixes and the header repeats as a check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loader/dataset.h"

namespace ddgnn {

// Appends the record of every graph of `block` to `out`, back to back; returns their offsets
// relative to where the first one starts: [n_graphs + 1], starting at 0. `compact` false: every
// array raw (float64), the records the decoder reads alike.
std::vector<int64_t> pack_records(const GraphBlock& block, std::vector<uint8_t>& out,
                                  bool compact = true);

// Bytes the graph would take as float64 arrays behind a 176-byte header (the layout before the
// encodings): what a record saves is measured against it.
int64_t raw_record_bytes(int64_t n_atoms, bool has_forces, int64_t extra_width,
                         int64_t graph_width);

// What the records of a dataset's first `max_graphs` graphs (all: 0) take: bytes as float64
// behind a 176-byte header (raw_record_bytes) and as records, in all and per array (energy,
// cell, stress, pos, forces, then the columns by name), with how often each encoding was chosen.
struct RecordSizes {
  struct Array {
    std::string name;
    int64_t raw = 0, encoded = 0;
    int64_t chosen[4] = {0, 0, 0, 0};  // by ArrayEncoding
  };
  int64_t graphs = 0, raw = 0, encoded = 0;
  std::vector<Array> arrays;
};
RecordSizes record_sizes(const Dataset& dataset, int64_t max_graphs);

// Rebuilds a GraphBlock from n records (record i at data + offsets[i], size offsets[i+1] -
// offsets[i]), in that order; `first` is set to -1 (the graphs need not be contiguous). `extra`
// and `graph_extra` give the widths of the per-atom and per-structure columns. A record whose
// bytes are not one record of this dataset is a DataError naming its position ("record 3 of 8:
// ...). `atom_arrays` false leaves the per-atom arrays (pos, forces, extra) empty, each only
// checked and stepped over: statistics of the rest read a record at a fraction of the cost.
GraphBlock unpack_records(const uint8_t* data, const int64_t* offsets, int64_t n,
                          const std::vector<ColumnInfo>& extra,
                          const std::vector<ColumnInfo>& graph_extra, bool atom_arrays = true);

}  // namespace ddgnn
