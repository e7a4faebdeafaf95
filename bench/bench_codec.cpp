// bench_codec DATA.h5 [...]: what the exact array encodings (loader/array_codec.h) make of each
// dataset's records, one record at a time as the store holds them. Per array: bytes raw (the
// packed record's float64s, loader/packed.h) and encoded, and which encodings were chosen; per
// record: the packed record (its 176-byte header included) against a compact one (9 bytes of
// counts and flags, the atomic numbers, every array encoded), as a ratio; and the time to decode
// every array of every record against a memcpy of the raw records in the same run, as a ratio and
// in GB/s of raw bytes produced. Prints figures; never fails on them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "loader/array_codec.h"
#include "loader/dataset.h"
#include "loader/packed.h"

namespace {

using ddgnn::ArrayEncoding;

struct Tally {
  int64_t raw = 0, encoded = 0;
  std::map<std::string, int64_t> chosen;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run(const std::string& path) {
  const ddgnn::Dataset d(path);
  const ddgnn::GraphBlock b = d.read(0, d.n_graphs());
  const std::vector<int64_t> offsets = ddgnn::packed_offsets(b);
  std::vector<uint8_t> raw_records(size_t(offsets.back()));
  ddgnn::pack_block(b, offsets, raw_records.data());

  std::map<std::string, Tally> arrays;
  std::vector<std::vector<uint8_t>> records(b.n_graphs());
  // Each record's arrays, in order, as (pointer, count), for encoding and for timing the decode.
  std::vector<std::vector<std::pair<const double*, int64_t>>> parts(b.n_graphs());
  for (size_t g = 0; g < b.n_graphs(); ++g) {
    const int64_t a0 = b.atom_start[g], n = b.n_atoms[g];
    auto& p = parts[g];
    p.emplace_back(&b.energy[g], 1);
    p.emplace_back(&b.cell[9 * g], 9);
    p.emplace_back(&b.stress[9 * g], 9);
    p.emplace_back(&b.pos[size_t(3 * a0)], 3 * n);
    if (!b.forces.empty()) p.emplace_back(&b.forces[size_t(3 * a0)], 3 * n);
    for (size_t c = 0; c < b.extra.size(); ++c) {
      const int64_t k = d.extra_columns()[c].n_cols;
      p.emplace_back(&b.extra[c][size_t(k * a0)], k * n);
    }
    for (size_t c = 0; c < b.graph_extra.size(); ++c) {
      const int64_t k = d.graph_columns()[c].n_cols;
      p.emplace_back(&b.graph_extra[c][size_t(k * g)], k);
    }
    static const char* names[] = {"energy", "cell", "stress", "pos", "forces"};
    std::vector<uint8_t>& rec = records[g];
    rec.resize(9 + size_t(n));  // n_atoms, config type, flags; then z
    for (size_t k = 0; k < p.size(); ++k) {
      const std::string name = k < 4 || (k == 4 && !b.forces.empty()) ? names[k] : "columns";
      const size_t before = rec.size();
      const ArrayEncoding e = ddgnn::encode_array(p[k].first, p[k].second, rec);
      Tally& t = arrays[name];
      t.raw += 8 * p[k].second;
      t.encoded += int64_t(rec.size() - before);
      t.chosen[ddgnn::to_string(e)] += 1;
    }
  }
  int64_t encoded_total = 0;
  for (const auto& r : records) encoded_total += int64_t(r.size());

  // Decode every array of every record, against a memcpy of the raw records; best of 5.
  std::vector<double> scratch(1 << 16);
  std::vector<uint8_t> copy(raw_records.size());
  double decode_s = 1e30, memcpy_s = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t g = 0; g < records.size(); ++g) {
      const std::vector<uint8_t>& rec = records[g];
      int64_t at = 9 + b.n_atoms[g];
      for (const auto& [ptr, n] : parts[g]) {
        if (size_t(n) > scratch.size()) scratch.resize(size_t(n));
        at += ddgnn::decode_array(rec.data() + at, int64_t(rec.size()) - at, n, scratch.data());
      }
    }
    decode_s = std::min(decode_s, seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    for (size_t g = 0; g + 1 < offsets.size(); ++g)
      std::copy(raw_records.begin() + offsets[g], raw_records.begin() + offsets[g + 1],
                copy.begin() + offsets[g]);
    memcpy_s = std::min(memcpy_s, seconds_since(t0));
  }
  std::printf("%s: %lld graphs, %lld atoms\n", path.c_str(), (long long)d.n_graphs(),
              (long long)d.n_atoms());
  std::printf("  %-8s %12s %12s %7s  %s\n", "array", "raw B", "encoded B", "ratio", "encodings");
  for (const auto& [name, t] : arrays) {
    std::string chosen;
    for (const auto& [e, count] : t.chosen)
      chosen += (chosen.empty() ? "" : ", ") + e + " " + std::to_string(count);
    std::printf("  %-8s %12lld %12lld %6.2fx  %s\n", name.c_str(), (long long)t.raw,
                (long long)t.encoded, double(t.raw) / double(std::max<int64_t>(t.encoded, 1)),
                chosen.c_str());
  }
  const double raw_b = double(offsets.back());
  std::printf("  records: %.1f B a graph packed, %.1f encoded: %.2fx smaller\n",
              raw_b / double(d.n_graphs()), double(encoded_total) / double(d.n_graphs()),
              raw_b / double(encoded_total));
  std::printf(
      "  decode %.1f us, memcpy of the raw records %.1f us: %.2fx its time; %.2f GB/s of raw "
      "bytes decoded, memcpy %.2f GB/s\n",
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
