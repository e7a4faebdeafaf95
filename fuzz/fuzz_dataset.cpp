// libFuzzer target: the dataset reader on files whose content, or whose HDF5 structure, is not what
// the writer makes. Two seed files are written once by the real writer (periodic and molecular
// graphs, stress, an extra column): one of format version 4 (encoded records), taken when the
// input's length leaves 6 or more over a multiple of 12, and one of version 3 (float64 arrays).
// Each input is a list of edits, 12 bytes each, applied through HDF5 to a copy: a value edit (array
// or attribute, row, column, 8 value bytes, whether to repair the checksums) when the first byte is
// below 0xE0, else a structural edit (an attribute stored as an array, of another class or as a
// variable-length string whose global heap may then be damaged; an array of another rank, extent or
// element type; objects deleted or added; version-1 style variable-length config type names). The
// reader must then read it or refuse it with a DataError: opening, every block, the statistics.
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/checksum.h"
#include "fuzz/fuzz_util.h"
#include "loader/dataset.h"
#include "loader/dataset_layout.h"
#include "loader/h5.h"
#include "loader/stats.h"

namespace {

using namespace ddgnn;

std::string g_dir, g_seed_path, g_work_path;
std::string g_seed[2];  // the seed files' bytes: format version 3, 4

void write_seed(int64_t version, std::string& bytes) {
  std::remove(g_seed_path.c_str());
  DatasetWriter w(g_seed_path, [version] {
    WriterOptions o;
    o.extra_columns = {"charges"};
    o.format_version = version;
    return o;
  }());
  for (int g = 0; g < 12; ++g) {
    Frame f;
    const int n = 2 + g % 5;
    for (int i = 0; i < n; ++i) {
      f.z.push_back(uint8_t(i % 2 ? 8 : 1));
      for (int d = 0; d < 3; ++d) {
        f.pos.push_back(0.9 * i + 0.3 * d + 0.05 * g);
        f.forces.push_back(0.1 * (i - d));
      }
    }
    f.has_energy = true;
    f.energy = -3.0 * n - 0.01 * g;
    if (g % 2 == 0) {
      f.has_cell = true;
      f.cell = {6.0, 0, 0, 0.5, 6.0, 0, 0, 0, 6.0};
      f.pbc = {true, true, g % 4 == 0};
      f.has_stress = true;
      f.stress.fill(0.002);
    }
    f.config_type = g % 3 ? "md" : "relax";
    f.extra.push_back({"charges", 1, std::vector<double>(size_t(n), 0.1)});
    w.add(f, "seed:" + std::to_string(g));
  }
  w.note_source("seed", 12);
  w.commit();
  std::ifstream in(g_seed_path, std::ios::binary);
  bytes.assign(std::istreambuf_iterator<char>(in), {});
}

// The things an edit can change: arrays (with their element type) and root attributes.
struct Target {
  const char* path;
  hid_t type;
  bool attribute;
};
const Target kTargets[] = {
    {"graphs/atom_start", H5T_NATIVE_INT64, false},
    {"graphs/n_atoms", H5T_NATIVE_INT32, false},
    {"graphs/energy", H5T_NATIVE_DOUBLE, false},
    {"graphs/cell", H5T_NATIVE_DOUBLE, false},
    {"graphs/pbc", H5T_NATIVE_UINT8, false},
    {"graphs/stress", H5T_NATIVE_DOUBLE, false},
    {"graphs/config_type", H5T_NATIVE_INT32, false},
    {"atoms/z", H5T_NATIVE_UINT8, false},
    {"atoms/pos", H5T_NATIVE_DOUBLE, false},
    {"atoms/forces", H5T_NATIVE_DOUBLE, false},
    {"atoms/extra/charges", H5T_NATIVE_DOUBLE, false},
    {"species", H5T_NATIVE_UINT8, false},
    {"checksums/atoms.z", H5T_NATIVE_UINT32, false},
    {"sources", H5T_NATIVE_UINT8, false},  // JSON text (format version 3)
    {"outliers", H5T_NATIVE_UINT8, false},
    {"n_graphs", H5T_NATIVE_INT64, true},
    {"n_atoms", H5T_NATIVE_INT64, true},
    {"has_forces", H5T_NATIVE_INT64, true},
    {"format_version", H5T_NATIVE_INT64, true},
    {"metadata_crc32", H5T_NATIVE_INT64, true},
    {"records", H5T_NATIVE_UINT8, false},  // format version 4
    {"graphs/record_start", H5T_NATIVE_INT64, false},
    {"columns", H5T_NATIVE_UINT8, false},
    {"n_record_bytes", H5T_NATIVE_INT64, true},
};

// The rank (1 or 2) and extents of a dataspace; 0 for another rank (the structural edits make
// ranks up to 8, whose extents would overrun `dims`).
int shape_of(hid_t space, hsize_t (&dims)[2]) {
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 1 || rank > 2) return 0;
  dims[1] = 1;
  H5Sget_simple_extent_dims(space, dims, nullptr);
  return rank;
}

// Writes `v` into root attribute `name`, a structural edit may have made an array or a string:
// only where it holds one value of up to 8 bytes (else H5Awrite would read past `v`).
void write_one_value(hid_t file, const char* name, int64_t v) {
  if (H5Aexists(file, name) <= 0) return;
  h5::Handle a(H5Aopen(file, name, H5P_DEFAULT));
  if (!a.valid()) return;
  h5::Handle space(H5Aget_space(a));
  h5::Handle type(H5Aget_type(a));
  if (H5Sget_simple_extent_npoints(space) == 1 && H5Tget_size(type) <= 8)
    H5Awrite(a, H5T_NATIVE_INT64, &v);
}

// Writes the value bytes at (row, col) of an array, rows and columns taken modulo its shape.
bool edit_array(hid_t file, const Target& t, uint32_t row, uint32_t col, const uint8_t* value) {
  h5::Handle d(H5Dopen2(file, t.path, H5P_DEFAULT));
  if (!d.valid()) return false;
  h5::Handle space(H5Dget_space(d));
  hsize_t dims[2] = {0, 1};
  const int rank = shape_of(space, dims);
  if (rank < 1 || dims[0] == 0 || dims[1] == 0) return false;
  hsize_t start[2] = {row % dims[0], rank == 2 ? col % dims[1] : 0}, count[2] = {1, 1};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  h5::Handle mem(H5Screate_simple(rank, count, nullptr));
  uint8_t buf[8];
  std::memcpy(buf, value, 8);
  H5Dwrite(d, t.type, mem, space, H5P_DEFAULT, buf);
  return true;
}

// Recomputes the CRC-32 of every block of `path` (as the writer would).
void repair_checksums(hid_t file, const char* path) {
  h5::Handle d(H5Dopen2(file, path, H5P_DEFAULT));
  const std::string crc_path = layout::checksum_path(path);
  h5::Handle c(H5Dopen2(file, crc_path.c_str(), H5P_DEFAULT));
  if (!d.valid() || !c.valid()) return;
  h5::Handle space(H5Dget_space(d));
  hsize_t dims[2] = {0, 1};
  const int rank = shape_of(space, dims);
  if (rank == 0) return;
  h5::Handle type(H5Dget_type(d));
  const size_t row_bytes = H5Tget_size(type) * (rank == 2 ? dims[1] : 1);
  std::vector<char> all(dims[0] * row_bytes);
  H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data());
  const hsize_t block = std::string(path) == "records"              ? layout::kRecordChunkBytes
                        : std::string(path).rfind("atoms/", 0) == 0 ? layout::kAtomChunkRows
                                                                    : layout::kGraphChunkRows;
  std::vector<uint32_t> crcs;
  for (hsize_t r = 0; r < dims[0]; r += block)
    crcs.push_back(crc32(all.data() + r * row_bytes, std::min(block, dims[0] - r) * row_bytes));
  h5::Handle cs(H5Dget_space(c));
  hsize_t cdims[2] = {0, 1};
  if (shape_of(cs, cdims) == 1 && cdims[0] == crcs.size())
    H5Dwrite(c, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, crcs.data());
}

// Replaces root attribute `name` with one of `type` in `space` holding `data` (any bytes that fit).
void replace_attr(hid_t file, const char* name, hid_t type, hid_t space, const void* data) {
  if (H5Aexists(file, name) > 0) H5Adelete(file, name);
  h5::Handle a(H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT));
  if (a.valid()) H5Awrite(a, type, data);
}

// Replaces array `path` with one of `type`, rank `rank` and extents `dims` (zeros).
void replace_array(hid_t file, const char* path, hid_t type, int rank, const hsize_t* dims) {
  H5Ldelete(file, path, H5P_DEFAULT);
  h5::Handle space(H5Screate_simple(rank, dims, nullptr));
  h5::Handle lcpl(H5Pcreate(H5P_LINK_CREATE));
  H5Pset_create_intermediate_group(lcpl, 1);
  h5::Handle d(H5Dcreate2(file, path, type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT));
  hssize_t n = H5Sget_simple_extent_npoints(space);
  if (!d.valid() || n <= 0 || n > (1 << 20)) return;
  std::vector<char> zeros(size_t(n) * std::max<size_t>(H5Tget_size(type), 1), 0);
  H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data());
}

// The rank (1 or 2) and extents of array `path`; 0 when it is missing or of another rank.
int array_shape(hid_t file, const char* path, hsize_t (&dims)[2]) {
  h5::Handle d(H5Dopen2(file, path, H5P_DEFAULT));
  if (!d.valid()) return 0;
  h5::Handle space(H5Dget_space(d));
  return shape_of(space, dims);
}

// One structural edit (e[0] >= 0xE0); sets `damage_heap` when the file's global heaps are to be
// overwritten once it is closed.
void structural_edit(hid_t file, const uint8_t* e, bool& damage_heap) {
  const Target& t = kTargets[e[1] % (sizeof kTargets / sizeof kTargets[0])];
  int64_t value;
  std::memcpy(&value, e + 4, 8);
  switch (e[0] & 7) {
    case 0: {  // an attribute as an array of 2..257 values; an array of another rank (1..8)
      if (t.attribute) {
        const hsize_t n = 2 + e[2];
        h5::Handle space(H5Screate_simple(1, &n, nullptr));
        std::vector<int64_t> v(n, value);
        replace_attr(file, t.path, H5T_NATIVE_INT64, space, v.data());
      } else {
        hsize_t dims[8];
        const int rank = 1 + e[2] % 8;
        for (int k = 0; k < rank; ++k) dims[k] = k == 0 ? 1 + e[3] % 40 : 1 + (e[3] >> k) % 3;
        replace_array(file, t.path, t.type, rank, dims);
      }
      break;
    }
    case 1: {  // a variable-length string attribute, its heap maybe damaged afterwards
      const char* names[] = {"format", "producer", "sources", "outliers", t.path};
      h5::Handle type(H5Tcopy(H5T_C_S1));
      H5Tset_size(type, H5T_VARIABLE);
      h5::Handle space(H5Screate(H5S_SCALAR));
      const char* text = e[3] & 2 ? "ddgnn-dataset" : "[]";
      replace_attr(file, names[e[2] % 5], type, space, &text);
      damage_heap = damage_heap || (e[3] & 1);
      break;
    }
    case 2:  // an object deleted
      if (t.attribute)
        H5Adelete(file, t.path);
      else
        H5Ldelete(file, t.path, H5P_DEFAULT);
      break;
    case 3: {  // an extra root attribute: an integer array, or a fixed string of 1..256 bytes
      h5::Handle space(H5Screate(H5S_SCALAR));
      if (e[2] & 1) {
        const hsize_t n = 1 + e[3];
        h5::Handle array(H5Screate_simple(1, &n, nullptr));
        std::vector<int64_t> v(n, value);
        replace_attr(file, "extra", H5T_NATIVE_INT64, array, v.data());
      } else {
        h5::Handle type(H5Tcopy(H5T_C_S1));
        H5Tset_size(type, 1 + e[3]);
        std::string text(1 + e[3], char(e[4]));
        replace_attr(file, "extra", type, space, text.data());
      }
      break;
    }
    case 4: {  // an array of another element type (float64, or a fixed string), same rows
      hsize_t dims[2] = {0, 0};
      const int rank = t.attribute ? 0 : array_shape(file, t.path, dims);
      if (rank == 0) break;
      h5::Handle str(H5Tcopy(H5T_C_S1));
      H5Tset_size(str, 1 + e[2] % 16);
      replace_array(file, t.path, e[3] & 1 ? hid_t(str) : H5T_NATIVE_DOUBLE, rank, dims);
      break;
    }
    case 5: {  // an attribute of another class: float64, or a fixed string
      if (!t.attribute) break;
      h5::Handle space(H5Screate(H5S_SCALAR));
      if (e[2] & 1) {
        double v;
        std::memcpy(&v, e + 4, 8);
        replace_attr(file, t.path, H5T_NATIVE_DOUBLE, space, &v);
      } else {
        h5::Handle type(H5Tcopy(H5T_C_S1));
        H5Tset_size(type, 8);
        replace_attr(file, t.path, type, space, e + 4);
      }
      break;
    }
    case 6: {  // an extendible array's rows changed (0..1023)
      hsize_t dims[2] = {0, 0};
      if (t.attribute || array_shape(file, t.path, dims) == 0) break;
      dims[0] = hsize_t(e[2]) | hsize_t(e[3] & 3) << 8;
      h5::Handle d(H5Dopen2(file, t.path, H5P_DEFAULT));
      H5Dset_extent(d, dims);
      break;
    }
    default: {  // config type names as version 1 wrote them: variable-length strings
      const hsize_t n = 1 + e[2] % 4;
      h5::Handle type(H5Tcopy(H5T_C_S1));
      H5Tset_size(type, H5T_VARIABLE);
      H5Ldelete(file, "config_types", H5P_DEFAULT);
      h5::Handle space(H5Screate_simple(1, &n, nullptr));
      h5::Handle d(
          H5Dcreate2(file, "config_types", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      std::vector<const char*> names(n, "md");
      if (d.valid()) H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, names.data());
      damage_heap = damage_heap || (e[3] & 1);
      break;
    }
  }
}

// Overwrites the signature of every global heap collection ("GCOL") of the file: the heap
// references of variable-length strings then point at garbage.
void damage_global_heaps(const std::string& path) {
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (size_t at = bytes.find("GCOL"); at != std::string::npos; at = bytes.find("GCOL", at + 4))
    bytes.replace(at, 4, "XXXX");
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

void repair_metadata(hid_t file) {
  try {
    h5::Handle sp(H5Dopen2(file, "species", H5P_DEFAULT));
    if (h5::n_cols(sp) != 0) return;  // a structural edit's rank 2: rows x columns to read
    std::vector<uint8_t> species(h5::n_rows(sp));
    h5::read_rows(sp, H5T_NATIVE_UINT8, 0, species.size(), species.data(), "species");
    const auto names = h5::read_strings(file, "config_types", 1000, false, "fuzz");
    const int64_t crc = layout::metadata_checksum(file, species, names, "fuzz");
    write_one_value(file, "metadata_crc32", crc);
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  h5::silence_errors();
  char dir[] = "/tmp/ddgnn-fuzz-dataset-XXXXXX";
  if (!mkdtemp(dir)) std::abort();
  g_dir = dir;
  g_seed_path = g_dir + "/seed.h5";
  g_work_path = g_dir + "/work.h5";
  write_seed(3, g_seed[0]);
  write_seed(4, g_seed[1]);
  std::atexit([] {
    std::remove(g_seed_path.c_str());
    std::remove(g_work_path.c_str());
    ::rmdir(g_dir.c_str());
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddgnn;
  {
    std::ofstream out(g_work_path, std::ios::binary | std::ios::trunc);
    const std::string& seed = g_seed[size % 12 >= 6 ? 1 : 0];
    out.write(seed.data(), std::streamsize(seed.size()));
  }
  bool damage_heap = false;
  {
    h5::Handle file(H5Fopen(g_work_path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    if (!file.valid()) std::abort();
    bool repair_meta = false;
    for (size_t at = 0; at + 12 <= size && at < 12 * 16; at += 12) {
      const uint8_t* e = data + at;
      if (e[0] >= 0xE0) {
        structural_edit(file, e, damage_heap);
        continue;
      }
      const Target& t = kTargets[e[0] % (sizeof kTargets / sizeof kTargets[0])];
      const uint32_t row = uint32_t(e[2]) | uint32_t(e[3]) << 8;
      if (t.attribute) {
        int64_t v;
        std::memcpy(&v, e + 4, 8);
        write_one_value(file, t.path, v);
      } else if (edit_array(file, t, row, e[1] >> 2, e + 4) && (e[1] & 1)) {
        repair_checksums(file, t.path);
      }
      repair_meta = repair_meta || (e[1] & 2);
    }
    if (repair_meta) repair_metadata(file);
  }
  if (damage_heap) damage_global_heaps(g_work_path);
  fuzz::expect_clean([&] {
    Dataset ds(g_work_path);
    ds.verify_all();
    ds.graph_config_types();
    compute_stats(ds, 3.0, 4);
  });
  return 0;
}
