// core/: the error line that main prints, CRC-32 with its combine rule, threads per rank, backend
// names, the UTF-8 check of names from outside.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/checksum.h"
#include "core/error.h"
#include "core/text.h"
#include "core/threads.h"

namespace ddgnn {

TEST(ErrorLine, NamesKindRankMessageAndHint) {
  const DataError e("data.xyz:12: expected 9 columns, found 7", "check Properties=");
  const std::string line = error_line(e, 3);
  EXPECT_EQ(line,
            "ddgnn: data error [rank 3]: data.xyz:12: expected 9 columns, found 7 — hint: check "
            "Properties=");
}

TEST(ErrorLine, SingleProcessOmitsRankAndFoldsNewlines) {
  const ConfigError e("bad\nvalue");
  EXPECT_EQ(error_line(e, -1), "ddgnn: config error: bad value");
}

TEST(ErrorLine, ForeignExceptionIsCalledABug) {
  const std::runtime_error e("boom");
  EXPECT_NE(error_line(e, -1).find("internal error: boom"), std::string::npos);
  EXPECT_NE(error_line(e, -1).find("bug in ddgnn"), std::string::npos);
}

// What the file system or the allocator refuses is the machine's answer, not a bug: named so.
TEST(ErrorLine, FileSystemAndMemoryErrorsAreNotCalledBugs) {
  const std::filesystem::filesystem_error fs_error(
      "cannot create directories", std::filesystem::path("/proc/x"),
      std::make_error_code(std::errc::no_such_file_or_directory));
  const std::string line = error_line(fs_error, -1);
  EXPECT_EQ(line.rfind("ddgnn: file error: ", 0), 0u) << line;
  EXPECT_NE(line.find("/proc/x"), std::string::npos) << line;
  EXPECT_EQ(line.find("bug"), std::string::npos) << line;
  const std::string memory = error_line(std::bad_alloc(), 2);
  EXPECT_EQ(memory.rfind("ddgnn: out of memory [rank 2]: ", 0), 0u) << memory;
  EXPECT_EQ(memory.find("bug"), std::string::npos) << memory;
}

// Every byte that is not part of valid UTF-8 is found and escaped, and valid text is kept.
TEST(Text, CsvFieldsKeepAnEmptyLastField) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split_csv_line("a,b,c"), (V{"a", "b", "c"}));
  EXPECT_EQ(split_csv_line("1,,3,"), (V{"1", "", "3", ""}));  // metrics.csv's empty energy
  EXPECT_EQ(split_csv_line(","), (V{"", ""}));
  EXPECT_EQ(split_csv_line("x"), (V{"x"}));
  EXPECT_TRUE(split_csv_line("").empty());
}

TEST(Text, Utf8IsCheckedAndOddBytesEscaped) {
  EXPECT_EQ(invalid_utf8_at("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), std::string::npos);
  EXPECT_EQ(invalid_utf8_at("caf\xe9"), 3u);           // Latin-1
  EXPECT_EQ(invalid_utf8_at("a\xc0\xaf"), 1u);         // overlong '/'
  EXPECT_EQ(invalid_utf8_at("a\xed\xa0\x80"), 1u);     // a surrogate
  EXPECT_EQ(invalid_utf8_at("\xf4\x90\x80\x80"), 0u);  // beyond U+10FFFF
  EXPECT_EQ(invalid_utf8_at("ab\xe2\x82"), 2u);        // cut short
  EXPECT_EQ(utf8_error_at("caf\xe9", 3), "byte 0xE9 at position 3");
  EXPECT_EQ(escape_invalid_utf8("d\xfe\xff.h5"), "d\\xFE\\xFF.h5");
  EXPECT_EQ(escape_invalid_utf8("caf\xc3\xa9\xe9"), "caf\xc3\xa9\\xE9");
  EXPECT_EQ(invalid_utf8_at(escape_invalid_utf8("\xff\xc0\xed\xa0\x80x")), std::string::npos);
}

TEST(Checksum, KnownValueOfCheckString) {
  // The standard CRC-32 check value of "123456789".
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);
}

TEST(Checksum, IncrementalAndCombineAgreeWithWhole) {
  std::vector<unsigned char> data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 131 + 7);
  const uint32_t whole = crc32(data.data(), data.size());
  const uint32_t a = crc32(data.data(), 40000);
  EXPECT_EQ(crc32(data.data() + 40000, 60000, a), whole);
  const uint32_t b = crc32(data.data() + 40000, 60000);
  EXPECT_EQ(crc32_combine(a, b, 60000), whole);
  data[500] ^= 1;
  EXPECT_NE(crc32(data.data(), data.size()), whole);
}

namespace {

TEST(Threads, RanksShareTheCoresTheyMayUse) {
  const int machine = int(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_GE(cores_available(), 1);
  EXPECT_LE(cores_available(), machine);
  EXPECT_EQ(threads_per_rank(machine, 1), machine);      // alone, unbound
  EXPECT_EQ(threads_per_rank(machine, 2 * machine), 1);  // oversubscribed: one each
  EXPECT_EQ(threads_per_rank(machine, machine), 1);
  if (machine >= 2) {
    EXPECT_EQ(threads_per_rank(1, 2), 1);  // bound to one core
  }
  if (machine >= 4) {
    EXPECT_EQ(threads_per_rank(machine, 2), machine / 2);
  }
}

TEST(Threads, RequestsAboveTheCoresAreCapped) {
  EXPECT_EQ(cap_threads(3, 8, "Runtime.intra_op_threads"), 3);
  EXPECT_EQ(cap_threads(8, 8, "Runtime.intra_op_threads"), 8);
  EXPECT_EQ(cap_threads(100000, 2, "Runtime.intra_op_threads"), 2);
  EXPECT_EQ(cap_threads(int64_t(1) << 40, 1, "--threads"), 1);
}

TEST(Backend, OneSpellingRoundTrips) {
  ASSERT_EQ(backend_names().size(), 6u);
  for (const std::string& name : backend_names()) EXPECT_EQ(to_string(parse_backend(name)), name);
  EXPECT_EQ(parse_backends({"shm", "file"}), (std::vector<Backend>{Backend::kShm, Backend::kFile}));
  EXPECT_FALSE(find_backend("local").has_value());
  try {
    parse_backend("rdma", "Loader.backend");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("Loader.backend: unknown backend 'rdma'"),
              std::string::npos);
    EXPECT_NE(e.hint().find("rma, collective, shm, replicated, file, nccl"), std::string::npos);
  }
}

}  // namespace
}  // namespace ddgnn
