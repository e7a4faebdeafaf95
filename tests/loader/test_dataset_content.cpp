// A dataset whose checksums are valid but whose content is wrong (a buggy or foreign writer, a
// crafted file): every value the reader hands on is checked, each bad one a DataError that names
// the file, the array, the graph and the value, never a crash, an HDF5 call or a source path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/h5_edit.h"
#include "../common/temp_dir.h"
#include "core/error.h"
#include "loader/array_codec.h"
#include "loader/dataset.h"
#include "loader/h5.h"
#include "loader/packed.h"

namespace ddgnn {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;

// Eight periodic Cu/H structures of 4 atoms, with stress, written by the real writer. Format
// version 3 by default: most tests below damage one of its float64 arrays, the reader's value
// checks being the same for both versions; those of version 4's records follow them. `columns`
// adds a per-atom column and a per-structure key of binary-born values.
std::string write_good(const TempDir& dir, int64_t version = 3, bool columns = false) {
  const std::string path = dir.file("d.h5");
  WriterOptions options;
  options.format_version = version;
  if (columns) {
    options.extra_columns = {"charges"};
    options.info_keys = {"gap"};
  }
  DatasetWriter w(path, options);
  for (int g = 0; g < 8; ++g) {
    Frame f;
    for (int i = 0; i < 4; ++i) {
      f.z.push_back(i == 0 ? 1 : 29);
      for (int d = 0; d < 3; ++d) {
        f.pos.push_back(1.0 + i + 0.3 * d + 0.01 * g);
        f.forces.push_back(0.1 * (i - d));
      }
    }
    f.has_energy = true;
    f.energy = -10.0 - g;
    f.has_cell = true;
    f.cell = {8.0, 0, 0, 0, 8.0, 0, 0, 0, 8.0};
    f.pbc = {true, true, true};
    f.has_stress = true;
    f.stress.fill(0.001);
    f.config_type = g < 4 ? "bulk" : "hot";
    if (columns) {
      std::vector<double> q;
      for (int i = 0; i < 4; ++i) q.push_back(std::sqrt(2.0 + i + g));
      f.extra.push_back({"charges", 1, q});
      f.info.push_back({"gap", 2, {std::acos(-1.0) * g, -0.0}});
    }
    w.add(f, "t:" + std::to_string(g));
  }
  w.commit();
  return path;
}

// The DataError of reading every graph of `path` (opening included); fails the test without one.
DataError read_error(const std::string& path) {
  try {
    Dataset ds(path);
    ds.verify_all();
  } catch (const DataError& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, Not(HasSubstr("HDF5 call")));
    EXPECT_THAT(what, Not(HasSubstr(".cpp")));
    return e;
  }
  ADD_FAILURE() << "no error for " << path;
  return DataError("none");
}

TEST(DatasetContent, GoodFileReads) {
  TempDir dir;
  const std::string path = write_good(dir);
  Dataset ds(path);
  EXPECT_NO_THROW(ds.verify_all());
  EXPECT_EQ(ds.config_types(), (std::vector<std::string>{"bulk", "hot"}));
}

TEST(DatasetContent, AtomicNumberOutOfRangeOrNotInSpeciesIsNamed) {
  for (uint8_t z : {uint8_t(200), uint8_t(0), uint8_t(8)}) {
    TempDir dir;
    const std::string path = write_good(dir);
    testing::overwrite_checksummed(path, "atoms/z", 13, 0, H5T_NATIVE_UINT8, z);  // graph 3
    const DataError e = read_error(path);
    EXPECT_THAT(e.what(), HasSubstr(path + ": array 'atoms/z', graph 3: atomic number " +
                                    std::to_string(z) + " of atom 1 of the graph"));
    EXPECT_THAT(e.hint(), HasSubstr("ddgnn convert"));
  }
}

TEST(DatasetContent, SpeciesTableWithoutAPresentElementIsCaught) {
  TempDir dir;
  const std::string path = write_good(dir);
  testing::overwrite_value(path, "species", 1, 0, H5T_NATIVE_UINT8, uint8_t(30));  // Cu -> Zn
  testing::repair_metadata_checksum(path);
  EXPECT_THAT(read_error(path).what(), HasSubstr("atomic number 29 of atom 1 of the graph is "
                                                 "not in the species table"));
}

TEST(DatasetContent, BadSpeciesTableIsNamedWithItsRow) {
  for (uint8_t z : {uint8_t(255), uint8_t(0), uint8_t(1)}) {  // 1: not increasing (1, 1)
    TempDir dir;
    const std::string path = write_good(dir);
    testing::overwrite_value(path, "species", 1, 0, H5T_NATIVE_UINT8, z);
    testing::repair_metadata_checksum(path);
    EXPECT_THAT(read_error(path).what(),
                HasSubstr("array 'species', row 1: atomic number " + std::to_string(z)));
  }
}

TEST(DatasetContent, FlippedBitInSpeciesOrConfigTypesFailsTheMetadataChecksum) {
  TempDir dir;
  const std::string path = write_good(dir);
  testing::overwrite_value(path, "species", 0, 0, H5T_NATIVE_UINT8, uint8_t(1 ^ 4));
  EXPECT_THAT(read_error(path).what(), HasSubstr("checksum mismatch in the metadata"));

  TempDir dir2;
  const std::string path2 = write_good(dir2);
  hid_t f = H5Fopen(path2.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "config_types", H5P_DEFAULT);
  hid_t type = H5Dget_type(d);
  std::vector<char> buf(2 * H5Tget_size(type));
  H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
  buf[0] ^= 0x02;  // "bulk" -> "`ulk"
  H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
  H5Tclose(type);
  H5Dclose(d);
  H5Fclose(f);
  EXPECT_THAT(read_error(path2).what(), HasSubstr("checksum mismatch in the metadata"));

  // A byte no UTF-8 text holds, with the checksum repaired: the name is refused, not passed on
  // to the JSON of `info --json`, the run log or a checkpoint.
  TempDir dir3;
  const std::string path3 = write_good(dir3);
  f = H5Fopen(path3.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  d = H5Dopen2(f, "config_types", H5P_DEFAULT);
  type = H5Dget_type(d);
  H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
  buf[H5Tget_size(type) + 1] = char(0xFF);  // "hot" -> "h\xFFt"
  H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
  H5Tclose(type);
  H5Dclose(d);
  H5Fclose(f);
  testing::repair_metadata_checksum(path3);
  EXPECT_THAT(read_error(path3).what(),
              HasSubstr("array 'config_types', row 1 is not UTF-8 text (byte 0xFF at position 1)"));
}

TEST(DatasetContent, ChangedAttributeFailsTheMetadataChecksum) {
  TempDir dir;
  const std::string path = write_good(dir);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t a = H5Aopen(f, "has_forces", H5P_DEFAULT);
  const int64_t zero = 0;
  H5Awrite(a, H5T_NATIVE_INT64, &zero);
  H5Aclose(a);
  H5Fclose(f);
  EXPECT_THAT(read_error(path).what(), HasSubstr("checksum mismatch in the metadata"));
}

TEST(DatasetContent, MissingAttributeIsNamedWithoutHdf5Internals) {
  TempDir dir;
  const std::string path = write_good(dir);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Adelete(f, "n_atoms");
  H5Fclose(f);
  const DataError e = read_error(path);
  EXPECT_THAT(e.what(), HasSubstr(path + ": attribute 'n_atoms' is missing"));
  EXPECT_THAT(e.hint(), HasSubstr("convert"));
}

TEST(DatasetContent, ImpossibleCountsAreRefused) {
  for (int64_t n_graphs : {int64_t(0), int64_t(-5), int64_t(1000)}) {  // 1000 > 32 atoms
    TempDir dir;
    const std::string path = write_good(dir);
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t a = H5Aopen(f, "n_graphs", H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &n_graphs);
    H5Aclose(a);
    H5Fclose(f);
    testing::repair_metadata_checksum(path);
    EXPECT_THAT(read_error(path).what(),
                HasSubstr("attributes n_graphs = " + std::to_string(n_graphs)));
  }
}

TEST(DatasetContent, TinyOrDegenerateCellIsNamed) {
  TempDir dir;
  const std::string path = write_good(dir);
  testing::overwrite_checksummed(path, "graphs/cell", 5, 4, H5T_NATIVE_DOUBLE, 0.001);
  EXPECT_THAT(read_error(path).what(),
              HasSubstr("array 'graphs/cell', graph 5: the periodic cell is 0.001 Å thick along "
                        "lattice vector b"));
  TempDir dir2;
  const std::string path2 = write_good(dir2);
  testing::overwrite_checksummed(path2, "graphs/cell", 2, 8, H5T_NATIVE_DOUBLE, 0.0);
  EXPECT_THAT(read_error(path2).what(), HasSubstr("graph 2: the periodic cell has volume 0 Å^3"));
  // Finite entries whose volume or face areas overflow (found by fuzzing: the neighbour count
  // of `info` then took the ceiling of NaN).
  for (const double huge : {1e200, 1e300}) {
    TempDir dir3;
    const std::string path3 = write_good(dir3);
    testing::overwrite_checksummed(path3, "graphs/cell", 5, 0, H5T_NATIVE_DOUBLE, huge);
    testing::overwrite_checksummed(path3, "graphs/cell", 5, 4, H5T_NATIVE_DOUBLE, huge);
    EXPECT_THAT(read_error(path3).what(),
                HasSubstr("graph 5: the periodic cell's volume overflows"));
  }
}

TEST(DatasetContent, NonFiniteValuesAreNamed) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    const char* array;
    hsize_t row, col;
    double value;
    const char* expect;
  };
  for (const Case& c : {Case{"graphs/energy", 6, 0, nan, "graph 6: energy nan eV is not finite"},
                        Case{"atoms/pos", 9, 2, inf, "graph 2: position inf of atom 1"},
                        Case{"atoms/forces", 31, 0, nan, "graph 7: force nan of atom 3"},
                        Case{"graphs/stress", 4, 3, nan, "graph 4: stress component 3 is nan"},
                        Case{"graphs/cell", 1, 0, inf, "graph 1: the cell has a non-finite"}}) {
    TempDir dir;
    const std::string path = write_good(dir);
    testing::overwrite_checksummed(path, c.array, c.row, c.col, H5T_NATIVE_DOUBLE, c.value);
    EXPECT_THAT(read_error(path).what(),
                HasSubstr(std::string("array '") + c.array + "', " + c.expect));
  }
}

TEST(DatasetContent, FlagsAndIndicesOutOfRangeAreNamed) {
  TempDir dir;
  const std::string path = write_good(dir);
  testing::overwrite_checksummed(path, "graphs/pbc", 3, 1, H5T_NATIVE_UINT8, uint8_t(7));
  EXPECT_THAT(read_error(path).what(), HasSubstr("graph 3: periodic flag 7 is not 0 or 1"));
  TempDir dir2;
  const std::string path2 = write_good(dir2);
  testing::overwrite_checksummed(path2, "graphs/config_type", 7, 0, H5T_NATIVE_INT32, int32_t(5));
  EXPECT_THAT(read_error(path2).what(), HasSubstr("graph 7: config type index 5 is not in 0..1"));
  EXPECT_THROW(Dataset(path2).graph_config_types(), DataError);
}

TEST(DatasetContent, VariableLengthNamesAreRefusedAndVersionOneWithAHintToConvertAgain) {
  // A file as format version 1 wrote it: variable-length config type names, no metadata CRC.
  TempDir dir;
  const std::string path = write_good(dir);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Ldelete(f, "config_types", H5P_DEFAULT);
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  hsize_t dims[1] = {2};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t d = H5Dcreate2(f, "config_types", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const char* names[2] = {"bulk", "hot"};
  H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, names);
  H5Dclose(d);
  H5Sclose(space);
  H5Tclose(type);
  H5Fclose(f);
  testing::repair_metadata_checksum(path);
  EXPECT_THAT(read_error(path).what(), HasSubstr("holds variable-length strings"));

  f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Adelete(f, "metadata_crc32");
  hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
  const int64_t one = 1;
  H5Awrite(a, H5T_NATIVE_INT64, &one);
  H5Aclose(a);
  H5Fclose(f);
  const DataError e = read_error(path);
  EXPECT_THAT(e.what(), HasSubstr("dataset format version 1, which this ddgnn no longer reads"));
  EXPECT_THAT(e.hint(), HasSubstr("convert the extended XYZ input again"));
}

// Replaces root attribute `name` of the file with one of `type` in `space`, holding `data`.
void replace_attr(const std::string& path, const char* name, hid_t type, hid_t space,
                  const void* data) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (H5Aexists(f, name) > 0) H5Adelete(f, name);
  hid_t a = H5Acreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, type, data);
  H5Aclose(a);
  H5Fclose(f);
}

// Overwrites every occurrence of `from` among the file's bytes with `to` (same length).
void patch_bytes(const std::string& path, const std::string& from, const std::string& to) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  for (size_t at = bytes.find(from); at != std::string::npos; at = bytes.find(from, at + 1))
    bytes.replace(at, to.size(), to);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(DatasetContent, VariableLengthAttributesWithABadHeapAreRefusedUnread) {
  // format, producer and sources as variable-length strings whose global heap is then damaged
  // (its collection signature overwritten): libhdf5 would follow the reference into it.
  for (const char* name : {"format", "producer", "sources"}) {
    SCOPED_TRACE(name);
    TempDir dir;
    const std::string path = write_good(dir);
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    hid_t space = H5Screate(H5S_SCALAR);
    const char* value = std::string(name) == "format" ? "ddgnn-dataset" : "[]";
    replace_attr(path, name, type, space, &value);
    H5Sclose(space);
    H5Tclose(type);
    patch_bytes(path, "GCOL", "XXXX");
    const DataError e = read_error(path);
    EXPECT_THAT(e.what(), HasSubstr(std::string("attribute '") + name +
                                    "' is a variable-length string, which `ddgnn convert` never "
                                    "writes"));
  }
}

TEST(DatasetContent, AttributesStoredAsArraysAreRefusedBeforeTheyAreRead) {
  TempDir dir;
  const std::string path = write_good(dir);
  std::vector<int64_t> many(4096, 8);
  hsize_t n[1] = {many.size()};
  hid_t space = H5Screate_simple(1, n, nullptr);
  replace_attr(path, "n_graphs", H5T_NATIVE_INT64, space, many.data());
  EXPECT_THAT(read_error(path).what(),
              HasSubstr("attribute 'n_graphs' holds an array of 4096 values where one value is "
                        "written"));
  // An extra integer array, which the metadata checksum reads with the other attributes.
  TempDir dir2;
  const std::string path2 = write_good(dir2);
  replace_attr(path2, "extra", H5T_NATIVE_INT64, space, many.data());
  EXPECT_THAT(read_error(path2).what(), HasSubstr("attribute 'extra' holds an array of 4096"));
  H5Sclose(space);
  // format as an array of two fixed-length strings.
  TempDir dir3;
  const std::string path3 = write_good(dir3);
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, 13);
  hsize_t two[1] = {2};
  hid_t space2 = H5Screate_simple(1, two, nullptr);
  const char text[] = "ddgnn-datasetddgnn-dataset";
  replace_attr(path3, "format", type, space2, text);
  EXPECT_THAT(read_error(path3).what(), HasSubstr("attribute 'format' holds an array of 2 values"));
  H5Sclose(space2);
  H5Tclose(type);
}

TEST(DatasetContent, SourcesThatAreNotTheJsonListConvertWritesAreNamed) {
  for (const std::string text : {"not json", "{\"file\": 3}"}) {
    TempDir dir;
    const std::string path = write_good(dir);
    {
      h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
      h5::write_text(f, "sources", text);
    }
    testing::repair_metadata_checksum(path);
    EXPECT_THAT(read_error(path).what(),
                HasSubstr("array 'sources' is not the JSON list convert writes"));
  }
  // The outlier list as an integer array, not bytes.
  TempDir dir;
  const std::string path = write_good(dir);
  {
    h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    H5Ldelete(f, "outliers", H5P_DEFAULT);
    h5::Handle d = h5::create_rows(f, "outliers", H5T_NATIVE_INT64, 0, 16);
    const int64_t v[2] = {91, 93};  // "[]" as int64s
    h5::append_rows(d, H5T_NATIVE_INT64, v, 2);
  }
  EXPECT_THAT(read_error(path).what(), HasSubstr("array 'outliers' is not a 1-D array of bytes"));
}

// A file of format version 2 (sources and outliers in attributes) is read as before, and an
// append writes version 3, its sources kept and its outliers found again.
// Every field of two blocks, bit for bit (NaN stresses compare equal by their bits).
void expect_same_bits(const GraphBlock& a, const GraphBlock& b) {
  const auto same = [](const auto& x, const auto& y) {
    return x.size() == y.size() &&
           (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0);
  };
  EXPECT_TRUE(same(a.atom_start, b.atom_start));
  EXPECT_TRUE(same(a.n_atoms, b.n_atoms));
  EXPECT_TRUE(same(a.energy, b.energy));
  EXPECT_TRUE(same(a.cell, b.cell));
  EXPECT_TRUE(same(a.pbc, b.pbc));
  EXPECT_TRUE(same(a.stress, b.stress));
  EXPECT_TRUE(same(a.config_type, b.config_type));
  EXPECT_TRUE(same(a.z, b.z));
  EXPECT_TRUE(same(a.pos, b.pos));
  EXPECT_TRUE(same(a.forces, b.forces));
  ASSERT_EQ(a.extra.size(), b.extra.size());
  for (size_t c = 0; c < a.extra.size(); ++c) EXPECT_TRUE(same(a.extra[c], b.extra[c]));
  ASSERT_EQ(a.graph_extra.size(), b.graph_extra.size());
  for (size_t c = 0; c < a.graph_extra.size(); ++c)
    EXPECT_TRUE(same(a.graph_extra[c], b.graph_extra[c]));
}

TEST(DatasetContent, VersionFourHoldsTheRecordsAndGivesBackWhatVersionThreeHolds) {
  for (const bool columns : {false, true}) {
    SCOPED_TRACE(columns);
    TempDir d3, d4;
    const Dataset v3(write_good(d3, 3, columns)), v4(write_good(d4, 4, columns));
    EXPECT_EQ(v3.format_version(), 3);
    EXPECT_EQ(v4.format_version(), 4);
    EXPECT_EQ(v3.record_bytes(), 0);
    EXPECT_GT(v4.record_bytes(), 8 * kRecordHeaderBytes);
    EXPECT_EQ(v4.extra_columns().size(), columns ? 1u : 0u);
    ASSERT_EQ(v4.graph_columns().size(), columns ? 1u : 0u);
    if (columns) EXPECT_EQ(v4.graph_columns()[0].n_cols, 2);
    EXPECT_EQ(v4.config_types(), v3.config_types());
    EXPECT_EQ(v4.graph_config_types(), v3.graph_config_types());
    EXPECT_NE(v4.content_crc32(), v3.content_crc32());
    expect_same_bits(v4.read(0, 8), v3.read(0, 8));
    expect_same_bits(v4.read(3, 4), v3.read(3, 4));
    // The records as the file holds them are those the store makes of version 3's arrays.
    std::vector<uint8_t> r3, r4;
    EXPECT_EQ(v4.read_records(2, 5, r4), v3.read_records(2, 5, r3));
    EXPECT_EQ(r4, r3);
    // A constant column (a list's dataset_name) joins the records as it joins read().
    Dataset named(v4.path());
    named.add_constant_column("dataset_name", 2.0);
    std::vector<uint8_t> rn;
    const std::vector<int64_t> off = named.read_records(1, 3, rn);
    const GraphBlock b =
        unpack_records(rn.data(), off.data(), 3, named.extra_columns(), named.graph_columns());
    GraphBlock want = named.read(1, 3);
    want.first = -1;
    expect_same_bits(b, want);
    EXPECT_EQ(b.graph_extra.back(), std::vector<double>(3, 2.0));
  }
}

TEST(DatasetContent, DamagedRecordsAreNamedWithTheirGraph) {
  const auto at = [](const std::string& path, int g, int64_t byte) {
    return hsize_t(testing::record_start(path, hsize_t(g)) + byte);
  };
  {  // a bit flipped behind the checksums' back
    TempDir dir;
    const std::string path = write_good(dir, 4);
    testing::flip_record_byte(path, at(path, 5, 20));
    EXPECT_THAT(read_error(path).what(),
                HasSubstr("checksum mismatch in array 'records', rows 0.."));
  }
  {  // a header's config type index, the checksums repaired: the reader's value check
    TempDir dir;
    const std::string path = write_good(dir, 4);
    testing::overwrite_checksummed(path, "records", at(path, 7, 4), 0, H5T_NATIVE_UINT8,
                                   uint8_t(5));
    EXPECT_THAT(read_error(path).what(),
                HasSubstr("array 'records', graph 7: config type index 5 is not in 0..1"));
    EXPECT_THROW(Dataset(path).graph_config_types(), DataError);
  }
  {  // a header's atom count: the record no longer parses
    TempDir dir;
    const std::string path = write_good(dir, 4);
    testing::overwrite_checksummed(path, "records", at(path, 3, 0), 0, H5T_NATIVE_UINT8,
                                   uint8_t(6));
    EXPECT_THAT(read_error(path).what(), HasSubstr("array 'records', graphs 0..7: record 4 of 8"));
  }
  {  // the stress (nine equal values: one constant) made infinite
    TempDir dir;
    const std::string path = write_good(dir, 4);
    std::vector<uint8_t> bytes;
    const std::vector<int64_t> off = Dataset(path).read_records(4, 1, bytes);
    int64_t p =
        kRecordHeaderBytes + 4;  // header, four atomic numbers (two elements: no palette pays)
    p += encoded_array_size(bytes.data() + p, off[1] - p, 1);  // energy
    p += encoded_array_size(bytes.data() + p, off[1] - p, 9);  // cell
    ASSERT_EQ(bytes[size_t(p)], uint8_t(ArrayEncoding::kConstant));
    const double inf = std::numeric_limits<double>::infinity();
    uint8_t value[8];
    std::memcpy(value, &inf, 8);
    for (int k = 0; k < 8; ++k)
      testing::overwrite_value(path, "records", at(path, 4, p + 1 + k), 0, H5T_NATIVE_UINT8,
                               value[k]);
    testing::repair_checksum(path, "records", at(path, 4, p));
    EXPECT_THAT(read_error(path).what(),
                HasSubstr("array 'records', graph 4: stress component 0 is inf"));
  }
  {  // a position made infinite: found without decoding, then named by decoding
    TempDir dir;
    const std::string path = dir.file("d.h5");
    {
      WriterOptions options;
      DatasetWriter w(path, options);
      for (int g = 0; g < 3; ++g) {
        Frame f;
        for (int i = 0; i < 3; ++i) {
          f.z.push_back(8);
          for (int d = 0; d < 3; ++d) f.pos.push_back(std::sqrt(2.0 + 3 * i + d + g));
        }
        f.has_energy = true;
        f.energy = -1.0 - g;
        w.add(f, "t:" + std::to_string(g));
      }
      w.commit();
    }
    std::vector<uint8_t> bytes;
    const std::vector<int64_t> off = Dataset(path).read_records(1, 1, bytes);
    int64_t p = kRecordHeaderBytes + 2;                        // header, a palette of one element
    p += encoded_array_size(bytes.data() + p, off[1] - p, 1);  // energy (no cell, no stress)
    ASSERT_EQ(bytes[size_t(p)], uint8_t(ArrayEncoding::kRaw));
    const double inf = -std::numeric_limits<double>::infinity();
    uint8_t value[8];
    std::memcpy(value, &inf, 8);
    for (int k = 0; k < 8; ++k)  // atom 1, z: value 5
      testing::overwrite_value(path, "records", at(path, 1, p + 1 + 8 * 5 + k), 0, H5T_NATIVE_UINT8,
                               value[k]);
    testing::repair_checksum(path, "records", at(path, 1, p));
    EXPECT_THAT(read_error(path).what(),
                HasSubstr("array 'records', graph 1: position -inf of atom 1 of the graph"));
    try {
      std::vector<uint8_t> r;
      Dataset(path).read_records(0, 3, r);
      ADD_FAILURE() << "read_records took a position that is not finite";
    } catch (const DataError& e) {
      EXPECT_THAT(e.what(), HasSubstr("graph 1: position -inf of atom 1"));
    }
  }
  {  // the offsets: a record shorter than its header
    TempDir dir;
    const std::string path = write_good(dir, 4);
    testing::overwrite_checksummed(path, "graphs/record_start", 3, 0, H5T_NATIVE_INT64,
                                   testing::record_start(path, 2) + 3);
    EXPECT_THAT(read_error(path).what(),
                HasSubstr("array 'graphs/record_start' is inconsistent at graph 2"));
  }
  {  // the column list
    TempDir dir;
    const std::string path = write_good(dir, 4);
    {
      h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
      h5::write_text(f, "columns", "[]");
    }
    testing::repair_metadata_checksum(path);
    EXPECT_THAT(read_error(path).what(),
                HasSubstr("array 'columns' is not the JSON convert writes"));
  }
}

TEST(DatasetContent, AVersionThreeFileStaysVersionThreeWhenAppendedTo) {
  TempDir dir;
  const std::string path = write_good(dir, 3);
  WriterOptions append;
  append.append = true;
  {
    DatasetWriter w(path, append);
    Frame f;
    Dataset(path).read(2, 1).frame(0, f);
    f.config_type = "bulk";
    w.add(f, "again:1");
    w.commit();
  }
  const Dataset ds(path);
  EXPECT_EQ(ds.format_version(), 3);
  EXPECT_EQ(ds.n_graphs(), 9);
  expect_same_bits(ds.read(8, 1), [&] {
    GraphBlock b = ds.read(2, 1);
    b.first = 8;
    return b;
  }());
  // Asking for another version at an append, or for one that is not written, is refused.
  append.format_version = 4;
  EXPECT_THROW(DatasetWriter(path, append), ConfigError);
  WriterOptions two;
  two.format_version = 2;
  EXPECT_THROW(DatasetWriter(dir.file("new.h5"), two), ConfigError);
}

TEST(DatasetContent, VersionTwoFilesAreReadAndAnAppendMakesThemVersionThree) {
  TempDir dir;
  const std::string path = write_good(dir);
  std::string sources, outliers;
  {
    const Dataset ds(path);
    sources = ds.sources();
  }
  {
    h5::Handle f(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    outliers = h5::read_text(f, "outliers", 1 << 20, path);
    H5Ldelete(f, "sources", H5P_DEFAULT);
    H5Ldelete(f, "outliers", H5P_DEFAULT);
    h5::write_attr_string(f, "sources", sources);
    h5::write_attr_string(f, "outliers", "[{\"graph\": 3, \"what\": \"a test's outlier\"}]");
    hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    const int64_t two = 2;
    H5Awrite(a, H5T_NATIVE_INT64, &two);
    H5Aclose(a);
  }
  testing::repair_metadata_checksum(path);
  {
    const Dataset v2(path);
    EXPECT_EQ(v2.format_version(), 2);
    EXPECT_EQ(v2.sources(), sources);
    ASSERT_TRUE(v2.outliers().has_value());
    ASSERT_EQ(v2.outliers()->size(), 1u);
    EXPECT_EQ(v2.outliers()->at(0).what, "a test's outlier");
  }
  {
    WriterOptions append;
    append.append = true;
    DatasetWriter w(path, append);
    Frame f;
    GraphBlock b = Dataset(path).read(0, 1);
    b.frame(0, f);
    f.config_type = "bulk";
    w.add(f, "again:1");
    w.note_source("again.xyz", 1);
    w.commit();
  }
  const Dataset v3(path);
  EXPECT_EQ(v3.format_version(), 3);
  EXPECT_EQ(nlohmann::json::parse(v3.sources()).size(), nlohmann::json::parse(sources).size() + 1);
  // The outlier list is found anew over all graphs at an append (the made-up entry goes).
  ASSERT_TRUE(v3.outliers().has_value());
  EXPECT_TRUE(v3.outliers()->empty());
}

TEST(DatasetContent, ArraysOfAnotherRankAreRefusedBeforeTheirShapeIsCopied) {
  for (const int rank : {32, 5, 3}) {
    SCOPED_TRACE(rank);
    TempDir dir;
    const std::string path = write_good(dir);
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "species", H5P_DEFAULT);
    std::vector<hsize_t> dims(size_t(rank), 1);
    dims[0] = 2;
    hid_t space = H5Screate_simple(rank, dims.data(), nullptr);
    hid_t d =
        H5Dcreate2(f, "species", H5T_NATIVE_UINT8, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const uint8_t z[2] = {1, 29};
    H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, z);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
    EXPECT_THAT(read_error(path).what(), HasSubstr("array 'species' has rank " +
                                                   std::to_string(rank) + " (1 or 2 are written)"));
  }
}

TEST(DatasetContent, AppendOntoABadFileIsRefusedAndLeavesItUntouched) {
  TempDir dir;
  const std::string path = write_good(dir);
  testing::overwrite_checksummed(path, "atoms/z", 2, 0, H5T_NATIVE_UINT8, uint8_t(200));
  const auto size = std::filesystem::file_size(path);
  WriterOptions opt;
  opt.append = true;
  try {
    DatasetWriter w(path, opt);
    ADD_FAILURE() << "append onto a bad file was accepted";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("atomic number 200"));
  }
  EXPECT_EQ(std::filesystem::file_size(path), size);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 1) << "a temporary file was left next to the dataset";
}

TEST(DatasetContent, WriterRefusesATinyPeriodicCell) {
  TempDir dir;
  DatasetWriter w(dir.file("d.h5"), {});
  Frame f;
  f.z = {29};
  f.pos = {0, 0, 0};
  f.has_energy = true;
  f.has_cell = true;
  f.cell = {0.001, 0, 0, 0, 0.001, 0, 0, 0, 0.001};
  f.pbc = {true, true, true};
  try {
    w.add(f, "in.xyz:1");
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("in.xyz:1: the periodic cell is 0.001 Å thick"));
  }
}

}  // namespace
}  // namespace ddgnn
