// The arrays of a dataset file, shared by the writer and the reader so that
// the two can never disagree. Loader-internal; the page for people is loader/FORMAT.md.
#pragma once

#include <hdf5.h>

#include <string>
#include <vector>

#include "loader/dataset.h"

namespace ddgnn::layout {

constexpr hsize_t kGraphChunkRows = 8192;  // rows per chunk and per checksum block, graph arrays
constexpr hsize_t kAtomChunkRows = 65536;  // the same for per-atom arrays
constexpr hsize_t kRecordChunkBytes = hsize_t(1) << 20;  // the same for the records (version 4)

// What an array's rows count: graphs, atoms, or bytes of the records.
enum class Rows { kGraph, kAtom, kByte };

struct ArraySpec {
  std::string path;  // e.g. "atoms/pos"
  hid_t type;        // HDF5 native memory type (file type is the same, little-endian)
  int n_cols;        // 0 for 1-D arrays
  hsize_t chunk_rows;
  Rows rows;
  size_t elem_size;  // bytes of one element
  size_t row_bytes() const { return elem_size * size_t(n_cols > 0 ? n_cols : 1); }
  bool per_atom() const { return rows == Rows::kAtom; }
};

// The arrays of a file of format `version`. Version 4 holds each graph as one encoded record
// (loader/packed.h) in `records`, found by `graphs/record_start`; versions 2-3 hold float64
// arrays of graphs and atoms.
inline std::vector<ArraySpec> array_specs(int64_t version, bool has_forces,
                                          const std::vector<ColumnInfo>& extra,
                                          const std::vector<ColumnInfo>& graph_extra) {
  if (version >= 4)
    return {{"graphs/record_start", H5T_NATIVE_INT64, 0, kGraphChunkRows, Rows::kGraph, 8},
            {"records", H5T_NATIVE_UINT8, 0, kRecordChunkBytes, Rows::kByte, 1}};
  std::vector<ArraySpec> specs = {
      {"graphs/atom_start", H5T_NATIVE_INT64, 0, kGraphChunkRows, Rows::kGraph, 8},
      {"graphs/n_atoms", H5T_NATIVE_INT32, 0, kGraphChunkRows, Rows::kGraph, 4},
      {"graphs/energy", H5T_NATIVE_DOUBLE, 0, kGraphChunkRows, Rows::kGraph, 8},
      {"graphs/cell", H5T_NATIVE_DOUBLE, 9, kGraphChunkRows, Rows::kGraph, 8},
      {"graphs/pbc", H5T_NATIVE_UINT8, 3, kGraphChunkRows, Rows::kGraph, 1},
      {"graphs/stress", H5T_NATIVE_DOUBLE, 9, kGraphChunkRows, Rows::kGraph, 8},
      {"graphs/config_type", H5T_NATIVE_INT32, 0, kGraphChunkRows, Rows::kGraph, 4},
      {"atoms/z", H5T_NATIVE_UINT8, 0, kAtomChunkRows, Rows::kAtom, 1},
      {"atoms/pos", H5T_NATIVE_DOUBLE, 3, kAtomChunkRows, Rows::kAtom, 8},
  };
  if (has_forces)
    specs.push_back({"atoms/forces", H5T_NATIVE_DOUBLE, 3, kAtomChunkRows, Rows::kAtom, 8});
  for (const auto& c : extra)
    specs.push_back(
        {"atoms/extra/" + c.name, H5T_NATIVE_DOUBLE, c.n_cols, kAtomChunkRows, Rows::kAtom, 8});
  for (const auto& c : graph_extra)
    specs.push_back(
        {"graphs/extra/" + c.name, H5T_NATIVE_DOUBLE, c.n_cols, kGraphChunkRows, Rows::kGraph, 8});
  return specs;
}

// Where the CRC-32 table of an array lives: "checksums/atoms.pos" for "atoms/pos".
inline std::string checksum_path(const std::string& array_path) {
  std::string s = array_path;
  for (char& c : s)
    if (c == '/') c = '.';
  return "checksums/" + s;
}

// The longest a metadata text array ('sources', 'outliers') may be: 1 GiB.
constexpr size_t kMaxMetadataText = size_t(1) << 30;

// CRC-32 of the file's metadata: every root attribute but `metadata_crc32` itself (name order,
// "name=value" lines), the species table, the config type names, and the text arrays 'sources'
// and 'outliers' where they exist (format version 3), and 'columns' (version 4). Written at commit
// as the root attribute `metadata_crc32` (from format version 2) and compared on open.
uint32_t metadata_checksum(hid_t file, const std::vector<uint8_t>& species,
                           const std::vector<std::string>& config_types,
                           const std::string& context);

}  // namespace ddgnn::layout
