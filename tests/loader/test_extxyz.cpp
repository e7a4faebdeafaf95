// Tests of the extended-XYZ reader: frames as ASE writes them, key and column variants, buffer
// boundaries, and one test per kind of bad input that checks the message names file, line, what.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "loader/extxyz.h"

namespace ddgnn {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A file under the temp directory with the given content, removed when it goes out of scope.
class TempFile {
 public:
  explicit TempFile(const std::string& content) {
    static std::atomic<int> counter{0};
    m_path = (fs::temp_directory_path() / ("ddgnn_test_extxyz_" + std::to_string(::getpid()) + "_" +
                                           std::to_string(counter++) + ".xyz"))
                 .string();
    std::ofstream(m_path, std::ios::binary) << content;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(m_path, ec);
  }
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
};

std::vector<Frame> read_all(const std::string& content, ExtxyzKeys keys = {},
                            size_t buffer_bytes = ExtxyzReader::kDefaultBufferBytes) {
  TempFile file(content);
  ExtxyzReader reader(file.path(), keys, buffer_bytes);
  std::vector<Frame> frames;
  Frame frame;
  while (reader.next(frame)) frames.push_back(frame);
  EXPECT_FALSE(reader.next(frame));  // stays at the end
  EXPECT_EQ(reader.frames_read(), static_cast<long long>(frames.size()));
  EXPECT_EQ(reader.bytes_read(), content.size());
  return frames;
}

struct Failure {
  std::string path, what, hint;
};

// Reads `content` to the end and returns the DataError it throws.
Failure read_error(const std::string& content, ExtxyzKeys keys = {}) {
  TempFile file(content);
  Failure f{file.path(), "no error thrown", ""};
  try {
    ExtxyzReader reader(file.path(), keys);
    Frame frame;
    while (reader.next(frame)) {
    }
  } catch (const DataError& e) {
    f.what = e.what();
    f.hint = e.hint();
  }
  return f;
}

const char* kAseFrame =
    "4\n"
    "Lattice=\"3.61 0.0 0.0 0.0 3.61 0.0 0.0 0.0 3.61\" "
    "Properties=species:S:1:pos:R:3:forces:R:3 energy=-14.2 "
    "stress=\"0.01 0.0 0.0 0.0 0.02 0.0 0.0 0.0 0.03\" free_energy=-14.2 pbc=\"T T T\"\n"
    "Cu       0.00000000       0.00000000       0.00000000       0.00100000      -0.00200000  "
    "     0.00300000\n"
    "Cu       0.00000000       1.80500000       1.80500000       0.00000000       0.00000000  "
    "     0.00000000\n"
    "Cu       1.80500000       0.00000000       1.80500000       0.00000000       0.00000000  "
    "     0.00000000\n"
    "Cu       1.80500000       1.80500000       0.00000000      -0.00100000       0.00200000  "
    "    -0.00300000\n";

// ---- frames that must read ----

TEST(Extxyz, ReadsFrameAsAseWritesIt) {
  std::vector<Frame> frames = read_all(kAseFrame);
  ASSERT_EQ(frames.size(), 1u);
  const Frame& f = frames[0];
  EXPECT_EQ(f.n_atoms(), 4u);
  EXPECT_THAT(f.z, ElementsAre(29, 29, 29, 29));
  EXPECT_DOUBLE_EQ(f.pos[3 * 1 + 1], 1.805);
  EXPECT_DOUBLE_EQ(f.pos[3 * 3 + 2], 0.0);
  ASSERT_EQ(f.forces.size(), 12u);
  EXPECT_DOUBLE_EQ(f.forces[1], -0.002);
  EXPECT_DOUBLE_EQ(f.forces[11], -0.003);
  EXPECT_TRUE(f.has_energy);
  EXPECT_DOUBLE_EQ(f.energy, -14.2);
  EXPECT_TRUE(f.has_stress);
  EXPECT_DOUBLE_EQ(f.stress[0], 0.01);
  EXPECT_DOUBLE_EQ(f.stress[4], 0.02);
  EXPECT_DOUBLE_EQ(f.stress[8], 0.03);
  EXPECT_TRUE(f.has_cell);
  EXPECT_THAT(f.cell, ElementsAre(3.61, 0, 0, 0, 3.61, 0, 0, 0, 3.61));
  EXPECT_THAT(f.pbc, ElementsAre(true, true, true));
  EXPECT_EQ(f.config_type, "");
  EXPECT_TRUE(f.extra.empty());
  EXPECT_EQ(f.line, 1);
}

TEST(Extxyz, ReadsMoleculeWithoutLattice) {
  std::vector<Frame> frames = read_all(
      "3\nenergy=-76.4 config_type=water\nO 0.0 0.0 0.119\nH 0.0 0.763 -0.477\n"
      "H 0.0 -0.763 -0.477\n");
  ASSERT_EQ(frames.size(), 1u);
  const Frame& f = frames[0];
  EXPECT_THAT(f.z, ElementsAre(8, 1, 1));
  EXPECT_FALSE(f.has_cell);
  EXPECT_THAT(f.pbc, ElementsAre(false, false, false));
  EXPECT_TRUE(f.forces.empty());
  EXPECT_FALSE(f.has_stress);
  EXPECT_EQ(f.config_type, "water");
  EXPECT_DOUBLE_EQ(f.pos[8], -0.477);
}

TEST(Extxyz, ReadsCustomEnergyAndForceKeys) {
  const std::string text =
      "2\nProperties=species:S:1:pos:R:3:forces:R:3:REF_forces:R:3 energy=-1.0 REF_energy=-2.5 "
      "REF_stress=\"1 2 3 4 5 6\"\n"
      "H 0 0 0 1 1 1 0.5 0.25 0.125\nH 0 0 0.74 1 1 1 -0.5 -0.25 -0.125\n";
  ExtxyzKeys keys;
  keys.energy = "REF_energy";
  keys.forces = "REF_forces";
  keys.stress = "REF_stress";
  keys.require_forces = true;
  std::vector<Frame> frames = read_all(text, keys);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_DOUBLE_EQ(frames[0].energy, -2.5);
  EXPECT_THAT(frames[0].forces, ElementsAre(0.5, 0.25, 0.125, -0.5, -0.25, -0.125));
  EXPECT_TRUE(frames[0].has_stress);
}

TEST(Extxyz, ConvertsVoigtStress) {
  std::vector<Frame> frames =
      read_all("1\nLattice=\"2 0 0 0 2 0 0 0 2\" energy=1 stress=\"1 2 3 4 5 6\"\nCu 0 0 0\n");
  // xx yy zz yz xz xy
  EXPECT_THAT(frames[0].stress, ElementsAre(1, 6, 5, 6, 2, 4, 5, 4, 3));
}

TEST(Extxyz, ConvertsVirialToStress) {
  std::vector<Frame> frames = read_all(
      "1\nLattice=\"2 0 0 0 2 0 0 0 2\" energy=1 virial=\"8 0 0 0 16 0 0 0 -24\"\nCu 0 0 0\n"
      "1\nLattice=\"2 0 0 0 2 0 0 0 2\" energy=1 virial=\"8 16 24 0 0 0\"\nCu 0 0 0\n"
      "1\nLattice=\"2 0 0 0 2 0 0 0 2\" energy=1 virial=\"8 8 8 8 8 8\" stress=\"1 1 1 1 1 1\"\n"
      "Cu 0 0 0\n"
      "1\nenergy=1 virial=\"8 8 8 8 8 8\"\nCu 0 0 0\n");
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_THAT(frames[0].stress, ElementsAre(-1, 0, 0, 0, -2, 0, 0, 0, 3));
  EXPECT_THAT(frames[1].stress, ElementsAre(-1, 0, 0, 0, -2, 0, 0, 0, -3));
  EXPECT_THAT(frames[2].stress, ElementsAre(1, 1, 1, 1, 1, 1, 1, 1, 1));  // stress= wins
  EXPECT_FALSE(frames[3].has_stress);  // no cell: no volume to divide by
}

TEST(Extxyz, ReadsAtomicNumberColumns) {
  std::vector<Frame> frames = read_all(
      "2\nProperties=Z:I:1:pos:R:3 energy=0\n29 0 0 0\n8 1 1 1\n"
      "1\nProperties=numbers:I:1:pos:R:3 energy=0\n118 0 0 0\n");
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_THAT(frames[0].z, ElementsAre(29, 8));
  EXPECT_THAT(frames[1].z, ElementsAre(118));
}

TEST(Extxyz, KeepsExtraColumnsInFileOrder) {
  ExtxyzKeys keys;
  keys.extra_columns = {"magmoms", "charges", "tags"};
  std::vector<Frame> frames = read_all(
      "2\nProperties=species:S:1:pos:R:3:charges:R:1:name:S:1:tags:I:1:magmoms:R:3:fixed:L:1 "
      "energy=0\n"
      "Fe 0 0 0 0.5 a 1 0 0 2.2 T\nFe 1 1 1 -0.5 b 2 0 0 -2.2 F\n",
      keys);
  ASSERT_EQ(frames[0].extra.size(), 3u);
  EXPECT_EQ(frames[0].extra[0].name, "charges");
  EXPECT_THAT(frames[0].extra[0].values, ElementsAre(0.5, -0.5));
  EXPECT_EQ(frames[0].extra[1].name, "tags");
  EXPECT_THAT(frames[0].extra[1].values, ElementsAre(1, 2));
  EXPECT_EQ(frames[0].extra[2].name, "magmoms");
  EXPECT_EQ(frames[0].extra[2].n_cols, 3);
  EXPECT_THAT(frames[0].extra[2].values, ElementsAre(0, 0, 2.2, 0, 0, -2.2));
  EXPECT_THAT(frames[0].pos, ElementsAre(0, 0, 0, 1, 1, 1));
}

TEST(Extxyz, KeepsPerStructureKeysInTheOrderAsked) {
  ExtxyzKeys keys;
  keys.info_keys = {"dipole", "gap"};
  std::vector<Frame> frames = read_all(
      "1\nenergy=-1 gap=2.5 dipole=\"0.1 -0.2 3e-1\" mol_id=7\nH 0 0 0\n"
      "1\ngap=-1 energy=-2 dipole=\"1 2 3\"\nH 0 0 1\n",
      keys);
  ASSERT_EQ(frames.size(), 2u);
  ASSERT_EQ(frames[0].info.size(), 2u);
  EXPECT_EQ(frames[0].info[0].name, "dipole");
  EXPECT_EQ(frames[0].info[0].n_cols, 3);
  EXPECT_THAT(frames[0].info[0].values, ElementsAre(0.1, -0.2, 0.3));
  EXPECT_EQ(frames[0].info[1].name, "gap");
  EXPECT_THAT(frames[0].info[1].values, ElementsAre(2.5));
  EXPECT_THAT(frames[1].info[1].values, ElementsAre(-1));
  EXPECT_TRUE(read_all("1\nenergy=-1 gap=2.5\nH 0 0 0\n")[0].info.empty());  // none asked
}

TEST(Extxyz, ReadsManyFramesIntoOneReusedFrame) {
  std::string text;
  for (int k = 1; k <= 50; ++k) {
    text += std::to_string(k) + "\nenergy=" + std::to_string(-k) + "\n";
    for (int i = 0; i < k; ++i) text += "C " + std::to_string(i) + " 0 0\n";
  }
  TempFile file(text);
  ExtxyzReader reader(file.path());
  Frame frame;
  long long line = 1;
  for (int k = 1; k <= 50; ++k) {
    ASSERT_TRUE(reader.next(frame));
    EXPECT_EQ(frame.n_atoms(), static_cast<size_t>(k));
    EXPECT_DOUBLE_EQ(frame.energy, -k);
    EXPECT_DOUBLE_EQ(frame.pos[3 * (k - 1)], k - 1);
    EXPECT_EQ(frame.line, line);
    line += k + 2;
  }
  EXPECT_FALSE(reader.next(frame));
  EXPECT_EQ(reader.frames_read(), 50);
}

TEST(Extxyz, ReusesFrameStorage) {
  ExtxyzKeys keys;
  keys.extra_columns = {"charges"};
  std::string text;
  for (int k = 0; k < 3; ++k) {
    text +=
        "2\nProperties=species:S:1:pos:R:3:forces:R:3:charges:R:1 energy=1\n"
        "H 0 0 0 1 1 1 0.5\nH 0 0 1 1 1 1 -0.5\n";
  }
  TempFile file(text);
  ExtxyzReader reader(file.path(), keys);
  Frame frame;
  ASSERT_TRUE(reader.next(frame));
  const double* pos = frame.pos.data();
  const double* forces = frame.forces.data();
  const double* charges = frame.extra.at(0).values.data();
  while (reader.next(frame)) {
    EXPECT_EQ(frame.pos.data(), pos);
    EXPECT_EQ(frame.forces.data(), forces);
    EXPECT_EQ(frame.extra.at(0).values.data(), charges);
  }
  EXPECT_EQ(reader.frames_read(), 3);
}

TEST(Extxyz, ReadsFrameLargerThanTheFirstAllocation) {
  const int n = 150000;
  std::string text = std::to_string(n) + "\nenergy=0\n";
  for (int i = 0; i < n; ++i) text += "H " + std::to_string(i) + " 0 0\n";
  std::vector<Frame> frames = read_all(text);
  ASSERT_EQ(frames[0].n_atoms(), static_cast<size_t>(n));
  EXPECT_DOUBLE_EQ(frames[0].pos[3 * (n - 1)], n - 1);
}

TEST(Extxyz, AcceptsCrlfLineEndingsAndTrailingBlankLines) {
  std::string text = kAseFrame;
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  crlf += "\r\n  \n\n";
  std::vector<Frame> frames = read_all(crlf);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_THAT(frames[0].pbc, ElementsAre(true, true, true));
  EXPECT_DOUBLE_EQ(frames[0].forces[11], -0.003);
  EXPECT_EQ(read_all(std::string(kAseFrame) + "\n\n\n").size(), 1u);
}

TEST(Extxyz, ReadsLastLineWithoutNewline) {
  std::vector<Frame> frames = read_all("1\nenergy=2\nAr 1 2 3");
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_THAT(frames[0].pos, ElementsAre(1, 2, 3));
}

TEST(Extxyz, LinesStraddlingTheBufferBoundaryReadTheSame) {
  std::string text;
  for (int k = 0; k < 40; ++k) text += std::string(kAseFrame) + "\r\n";
  // One comment line far longer than the small buffers below: the buffer has to grow.
  text += "1\nenergy=3 comment=\"" + std::string(5000, 'x') + "\"\nAr 1 2 3\n";
  const std::vector<Frame> expected = read_all(text);
  ASSERT_EQ(expected.size(), 41u);
  for (size_t buffer : {16, 17, 31, 64, 100, 127, 1000, 4096}) {
    const std::vector<Frame> frames = read_all(text, {}, buffer);
    ASSERT_EQ(frames.size(), expected.size()) << buffer;
    for (size_t k = 0; k < frames.size(); ++k) {
      EXPECT_EQ(frames[k].z, expected[k].z) << buffer;
      EXPECT_EQ(frames[k].pos, expected[k].pos) << buffer;
      EXPECT_EQ(frames[k].forces, expected[k].forces) << buffer;
      EXPECT_EQ(frames[k].stress, expected[k].stress) << buffer;
      EXPECT_EQ(frames[k].line, expected[k].line) << buffer;
    }
  }
}

TEST(Extxyz, ParsesExponentsAndLeadingPlus) {
  std::vector<Frame> frames = read_all(
      "1\nProperties=species:S:1:pos:R:3:forces:R:3 energy=+1.5E+02\n"
      "Cu +1.5e-03 -2.5e-1 .5 1. +0 1E-400\n");
  EXPECT_DOUBLE_EQ(frames[0].energy, 150.0);
  EXPECT_THAT(frames[0].pos, ElementsAre(1.5e-3, -0.25, 0.5));
  EXPECT_THAT(frames[0].forces, ElementsAre(1.0, 0.0, 0.0));  // 1E-400 underflows to 0
}

TEST(Extxyz, ParsesCommentLineForms) {
  std::vector<Frame> frames = read_all(
      "1\nlattice=[[2, 0, 0], [0, 2, 0], [0, 0, 2]] properties=species:S:1:pos:R:3 energy = -3 "
      "is_relaxed config_type='bulk fcc' pbc=[T,T,F] note={a b c} path=\"a\\\"b\"\nCu 0 0 0\n");
  const Frame& f = frames[0];
  EXPECT_TRUE(f.has_cell);
  EXPECT_THAT(f.cell, ElementsAre(2, 0, 0, 0, 2, 0, 0, 0, 2));
  EXPECT_DOUBLE_EQ(f.energy, -3);
  EXPECT_EQ(f.config_type, "bulk fcc");
  EXPECT_THAT(f.pbc, ElementsAre(true, true, false));
}

TEST(Extxyz, ReadsPbcSpellings) {
  const std::string cell = "Lattice=\"2 0 0 0 2 0 0 0 2\" energy=0 ";
  EXPECT_THAT(read_all("1\n" + cell + "pbc=\"True False True\"\nH 0 0 0\n")[0].pbc,
              ElementsAre(true, false, true));
  EXPECT_THAT(read_all("1\n" + cell + "pbc=\"1 1 0\"\nH 0 0 0\n")[0].pbc,
              ElementsAre(true, true, false));
  EXPECT_THAT(read_all("1\n" + cell + "\nH 0 0 0\n")[0].pbc, ElementsAre(true, true, true));
  EXPECT_THAT(read_all("1\n" + cell + "pbc=\"F F F\"\nH 0 0 0\n")[0].pbc,
              ElementsAre(false, false, false));
}

TEST(Extxyz, EnergyIsOptionalWhenNotRequired) {
  ExtxyzKeys keys;
  keys.require_energy = false;
  std::vector<Frame> frames = read_all("1\nProperties=species:S:1:pos:R:3\nH 0 0 0\n", keys);
  EXPECT_FALSE(frames[0].has_energy);
}

TEST(Extxyz, ReadsStandardInput) {
  TempFile file(kAseFrame);
  // Point file descriptor 0 at the file for the duration of the test, then restore it.
  struct StdinFrom {
    int saved = ::dup(STDIN_FILENO);
    explicit StdinFrom(const std::string& path) {
      const int fd = ::open(path.c_str(), O_RDONLY);
      ::dup2(fd, STDIN_FILENO);
      ::close(fd);
    }
    ~StdinFrom() {
      ::dup2(saved, STDIN_FILENO);
      ::close(saved);
    }
  } redirect(file.path());
  ExtxyzReader reader("-");
  EXPECT_EQ(reader.path(), "-");
  Frame frame;
  ASSERT_TRUE(reader.next(frame));
  EXPECT_EQ(frame.n_atoms(), 4u);
  EXPECT_FALSE(reader.next(frame));
}

// ---- bad input: each names file and line, what was expected and what was found ----

TEST(ExtxyzErrors, TruncatedFrame) {
  std::string text = kAseFrame;
  text.resize(text.find("Cu       1.8050"));  // two atom lines of four
  Failure e = read_error(text);
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":4: "), HasSubstr("says 4 atoms"),
                            HasSubstr("found 2 atom lines")));
  EXPECT_THAT(e.hint, HasSubstr("truncated"));
  text.resize(text.size() - 30);  // the file ends in the middle of an atom line
  e = read_error(text);
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":4: "), HasSubstr("incomplete (5 columns")));
  EXPECT_THAT(e.hint, HasSubstr("truncated"));
  e = read_error("1000000000000\nenergy=0\nH 0 0 0\n");  // must not allocate for the count
  EXPECT_THAT(e.what, AllOf(HasSubstr("says 1000000000000 atoms"), HasSubstr("found 1 atom")));
  e = read_error("4\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":1: "), HasSubstr("ends after the count line")));
  EXPECT_THAT(e.hint, HasSubstr("truncated"));
}

TEST(ExtxyzErrors, WrongNumberOfColumns) {
  Failure e = read_error("1\nProperties=species:S:1:pos:R:3:forces:R:3 energy=0\nCu 0 0 0 1 1\n");
  EXPECT_THAT(e.what,
              AllOf(StartsWith(e.path + ":3: "), HasSubstr("has 6 columns"), HasSubstr("says 7")));
  e = read_error("1\nenergy=0\nCu 0 0 0 1\n");
  EXPECT_THAT(e.what,
              AllOf(StartsWith(e.path + ":3: "), HasSubstr("has 5 columns"), HasSubstr("says 4")));
  e = read_error("1\nProperties=species:S:1:pos:R:3:tags:I:1 energy=0\nCu 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(HasSubstr("has 4 columns"), HasSubstr("says 5")));
}

// A column of 2·10⁸ values (a crafted header) is refused from the header, before any allocation.
TEST(ExtxyzErrors, ColumnCountOutOfRangeIsRefusedFromTheHeader) {
  for (const char* count : {"200000000", "0", "1001", "-3"}) {
    Failure e = read_error(std::string("1\nProperties=species:S:1:pos:R:3:q:R:") + count +
                           " energy=0\nCu 0 0 0 1\n");
    EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":2: "), HasSubstr("column 'q'"),
                              HasSubstr("count from 1 to 1000")));
  }
}

TEST(ExtxyzErrors, CountLineTooLarge) {
  Failure e = read_error("3\nenergy=0\nH 0 0 0\nH 0 0 1\n2\nenergy=0\nH 0 0 0\nH 0 0 1\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":5: "), HasSubstr("found '2'"),
                            HasSubstr("count line at line 1 says 3 atoms"),
                            HasSubstr("appears to have 2")));
  e = read_error("3\nenergy=0\nH 0 0 0\nH 0 0 1\n");  // short frame at the end of the file
  EXPECT_THAT(e.what, AllOf(HasSubstr("says 3 atoms"), HasSubstr("found 2 atom lines")));
}

TEST(ExtxyzErrors, CountLineTooSmall) {
  Failure e = read_error("2\nenergy=0\nH 0 0 0\nH 0 0 1\nH 0 0 2\n2\nenergy=0\nH 0 0 0\nH 0 0 1\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":5: "), HasSubstr("expected the count line"),
                            HasSubstr("'H 0 0 2'"), HasSubstr("count line at line 1 says 2 atoms"),
                            HasSubstr("appears to have more")));
}

TEST(ExtxyzErrors, NotANumber) {
  Failure e = read_error("2\nenergy=0\nH 0 0 0\nH 0 abc 1\n");
  EXPECT_THAT(e.what,
              AllOf(StartsWith(e.path + ":4: "), HasSubstr("expected a number"),
                    HasSubstr("found 'abc'"), HasSubstr("pos y"), HasSubstr("atom 2 of 2")));
  e = read_error("1\nenergy=0\nH 0 0 1.5d-3\n");
  EXPECT_THAT(e.what, HasSubstr("found '1.5d-3'"));
  e = read_error("1\nenergy=abc\nH 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":2: "), HasSubstr("found 'abc'")));
}

TEST(ExtxyzErrors, NonFiniteValues) {
  Failure e = read_error("2\nenergy=0\nH 0 0 0\nH 0 nan 1\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":4: "), HasSubstr("position y of atom 2"),
                            HasSubstr("'nan'")));
  e = read_error("1\nProperties=species:S:1:pos:R:3:forces:R:3 energy=0\nH 0 0 0 0 0 -inf\n");
  EXPECT_THAT(e.what, AllOf(HasSubstr("force z of atom 1"), HasSubstr("'-inf'")));
  e = read_error("1\nenergy=NaN\nH 0 0 0\n");
  EXPECT_THAT(e.what,
              AllOf(StartsWith(e.path + ":2: "), HasSubstr("energy"), HasSubstr("not finite")));
  e = read_error("1\nLattice=\"2 0 0 0 2 0 0 0 2\" energy=0 stress=\"1 2 3 4 5 inf\"\nH 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(HasSubstr("stress"), HasSubstr("not finite")));
  e = read_error("1\nLattice=\"2 0 0 0 nan 0 0 0 2\" energy=0\nH 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(HasSubstr("cell"), HasSubstr("not finite")));
}

TEST(ExtxyzErrors, UnknownElement) {
  Failure e = read_error("2\nenergy=0\nH 0 0 0\nXx 0 0 1\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":4: "), HasSubstr("unknown element symbol 'Xx'")));
  EXPECT_THAT(e.hint, HasSubstr("species column"));
}

TEST(ExtxyzErrors, AtomicNumberOutOfRange) {
  Failure e = read_error("1\nProperties=Z:I:1:pos:R:3 energy=0\n119 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":3: "), HasSubstr("atomic number 119"),
                            HasSubstr("1..118")));
  e = read_error("1\nProperties=Z:I:1:pos:R:3 energy=0\n0 0 0 0\n");
  EXPECT_THAT(e.what, HasSubstr("atomic number 0"));
}

TEST(ExtxyzErrors, MissingEnergy) {
  Failure e = read_error("1\nREF_energy=-3 pbc=\"F F F\"\nH 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":2: "), HasSubstr("no energy key 'energy'"),
                            HasSubstr("REF_energy, pbc")));
  EXPECT_THAT(e.hint, HasSubstr("--energy-key REF_energy"));
  e = read_error("1\nfoo=1\nH 0 0 0\n");
  EXPECT_THAT(e.hint, HasSubstr("--energy-key"));
}

TEST(ExtxyzErrors, PerStructureKeyMissingOrNotNumbers) {
  ExtxyzKeys keys;
  keys.info_keys = {"gap"};
  Failure e = read_error("1\nenergy=0 gap=1\nH 0 0 0\n1\nenergy=0 HOMO=2\nH 0 0 0\n", keys);
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":5: "), HasSubstr("no per-structure key 'gap'"),
                            HasSubstr("energy, HOMO")));
  EXPECT_THAT(e.hint, HasSubstr("--info-keys"));
  e = read_error("1\nenergy=0 gap=small\nH 0 0 0\n", keys);
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":2: "), HasSubstr("expected numbers")));
  e = read_error("1\nenergy=0 gap=\"\"\nH 0 0 0\n", keys);
  EXPECT_THAT(e.what, HasSubstr("holds no number"));
  e = read_error("1\nenergy=0 gap=nan\nH 0 0 0\n", keys);
  EXPECT_THAT(e.what, HasSubstr("gap"));
}

TEST(ExtxyzErrors, MissingForces) {
  ExtxyzKeys keys;
  keys.require_forces = true;
  Failure e = read_error(
      "1\nProperties=species:S:1:pos:R:3:REF_forces:R:3 energy=0\nH 0 0 0 1 1 1\n", keys);
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":2: "), HasSubstr("no forces column 'forces'"),
                            HasSubstr("REF_forces")));
}

TEST(ExtxyzErrors, LatticeWithWrongCount) {
  Failure e = read_error("1\nLattice=\"2 0 0 0 2 0 0 0\" energy=0\nH 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":2: "), HasSubstr("Lattice has 8 numbers"),
                            HasSubstr("expected 9")));
  e = read_error("1\nLattice=\"2 0 0 0 2 0 0 0 2 1\" energy=0\nH 0 0 0\n");
  EXPECT_THAT(e.what, HasSubstr("Lattice has 10 numbers"));
}

TEST(ExtxyzErrors, EmptyFile) {
  Failure e = read_error("");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":"), HasSubstr("contains no frames")));
  e = read_error("\n  \n\n");
  EXPECT_THAT(e.what, HasSubstr("contains no frames"));
}

TEST(ExtxyzErrors, BadCountLine) {
  Failure e = read_error("-3\nenergy=0\nH 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":1: "), HasSubstr("-3 atoms")));
  e = read_error("2.5\nenergy=0\nH 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":1: "), HasSubstr("found '2.5'")));
  e = read_error("0\nenergy=0\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":1: "), HasSubstr("says 0 atoms")));
  e = read_error(std::string(kAseFrame) + "0\nenergy=0\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":7: "), HasSubstr("says 0 atoms")));
}

TEST(ExtxyzErrors, DegenerateOrUnperiodicCell) {
  Failure e = read_error("1\nLattice=\"2 0 0 4 0 0 0 0 2\" energy=0\nH 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":2: "), HasSubstr("volume")));
  e = read_error("1\nLattice=\"2 0 0 0 -2 0 0 0 2\" energy=0\nH 0 0 0\n");
  EXPECT_THAT(e.what, HasSubstr("volume -8"));
  e = read_error("1\nenergy=0 pbc=\"T T T\"\nH 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":2: "), HasSubstr("no Lattice")));
  // A cell far too thin (a unit error: nm or bohr for Å, or a typo) would need millions of images.
  e = read_error("1\nLattice=\"3 0 0 0 0.001 0 0 0 3\" energy=0\nH 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":2: "),
                            HasSubstr("0.001 Å thick along lattice vector b")));
  // Not periodic: a degenerate cell is allowed.
  EXPECT_THAT(read_error("1\nLattice=\"0 0 0 0 0 0 0 0 0\" pbc=\"F F F\" energy=0\nH 0 0 0\n").what,
              "no error thrown");
}

TEST(ExtxyzErrors, BadProperties) {
  Failure e = read_error("1\nProperties=species:S:1:pos:R energy=0\nH 0 0 0\n");
  EXPECT_THAT(e.what, AllOf(StartsWith(e.path + ":2: "), HasSubstr("multiple of 3")));
  e = read_error("1\nProperties=species:S:1:pos:R:2 energy=0\nH 0 0\n");
  EXPECT_THAT(e.what, HasSubstr("expected pos:R:3"));
  e = read_error("1\nProperties=pos:R:3 energy=0\n0 0 0\n");
  EXPECT_THAT(e.what, HasSubstr("no species column"));
  ExtxyzKeys keys;
  keys.extra_columns = {"charges"};
  e = read_error("1\nenergy=0\nH 0 0 0\n", keys);
  EXPECT_THAT(e.what, HasSubstr("no column 'charges'"));
}

// Random byte edits of a valid file must end in frames or a DataError, never anything else.
TEST(ExtxyzErrors, RandomCorruptionsGiveDataErrorsOnly) {
  const std::string valid = std::string(kAseFrame) + kAseFrame;
  const std::string alphabet = "0123456789.-+eE \n\r\t\"'=:[]{}\\CuXTFnai";
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    std::string text = valid;
    const int n_edits = 1 + trial % 4;
    for (int k = 0; k < n_edits && !text.empty(); ++k) {
      const size_t at = rng() % text.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          text[at] = c;
          break;
        case 1:
          text.erase(at, 1 + rng() % 8);
          break;
        default:
          text.insert(at, 1, c);
          break;
      }
    }
    TempFile file(text);
    try {
      ExtxyzReader reader(file.path(), {}, 16 + trial % 64);
      Frame frame;
      while (reader.next(frame)) {
        for (double x : frame.pos) ASSERT_TRUE(std::isfinite(x));
      }
    } catch (const DataError& e) {
      EXPECT_THAT(e.what(), StartsWith(file.path() + ":")) << text;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a DataError: " << e.what() << "\n" << text;
    }
  }
}

TEST(ExtxyzErrors, MissingFile) {
  try {
    ExtxyzReader reader("/nonexistent/ddgnn/file.xyz");
    FAIL() << "no exception";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(),
                AllOf(HasSubstr("/nonexistent/ddgnn/file.xyz"), HasSubstr("cannot open")));
  }
}

}  // namespace
}  // namespace ddgnn
