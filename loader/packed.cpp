// Graphs to byte records and back (layout in packed.h).
#include "loader/packed.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/units.h"
#include "loader/array_codec.h"

namespace ddgnn {

namespace {

constexpr int64_t kHeaderBytes = kRecordHeaderBytes;

// Widths (doubles per row) of a block's columns, from their sizes over `rows`.
std::vector<int64_t> widths(const std::vector<std::vector<double>>& columns, int64_t rows) {
  std::vector<int64_t> out;
  for (const auto& c : columns) out.push_back(rows > 0 ? int64_t(c.size()) / rows : 0);
  return out;
}

void put_i32(std::vector<uint8_t>& out, int32_t v) {
  const auto u = uint32_t(v);
  for (int b = 0; b < 4; ++b) out.push_back(uint8_t(u >> (8 * b)));
}

int32_t get_i32(const uint8_t* p) {
  uint32_t u = 0;
  for (int b = 0; b < 4; ++b) u |= uint32_t(p[b]) << (8 * b);
  return int32_t(u);
}

struct Header {
  int32_t n_atoms = 0, config_type = 0;
  uint8_t flags = 0;
};

constexpr uint8_t kZPalette = 16;  // flags bit 4: the atomic numbers as a palette
constexpr uint8_t kNoCell = 32;    // flags bit 5: no cell bytes, all nine +0.0
constexpr uint8_t kNoStress = 64;  // flags bit 6: no stress bytes, all nine kNoStressValue
constexpr uint8_t kKnownFlags = 127;

// The NaN that marks "no stress" (std::nan("")), bit for bit: a stress of nine of them is left
// out of the record; any other value, another NaN included, is encoded.
uint64_t bits_of(double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  return u;
}
bool all_bits(const double* v, uint64_t bits) {
  for (int k = 0; k < 9; ++k)
    if (bits_of(v[k]) != bits) return false;
  return true;
}

// Bits an index into a palette of k values takes: ceil(log2 k), 0 for one value.
int palette_bits(int64_t k) {
  int bits = 0;
  while ((int64_t(1) << bits) < k) ++bits;
  return bits;
}

// The palette of n atomic numbers: the distinct values in increasing order (no allocation: it
// is made for every graph a store loads).
struct Palette {
  std::array<uint8_t, 256> values;
  int64_t size = 0;
  int bits = 0;
};

Palette palette_of(const uint8_t* z, int64_t n) {
  bool present[256] = {};
  for (int64_t i = 0; i < n; ++i) present[z[i]] = true;
  Palette p;
  for (int v = 0; v < 256; ++v)
    if (present[v]) p.values[size_t(p.size++)] = uint8_t(v);
  p.bits = palette_bits(p.size);
  return p;
}

int64_t palette_bytes(int64_t n_values, int64_t n, int bits) {
  return 1 + n_values + (n * bits + 7) / 8;
}

Header read_header(const uint8_t* p) {
  Header h;
  h.n_atoms = get_i32(p);
  h.config_type = get_i32(p + 4);
  h.flags = p[8];
  return h;
}

}  // namespace

int64_t raw_record_bytes(int64_t n_atoms, bool has_forces, int64_t extra_width,
                         int64_t graph_width) {
  return 176 + (n_atoms + 7) / 8 * 8 + 8 * n_atoms * (3 + (has_forces ? 3 : 0) + extra_width) +
         8 * graph_width;
}

std::vector<int64_t> pack_records(const GraphBlock& block, std::vector<uint8_t>& out,
                                  bool compact) {
  const auto encode_array = [compact](const double* v, int64_t n, std::vector<uint8_t>& o) {
    return ddgnn::encode_array(v, n, o, compact);
  };
  const bool forces = !block.forces.empty();
  int64_t total_atoms = 0;
  for (size_t i = 0; i < block.n_graphs(); ++i) total_atoms += block.n_atoms[i];
  const std::vector<int64_t> w = widths(block.extra, total_atoms);
  const std::vector<int64_t> gw = widths(block.graph_extra, int64_t(block.n_graphs()));
  const uint64_t no_stress = bits_of(std::nan(""));
  const size_t start = out.size();
  std::vector<int64_t> offsets(block.n_graphs() + 1, 0);
  for (size_t i = 0; i < block.n_graphs(); ++i) {
    const int64_t n = block.n_atoms[i], a0 = block.atom_start[i];
    const uint8_t* z = block.z.data() + a0;
    const Palette palette = palette_of(z, n);
    const bool as_palette = compact && palette_bytes(palette.size, n, palette.bits) < n;
    const bool no_cell = compact && all_bits(&block.cell[9 * i], 0);
    const bool stress_none =
        compact && (block.stress.empty() ? false : all_bits(&block.stress[9 * i], no_stress));
    put_i32(out, int32_t(n));
    put_i32(out, block.config_type.empty() ? 0 : block.config_type[i]);
    out.push_back(uint8_t((forces ? 1 : 0) | (block.pbc[3 * i] ? 2 : 0) |
                          (block.pbc[3 * i + 1] ? 4 : 0) | (block.pbc[3 * i + 2] ? 8 : 0) |
                          (as_palette ? kZPalette : 0) | (no_cell ? kNoCell : 0) |
                          (stress_none ? kNoStress : 0)));
    if (as_palette) {
      out.push_back(uint8_t(palette.size));
      out.insert(out.end(), palette.values.begin(), palette.values.begin() + palette.size);
      uint8_t index[256] = {};
      for (int64_t k = 0; k < palette.size; ++k) index[palette.values[size_t(k)]] = uint8_t(k);
      const size_t packed = out.size();
      out.resize(packed + size_t((n * palette.bits + 7) / 8), 0);
      for (int64_t a = 0; a < n && palette.bits > 0; ++a) {
        const int64_t bit = a * palette.bits;  // bits <= 7: an index spans at most two bytes
        const unsigned v = unsigned(index[z[a]]) << (bit & 7);
        out[packed + size_t(bit >> 3)] |= uint8_t(v);
        if ((bit & 7) + palette.bits > 8) out[packed + size_t(bit >> 3) + 1] |= uint8_t(v >> 8);
      }
    } else {
      out.insert(out.end(), z, z + n);
    }
    encode_array(&block.energy[i], 1, out);
    if (!no_cell) encode_array(&block.cell[9 * i], 9, out);
    if (block.stress.empty()) {
      const double none[9] = {};  // as the reader's zero stress of a block without one
      encode_array(none, 9, out);
    } else if (!stress_none) {
      encode_array(&block.stress[9 * i], 9, out);
    }
    encode_array(&block.pos[size_t(3 * a0)], 3 * n, out);
    if (forces) encode_array(&block.forces[size_t(3 * a0)], 3 * n, out);
    for (size_t c = 0; c < block.extra.size(); ++c)
      encode_array(&block.extra[c][size_t(w[c] * a0)], w[c] * n, out);
    for (size_t c = 0; c < block.graph_extra.size(); ++c)
      encode_array(&block.graph_extra[c][size_t(gw[c]) * i], gw[c], out);
    offsets[i + 1] = int64_t(out.size() - start);
  }
  return offsets;
}

void add_constant_columns(std::vector<uint8_t>& records, std::vector<int64_t>& offsets,
                          const std::vector<double>& values) {
  if (values.empty() || offsets.size() < 2) return;
  // The per-structure columns end a record: the new ones follow them.
  std::vector<uint8_t> tail;
  for (double v : values) encode_array(&v, 1, tail);
  const size_t n = offsets.size() - 1;
  std::vector<uint8_t> out;
  out.reserve(records.size() + n * tail.size());
  for (size_t i = 0; i < n; ++i) {
    const int64_t size = offsets[i + 1] - offsets[i];
    if (size < kHeaderBytes)
      throw DataError("record " + std::to_string(i + 1) + " of " + std::to_string(n) + ": " +
                          std::to_string(size) + " bytes, shorter than its header",
                      "the record is corrupted");
    const size_t at = out.size();
    out.insert(out.end(), records.begin() + offsets[i], records.begin() + offsets[i + 1]);
    out.insert(out.end(), tail.begin(), tail.end());
    offsets[i] = int64_t(at);
  }
  offsets[n] = int64_t(out.size());
  records.swap(out);
}

RecordSizes record_sizes(const Dataset& dataset, int64_t max_graphs) {
  RecordSizes out;
  const int64_t total =
      max_graphs > 0 ? std::min(max_graphs, dataset.n_graphs()) : dataset.n_graphs();
  out.arrays.resize(5);
  const char* names[] = {"energy", "cell", "stress", "pos", "forces"};
  for (int k = 0; k < 5; ++k) out.arrays[size_t(k)].name = names[k];
  for (const auto& c : dataset.extra_columns()) out.arrays.push_back({c.name});
  for (const auto& c : dataset.graph_columns()) out.arrays.push_back({c.name});
  int64_t width = 0, gwidth = 0;
  for (const auto& c : dataset.extra_columns()) width += c.n_cols;
  for (const auto& c : dataset.graph_columns()) gwidth += c.n_cols;
  std::vector<uint8_t> scratch;
  const uint64_t no_stress = bits_of(std::nan(""));
  for (int64_t first = 0; first < total; first += 10000) {
    const int64_t count = std::min<int64_t>(10000, total - first);
    const GraphBlock b = dataset.read(first, count);
    scratch.clear();
    out.encoded += dataset.read_records(first, count, scratch).back();
    for (size_t g = 0; g < b.n_graphs(); ++g) {
      const int64_t n = b.n_atoms[g], a0 = b.atom_start[g];
      out.raw += raw_record_bytes(n, !b.forces.empty(), width, gwidth);
      const auto tally = [&](size_t k, const double* v, int64_t count) {
        scratch.clear();
        const ArrayEncoding e = encode_array(v, count, scratch);
        out.arrays[k].raw += 8 * count;
        out.arrays[k].encoded += int64_t(scratch.size());
        out.arrays[k].chosen[int(e)] += 1;
      };
      // A zero cell and a stress of none take no bytes (flags in the header).
      const auto absent = [&](size_t k) {
        out.arrays[k].raw += 8 * 9;
        out.arrays[k].absent += 1;
      };
      tally(0, &b.energy[g], 1);
      if (all_bits(&b.cell[9 * g], 0))
        absent(1);
      else
        tally(1, &b.cell[9 * g], 9);
      if (all_bits(&b.stress[9 * g], no_stress))
        absent(2);
      else
        tally(2, &b.stress[9 * g], 9);
      tally(3, &b.pos[size_t(3 * a0)], 3 * n);
      if (!b.forces.empty()) tally(4, &b.forces[size_t(3 * a0)], 3 * n);
      size_t k = 5;
      for (size_t c = 0; c < b.extra.size(); ++c, ++k) {
        const int64_t w = dataset.extra_columns()[c].n_cols;
        tally(k, &b.extra[c][size_t(w * a0)], w * n);
      }
      for (size_t c = 0; c < b.graph_extra.size(); ++c, ++k) {
        const int64_t w = dataset.graph_columns()[c].n_cols;
        tally(k, &b.graph_extra[c][size_t(w) * g], w);
      }
    }
    out.graphs += int64_t(b.n_graphs());
  }
  if (!dataset.has_forces()) out.arrays.erase(out.arrays.begin() + 4);
  return out;
}

GraphBlock unpack_records(const uint8_t* data, const int64_t* offsets, int64_t n,
                          const std::vector<ColumnInfo>& extra,
                          const std::vector<ColumnInfo>& graph_extra, bool atom_arrays,
                          bool* atoms_finite, const uint8_t* only) {
  GraphBlock b;
  if (atoms_finite) *atoms_finite = true;
  b.first = -1;
  const auto where = [n](int64_t i) {
    return "record " + std::to_string(i + 1) + " of " + std::to_string(n) + ": ";
  };
  // The atoms of every record first (to size the block: a count the record cannot hold is
  // refused here, before any allocation), the rest of each header in order below.
  int64_t total_atoms = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t size = offsets[i + 1] - offsets[i];
    const int32_t atoms = size >= kHeaderBytes ? get_i32(data + offsets[i]) : 0;
    // A byte an atom at least, unless the atomic numbers are a palette (a one-element graph
    // with constant positions takes a few bytes whatever its size): then at most 2^16 atoms
    // more than bytes. (A record of no atoms is refused below, in order.)
    const bool palette = size >= kHeaderBytes && (data[offsets[i] + 8] & kZPalette) != 0;
    if (size < kHeaderBytes || atoms < 0 ||
        (atoms > size && (!palette || atoms - size > (int64_t(1) << 16))))
      throw DataError(where(i) + std::to_string(size) + " bytes, not a record of " +
                          std::to_string(atoms) + " atoms",
                      "the sender and receiver disagree on the store's layout");
    total_atoms += atoms;
  }
  const bool forces = n > 0 && (read_header(data + offsets[0]).flags & 1) != 0;
  const auto sz = [](int64_t k) { return static_cast<size_t>(k); };
  b.atom_start.resize(sz(n));
  b.n_atoms.resize(sz(n));
  b.energy.resize(sz(n));
  b.cell.resize(sz(9 * n));
  b.pbc.resize(sz(3 * n));
  b.stress.resize(sz(9 * n));
  b.config_type.resize(sz(n));
  b.z.resize(sz(total_atoms));
  if (atom_arrays) {
    b.pos.resize(sz(3 * total_atoms));
    if (forces) b.forces.resize(sz(3 * total_atoms));
    b.extra.resize(extra.size());
    for (size_t c = 0; c < extra.size(); ++c) b.extra[c].resize(sz(extra[c].n_cols * total_atoms));
  }
  b.graph_extra.resize(graph_extra.size());
  for (size_t c = 0; c < graph_extra.size(); ++c)
    b.graph_extra[c].resize(sz(graph_extra[c].n_cols * n));
  int64_t a0 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = data + offsets[i];
    const uint8_t* end = data + offsets[i + 1];
    const Header h = read_header(p);
    if (((h.flags & 1) != 0) != forces || (h.flags & ~kKnownFlags) != 0)
      throw DataError(where(i) + "header (" + std::to_string(h.n_atoms) + " atoms, flags " +
                          std::to_string(h.flags) + ") is not one of this dataset",
                      "the record is corrupted or from another dataset");
    const int64_t na = h.n_atoms;
    if (na < 1)
      throw DataError(where(i) + "a record of no atoms",
                      "the record is corrupted or from another dataset");
    b.atom_start[sz(i)] = a0;
    b.n_atoms[sz(i)] = h.n_atoms;
    b.config_type[sz(i)] = h.config_type;
    for (int k = 0; k < 3; ++k) b.pbc[sz(3 * i + k)] = (h.flags >> (k + 1)) & 1;
    p += kHeaderBytes;
    const auto bad_z = [&](const std::string& what) {
      return DataError(where(i) + "its " + std::to_string(na) + " atomic numbers " + what,
                       "the record is corrupted or from another dataset");
    };
    if ((h.flags & kZPalette) != 0) {
      // Palette: byte k (1..118), k increasing atomic numbers, then each atom's index into them
      // in ceil(log2 k) bits.
      const int k = end - p >= 1 ? p[0] : 0;
      const int bits = palette_bits(k);
      if (k < 1 || k > kMaxAtomicNumber)
        throw bad_z("have a palette of " + std::to_string(k) + " values");
      if (end - p < palette_bytes(k, na, bits)) throw bad_z("run past its end");
      const uint8_t* values = p + 1;
      for (int v = 0; v < k; ++v)
        if (values[v] < 1 || values[v] > kMaxAtomicNumber || (v > 0 && values[v] <= values[v - 1]))
          throw bad_z("have a palette that is not increasing atomic numbers");
      const uint8_t* packed = values + k;
      for (int64_t a = 0; a < na; ++a) {
        unsigned index = 0;
        if (bits > 0) {
          const int64_t bit = a * bits;
          unsigned word = packed[bit >> 3];
          if ((bit & 7) + bits > 8) word |= unsigned(packed[(bit >> 3) + 1]) << 8;
          index = (word >> (bit & 7)) & ((1u << bits) - 1);
        }
        if (index >= unsigned(k))
          throw bad_z("index " + std::to_string(index) + " past a palette of " + std::to_string(k));
        b.z[sz(a0 + a)] = values[index];
      }
      p += palette_bytes(k, na, bits);
    } else {
      if (end - p < na) throw bad_z("run past its end");
      std::memcpy(&b.z[sz(a0)], p, sz(na));
      p += na;
    }
    const auto decode = [&](double* dst, int64_t count) {
      try {
        p += decode_array(p, end - p, count, dst);
      } catch (const DataError& e) {
        throw DataError(where(i) + e.what(), e.hint());
      }
    };
    decode(&b.energy[sz(i)], 1);
    if ((h.flags & kNoCell) != 0)
      std::fill_n(&b.cell[sz(9 * i)], 9, 0.0);
    else
      decode(&b.cell[sz(9 * i)], 9);
    if ((h.flags & kNoStress) != 0)
      std::fill_n(&b.stress[sz(9 * i)], 9, std::nan(""));
    else
      decode(&b.stress[sz(9 * i)], 9);
    // Without the per-atom arrays each is checked and stepped over (positions and forces
    // looked at for values that are not finite, when asked).
    const bool decode_atoms = atom_arrays && (!only || only[i] != 0);
    const auto atoms = [&](std::vector<double>* v, int64_t width, bool finite) {
      if (decode_atoms) return decode(&(*v)[sz(width * a0)], width * na);
      try {
        if (finite && atoms_finite && *atoms_finite)
          *atoms_finite = encoded_array_finite(p, end - p, width * na);
        p += encoded_array_size(p, end - p, width * na);
      } catch (const DataError& e) {
        throw DataError(where(i) + e.what(), e.hint());
      }
    };
    atoms(&b.pos, 3, true);
    if (forces) atoms(&b.forces, 3, true);
    for (size_t c = 0; c < extra.size(); ++c)
      atoms(atom_arrays ? &b.extra[c] : nullptr, extra[c].n_cols, false);
    for (size_t c = 0; c < graph_extra.size(); ++c)
      decode(&b.graph_extra[c][sz(graph_extra[c].n_cols * i)], graph_extra[c].n_cols);
    if (p != end)
      throw DataError(where(i) + std::to_string(end - p) + " bytes left after its last array",
                      "the record is corrupted or from another dataset");
    a0 += na;
  }
  return b;
}

}  // namespace ddgnn
