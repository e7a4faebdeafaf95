// bench_codec DATA.h5 [...]: what the exact array encodings (loader/array_codec.h) make of each
// dataset's records (loader/packed.h), as the store holds them. Per array: bytes as float64 and
// encoded, and which encodings were chosen; per record: the float64 layout behind a 176-byte
// header (raw_record_bytes, the layout before the encodings) against the record; and the time
// to unpack every record (unpack_records, what the prefetch thread does) against a memcpy of as
// many raw bytes in the same run, as a ratio and in GB/s of raw bytes produced. Prints figures;
// never fails on them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "loader/array_codec.h"
#include "loader/dataset.h"
#include "loader/packed.h"

namespace {

using ddgnn::ArrayEncoding;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const std::string& path) {
  const ddgnn::Dataset d(path);
  const ddgnn::GraphBlock b = d.read(0, d.n_graphs());
  std::vector<uint8_t> records;
  const std::vector<int64_t> offsets = ddgnn::pack_records(b, records);
  int64_t extra_width = 0, graph_width = 0;
  for (const auto& c : d.extra_columns()) extra_width += c.n_cols;
  for (const auto& c : d.graph_columns()) graph_width += c.n_cols;
  int64_t raw_total = 0;
  for (size_t g = 0; g < b.n_graphs(); ++g)
    raw_total += ddgnn::raw_record_bytes(b.n_atoms[g], d.has_forces(), extra_width, graph_width);

  const ddgnn::RecordSizes sizes = ddgnn::record_sizes(d, 0);
  const auto encoded_total = int64_t(records.size());

  // Unpack every record, against a memcpy of as many raw bytes; best of 5.
  std::vector<uint8_t> raw(size_t(raw_total), 1);
  std::vector<uint8_t> copy(raw.size());
  double decode_s = 1e30, memcpy_s = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    const ddgnn::GraphBlock u =
        ddgnn::unpack_records(records.data(), offsets.data(), int64_t(b.n_graphs()),
                              d.extra_columns(), d.graph_columns());
    decode_s = std::min(decode_s, seconds_since(t0));
    if (u.pos != b.pos) throw ddgnn::Error("bench_codec: the records did not give back pos");
    t0 = std::chrono::steady_clock::now();
    std::memcpy(copy.data(), raw.data(), raw.size());
    memcpy_s = std::min(memcpy_s, seconds_since(t0));
  }
  std::printf("%s: %lld graphs, %lld atoms\n", path.c_str(), (long long)d.n_graphs(),
              (long long)d.n_atoms());
  std::printf("  %-8s %12s %12s %7s  %s\n", "array", "raw B", "encoded B", "ratio", "encodings");
  for (const auto& a : sizes.arrays) {
    std::string chosen;
    for (int e = 0; e < 4; ++e)
      if (a.chosen[e] > 0)
        chosen += (chosen.empty() ? "" : ", ") + std::string(ddgnn::to_string(ArrayEncoding(e))) +
                  " " + std::to_string(a.chosen[e]);
    std::printf("  %-8s %12lld %12lld %6.2fx  %s\n", a.name.c_str(), (long long)a.raw,
                (long long)a.encoded, double(a.raw) / double(std::max<int64_t>(a.encoded, 1)),
                chosen.c_str());
  }
  const double raw_b = double(raw_total);
  std::printf("  records: %.1f B a graph as float64, %.1f encoded: %.2fx smaller\n",
              raw_b / double(d.n_graphs()), double(encoded_total) / double(d.n_graphs()),
              raw_b / double(encoded_total));
  std::printf(
      "  unpack %.1f us, memcpy of as many raw bytes %.1f us: %.2fx its time; %.2f GB/s of raw "
      "bytes unpacked, memcpy %.2f GB/s\n",
      1e6 * decode_s, 1e6 * memcpy_s, decode_s / memcpy_s, raw_b / decode_s / 1e9,
      raw_b / memcpy_s / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_codec DATA.h5 [DATA2.h5 ...]\n");
    return 2;
  }
  try {
    for (int i = 1; i < argc; ++i) run(argv[i]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", ddgnn::error_line(e, -1).c_str());
    return 1;
  }
  return 0;
}
