// The dataset file: round trip of every field, ranges across checksum blocks, append, atomic
// writes, and the bad files (not HDF5, HDF5 not by ddgnn, newer version, corrupted block).
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "../common/h5_edit.h"
#include "../common/temp_dir.h"
#include "core/error.h"
#include "loader/dataset.h"

namespace ddgnn {
namespace {

using testing::TempDir;

// A structure with n atoms; periodic when `periodic`, with stress on even seeds.
Frame make_frame(int n, unsigned seed, bool periodic, bool forces = true) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Frame f;
  for (int i = 0; i < n; ++i) {
    f.z.push_back(uint8_t(i % 3 == 0 ? 29 : (i % 3 == 1 ? 28 : 1)));
    for (int d = 0; d < 3; ++d) f.pos.push_back(5.0 * u(rng));
    if (forces)
      for (int d = 0; d < 3; ++d) f.forces.push_back(u(rng));
  }
  f.has_energy = true;
  f.energy = -3.5 * n + 0.01 * u(rng);
  if (periodic) {
    f.has_cell = true;
    f.cell = {10.0, 0, 0, 0.5, 10.0, 0, 0, 0, 10.0};
    f.pbc = {true, true, true};
  }
  if (seed % 2 == 0) {
    f.has_stress = true;
    for (int k = 0; k < 9; ++k) f.stress[k] = 0.001 * u(rng);
  }
  f.config_type = seed % 3 == 0 ? "bulk" : "";
  ExtraColumn q{"charges", 1, {}};
  for (int i = 0; i < n; ++i) q.values.push_back(0.1 * i);
  f.extra.push_back(q);
  return f;
}

void write(const std::string& path, const std::vector<Frame>& frames, bool append = false,
           std::vector<std::string> extra = {}, int64_t version = 0) {
  WriterOptions opt;
  opt.append = append;
  opt.format_version = version;
  opt.extra_columns = std::move(extra);
  DatasetWriter w(path, opt);
  for (size_t i = 0; i < frames.size(); ++i) w.add(frames[i], "test:" + std::to_string(i));
  w.note_source("test", int64_t(frames.size()));
  w.commit();
}

// `f` throws a DataError whose message contains `needle`.
template <class F>
void expect_data_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no DataError; expected one containing: " << needle;
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

void expect_same(const Frame& a, const Frame& b) {
  EXPECT_EQ(a.z, b.z);
  EXPECT_EQ(a.pos, b.pos);
  EXPECT_EQ(a.forces, b.forces);
  EXPECT_EQ(a.energy, b.energy);
  EXPECT_EQ(a.has_cell, b.has_cell);
  if (a.has_cell) {
    EXPECT_EQ(a.cell, b.cell);
  }
  EXPECT_EQ(a.pbc, b.pbc);
  EXPECT_EQ(a.has_stress, b.has_stress);
  if (a.has_stress) {
    EXPECT_EQ(a.stress, b.stress);
  }
}

// The test folders every test writes into go away with everything in them, and a link inside
// one is removed, not followed.
TEST(TestFolders, RemovedWithNestedFilesButNotWhatALinkPointsTo) {
  testing::TempDir outside;
  const std::string kept = outside.file("kept.txt");
  std::ofstream(kept) << "outside";
  std::filesystem::path inner;
  {
    testing::TempDir dir;
    inner = dir.path();
    std::filesystem::create_directories(dir.path() / "a" / "b");
    std::ofstream((dir.path() / "a" / "b" / "f.txt").string()) << "x";
    std::ofstream(dir.file("g.txt")) << "y";
    std::filesystem::create_symlink(outside.path(), dir.path() / "a" / "link");
    ASSERT_TRUE(std::filesystem::exists(dir.path() / "a" / "link" / "kept.txt"));
  }
  EXPECT_FALSE(std::filesystem::exists(inner));
  EXPECT_TRUE(std::filesystem::exists(kept));
}

TEST(Dataset, RoundTripsEveryField) {
  TempDir dir;
  std::vector<Frame> frames;
  for (unsigned s = 0; s < 50; ++s) frames.push_back(make_frame(3 + int(s % 7), s, s % 2 == 0));
  write(dir.file("d.h5"), frames, false, {"charges"});
  Dataset ds(dir.file("d.h5"));
  EXPECT_EQ(ds.n_graphs(), 50);
  EXPECT_TRUE(ds.has_forces());
  EXPECT_EQ(ds.species(), (std::vector<uint8_t>{1, 28, 29}));
  ASSERT_EQ(ds.extra_columns().size(), 1u);
  EXPECT_EQ(ds.extra_columns()[0].name, "charges");
  EXPECT_EQ(ds.format_version(), kFormatVersion);
  EXPECT_NE(ds.producer().find("ddgnn"), std::string::npos);
  const GraphBlock b = ds.read(0, 50);
  Frame got;
  int64_t atoms = 0;
  for (size_t i = 0; i < 50; ++i) {
    b.frame(i, got);
    expect_same(frames[i], got);
    EXPECT_EQ(ds.config_types()[size_t(std::stoi(got.config_type))], frames[i].config_type);
    for (int a = 0; a < b.n_atoms[i]; ++a)
      EXPECT_EQ(b.extra[0][size_t(b.atom_start[i] + a)], frames[i].extra[0].values[size_t(a)]);
    atoms += b.n_atoms[i];
  }
  EXPECT_EQ(atoms, ds.n_atoms());
}

TEST(Dataset, ReadsAnyRangeAcrossChecksumBlocks) {
  // 12,000 graphs of 11 atoms: 132,000 atoms span three per-atom blocks and two graph blocks.
  TempDir dir;
  std::vector<Frame> frames;
  for (unsigned s = 0; s < 12000; ++s) frames.push_back(make_frame(11, s, true));
  write(dir.file("big.h5"), frames);
  Dataset ds(dir.file("big.h5"));
  Frame got;
  for (auto [first, count] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {5957, 20}, {8190, 5}, {11999, 1}, {3000, 6000}}) {
    const GraphBlock b = ds.read(first, count);
    ASSERT_EQ(int64_t(b.n_graphs()), count);
    for (int64_t i = 0; i < count; i += 97) {
      b.frame(size_t(i), got);
      expect_same(frames[size_t(first + i)], got);
    }
  }
  EXPECT_THROW(ds.read(11990, 20), DataError);
  EXPECT_NO_THROW(ds.verify_all());
}

TEST(Dataset, AppendAddsGraphsAndKeepsChecksumsValid) {
  TempDir dir;
  std::vector<Frame> a, b;
  for (unsigned s = 0; s < 30; ++s) a.push_back(make_frame(5, s, true));
  for (unsigned s = 100; s < 140; ++s) b.push_back(make_frame(7, s, false));
  write(dir.file("d.h5"), a);
  write(dir.file("d.h5"), b, /*append=*/true);
  Dataset ds(dir.file("d.h5"));
  EXPECT_EQ(ds.n_graphs(), 70);
  EXPECT_EQ(ds.n_atoms(), 30 * 5 + 40 * 7);
  EXPECT_NO_THROW(ds.verify_all());
  Frame got;
  const GraphBlock blk = ds.read(25, 10);
  blk.frame(4, got);
  expect_same(a[29], got);
  blk.frame(5, got);
  expect_same(b[0], got);
  EXPECT_NE(ds.sources().find("\"frames\":40"), std::string::npos);
}

// Per-structure keys (convert --info-keys) are stored under graphs/extra, read back per graph
// across checksum blocks, and must agree between a file and what is appended to it.
TEST(Dataset, PerStructureColumnsRoundTripAndMustMatchOnAppend) {
  TempDir dir;
  std::vector<Frame> frames;
  for (unsigned s = 0; s < 9000; ++s) {  // two graph checksum blocks
    Frame f = make_frame(2, s, false);
    f.info.push_back({"gap", 1, {0.5 * s}});
    f.info.push_back({"dipole", 3, {1.0 * s, -1.0, 2.0}});
    frames.push_back(f);
  }
  WriterOptions opt;
  opt.info_keys = {"dipole", "gap"};
  {
    DatasetWriter w(dir.file("d.h5"), opt);
    for (size_t i = 0; i < frames.size(); ++i) w.add(frames[i], "t:" + std::to_string(i));
    w.commit();
  }
  {
    const Dataset ds(dir.file("d.h5"));
    ASSERT_EQ(ds.graph_columns().size(), 2u);
    EXPECT_EQ(ds.graph_columns()[0].name, "dipole");  // the file's order: by name
    EXPECT_EQ(ds.graph_columns()[0].n_cols, 3);
    EXPECT_EQ(ds.graph_columns()[1].name, "gap");
    EXPECT_EQ(ds.graph_columns()[1].n_cols, 1);
    EXPECT_TRUE(ds.extra_columns().empty());
    const GraphBlock b = ds.read(8190, 4);
    ASSERT_EQ(b.graph_extra.size(), 2u);
    EXPECT_EQ(b.graph_extra[1], (std::vector<double>{4095.0, 4095.5, 4096.0, 4096.5}));
    EXPECT_EQ(b.graph_extra[0][3 * 3], 8193.0);
    EXPECT_EQ(b.graph_extra[0][3 * 3 + 2], 2.0);
    EXPECT_NO_THROW(ds.verify_all());
  }
  // Appending with the same keys adds to them; with others it is refused, the file unchanged.
  opt.append = true;
  {
    DatasetWriter w(dir.file("d.h5"), opt);
    w.add(frames[1], "more:1");
    w.commit();
  }
  EXPECT_EQ(Dataset(dir.file("d.h5")).read(9000, 1).graph_extra[1][0], 0.5);
  opt.info_keys = {"gap"};
  try {
    DatasetWriter w(dir.file("d.h5"), opt);
    ADD_FAILURE() << "appended with other keys";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("(dipole, gap)"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("--info-keys"), std::string::npos);
  }
  EXPECT_EQ(Dataset(dir.file("d.h5")).n_graphs(), 9001);
  // A structure without a key, or with another number of values, is named.
  WriterOptions fresh;
  fresh.info_keys = {"gap"};
  DatasetWriter w(dir.file("e.h5"), fresh);
  w.add(frames[0], "e.xyz:1");
  Frame missing = frames[1];
  missing.info.clear();
  expect_data_error([&] { w.add(missing, "e.xyz:9"); },
                    "e.xyz:9: per-structure key 'gap' is missing");
  Frame wider = frames[1];
  wider.info[0].values = {1.0, 2.0};
  wider.info[0].n_cols = 2;
  expect_data_error([&] { w.add(wider, "e.xyz:12"); }, "holds 2 number(s), earlier structures 1");
}

TEST(Dataset, FailedWriteLeavesNoFile) {
  TempDir dir;
  {
    DatasetWriter w(dir.file("d.h5"), {});
    w.add(make_frame(4, 1, true), "a.xyz:1");
    Frame bad = make_frame(4, 2, true, /*forces=*/false);
    expect_data_error([&] { w.add(bad, "a.xyz:7"); }, "a.xyz:7: structure has no forces");
  }  // destroyed without commit
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "a temporary or partial file was left";
}

// The writer applies the reader's rules to names: what it wrote, the reader reads back.
TEST(Dataset, NamesTheReaderCouldNotReadBackAreRefusedByTheWriter) {
  TempDir dir;
  {
    DatasetWriter w(dir.file("d.h5"), {});
    Frame f = make_frame(4, 1, true);
    f.config_type = std::string(5000, 'x');
    expect_data_error([&] { w.add(f, "x:1"); }, "x:1: config_type of 5000 bytes");
    f.config_type = std::string("hot\0cold", 8);
    expect_data_error([&] { w.add(f, "x:2"); }, "holding a NUL");
    f.config_type =
        "ab\xff\xfe"
        "cd";  // Latin-1 or UTF-16 text: the reader reads UTF-8 only
    expect_data_error([&] { w.add(f, "x:3"); },
                      "x:3: config_type is not UTF-8 text (byte 0xFF at position 2)");
    f.config_type = "\xc3\xa9tain";  // UTF-8 "é"
    w.add(f, "x:4");
    f.config_type = std::string(4096, 'y');  // the longest the reader reads
    w.add(f, "x:3");
    w.commit();
  }
  EXPECT_EQ(Dataset(dir.file("d.h5")).config_types(),
            (std::vector<std::string>{"\xc3\xa9tain", std::string(4096, 'y')}));
  for (const auto& [columns, keys] :
       std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
           {{"a/b"}, {}}, {{}, {"gap/x"}}, {{"a.b"}, {}}, {{""}, {}}}) {
    WriterOptions o;
    o.extra_columns = columns;
    o.info_keys = keys;
    try {
      DatasetWriter w(dir.file("e.h5"), o);
      ADD_FAILURE() << "accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot name a column"), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("e.h5")));
}

// Two files of one graph count and the same metadata (written in the same second from the same
// names) but one energy apart differ in content identity; one file opened twice does not.
TEST(Dataset, ContentIdentitySeesEveryValueTheMetadataDoesNot) {
  TempDir dir;
  const auto write = [&](const std::string& name, double shift) {
    DatasetWriter w(dir.file(name), {});
    for (int k = 0; k < 20; ++k) {
      Frame f = make_frame(4, unsigned(k), true);
      if (k == 13) f.energy += shift;
      w.add(f, "x:" + std::to_string(k));
    }
    w.note_source("x.xyz", 20);
    w.commit();
  };
  write("a.h5", 0.0);
  write("b.h5", 1e-9);
  const Dataset a(dir.file("a.h5")), again(dir.file("a.h5")), b(dir.file("b.h5"));
  EXPECT_EQ(a.content_crc32(), again.content_crc32());
  EXPECT_NE(a.content_crc32(), b.content_crc32());
  EXPECT_EQ(a.content_crc32(), a.content_crc32());  // kept, not read again
}

TEST(Dataset, MissingEnergyAndNonFiniteValuesAreRefused) {
  TempDir dir;
  DatasetWriter w(dir.file("d.h5"), {});
  Frame f = make_frame(4, 1, true);
  f.has_energy = false;
  EXPECT_THROW(w.add(f, "x:1"), DataError);
  f = make_frame(4, 1, true);
  f.pos[4] = std::nan("");
  EXPECT_THROW(w.add(f, "x:1"), DataError);
}

TEST(Dataset, RefusesFileThatIsNotHdf5) {
  TempDir dir;
  std::ofstream(dir.file("x.h5")) << "3\nnot hdf5\n";
  try {
    Dataset ds(dir.file("x.h5"));
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("not an HDF5 file"), std::string::npos);
    EXPECT_NE(e.hint().find("ddgnn convert"), std::string::npos);
  }
}

TEST(Dataset, RefusesHdf5NotWrittenByDdgnn) {
  TempDir dir;
  hid_t f = H5Fcreate(dir.file("other.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(f);
  try {
    Dataset ds(dir.file("other.h5"));
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("not a ddgnn dataset"), std::string::npos);
  }
}

TEST(Dataset, RefusesNewerFormatVersion) {
  TempDir dir;
  write(dir.file("d.h5"), {make_frame(3, 1, true)});
  hid_t f = H5Fopen(dir.file("d.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
  const int64_t v = kFormatVersion + 1;
  H5Awrite(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  H5Fclose(f);
  try {
    Dataset ds(dir.file("d.h5"));
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("format version " + std::to_string(kFormatVersion + 1) +
                                         " is newer"),
              std::string::npos);
    EXPECT_NE(e.hint().find("update ddgnn"), std::string::npos);
  }
}

TEST(Dataset, CorruptedArrayIsReportedWithBlockAndRows) {
  for (const int64_t version : {int64_t(3), kFormatVersion}) {
    SCOPED_TRACE(version);
    TempDir dir;
    std::vector<Frame> frames;
    for (unsigned s = 0; s < 20; ++s) frames.push_back(make_frame(6, s, true));
    write(dir.file("d.h5"), frames, false, {}, version);
    // Change one value behind the writer's back: a position, or a byte of graph 8's record.
    std::string want = "checksum mismatch in array 'atoms/pos', rows 0..119 (block 0)";
    if (version >= 4) {
      testing::flip_record_byte(dir.file("d.h5"),
                                hsize_t(testing::record_start(dir.file("d.h5"), 8) + 30));
      want = "checksum mismatch in array 'records', rows 0.." +
             std::to_string(Dataset(dir.file("d.h5")).record_bytes() - 1) + " (block 0)";
    } else {
      testing::overwrite_double(dir.file("d.h5"), "atoms/pos", 50, 1, 123.0);
    }
    Dataset ds(dir.file("d.h5"));
    try {
      ds.read(0, 20);
      FAIL() << "no error";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
    // Unverified, the damaged value is read (or, in a record, refused as no record).
    if (version < 4) EXPECT_NO_THROW(ds.read(0, 20, /*verify=*/false));
  }
}

}  // namespace
}  // namespace ddgnn
