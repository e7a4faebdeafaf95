// Dataset, format version 4: the records of a range of graphs, found by their offsets, read
// with their checksums and checked (loader/FORMAT.md).
#include <cstring>

#include "loader/array_codec.h"
#include "loader/dataset_impl.h"
#include "loader/packed.h"

namespace ddgnn {

namespace {

// Records of graphs [first, first + count) that take `got` bytes where `want` were sized for.
DataError size_changed(const std::string& path, int64_t first, int64_t count, int64_t got,
                       int64_t want) {
  return DataError(path + ": graphs " + std::to_string(first) + ".." +
                       std::to_string(first + count - 1) + " hold " + std::to_string(got) +
                       " bytes of records, " + std::to_string(want) + " were expected",
                   "the file changed while it was read; load it again");
}

}  // namespace

int64_t Dataset::record_bytes() const {
  return m_impl->n_record_bytes;
}

std::vector<int64_t> Dataset::stored_record_sizes(int64_t first, int64_t count) const {
  const Impl& m = *m_impl;
  if (m.version < 4) return {};
  m.check_range(first, count);
  std::vector<uint8_t> encoded;  // the constant columns read_records() appends to each record
  for (double v : m.constants) encode_array(&v, 1, encoded);
  const auto tail = int64_t(encoded.size());
  std::vector<int64_t> start = m.record_offsets(first, count, true);
  for (size_t i = 0; i + 1 < start.size(); ++i) start[i] = start[i + 1] - start[i] + tail;
  start.pop_back();
  return start;
}

std::vector<int64_t> Dataset::Impl::record_offsets(int64_t first, int64_t count,
                                                   bool verify) const {
  const size_t n = size_t(count);
  std::vector<int64_t> start(n + 1);
  if (n > 0) read_array(index("graphs/record_start"), hsize_t(first), n, start.data(), verify);
  if (first + count < n_graphs)
    read_array(index("graphs/record_start"), hsize_t(first + count), 1, &start[n], verify);
  else
    start[n] = n_record_bytes;
  // The offset table first: each record at least a header long, the first at 0, within the file.
  for (size_t i = 0; i < n; ++i) {
    const int64_t g = first + int64_t(i);
    if ((g == 0 && start[0] != 0) || start[i] < 0 || start[i + 1] - start[i] < kRecordHeaderBytes ||
        start[i + 1] > n_record_bytes)
      throw DataError(path + ": array 'graphs/record_start' is inconsistent at graph " +
                          std::to_string(g) + " (" + std::to_string(start[i]) + ", then " +
                          std::to_string(start[i + 1]) + ", of " + std::to_string(n_record_bytes) +
                          " bytes)",
                      "the file is corrupted; convert it again");
  }
  return start;
}

GraphBlock Dataset::Impl::read_v4(int64_t first, int64_t count, bool verify,
                                  std::vector<uint8_t>* bytes, std::vector<int64_t>* offsets,
                                  bool light, uint8_t* dest, int64_t dest_size) const {
  const size_t n = size_t(count);
  std::vector<int64_t> start = record_offsets(first, count, verify);
  const int64_t s0 = n > 0 ? start[0] : 0;
  for (int64_t& s : start) s -= s0;
  std::vector<uint8_t> own;
  std::vector<uint8_t>& vec = bytes ? *bytes : own;
  if (dest && dest_size != start[n]) throw size_changed(path, first, count, start[n], dest_size);
  if (!dest) vec.resize(size_t(start[n]));
  uint8_t* buf = dest ? dest : vec.data();
  read_array(index("records"), hsize_t(s0), hsize_t(start[n]), buf, verify);
  GraphBlock b;
  try {
    bool finite = true;
    b = unpack_records(buf, start.data(), count, extra, graph_extra, !light, &finite);
    if (!finite)  // decoded after all, for check_block to name the value
      b = unpack_records(buf, start.data(), count, extra, graph_extra);
  } catch (const DataError& e) {
    throw DataError(path + ": array 'records', graphs " + std::to_string(first) + ".." +
                        std::to_string(first + count - 1) + ": " + e.what(),
                    "the file is corrupted or was written by another tool; convert the extxyz "
                    "input again with `ddgnn convert`");
  }
  b.first = first;
  const bool forces = n > 0 && (buf[8] & 1) != 0;  // the first record's header flags, bit 0
  if (n > 0 && forces != has_forces)               // the records of a block agree (unpack_records)
    bad_value("records", first,
              has_forces ? "the record has no forces, the dataset has them"
                         : "the record has forces, the dataset has none");
  check_block(b);
  if (offsets) *offsets = std::move(start);
  return b;
}

std::vector<int64_t> Dataset::read_records(int64_t first, int64_t count, std::vector<uint8_t>& out,
                                           bool compact) const {
  const Impl& m = *m_impl;
  if (m.version < 4 || !compact) {
    const GraphBlock b = read(first, count);
    return pack_records(b, out, compact);
  }
  m.check_range(first, count);
  std::vector<uint8_t> bytes;
  std::vector<int64_t> offsets;
  m.read_v4(first, count, true, &bytes, &offsets, /*light=*/true);
  add_constant_columns(bytes, offsets, m.constants);
  if (out.empty())
    out.swap(bytes);
  else
    out.insert(out.end(), bytes.begin(), bytes.end());
  return offsets;
}

void Dataset::read_records_into(int64_t first, int64_t count, uint8_t* dest, int64_t size) const {
  const Impl& m = *m_impl;
  if (m.version >= 4 && m.constants.empty()) {
    m.check_range(first, count);
    m.read_v4(first, count, true, nullptr, nullptr, /*light=*/true, dest, size);
    return;
  }
  std::vector<uint8_t> records;
  read_records(first, count, records);
  if (int64_t(records.size()) != size)
    throw size_changed(m.path, first, count, int64_t(records.size()), size);
  if (size > 0) std::memcpy(dest, records.data(), size_t(size));
}

}  // namespace ddgnn
