// Dataset: opens a ddgnn dataset file, checks its format and version, and reads contiguous graph
// ranges by hyperslab, verifying the CRC-32 of every checksum block it touches.
#include "loader/dataset.h"
#include "loader/dataset_impl.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/checksum.h"
#include "core/error.h"
#include "core/log.h"
#include "core/text.h"
#include "core/units.h"
#include "loader/array_codec.h"
#include "loader/cell.h"
#include "loader/dataset_layout.h"
#include "loader/h5.h"
#include "loader/packed.h"

namespace ddgnn {

void Dataset::Impl::bad_value(const char* array, int64_t graph, const std::string& what) const {
  // A version-4 file holds every value of a graph in its record.
  throw DataError(path + ": array '" + (version >= 4 ? "records" : array) + "', graph " +
                      std::to_string(graph) + ": " + what,
                  "the file is corrupted or was written by another tool; convert the extxyz "
                  "input again with `ddgnn convert`");
}

void Dataset::Impl::check_config_type(int32_t index, int64_t graph) const {
  if (index < 0 || size_t(index) >= config_types.size())
    bad_value("graphs/config_type", graph,
              "config type index " + std::to_string(index) + " is not in 0.." +
                  std::to_string(int64_t(config_types.size()) - 1));
}

void Dataset::Impl::check_block(const GraphBlock& b) const {
  auto bad = [&](const char* array, size_t i, const std::string& what) {
    bad_value(array, b.id_of(i), what);
  };
  for (size_t i = 0; i < b.n_graphs(); ++i) {
    if (!std::isfinite(b.energy[i]))
      bad("graphs/energy", i, "energy " + fmt("%.10g", b.energy[i]) + " eV is not finite");
    check_config_type(b.config_type[i], b.id_of(i));
    bool pbc[3];
    for (int k = 0; k < 3; ++k) {
      const uint8_t p = b.pbc[3 * i + size_t(k)];
      if (p > 1) bad("graphs/pbc", i, "periodic flag " + std::to_string(p) + " is not 0 or 1");
      pbc[k] = p == 1;
    }
    const std::string cell = cell_problem(&b.cell[9 * i], pbc);
    if (!cell.empty()) bad("graphs/cell", i, cell);
    const double* s = &b.stress[9 * i];
    const bool none = std::isnan(s[0]);
    for (int k = 0; k < 9; ++k)
      if (none ? !std::isnan(s[k]) : !std::isfinite(s[k]))
        bad("graphs/stress", i,
            "stress component " + std::to_string(k) + " is " + fmt("%.10g", s[k]) +
                " (all nine finite, or all NaN for no stress)");
    const size_t a0 = size_t(b.atom_start[i]);
    for (size_t a = a0; a < a0 + size_t(b.n_atoms[i]); ++a) {
      const auto atom = [&] { return " of atom " + std::to_string(a - a0) + " of the graph"; };
      const int z = b.z[a];
      if (z > kMaxAtomicNumber || !in_species[size_t(z)])
        bad("atoms/z", i,
            "atomic number " + std::to_string(z) + atom() + " is not in the species table");
      for (int d = 0; d < 3 && !b.pos.empty(); ++d) {  // empty: checked undecoded (read_v4)
        if (!std::isfinite(b.pos[3 * a + size_t(d)]))
          bad("atoms/pos", i, "position " + fmt("%.10g", b.pos[3 * a + size_t(d)]) + atom());
        if (!b.forces.empty() && !std::isfinite(b.forces[3 * a + size_t(d)]))
          bad("atoms/forces", i, "force " + fmt("%.10g", b.forces[3 * a + size_t(d)]) + atom());
      }
    }
  }
}

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
  // Version 1 stored the config type names as variable-length strings, whose heap references
  // libhdf5 follows unchecked (a damaged one crashes the reader before any checksum): refused.
  if (m.version == 1)
    throw DataError(path +
                        ": dataset format version 1, which this ddgnn no longer reads (its "
                        "variable-length config type names cannot be read safely)",
                    "convert the extended XYZ input again with this ddgnn: `ddgnn convert "
                    "in.extxyz out.h5` writes version " +
                        std::to_string(kFormatVersion));
  const std::string corrupted =
      "the file is corrupted or was written by another tool; convert "
      "the extxyz input again with `ddgnn convert`";
  m.producer = h5::read_attr_string(m.file, "producer", path);
  // Version 3 keeps the metadata that grows with the data (the inputs, the outlier frames) in
  // arrays of bytes; version 2 kept them in attributes, which hold at most 64 KiB.
  const bool text_arrays = m.version >= 3;
  const char* holder = text_arrays ? "array" : "attribute";
  if (text_arrays)
    m.sources = h5::read_text(m.file, "sources", layout::kMaxMetadataText, path);
  else
    m.sources =
        h5::has_attr(m.file, "sources") ? h5::read_attr_string(m.file, "sources", path) : "";
  if (!m.sources.empty() &&
      !nlohmann::json::parse(m.sources, nullptr, /*allow_exceptions=*/false).is_array())
    throw DataError(path + ": " + holder + " 'sources' is not the JSON list convert writes",
                    "the file is corrupted or was written by another tool; convert the "
                    "extended XYZ input again");
  m.n_graphs = h5::read_attr_int(m.file, "n_graphs", path);
  m.n_atoms = h5::read_attr_int(m.file, "n_atoms", path);
  const int64_t has_forces = h5::read_attr_int(m.file, "has_forces", path);
  if (m.n_graphs < 1 || m.n_atoms < m.n_graphs || (has_forces != 0 && has_forces != 1))
    throw DataError(path + ": attributes n_graphs = " + std::to_string(m.n_graphs) +
                        ", n_atoms = " + std::to_string(m.n_atoms) +
                        ", has_forces = " + std::to_string(has_forces) +
                        " are impossible (at least one graph, one atom a graph, has_forces 0 or 1)",
                    corrupted);
  m.has_forces = has_forces == 1;
  {
    if (!h5::exists(m.file, "species"))
      throw DataError(path + ": array 'species' is missing", corrupted);
    h5::Handle sp(H5_CHECK(H5Dopen2(m.file, "species", H5P_DEFAULT), path + ": array 'species'"));
    const hsize_t rows = h5::n_rows(sp);
    if (rows < 1 || rows > hsize_t(kMaxAtomicNumber) || h5::n_cols(sp) != 0)
      throw DataError(path + ": array 'species' has " + std::to_string(rows) + " rows (1.." +
                          std::to_string(kMaxAtomicNumber) + " expected)",
                      corrupted);
    m.species.resize(rows);
    h5::read_rows(sp, H5T_NATIVE_UINT8, 0, rows, m.species.data(), path + ": array 'species'");
    for (size_t k = 0; k < m.species.size(); ++k) {
      const int z = m.species[k];
      if (z < 1 || z > kMaxAtomicNumber || (k > 0 && z <= m.species[k - 1]))
        throw DataError(path + ": array 'species', row " + std::to_string(k) + ": atomic number " +
                            std::to_string(z) + " (the table lists distinct atomic numbers 1.." +
                            std::to_string(kMaxAtomicNumber) + " in increasing order)",
                        corrupted);
      m.in_species[size_t(z)] = true;
    }
  }
  m.config_types = h5::read_strings(m.file, "config_types", size_t(m.n_graphs),
                                    /*allow_variable=*/false, path);
  {
    if (!h5::has_attr(m.file, "metadata_crc32"))
      throw DataError(path + ": attribute 'metadata_crc32' is missing", corrupted);
    const int64_t want = h5::read_attr_int(m.file, "metadata_crc32", path);
    m.metadata_crc32 = want;
    const uint32_t got = layout::metadata_checksum(m.file, m.species, m.config_types, path);
    if (want != int64_t(got))
      throw DataError(path +
                          ": checksum mismatch in the metadata (root attributes, 'species' "
                          "or 'config_types')",
                      corrupted);
  }
  for (size_t k = 0; k < m.config_types.size(); ++k)
    if (const size_t bad = invalid_utf8_at(m.config_types[k]); bad != std::string::npos)
      throw DataError(path + ": array 'config_types', row " + std::to_string(k) +
                          " is not UTF-8 text (" + utf8_error_at(m.config_types[k], bad) + ")",
                      corrupted);
  if (text_arrays || h5::has_attr(m.file, "outliers")) {
    m.outliers.emplace();
    const std::string text = text_arrays
                                 ? h5::read_text(m.file, "outliers", layout::kMaxMetadataText, path)
                                 : h5::read_attr_string(m.file, "outliers", path);
    try {
      for (const auto& o : nlohmann::json::parse(text))
        m.outliers->push_back({o.at("graph").get<int64_t>(), o.at("what").get<std::string>()});
    } catch (const nlohmann::json::exception&) {
      throw DataError(path + ": " + holder + " 'outliers' is not the JSON list convert writes",
                      corrupted);
    }
  }
  // Extra per-atom columns: whatever lies under atoms/extra; per-structure ones under graphs/extra.
  const auto columns_under = [&](const char* group, std::vector<ColumnInfo>& out) {
    if (!h5::exists(m.file, group)) return;
    h5::Handle g(H5_CHECK(H5Gopen2(m.file, group, H5P_DEFAULT), path));
    H5G_info_t info;
    H5_CHECK(H5Gget_info(g, &info), path);
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      char name[256];
      H5_CHECK(
          H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT),
          path);
      h5::Handle d(H5_CHECK(H5Dopen2(g, name, H5P_DEFAULT), path));
      out.push_back({name, std::max(1, h5::n_cols(d))});
    }
  };
  if (m.version >= 4) {
    // The records hold the columns' values; their names and widths are the text array 'columns'.
    m.n_record_bytes = h5::read_attr_int(m.file, "n_record_bytes", path);
    if (m.n_record_bytes < kRecordHeaderBytes * m.n_graphs)
      throw DataError(path + ": attribute n_record_bytes = " + std::to_string(m.n_record_bytes) +
                          " is less than " + std::to_string(kRecordHeaderBytes) + " bytes a graph",
                      corrupted);
    const std::string text = h5::read_text(m.file, "columns", layout::kMaxMetadataText, path);
    try {
      const auto j = nlohmann::json::parse(text);
      for (const auto& [key, out] :
           {std::pair<const char*, std::vector<ColumnInfo>*>{"atoms", &m.extra},
            std::pair<const char*, std::vector<ColumnInfo>*>{"graphs", &m.graph_extra}})
        for (const auto& c : j.at(key)) {
          const int width = c.at("width").get<int>();
          if (width < 1 || width > 4096) throw std::out_of_range("width");
          out->push_back({c.at("name").get<std::string>(), width});
        }
    } catch (const std::exception&) {
      throw DataError(path + ": array 'columns' is not the JSON convert writes", corrupted);
    }
  } else {
    columns_under("atoms/extra", m.extra);
    columns_under("graphs/extra", m.graph_extra);
  }
  m.specs = layout::array_specs(m.version, m.has_forces, m.extra, m.graph_extra);
  m.graph_columns = m.graph_extra;
  for (const auto& spec : m.specs) {
    const std::string ctx = path + ": array '" + spec.path + "'";
    if (!h5::exists(m.file, spec.path))
      throw DataError(ctx + " is missing", "the file is incomplete; convert it again");
    m.dsets.emplace_back(H5_CHECK(H5Dopen2(m.file, spec.path.c_str(), H5P_DEFAULT), ctx));
    m.crc_dsets.emplace_back(
        H5_CHECK(H5Dopen2(m.file, layout::checksum_path(spec.path).c_str(), H5P_DEFAULT), ctx));
    const hsize_t rows = h5::n_rows(m.dsets.back());
    const hsize_t want = m.total_rows(spec);
    if (rows != want)
      throw DataError(
          ctx + " has " + std::to_string(rows) + " rows, expected " + std::to_string(want),
          "the file is incomplete or corrupted; convert it again");
    const int want_cols = spec.n_cols;
    if (h5::n_cols(m.dsets.back()) != want_cols)
      throw DataError(ctx + " has the wrong number of columns", "the file is corrupted");
    // Its checksum table: one value a block, read into a buffer of that size.
    const hsize_t blocks = (want + spec.chunk_rows - 1) / spec.chunk_rows;
    if (h5::n_cols(m.crc_dsets.back()) != 0 || h5::n_rows(m.crc_dsets.back()) != blocks)
      throw DataError(path + ": array '" + layout::checksum_path(spec.path) +
                          "' is not a table of " + std::to_string(blocks) + " checksums",
                      "the file is corrupted; convert the extxyz input again with `ddgnn convert`");
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
int64_t Dataset::metadata_crc32() const {
  return m_impl->metadata_crc32;
}
int64_t Dataset::content_crc32() const {
  const Impl& m = *m_impl;
  if (m.content_crc32 >= 0) return m.content_crc32;
  const uint32_t meta = uint32_t(m.metadata_crc32);
  uint32_t c = crc32(&meta, sizeof meta);
  for (size_t i = 0; i < m.specs.size(); ++i) {
    const auto& spec = m.specs[i];
    const hsize_t total = m.total_rows(spec);
    const hsize_t blocks = (total + spec.chunk_rows - 1) / spec.chunk_rows;
    const std::string ctx = m.path + ": array '" + layout::checksum_path(spec.path) + "'";
    std::vector<uint32_t> table(blocks);  // its shape checked when the file was opened
    h5::read_rows(m.crc_dsets[i], H5T_NATIVE_UINT32, 0, blocks, table.data(), ctx);
    c = crc32(spec.path.data(), spec.path.size(), c);
    c = crc32(table.data(), table.size() * sizeof(uint32_t), c);
  }
  m.content_crc32 = int64_t(c);
  return m.content_crc32;
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

const std::vector<ColumnInfo>& Dataset::graph_columns() const {
  return m_impl->graph_columns;
}

void Dataset::add_constant_column(const std::string& name, double value) {
  Impl& m = *m_impl;
  for (const auto& c : m.graph_columns)
    if (c.name == name)
      throw DataError(m.path + " has a per-structure column " + name + " of its own",
                      "convert it without that --info-keys entry, or give it alone");
  m.graph_columns.push_back({name, 1});
  m.constants.push_back(value);
}
const std::string& Dataset::sources() const {
  return m_impl->sources;
}
const std::optional<std::vector<Outlier>>& Dataset::outliers() const {
  return m_impl->outliers;
}

std::vector<int32_t> Dataset::graph_config_types() const {
  const Impl& m = *m_impl;
  std::vector<int32_t> out(size_t(m.n_graphs));
  if (m.version >= 4) {  // in the records' headers, checked as they are read
    constexpr int64_t kStep = 65536;
    for (int64_t g = 0; g < m.n_graphs; g += kStep) {
      const GraphBlock b =
          m.read_v4(g, std::min(kStep, m.n_graphs - g), true, nullptr, nullptr, /*light=*/true);
      std::copy(b.config_type.begin(), b.config_type.end(), out.begin() + g);
    }
    return out;
  }
  m.read_array(m.index("graphs/config_type"), 0, size_t(m.n_graphs), out.data(), true);
  for (size_t g = 0; g < out.size(); ++g) m.check_config_type(out[g], int64_t(g));
  return out;
}

GraphBlock Dataset::read(int64_t first, int64_t count, bool verify) const {
  const Impl& m = *m_impl;
  m.check_range(first, count);
  if (m.version >= 4) {
    GraphBlock b = m.read_v4(first, count, verify, nullptr, nullptr);
    for (double v : m.constants) b.graph_extra.emplace_back(size_t(count), v);
    return b;
  }
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
  for (const auto& c : m.graph_extra) {
    b.graph_extra.emplace_back(size_t(c.n_cols) * n);
    m.read_array(m.index("graphs/extra/" + c.name), first, n, b.graph_extra.back().data(), verify);
  }
  for (double v : m.constants) b.graph_extra.emplace_back(n, v);
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
  m.check_block(b);
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
  return std::fabs(cell_det(&cell[9 * i]));
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

namespace layout {

uint32_t metadata_checksum(hid_t file, const std::vector<uint8_t>& species,
                           const std::vector<std::string>& config_types,
                           const std::string& context) {
  std::string text;
  for (const auto& name : h5::attr_names(file, context)) {
    if (name == "metadata_crc32") continue;
    text += name + "=";
    text += h5::attr_is_string(file, name, context)
                ? h5::read_attr_string(file, name, context)
                : std::to_string(h5::read_attr_int(file, name, context));
    text += '\n';
  }
  text += "species=";
  text.append(species.begin(), species.end());
  text += "\nconfig_types=";
  for (const auto& c : config_types) text += c + '\0';
  for (const char* name : {"sources", "outliers", "columns"})  // arrays of bytes, version 3 on
    if (h5::exists(file, name))
      text += std::string("\n") + name + "=" + h5::read_text(file, name, kMaxMetadataText, context);
  return crc32(text.data(), text.size());
}

}  // namespace layout

}  // namespace ddgnn
