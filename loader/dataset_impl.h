// The reader's state shared by its translation units: dataset.cpp (opening a file, version-3
// arrays, metadata) and dataset_records.cpp (version-4 records). Loader-internal.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "core/error.h"
#include "core/units.h"
#include "loader/dataset.h"
#include "loader/dataset_layout.h"
#include "loader/h5.h"

namespace ddgnn {

struct Dataset::Impl {
  std::string path;
  h5::Handle file;
  int64_t n_graphs = 0, n_atoms = 0, version = 0, metadata_crc32 = 0;
  int64_t n_record_bytes = 0;          // format version 4
  mutable int64_t content_crc32 = -1;  // computed on the first call
  std::string producer, sources;
  std::optional<std::vector<Outlier>> outliers;
  bool has_forces = false;
  std::vector<uint8_t> species;
  std::vector<std::string> config_types;
  std::vector<ColumnInfo> extra, graph_extra;
  // graph_extra, then the columns add_constant_column() added (values in `constants`).
  std::vector<ColumnInfo> graph_columns;
  std::vector<double> constants;
  std::vector<layout::ArraySpec> specs;
  std::vector<h5::Handle> dsets, crc_dsets;  // parallel to specs
  std::array<bool, kMaxAtomicNumber + 1> in_species{};

  // Every value of a block that the rest of ddgnn trusts: a DataError names the array, the graph
  // (and atom) and the value.
  void check_block(const GraphBlock& b) const;
  void check_config_type(int32_t index, int64_t graph) const;
  [[noreturn]] void bad_value(const char* array, int64_t graph, const std::string& what) const;

  // Graphs [first, first + count) of a version-4 file, decoded from their records and checked;
  // the records themselves and their offsets (from 0) go to `bytes` and `offsets` when given.
  // `light`: the block without its per-atom arrays, which are checked without being decoded
  // (decoded only to name a value that is not finite).
  // `dest` (dest_size bytes, what the offsets say they take) receives the records instead.
  GraphBlock read_v4(int64_t first, int64_t count, bool verify, std::vector<uint8_t>* bytes,
                     std::vector<int64_t>* offsets, bool light = false, uint8_t* dest = nullptr,
                     int64_t dest_size = 0) const;
  // Where the records of graphs [first, first + count) start in `records`, and where the last
  // ends ([count + 1]), checked: the first graph's at 0, each at least a header long.
  std::vector<int64_t> record_offsets(int64_t first, int64_t count, bool verify) const;
  void check_range(int64_t first, int64_t count) const {
    if (first < 0 || count < 0 || first + count > n_graphs)
      throw DataError(path + ": graphs " + std::to_string(first) + ".." +
                      std::to_string(first + count - 1) + " requested, the file has " +
                      std::to_string(n_graphs));
  }

  hsize_t total_rows(const layout::ArraySpec& spec) const {
    switch (spec.rows) {
      case layout::Rows::kAtom:
        return hsize_t(n_atoms);
      case layout::Rows::kByte:
        return hsize_t(n_record_bytes);
      default:
        return hsize_t(n_graphs);
    }
  }

  size_t index(const std::string& p) const {
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].path == p) return i;
    throw Error("internal: no array " + p);
  }

  // Reads rows [first, first + n) of array i into `out`; with `verify`, reads whole checksum
  // blocks and compares their CRC-32 with the table.
  void read_array(size_t i, hsize_t first, hsize_t n, void* out, bool verify) const {
    const auto& spec = specs[i];
    const std::string ctx = path + ": reading " + spec.path;
    if (n == 0) return;
    const size_t rb = spec.row_bytes();
    if (!verify) {
      h5::read_rows(dsets[i], spec.type, first, n, out, ctx);
      return;
    }
    const hsize_t total = total_rows(spec);
    const hsize_t b0 = first / spec.chunk_rows;
    const hsize_t b1 = (first + n + spec.chunk_rows - 1) / spec.chunk_rows;
    const hsize_t r0 = b0 * spec.chunk_rows;
    const hsize_t r1 = std::min(b1 * spec.chunk_rows, total);
    const hsize_t last = first + n;
    if (last > total)
      throw DataError(ctx + ": rows past the end of the array", "the file is corrupted");
    // The rows asked for straight into `out`; the rest of the first and last blocks beside
    // them, for the blocks' checksums.
    h5::read_rows(dsets[i], spec.type, first, n, out, ctx);
    std::vector<char> head((first - r0) * rb), tail((r1 - last) * rb);
    if (!head.empty()) h5::read_rows(dsets[i], spec.type, r0, first - r0, head.data(), ctx);
    if (!tail.empty()) h5::read_rows(dsets[i], spec.type, last, r1 - last, tail.data(), ctx);
    std::vector<uint32_t> expected(b1 - b0);
    h5::read_rows(crc_dsets[i], H5T_NATIVE_UINT32, b0, b1 - b0, expected.data(), ctx);
    const char* rows = static_cast<const char*>(out);
    for (hsize_t b = b0; b < b1; ++b) {
      const hsize_t s = b * spec.chunk_rows, e = std::min(s + spec.chunk_rows, total);
      uint32_t got = 0;
      if (s < first) got = crc32(head.data() + (s - r0) * rb, (std::min(e, first) - s) * rb, got);
      const hsize_t lo = std::max(s, first), hi = std::min(e, last);
      if (lo < hi) got = crc32(rows + (lo - first) * rb, (hi - lo) * rb, got);
      if (e > last) {
        const hsize_t from = std::max(s, last);
        got = crc32(tail.data() + (from - last) * rb, (e - from) * rb, got);
      }
      if (got != expected[b - b0])
        throw DataError(path + ": checksum mismatch in array '" + spec.path + "', rows " +
                            std::to_string(s) + ".." + std::to_string(e - 1) + " (block " +
                            std::to_string(b) + ")",
                        "the file is corrupted; convert the extxyz input again with "
                        "`ddgnn convert`");
    }
  }
};

}  // namespace ddgnn
