// Dataset: opens a ddgnn dataset file, checks its format and version, and reads contiguous graph
// ranges by hyperslab, verifying the CRC-32 of every checksum block it touches.
#include "loader/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/checksum.h"
#include "core/error.h"
#include "loader/dataset_layout.h"
#include "loader/h5.h"

namespace ddgnn {

struct Dataset::Impl {
  std::string path;
  h5::Handle file;
  int64_t n_graphs = 0, n_atoms = 0, version = 0;
  std::string producer, sources;
  bool has_forces = false;
  std::vector<uint8_t> species;
  std::vector<std::string> config_types;
  std::vector<ColumnInfo> extra;
  std::vector<layout::ArraySpec> specs;
  std::vector<h5::Handle> dsets, crc_dsets;  // parallel to specs

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
    const hsize_t total = spec.per_atom ? hsize_t(n_atoms) : hsize_t(n_graphs);
    const hsize_t b0 = first / spec.chunk_rows;
    const hsize_t b1 = (first + n + spec.chunk_rows - 1) / spec.chunk_rows;
    const hsize_t r0 = b0 * spec.chunk_rows;
    const hsize_t r1 = std::min(b1 * spec.chunk_rows, total);
    if (first + n > total)
      throw DataError(ctx + ": rows past the end of the array", "the file is corrupted");
    std::vector<char> buf((r1 - r0) * rb);
    h5::read_rows(dsets[i], spec.type, r0, r1 - r0, buf.data(), ctx);
    std::vector<uint32_t> expected(b1 - b0);
    h5::read_rows(crc_dsets[i], H5T_NATIVE_UINT32, b0, b1 - b0, expected.data(), ctx);
    for (hsize_t b = b0; b < b1; ++b) {
      const hsize_t s = b * spec.chunk_rows, e = std::min(s + spec.chunk_rows, total);
      const uint32_t got = crc32(buf.data() + (s - r0) * rb, (e - s) * rb);
      if (got != expected[b - b0])
        throw DataError(path + ": checksum mismatch in array '" + spec.path + "', rows " +
                            std::to_string(s) + ".." + std::to_string(e - 1) + " (block " +
                            std::to_string(b) + ")",
                        "the file is corrupted; convert the extxyz input again with "
                        "`ddgnn convert`");
    }
    std::memcpy(out, buf.data() + (first - r0) * rb, n * rb);
  }
};

Dataset::Dataset(const std::string& path) : m_impl(std::make_unique<Impl>()) {
  h5::silence_errors();
  Impl& m = *m_impl;
  m.path = path;
  const std::string hint = "was this file written by `ddgnn convert`?";
  if (!std::filesystem::exists(path))
    throw DataError(path + ": no such file", "check the path, or create it with `ddgnn convert`");
  if (H5Fis_hdf5(path.c_str()) <= 0) throw DataError(path + ": not an HDF5 file", hint);
  m.file = h5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!m.file.valid()) throw DataError(path + ": cannot open as HDF5", hint);
  if (!h5::has_attr(m.file, "format") ||
      h5::read_attr_string(m.file, "format", path) != kFormatName)
    throw DataError(path + ": an HDF5 file, but not a ddgnn dataset (no format=\"" +
                        std::string(kFormatName) + "\" attribute)",
                    hint);
  m.version = h5::read_attr_int(m.file, "format_version", path);
  if (m.version > kFormatVersion)
    throw DataError(path + ": dataset format version " + std::to_string(m.version) +
                        " is newer than this ddgnn reads (up to " + std::to_string(kFormatVersion) +
                        ")",
                    "update ddgnn, or convert the data again with this version");
  if (m.version < 1)
    throw DataError(path + ": invalid dataset format version " + std::to_string(m.version), hint);
  m.producer = h5::read_attr_string(m.file, "producer", path);
  m.sources = h5::has_attr(m.file, "sources") ? h5::read_attr_string(m.file, "sources", path) : "";
  m.n_graphs = h5::read_attr_int(m.file, "n_graphs", path);
  m.n_atoms = h5::read_attr_int(m.file, "n_atoms", path);
  m.has_forces = h5::read_attr_int(m.file, "has_forces", path) != 0;
  m.config_types = h5::read_strings(m.file, "config_types", path);
  {
    h5::Handle sp(H5_CHECK(H5Dopen2(m.file, "species", H5P_DEFAULT), path));
    m.species.resize(h5::n_rows(sp));
    h5::read_rows(sp, H5T_NATIVE_UINT8, 0, m.species.size(), m.species.data(), path);
  }
  // Extra per-atom columns: whatever lies under atoms/extra.
  if (h5::exists(m.file, "atoms/extra")) {
    h5::Handle g(H5_CHECK(H5Gopen2(m.file, "atoms/extra", H5P_DEFAULT), path));
    H5G_info_t info;
    H5_CHECK(H5Gget_info(g, &info), path);
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      char name[256];
      H5_CHECK(
          H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT),
          path);
      h5::Handle d(H5_CHECK(H5Dopen2(g, name, H5P_DEFAULT), path));
      m.extra.push_back({name, std::max(1, h5::n_cols(d))});
    }
  }
  m.specs = layout::array_specs(m.has_forces, m.extra);
  for (const auto& spec : m.specs) {
    const std::string ctx = path + ": array '" + spec.path + "'";
    if (!h5::exists(m.file, spec.path))
      throw DataError(ctx + " is missing", "the file is incomplete; convert it again");
    m.dsets.emplace_back(H5_CHECK(H5Dopen2(m.file, spec.path.c_str(), H5P_DEFAULT), ctx));
    m.crc_dsets.emplace_back(
        H5_CHECK(H5Dopen2(m.file, layout::checksum_path(spec.path).c_str(), H5P_DEFAULT), ctx));
    const hsize_t rows = h5::n_rows(m.dsets.back());
    const hsize_t want = spec.per_atom ? hsize_t(m.n_atoms) : hsize_t(m.n_graphs);
    if (rows != want)
      throw DataError(
          ctx + " has " + std::to_string(rows) + " rows, expected " + std::to_string(want),
          "the file is incomplete or corrupted; convert it again");
    const int want_cols = spec.n_cols;
    if (h5::n_cols(m.dsets.back()) != want_cols)
      throw DataError(ctx + " has the wrong number of columns", "the file is corrupted");
  }
}

Dataset::~Dataset() = default;

const std::string& Dataset::path() const {
  return m_impl->path;
}
int64_t Dataset::n_graphs() const {
  return m_impl->n_graphs;
}
int64_t Dataset::n_atoms() const {
  return m_impl->n_atoms;
}
int64_t Dataset::format_version() const {
  return m_impl->version;
}
const std::string& Dataset::producer() const {
  return m_impl->producer;
}
bool Dataset::has_forces() const {
  return m_impl->has_forces;
}
const std::vector<uint8_t>& Dataset::species() const {
  return m_impl->species;
}
const std::vector<std::string>& Dataset::config_types() const {
  return m_impl->config_types;
}
const std::vector<ColumnInfo>& Dataset::extra_columns() const {
  return m_impl->extra;
}
const std::string& Dataset::sources() const {
  return m_impl->sources;
}

std::vector<int32_t> Dataset::graph_config_types() const {
  const Impl& m = *m_impl;
  std::vector<int32_t> out(size_t(m.n_graphs));
  m.read_array(m.index("graphs/config_type"), 0, size_t(m.n_graphs), out.data(), true);
  return out;
}

GraphBlock Dataset::read(int64_t first, int64_t count, bool verify) const {
  const Impl& m = *m_impl;
  if (first < 0 || count < 0 || first + count > m.n_graphs)
    throw DataError(m.path + ": graphs " + std::to_string(first) + ".." +
                    std::to_string(first + count - 1) + " requested, the file has " +
                    std::to_string(m.n_graphs));
  GraphBlock b;
  b.first = first;
  const size_t n = size_t(count);
  b.atom_start.resize(n);
  b.n_atoms.resize(n);
  b.energy.resize(n);
  b.cell.resize(9 * n);
  b.pbc.resize(3 * n);
  b.stress.resize(9 * n);
  b.config_type.resize(n);
  m.read_array(m.index("graphs/atom_start"), first, n, b.atom_start.data(), verify);
  m.read_array(m.index("graphs/n_atoms"), first, n, b.n_atoms.data(), verify);
  m.read_array(m.index("graphs/energy"), first, n, b.energy.data(), verify);
  m.read_array(m.index("graphs/cell"), first, n, b.cell.data(), verify);
  m.read_array(m.index("graphs/pbc"), first, n, b.pbc.data(), verify);
  m.read_array(m.index("graphs/stress"), first, n, b.stress.data(), verify);
  m.read_array(m.index("graphs/config_type"), first, n, b.config_type.data(), verify);
  if (n == 0) return b;

  // Atom range of the block; check the offset table is consistent before trusting it.
  const int64_t a0 = b.atom_start[0];
  int64_t expect = a0;
  for (size_t i = 0; i < n; ++i) {
    if (b.n_atoms[i] <= 0 || b.atom_start[i] != expect || expect + b.n_atoms[i] > m.n_atoms)
      throw DataError(
          m.path + ": offset table is inconsistent at graph " + std::to_string(first + int64_t(i)),
          "the file is corrupted; convert it again");
    expect += b.n_atoms[i];
    b.atom_start[i] -= a0;
  }
  const size_t na = size_t(b.atom_start[n - 1] + b.n_atoms[n - 1]);
  b.z.resize(na);
  b.pos.resize(3 * na);
  m.read_array(m.index("atoms/z"), a0, na, b.z.data(), verify);
  m.read_array(m.index("atoms/pos"), a0, na, b.pos.data(), verify);
  if (m.has_forces) {
    b.forces.resize(3 * na);
    m.read_array(m.index("atoms/forces"), a0, na, b.forces.data(), verify);
  }
  for (const auto& c : m.extra) {
    b.extra.emplace_back(size_t(c.n_cols) * na);
    m.read_array(m.index("atoms/extra/" + c.name), a0, na, b.extra.back().data(), verify);
  }
  return b;
}

void Dataset::verify_all() const {
  constexpr int64_t kStep = 65536;
  for (int64_t g = 0; g < n_graphs(); g += kStep) read(g, std::min(kStep, n_graphs() - g), true);
}

bool GraphBlock::has_stress(size_t i) const {
  return bulk(i) && !stress.empty() && !std::isnan(stress[9 * i]);
}

double GraphBlock::volume(size_t i) const {
  const double* c = &cell[9 * i];
  return std::fabs(c[0] * (c[4] * c[8] - c[5] * c[7]) - c[1] * (c[3] * c[8] - c[5] * c[6]) +
                   c[2] * (c[3] * c[7] - c[4] * c[6]));
}

void GraphBlock::frame(size_t i, Frame& out) const {
  out.clear();
  const size_t s = size_t(atom_start[i]), n = size_t(n_atoms[i]);
  out.z.assign(z.begin() + s, z.begin() + s + n);
  out.pos.assign(pos.begin() + 3 * s, pos.begin() + 3 * (s + n));
  if (!forces.empty()) out.forces.assign(forces.begin() + 3 * s, forces.begin() + 3 * (s + n));
  out.has_energy = true;
  out.energy = energy[i];
  for (int k = 0; k < 9; ++k) out.cell[k] = cell[9 * i + k];
  out.has_cell = std::any_of(out.cell.begin(), out.cell.end(), [](double v) { return v != 0.0; });
  for (int k = 0; k < 3; ++k) out.pbc[k] = pbc[3 * i + k] != 0;
  out.has_stress = stress[9 * i] == stress[9 * i];  // NaN marks "no stress"
  if (out.has_stress)
    for (int k = 0; k < 9; ++k) out.stress[k] = stress[9 * i + k];
  out.config_type = std::to_string(config_type[i]);
}

}  // namespace ddgnn
