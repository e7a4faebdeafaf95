// DatasetWriter: buffers frames into chunked HDF5 arrays, keeps a running CRC-32 per checksum
// block, and commits atomically (temporary file, fsync, rename). Appending copies the file first.
#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/checksum.h"
#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "core/units.h"
#include "core/version.h"
#include "loader/cell.h"
#include "loader/dataset.h"
#include "loader/dataset_layout.h"
#include "loader/h5.h"
#include "loader/outliers.h"
#include "loader/packed.h"

namespace fs = std::filesystem;

namespace ddgnn {

namespace {

// One array of the file: pending rows in memory, the running CRC of the current block, and the
// checksums of the blocks finished since the file was opened.
struct ArrayWriter {
  layout::ArraySpec spec;
  h5::Handle dset, crc_dset;
  hsize_t rows = 0;  // rows in the file plus pending
  std::vector<char> pending;
  hsize_t pending_rows = 0;
  uint32_t block_crc = 0;
  hsize_t first_block = 0;  // index of the first checksum entry that will be (re)written
  std::vector<uint32_t> finished;

  void push(const void* data, hsize_t n) {
    const auto* p = static_cast<const char*>(data);
    const size_t rb = spec.row_bytes();
    pending.insert(pending.end(), p, p + n * rb);
    pending_rows += n;
    while (n > 0) {
      const hsize_t in_block = rows % spec.chunk_rows;
      const hsize_t k = std::min<hsize_t>(n, spec.chunk_rows - in_block);
      block_crc = crc32(p, k * rb, block_crc);
      rows += k;
      n -= k;
      p += k * rb;
      if (rows % spec.chunk_rows == 0) {
        finished.push_back(block_crc);
        block_crc = 0;
      }
    }
    if (pending_rows >= spec.chunk_rows) flush();
  }

  void flush() {
    h5::append_rows(dset, spec.type, pending.data(), pending_rows);
    pending.clear();
    pending_rows = 0;
  }

  void finish() {
    flush();
    std::vector<uint32_t> table = finished;
    if (rows % spec.chunk_rows != 0) table.push_back(block_crc);
    const hsize_t n_blocks = first_block + table.size();
    hsize_t dims[1] = {n_blocks};
    H5_CHECK(H5Dset_extent(crc_dset, dims), "writing checksums of " + spec.path);
    h5::write_rows(crc_dset, H5T_NATIVE_UINT32, first_block, table.size(), table.data());
  }
};

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Whether `columns` are named `wanted`, in any order.
bool same_names(const std::vector<ColumnInfo>& columns, std::vector<std::string> wanted) {
  std::vector<std::string> names;
  for (const auto& c : columns) names.push_back(c.name);
  std::sort(names.begin(), names.end());
  std::sort(wanted.begin(), wanted.end());
  return names == wanted;
}

// The column called `name` among `columns`, nullptr when there is none.
const ExtraColumn* named(const std::vector<ExtraColumn>& columns, const std::string& name) {
  for (const auto& c : columns)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace

struct DatasetWriter::Impl {
  std::string path, tmp_path;
  std::unique_ptr<FolderLock> lock;
  WriterOptions options;
  h5::Handle file;
  std::vector<ArrayWriter> arrays;  // empty until the layout is known
  bool has_forces = false;
  std::vector<ColumnInfo> extra, graph_extra;
  std::vector<bool> species = std::vector<bool>(kMaxAtomicNumber + 1, false);
  std::vector<std::string> config_types;
  std::map<std::string, int32_t> config_index;
  nlohmann::json sources = nlohmann::json::array();
  OutlierScan scan;
  int64_t n_graphs = 0, n_atoms = 0;
  bool committed = false;
  int64_t version = kFormatVersion;
  // Version 4: graphs waiting to be packed into records (kPackGraphs at a time).
  static constexpr size_t kPackGraphs = 4096;
  GraphBlock pending;
  std::vector<uint8_t> packed;
  int64_t n_record_bytes = 0;

  void flush_records() {
    if (pending.n_graphs() == 0) return;
    packed.clear();
    const std::vector<int64_t> offsets = pack_records(pending, packed);
    for (size_t i = 0; i + 1 < offsets.size(); ++i) {
      const int64_t start = n_record_bytes + offsets[i];
      array("graphs/record_start").push(&start, 1);
    }
    array("records").push(packed.data(), packed.size());
    n_record_bytes += int64_t(packed.size());
    pending = GraphBlock();
  }

  ArrayWriter& array(const std::string& p) {
    for (auto& a : arrays)
      if (a.spec.path == p) return a;
    throw Error("internal: no array " + p);
  }

  void create_arrays() {
    for (const auto& spec : layout::array_specs(version, has_forces, extra, graph_extra)) {
      ArrayWriter a;
      a.spec = spec;
      a.dset = h5::create_rows(file, spec.path, spec.type, spec.n_cols, spec.chunk_rows);
      a.crc_dset =
          h5::create_rows(file, layout::checksum_path(spec.path), H5T_NATIVE_UINT32, 0, 1024);
      h5::write_attr_int(a.dset, "checksum_block_rows", int64_t(spec.chunk_rows));
      arrays.push_back(std::move(a));
    }
  }

  void open_existing();
  void check_and_add(const Frame& f, const std::string& where);
};

void DatasetWriter::Impl::open_existing() {
  // The reader's checks of every block and value: nothing is appended to a file that is wrong.
  // Its frames join the outlier scan (the energy test compares every frame of a composition).
  Dataset existing(path);
  // The file keeps its version (a version 2 becomes 3: its text attributes become arrays).
  version = std::max(existing.format_version(), kOldestWrittenVersion);
  if (options.format_version != 0 && options.format_version != version)
    throw ConfigError(
        path + " is of format version " + std::to_string(version) +
            ", and an append keeps it (asked: " + std::to_string(options.format_version) + ")",
        "leave out the format version, or convert everything again into a new file");
  n_record_bytes = existing.record_bytes();
  Frame frame;
  constexpr int64_t kStep = 16384;
  for (int64_t g0 = 0; g0 < existing.n_graphs(); g0 += kStep) {
    const GraphBlock b = existing.read(g0, std::min(kStep, existing.n_graphs() - g0));
    for (size_t i = 0; i < b.n_graphs(); ++i) {
      b.frame(i, frame);
      scan.add(frame);
    }
  }
  has_forces = existing.has_forces();
  if (!options.extra_columns.empty() &&
      !same_names(existing.extra_columns(), options.extra_columns))
    throw DataError(path + ": cannot append with extra columns that differ from the file's",
                    "pass the same --extra-columns as the original conversion");
  extra = existing.extra_columns();
  if (!same_names(existing.graph_columns(), options.info_keys)) {
    std::string have;
    for (const auto& c : existing.graph_columns()) have += (have.empty() ? "" : ", ") + c.name;
    throw DataError(path +
                        ": cannot append with per-structure keys (--info-keys) that differ "
                        "from the file's (" +
                        (have.empty() ? "none" : have) + ")",
                    "pass the same --info-keys as the original conversion");
  }
  graph_extra = existing.graph_columns();
  for (uint8_t z : existing.species()) species[z] = true;
  config_types = existing.config_types();
  for (size_t i = 0; i < config_types.size(); ++i) config_index[config_types[i]] = int32_t(i);
  sources = nlohmann::json::parse(existing.sources().empty() ? "[]" : existing.sources());
  n_graphs = existing.n_graphs();
  n_atoms = existing.n_atoms();

  std::error_code copy_error;
  fs::copy_file(path, tmp_path, fs::copy_options::overwrite_existing, copy_error);
  if (copy_error) {
    std::error_code ignored;
    fs::remove(tmp_path, ignored);
    throw Error(
        "cannot copy " + path + " to " + tmp_path + " to append (" + copy_error.message() + ")",
        "the disk may be full: free space (the copy needs the file's size again), then "
        "append again; " +
            path + " is untouched");
  }
  file = h5::Handle(H5_CHECK(H5Fopen(tmp_path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT),
                             "opening " + tmp_path + " to append"));
  for (const auto& spec : layout::array_specs(version, has_forces, extra, graph_extra)) {
    const std::string ctx = path + ": opening " + spec.path;
    ArrayWriter a;
    a.spec = spec;
    a.dset = h5::Handle(H5_CHECK(H5Dopen2(file, spec.path.c_str(), H5P_DEFAULT), ctx));
    a.crc_dset = h5::Handle(
        H5_CHECK(H5Dopen2(file, layout::checksum_path(spec.path).c_str(), H5P_DEFAULT), ctx));
    a.rows = h5::n_rows(a.dset);
    a.first_block = a.rows / spec.chunk_rows;
    if (a.rows % spec.chunk_rows != 0)
      h5::read_rows(a.crc_dset, H5T_NATIVE_UINT32, a.first_block, 1, &a.block_crc, ctx);
    arrays.push_back(std::move(a));
  }
}

void DatasetWriter::Impl::check_and_add(const Frame& f, const std::string& where) {
  const size_t n = f.n_atoms();
  if (n == 0) throw DataError(where + ": structure has no atoms");
  if (!f.has_energy)
    throw DataError(where + ": structure has no energy",
                    "every structure needs a total energy; use --energy-key to name its key");
  if (!std::isfinite(f.energy)) throw DataError(where + ": energy is not a finite number");
  for (size_t i = 0; i < 3 * n; ++i)
    if (!std::isfinite(f.pos[i]))
      throw DataError(where + ": position of atom " + std::to_string(i / 3 + 1) + " is not finite");
  for (uint8_t z : f.z)
    if (z < 1 || z > kMaxAtomicNumber)
      throw DataError(where + ": atomic number " + std::to_string(int(z)) + " is out of 1.." +
                      std::to_string(kMaxAtomicNumber));
  const bool periodic[3] = {f.pbc[0], f.pbc[1], f.pbc[2]};
  const std::string cell_error = cell_problem(f.cell.data(), periodic);
  if (!cell_error.empty())
    throw DataError(where + ": " + cell_error,
                    "give a periodic structure a cell of three independent lattice vectors (Å)");

  const bool frame_forces = !f.forces.empty();
  if (arrays.empty()) {
    has_forces = frame_forces;
    for (const auto& name : options.extra_columns) {
      const ExtraColumn* it = named(f.extra, name);
      if (!it)
        throw DataError(where + ": per-atom column '" + name + "' is missing",
                        "check --extra-columns against the Properties= of the file");
      extra.push_back({name, it->n_cols});
    }
    for (const auto& name : options.info_keys) {
      const ExtraColumn* it = named(f.info, name);
      if (!it)
        throw DataError(where + ": per-structure key '" + name + "' is missing",
                        "check --info-keys against the comment line of the file");
      if (std::find(options.extra_columns.begin(), options.extra_columns.end(), name) !=
          options.extra_columns.end())
        throw DataError(
            where + ": '" + name + "' is both a per-atom column and a per-structure key",
            "keep it in --extra-columns or in --info-keys, not both");
      graph_extra.push_back({name, it->n_cols});
    }
    create_arrays();
  }
  if (frame_forces != has_forces)
    throw DataError(where + (frame_forces ? ": structure has forces but earlier ones have none"
                                          : ": structure has no forces but earlier ones have them"),
                    "every structure of a dataset must carry forces, or none");
  if (frame_forces && f.forces.size() != 3 * n)
    throw DataError(where + ": forces have the wrong length");
  for (size_t i = 0; i < f.forces.size(); ++i)
    if (!std::isfinite(f.forces[i]))
      throw DataError(where + ": force on atom " + std::to_string(i / 3 + 1) + " is not finite");

  int32_t ct = 0;
  auto it = config_index.find(f.config_type);
  if (it == config_index.end()) {
    // The reader's rule for the names it reads back (UTF-8, fixed-length, NUL-padded, at most
    // 4096 bytes): a name it could not read would make the whole file unreadable.
    if (f.config_type.size() > 4096 || f.config_type.find('\0') != std::string::npos)
      throw DataError(
          where + ": config_type of " + std::to_string(f.config_type.size()) + " bytes" +
              (f.config_type.find('\0') != std::string::npos ? " holding a NUL" : std::string()) +
              " (at most 4096, no NUL)",
          "shorten the config_type (or --config-type-key's value) in the input");
    if (const size_t bad = invalid_utf8_at(f.config_type); bad != std::string::npos)
      throw DataError(
          where + ": config_type is not UTF-8 text (" + utf8_error_at(f.config_type, bad) + ")",
          "convert the file to UTF-8 first, e.g. iconv -f latin1 -t utf-8");
    ct = int32_t(config_types.size());
    config_types.push_back(f.config_type);
    config_index.emplace(f.config_type, ct);
  } else {
    ct = it->second;
  }

  const int64_t start = n_atoms;
  const int32_t na = int32_t(n);
  std::array<double, 9> stress;
  stress.fill(std::nan(""));
  if (f.has_stress) stress = f.stress;
  std::array<uint8_t, 3> pbc = {uint8_t(f.pbc[0]), uint8_t(f.pbc[1]), uint8_t(f.pbc[2])};
  std::array<double, 9> cell{};
  if (f.has_cell) cell = f.cell;

  std::vector<const ExtraColumn*> columns, keys;
  for (const auto& c : extra) {
    const ExtraColumn* col = named(f.extra, c.name);
    if (!col || col->n_cols != c.n_cols)
      throw DataError(where + ": per-atom column '" + c.name + "' is missing or has another width");
    columns.push_back(col);
  }
  for (const auto& c : graph_extra) {
    const ExtraColumn* key = named(f.info, c.name);
    if (!key)
      throw DataError(where + ": per-structure key '" + c.name + "' is missing",
                      "every structure of a dataset must carry the keys of --info-keys");
    if (key->n_cols != c.n_cols)
      throw DataError(where + ": per-structure key '" + c.name + "' holds " +
                          std::to_string(key->n_cols) + " number(s), earlier structures " +
                          std::to_string(c.n_cols),
                      "a per-structure target has the same number of values in every structure");
    keys.push_back(key);
  }
  if (version >= 4) {
    // Into the block of graphs waiting to become records.
    GraphBlock& b = pending;
    const auto append = [](auto& to, const auto* from, size_t count) {
      to.insert(to.end(), from, from + count);
    };
    if (b.n_graphs() == 0) {
      b.extra.assign(extra.size(), {});
      b.graph_extra.assign(graph_extra.size(), {});
    }
    b.atom_start.push_back(int64_t(b.z.size()));
    b.n_atoms.push_back(na);
    b.energy.push_back(f.energy);
    append(b.cell, cell.data(), 9);
    append(b.pbc, pbc.data(), 3);
    append(b.stress, stress.data(), 9);
    b.config_type.push_back(ct);
    append(b.z, f.z.data(), n);
    append(b.pos, f.pos.data(), 3 * n);
    if (has_forces) append(b.forces, f.forces.data(), 3 * n);
    for (size_t c = 0; c < columns.size(); ++c)
      append(b.extra[c], columns[c]->values.data(), size_t(extra[c].n_cols) * n);
    for (size_t c = 0; c < keys.size(); ++c)
      append(b.graph_extra[c], keys[c]->values.data(), size_t(graph_extra[c].n_cols));
    if (b.n_graphs() >= kPackGraphs) flush_records();
  } else {
    array("graphs/atom_start").push(&start, 1);
    array("graphs/n_atoms").push(&na, 1);
    array("graphs/energy").push(&f.energy, 1);
    array("graphs/cell").push(cell.data(), 1);
    array("graphs/pbc").push(pbc.data(), 1);
    array("graphs/stress").push(stress.data(), 1);
    array("graphs/config_type").push(&ct, 1);
    array("atoms/z").push(f.z.data(), n);
    array("atoms/pos").push(f.pos.data(), n);
    if (has_forces) array("atoms/forces").push(f.forces.data(), n);
    for (size_t c = 0; c < columns.size(); ++c)
      array("atoms/extra/" + extra[c].name).push(columns[c]->values.data(), n);
    for (size_t c = 0; c < keys.size(); ++c)
      array("graphs/extra/" + graph_extra[c].name).push(keys[c]->values.data(), 1);
  }
  for (uint8_t z : f.z) species[z] = true;
  scan.add(f);
  n_graphs += 1;
  n_atoms += int64_t(n);
}

namespace {

// A column or key name the reader can find again: it becomes an HDF5 link name, and a checksum
// table's name with "." between its parts.
void check_column_name(const std::string& name, const char* option) {
  const bool ok =
      !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      });
  if (!ok)
    throw ConfigError(std::string(option) + ": '" + name +
                          "' cannot name a column (1-64 letters, digits, '_' or '-')",
                      "give the key as the extended XYZ file spells it");
}

}  // namespace

DatasetWriter::DatasetWriter(const std::string& path, const WriterOptions& options)
    : m_impl(std::make_unique<Impl>()) {
  h5::silence_errors();
  for (const auto& name : options.extra_columns) check_column_name(name, "--extra-columns");
  for (const auto& name : options.info_keys) check_column_name(name, "--info-keys");
  m_impl->path = path;
  m_impl->tmp_path = path + ".tmp." + std::to_string(::getpid());
  m_impl->options = options;
  if (options.format_version != 0 &&
      (options.format_version < kOldestWrittenVersion || options.format_version > kFormatVersion))
    throw ConfigError(
        "convert: format version " + std::to_string(options.format_version) + " cannot be written",
        "give " + std::to_string(kOldestWrittenVersion) + " (read by older ddgnn) to " +
            std::to_string(kFormatVersion));
  m_impl->version = options.format_version != 0 ? options.format_version : kFormatVersion;
  const std::string folder = fs::path(path).parent_path().string();
  // A lock per output (".<name>.lock" beside it): conversions of other outputs in one folder,
  // one process per shard, run side by side.
  const std::string lock_path = (folder.empty() ? std::string() : folder + "/") + "." +
                                fs::path(path).filename().string() + ".lock";
  m_impl->lock = std::make_unique<FolderLock>(lock_path, path, -1.0, /*lock_file=*/true);
  const int stale = remove_stale_temporaries(folder.empty() ? "." : folder,
                                             fs::path(path).filename().string() + ".tmp.");
  if (stale > 0)
    spdlog::info("{}: removed {} temporary file(s) of interrupted writes", path, stale);
  if (options.must_not_exist && fs::exists(path))
    throw ConfigError("convert: output '" + path + "' already exists",
                      "pass --append to add to it, or --overwrite to replace it");
  if (options.append) {
    if (!fs::exists(path))
      throw DataError(path + ": cannot append, the file does not exist",
                      "leave out --append to create it");
    m_impl->open_existing();
  } else {
    m_impl->file = h5::Handle(
        H5_CHECK(H5Fcreate(m_impl->tmp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                 "creating " + m_impl->tmp_path));
  }
}

DatasetWriter::~DatasetWriter() {
  if (!m_impl->committed) {
    if (m_impl->file.valid()) h5::note_failed_close();
    m_impl->arrays.clear();
    m_impl->file.reset();
    std::error_code ec;
    fs::remove(m_impl->tmp_path, ec);  // never leave a half-written file behind
  }
}

void DatasetWriter::add(const Frame& frame, const std::string& where) {
  m_impl->check_and_add(frame, where);
}

void DatasetWriter::note_source(const std::string& input, int64_t n_frames) {
  m_impl->sources.push_back(
      {{"file", escape_invalid_utf8(input)}, {"frames", n_frames}, {"added", now_iso8601()}});
}

void DatasetWriter::commit() {
  Impl& m = *m_impl;
  if (m.n_graphs == 0)
    throw DataError(m.path + ": no structures to write", "check the input files");
  if (m.version >= 4) m.flush_records();
  for (auto& a : m.arrays) a.finish();
  std::vector<uint8_t> species;
  for (int z = 1; z <= kMaxAtomicNumber; ++z)
    if (m.species[z]) species.push_back(uint8_t(z));
  const std::string ctx = "writing metadata of " + m.path;
  if (h5::exists(m.file, "species")) H5_CHECK(H5Ldelete(m.file, "species", H5P_DEFAULT), ctx);
  {
    h5::Handle sp = h5::create_rows(m.file, "species", H5T_NATIVE_UINT8, 0, 128);
    h5::append_rows(sp, H5T_NATIVE_UINT8, species.data(), species.size());
  }
  h5::write_strings(m.file, "config_types", m.config_types);
  h5::write_attr_string(m.file, "format", kFormatName);
  h5::write_attr_int(m.file, "format_version", m.version);
  h5::write_attr_string(m.file, "producer",
                        std::string("ddgnn ") + DDGNN_VERSION + " (" + DDGNN_GIT_DESCRIBE + ")");
  if (!h5::has_attr(m.file, "created")) h5::write_attr_string(m.file, "created", now_iso8601());
  h5::write_attr_string(m.file, "modified", now_iso8601());
  h5::write_attr_string(m.file, "units_energy", "eV");
  h5::write_attr_string(m.file, "units_length", "angstrom");
  h5::write_attr_string(m.file, "units_forces", "eV/angstrom");
  h5::write_attr_string(m.file, "units_stress", "eV/angstrom^3");
  h5::write_attr_string(m.file, "energy_key", m.options.energy_key);
  h5::write_attr_string(m.file, "forces_key", m.options.forces_key);
  // Metadata that grows with the data goes into arrays (an attribute holds at most 64 KiB: a
  // few thousand outlier frames did not fit); those of a version-2 file appended to go.
  for (const char* name : {"sources", "outliers"})
    if (h5::has_attr(m.file, name)) H5_CHECK(H5Adelete(m.file, name), ctx);
  h5::write_text(m.file, "sources", m.sources.dump());
  h5::write_attr_int(m.file, "has_forces", m.has_forces ? 1 : 0);
  h5::write_attr_int(m.file, "n_graphs", m.n_graphs);
  h5::write_attr_int(m.file, "n_atoms", m.n_atoms);
  if (m.version >= 4) {
    h5::write_attr_int(m.file, "n_record_bytes", m.n_record_bytes);
    nlohmann::json columns = {{"atoms", nlohmann::json::array()},
                              {"graphs", nlohmann::json::array()}};
    for (const auto& c : m.extra)
      columns["atoms"].push_back({{"name", c.name}, {"width", c.n_cols}});
    for (const auto& c : m.graph_extra)
      columns["graphs"].push_back({{"name", c.name}, {"width", c.n_cols}});
    h5::write_text(m.file, "columns", columns.dump());
  }
  nlohmann::json outliers = nlohmann::json::array();
  for (const auto& o : m.scan.finish()) outliers.push_back({{"graph", o.graph}, {"what", o.what}});
  h5::write_text(m.file, "outliers", outliers.dump());
  h5::write_attr_int(m.file, "metadata_crc32",
                     layout::metadata_checksum(m.file, species, m.config_types, ctx));
  m.arrays.clear();
  H5_CHECK(H5Fflush(m.file, H5F_SCOPE_GLOBAL), ctx);
  m.file.reset();
  // What is about to replace the output passes the one test of a readable file, the reader's own
  // (structure, metadata checksum, names): a writer bug or a name the reader refuses never
  // replaces a good file with one nothing can open.
  try {
    Dataset check(m.tmp_path);
  } catch (const Error& e) {
    throw DataError("the file about to be written as " + m.path +
                        " would not be readable, so it was not written: " + e.what(),
                    "this is a bug in ddgnn convert; please report it with the input");
  }
  fsync_path(m.tmp_path);
  std::error_code ec;
  fs::rename(m.tmp_path, m.path, ec);
  if (ec)
    throw DataError("cannot rename " + m.tmp_path + " to " + m.path + ": " + ec.message(),
                    "check permissions of the output directory");
  fsync_path(fs::path(m.path).parent_path().empty() ? "."
                                                    : fs::path(m.path).parent_path().string());
  m.committed = true;
}

std::vector<Outlier> DatasetWriter::outliers() const {
  return m_impl->scan.finish();
}

int64_t DatasetWriter::n_graphs() const {
  return m_impl->n_graphs;
}
int64_t DatasetWriter::n_atoms() const {
  return m_impl->n_atoms;
}

}  // namespace ddgnn
