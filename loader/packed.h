// One graph as a byte record: how samples sit in the in-memory store and travel between ranks
// (edges are never packed; the receiver builds the radius graph). Layout, byte-aligned,
// little-endian:
//   header, 9 bytes: n_atoms int32, config_type int32, flags uint8 (bit 0: forces; bits 1-3:
//     pbc; bit 4: atomic numbers as a palette; bit 5: no cell, all nine +0.0, and no bytes of
//     it; bit 6: no stress, all nine the NaN of std::nan(""), and no bytes of it: a molecule)
//   z: [n_atoms] uint8, or, where smaller (flags bit 4), a palette: byte k, the k distinct atomic
//     numbers in increasing order, then each atom's index into them in ceil(log2 k) bits, packed
//     from the low bit (a one-element crystal: 2 bytes)
//   each float64 array in its cheapest exact encoding (loader/array_codec.h), in this order:
//     energy [1], cell [9] Å (unless flags bit 5), stress [9] eV/Å³ (unless flags bit 6), pos
//     [n_atoms, 3] Å, forces [n_atoms, 3] eV/Å (when the dataset has forces), each extra column
//     [n_atoms, k] in Dataset::extra_columns() order, each per-structure column [k] in
//     Dataset::graph_columns() order
// A record gives back every bit it was made from. It is self-describing apart from the
// columns, which the dataset fixes: a decoder given other columns finds the record ending
// before or after its last byte (a DataError), unless both take the same bytes.
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

// Bytes of a record's header: the least a record takes.
constexpr int64_t kRecordHeaderBytes = 9;

// Adds per-structure columns of one value each, the same for every record, after each record's
// own columns: `records` holds n records back to back at `offsets` ([n + 1], from 0), both
// rewritten. A file of a list trained as one dataset gets its dataset_name so
// (Dataset::add_constant_column) without decoding its records.
void add_constant_columns(std::vector<uint8_t>& records, std::vector<int64_t>& offsets,
                          const std::vector<double>& values);

// Bytes the graph would take as float64 arrays behind a 176-byte header (the layout before the
// encodings): what a record saves is measured against it.
int64_t raw_record_bytes(int64_t n_atoms, bool has_forces, int64_t extra_width,
                         int64_t graph_width);

// What the records of a dataset's first `max_graphs` graphs (all: 0) take: bytes as float64
// behind a 176-byte header (raw_record_bytes) and as records, in all and per array (energy,
// cell, stress, pos, forces, then the columns by name), with how often each encoding was chosen
// (or the array left out of the record).
struct RecordSizes {
  struct Array {
    std::string name;
    int64_t raw = 0, encoded = 0;
    int64_t chosen[4] = {0, 0, 0, 0};  // by ArrayEncoding
    int64_t absent = 0;                // records without the array's bytes (cell, stress)
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
// checked and stepped over: statistics of the rest read a record at a fraction of the cost;
// then `atoms_finite`, when given, is set to whether every position and force is finite (found
// without decoding them: encoded_array_finite). `only` ([n], when given) limits the decoding of
// the per-atom arrays to the records i where only[i] is not 0; the others' are stepped over and
// left 0 (a split's statistics over a chunk of all splits' graphs).
GraphBlock unpack_records(const uint8_t* data, const int64_t* offsets, int64_t n,
                          const std::vector<ColumnInfo>& extra,
                          const std::vector<ColumnInfo>& graph_extra, bool atom_arrays = true,
                          bool* atoms_finite = nullptr, const uint8_t* only = nullptr);

}  // namespace ddgnn
