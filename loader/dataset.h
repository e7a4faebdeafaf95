// The ddgnn dataset file (HDF5): the writer used by `ddgnn convert`, and the reader that loads any
// contiguous range of graphs with per-block checksum verification. Layout: loader/FORMAT.md.
// Shapes: n_graphs graphs, n_atoms atoms in all; per-atom arrays row-major [n_atoms, k].
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loader/frame.h"
#include "loader/outliers.h"

namespace ddgnn {

constexpr const char* kFormatName = "ddgnn-dataset";
constexpr int64_t kFormatVersion = 4;
// The oldest version `convert` writes (for a reader of an older ddgnn) and an append keeps.
constexpr int64_t kOldestWrittenVersion = 3;

// A contiguous range of graphs [first, first + n_graphs()) read from a dataset, or graphs
// gathered from anywhere (first = -1; graph_ids then names each one's index in the file).
struct GraphBlock {
  int64_t first = 0;                 // global index of the first graph, -1 when not contiguous
  std::vector<int64_t> graph_ids;    // [n_graphs] global indices when first = -1 (may be empty)
  std::vector<int64_t> atom_start;   // [n_graphs] first atom of each graph, relative to the block
  std::vector<int32_t> n_atoms;      // [n_graphs]
  std::vector<double> energy;        // [n_graphs] eV
  std::vector<double> cell;          // [n_graphs, 9] Å, rows are lattice vectors (zero: no cell)
  std::vector<uint8_t> pbc;          // [n_graphs, 3]
  std::vector<double> stress;        // [n_graphs, 9] eV/Å^3, NaN where the input had none
  std::vector<int32_t> config_type;  // [n_graphs] index into Dataset::config_types()
  std::vector<uint8_t> z;            // [n_atoms_block] atomic numbers
  std::vector<double> pos;           // [n_atoms_block, 3] Å
  std::vector<double> forces;        // [n_atoms_block, 3] eV/Å, empty if the dataset has none
  std::vector<std::vector<double>> extra;  // one per Dataset::extra_columns(), [n_atoms_block, k]
  std::vector<std::vector<double>> graph_extra;  // one per Dataset::graph_columns(), [n_graphs, k]

  size_t n_graphs() const { return n_atoms.size(); }
  // The index in the dataset file of graph i of the block (-1 when unknown).
  int64_t id_of(size_t i) const {
    if (first >= 0) return first + int64_t(i);
    return i < graph_ids.size() ? graph_ids[i] : -1;
  }
  // Graph i of the block as a Frame (config_type left as its index; names are in the Dataset).
  void frame(size_t i, Frame& out) const;
  // Graph i is periodic in all three directions (its cell has a volume).
  bool bulk(size_t i) const { return pbc[3 * i] && pbc[3 * i + 1] && pbc[3 * i + 2]; }
  // Graph i has a stress the model can predict: one was given, and the cell is bulk.
  bool has_stress(size_t i) const;
  // |det| of graph i's cell, Å³.
  double volume(size_t i) const;
};

struct ColumnInfo {
  std::string name;
  int n_cols = 1;
};

// Read-only view of a dataset file. Opening checks the format name and version; reads verify
// the CRC-32 of every checksum block they touch (a corrupted block is a DataError naming it).
class Dataset {
 public:
  explicit Dataset(const std::string& path);
  ~Dataset();
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const std::string& path() const;
  int64_t n_graphs() const;
  int64_t n_atoms() const;
  // The metadata checksum (root attributes, species, config types): with the counts and the
  // file's size, what tells two dataset files apart.
  int64_t metadata_crc32() const;
  // What the file holds, as one CRC-32: of the metadata checksum and of every array's table of
  // block checksums (read on the first call, a few kB per GB). Files that differ in any value
  // differ here; the same data converted again differs too (its time stamps are metadata).
  int64_t content_crc32() const;
  int64_t format_version() const;
  const std::string& producer() const;
  bool has_forces() const;
  const std::vector<uint8_t>& species() const;           // sorted atomic numbers present
  const std::vector<std::string>& config_types() const;  // names, index = GraphBlock::config_type
  const std::vector<ColumnInfo>& extra_columns() const;  // per-atom (atoms/extra)
  // Per-structure columns: graphs/extra, then those add_constant_column() added.
  const std::vector<ColumnInfo>& graph_columns() const;
  const std::string& sources() const;  // JSON list of the input files and their frame counts
  // The outlier frames `convert` found (loader/outliers.h); nullopt for a file written before
  // convert looked for them (format version 1).
  const std::optional<std::vector<Outlier>>& outliers() const;

  // Every graph's index into config_types() (4 bytes a graph; checksums verified).
  std::vector<int32_t> graph_config_types() const;

  // Reads graphs [first, first + count). Throws DataError past the end or on a checksum mismatch.
  GraphBlock read(int64_t first, int64_t count, bool verify = true) const;

  // Appends the records (loader/packed.h) of graphs [first, first + count) to `out`; returns
  // their offsets relative to where the first one starts ([count + 1], from 0). A file of
  // format version 4 holds them: read as they are (checksums and every value checked as read()
  // checks them); `compact` false, or an older file, reads and packs them.
  std::vector<int64_t> read_records(int64_t first, int64_t count, std::vector<uint8_t>& out,
                                    bool compact = true) const;

  // The same records straight into `dest`, which holds `size` bytes: what stored_record_sizes()
  // says they take, else a DataError (the file changed).
  void read_records_into(int64_t first, int64_t count, uint8_t* dest, int64_t size) const;

  // Bytes of the records in the file (format version 4; 0 before).
  int64_t record_bytes() const;
  // The sizes of the records read_records(first, count) gives, from the file's offsets alone
  // (format version 4: a loader sizes its store before it reads them); empty for an older file,
  // whose records are made as they are read.
  std::vector<int64_t> stored_record_sizes(int64_t first, int64_t count) const;

  // Verifies every checksum block of every array; throws DataError on the first mismatch.
  void verify_all() const;

  // Adds a per-structure column the file does not hold, `value` for every graph, after the
  // file's own (read() fills it): a file of a list trained as one dataset gets dataset_name,
  // its place in the list. DataError when the file has a column of that name.
  void add_constant_column(const std::string& name, double value);

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

// Options of `ddgnn convert`.
struct WriterOptions {
  bool append = false;                     // add to an existing dataset instead of creating one
  bool must_not_exist = false;             // refuse (under the lock) an output that exists
  std::vector<std::string> extra_columns;  // per-atom columns to keep (must be in every frame)
  std::vector<std::string> info_keys;      // per-structure numbers to keep (Frame::info)
  std::string energy_key = "energy";       // recorded as provenance
  std::string forces_key = "forces";
  // kOldestWrittenVersion..kFormatVersion; 0: kFormatVersion for a new file, and at an append
  // the file's own (3 for a version 2), which is the only one an append may ask for.
  int64_t format_version = 0;
};

// Writes a dataset to a temporary file next to `path`; commit() renames it into place. If the
// writer is destroyed without commit() (an exception), the temporary file is removed, so a failed
// conversion never leaves a file that looks valid. With append, the existing file is copied first.
// A writer holds an exclusive lock on the output's folder from construction to destruction, so
// two writers of one output (two appends, two conversions) run one after the other and neither
// is lost; it removes temporaries of `path` that killed writers left.
class DatasetWriter {
 public:
  DatasetWriter(const std::string& path, const WriterOptions& options);
  ~DatasetWriter();
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // Adds one structure. `where` names its origin for messages ("in.xyz:1234").
  void add(const Frame& frame, const std::string& where);
  // Records an input file and how many frames it gave (stored in the `sources` array).
  void note_source(const std::string& input, int64_t n_frames);
  // Flushes, writes checksums and metadata, closes, fsyncs and renames into place.
  void commit();

  // Outlier frames among all the file's graphs so far (existing ones too when appending); commit()
  // stores them in the file.
  std::vector<Outlier> outliers() const;
  int64_t n_graphs() const;  // graphs in the file so far (existing ones too when appending)
  int64_t n_atoms() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace ddgnn
