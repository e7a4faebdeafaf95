// loader/array_codec: every float64 array comes back bit for bit, in the cheapest encoding
// that can give it back: values written as text with a few decimals as decimal, float32-born
// values as float32, a repeated value once, binary-born values raw; NaN payloads, -0.0,
// denormals and infinities kept; damaged bytes refused naming what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "loader/array_codec.h"

namespace ddgnn {
namespace {

uint64_t bits_of(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}

double from_bits(uint64_t b) {
  double v;
  std::memcpy(&v, &b, 8);
  return v;
}

// Encodes, checks the size the reader computes, decodes, and compares every bit.
ArrayEncoding round_trip(const std::vector<double>& v, size_t* bytes = nullptr) {
  std::vector<uint8_t> enc = {0xAB};  // something before: the encoding appends
  const ArrayEncoding e = encode_array(v.data(), int64_t(v.size()), enc);
  enc.push_back(0xCD);  // and something after: the reader stops at its own end
  const int64_t size = int64_t(enc.size()) - 2;
  EXPECT_EQ(encoded_array_size(enc.data() + 1, size + 1, int64_t(v.size())), size);
  std::vector<double> back(v.size(), 12345.0);
  EXPECT_EQ(decode_array(enc.data() + 1, size + 1, int64_t(v.size()), back.data()), size);
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(bits_of(back[i]), bits_of(v[i]))
        << "value " << i << " of " << v.size() << " (" << to_string(e) << "): " << v[i] << " -> "
        << back[i];
  if (bytes) *bytes = size_t(size);
  return e;
}

// The doubles strtod reads from values printed with `decimals` digits after the point.
std::vector<double> text_born(int n, int decimals, double scale, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, u(rng));
    v.push_back(std::strtod(buf, nullptr));
  }
  return v;
}

TEST(ArrayCodec, ValuesWrittenAsTextAreDecimalAndSmall) {
  // Positions as ASE writes them (%16.8f) within 10 Å: 10^9 distinct values, 31 bits a value.
  size_t bytes = 0;
  const auto pos = text_born(27, 8, 10.0, 1);
  EXPECT_EQ(round_trip(pos, &bytes), ArrayEncoding::kDecimal);
  EXPECT_EQ(bytes, 11u + (27u * 31 + 7) / 8);  // 116 bytes for 216
  // Forces with 6 decimals, energies with 10, a lattice of whole numbers.
  EXPECT_EQ(round_trip(text_born(324, 6, 3.0, 2)), ArrayEncoding::kDecimal);
  EXPECT_EQ(round_trip(text_born(1, 10, 1000.0, 3), &bytes), ArrayEncoding::kConstant);
  EXPECT_EQ(round_trip({10.845, 0, 0, 0, 10.845, 0, 0, 0, 10.845}), ArrayEncoding::kDecimal);
  // The smallest exponent that holds them all: 0.5 and 0.25 need two decimals.
  std::vector<double> quarters;
  for (int i = 0; i < 30; ++i) quarters.push_back(0.25 * i);
  std::vector<uint8_t> enc;
  encode_array(quarters.data(), 30, enc);
  ASSERT_EQ(enc[0], uint8_t(ArrayEncoding::kDecimal));
  EXPECT_EQ(enc[1], 2);
}

TEST(ArrayCodec, RepeatedFloat32AndBinaryBornValues) {
  size_t bytes = 0;
  EXPECT_EQ(round_trip(std::vector<double>(9, 0.0), &bytes), ArrayEncoding::kConstant);
  EXPECT_EQ(bytes, 9u);  // a molecule's zero cell: 9 bytes instead of 72
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(round_trip(std::vector<double>(9, nan), &bytes), ArrayEncoding::kConstant);
  EXPECT_EQ(bytes, 9u);  // its NaN stress

  std::mt19937 rng(4);
  std::normal_distribution<float> f(0.0f, 2.0f);
  std::vector<double> widened;
  for (int i = 0; i < 300; ++i) widened.push_back(double(f(rng)));
  EXPECT_EQ(round_trip(widened, &bytes), ArrayEncoding::kFloat32);
  EXPECT_EQ(bytes, 1u + 4 * 300);

  std::mt19937_64 r64(5);
  std::normal_distribution<double> d(0.0, 2.0);
  std::vector<double> binary;
  for (int i = 0; i < 300; ++i) binary.push_back(d(r64));
  EXPECT_EQ(round_trip(binary, &bytes), ArrayEncoding::kRaw);
  EXPECT_EQ(bytes, 1u + 8 * 300);

  EXPECT_EQ(round_trip({}, &bytes), ArrayEncoding::kRaw);  // nothing: one byte
  EXPECT_EQ(bytes, 1u);
}

TEST(ArrayCodec, EveryBitOfOddValuesComesBack) {
  const double inf = std::numeric_limits<double>::infinity();
  const double denormal = std::numeric_limits<double>::denorm_min();
  const std::vector<std::vector<double>> cases = {
      {-0.0, 0.0, 1.5},                               // -0.0 is not k / 10^e
      {-0.0},                                         // alone
      {from_bits(0x7FF8000000000001ULL), 1.0},        // a quiet NaN with a payload
      {from_bits(0x7FF0000000000001ULL), 2.0, -3.0},  // a signalling NaN
      {from_bits(0xFFF8DEADBEEF0000ULL), from_bits(0x7FF8000000000000ULL)},  // two NaNs
      {inf, -inf, 0.125},
      {denormal, 3 * denormal, 0.0},    // denormals
      {1e300, -1e-300, 7.0},            // beyond any decimal
      {9007199254740993.0, 1.0},        // 2^53 + 1 is no double: 2^53
      {0.1, 0.2, 0.30000000000000004},  // 0.1 + 0.2, as computed
      {123456789.123456789, -0.000001},
  };
  for (const auto& c : cases) round_trip(c);
  // Random bit patterns, one class at a time and mixed.
  std::mt19937_64 rng(6);
  for (int t = 0; t < 2000; ++t) {
    std::vector<double> v(size_t(1 + rng() % 40));
    const int kind = int(rng() % 4);
    for (double& x : v) {
      const int k = kind == 3 ? int(rng() % 3) : kind;
      if (k == 0)
        x = from_bits(rng());  // anything, NaNs and infinities included
      else if (k == 1)
        x = double(int64_t(rng() % 2000001) - 1000000) / 1000.0;  // text-born, 3 decimals
      else
        x = double(float(int32_t(rng()) / 65536.0f));  // float32-born
    }
    round_trip(v);
  }
}

TEST(ArrayCodec, DamagedBytesAreRefusedNamingWhatIsWrong) {
  const auto refused = [](std::vector<uint8_t> bytes, int64_t n, const std::string& needle) {
    std::vector<double> out(size_t(std::max<int64_t>(n, 1)));
    try {
      decode_array(bytes.data(), int64_t(bytes.size()), n, out.data());
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused({}, 3, "no byte for the encoding of 3 values");
  refused({7}, 3, "unknown encoding 7");
  refused({uint8_t(ArrayEncoding::kRaw), 0, 0, 0}, 3, "raw float64 of 3 values needs 25 bytes");
  refused({uint8_t(ArrayEncoding::kConstant), 1, 2}, 3, "a constant of 3 values needs 9 bytes");
  std::vector<uint8_t> decimal = {
      uint8_t(ArrayEncoding::kDecimal), 23, 8, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3};
  refused(decimal, 3, "decimal exponent 23 > 22");
  decimal[1] = 2;
  decimal[2] = 57;
  refused(decimal, 3, "decimal offsets of 57 bits > 56");
  decimal[2] = 16;
  refused(decimal, 3, "decimal of 3 values needs 17 bytes, 14 are left");
  decimal[2] = 8;
  decimal[10] = 0x7F;  // base far beyond 2^53
  refused(decimal, 3, "decimal base beyond 2^53");
}

TEST(ArrayCodec, FinitenessIsToldWithoutDecoding) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    std::vector<double> values;
    ArrayEncoding encoding;
    bool finite;
  };
  const std::vector<Case> cases = {
      {{0.1234, -1.2345, 3.0001}, ArrayEncoding::kDecimal, true},
      {{2.0, 2.0}, ArrayEncoding::kConstant, true},
      {{inf, inf}, ArrayEncoding::kConstant, false},
      {{0.1f, 0.3f, float(inf)}, ArrayEncoding::kFloat32, false},
      {{0.1f, 0.3f, 1e-40f}, ArrayEncoding::kFloat32, true},
      {{std::sqrt(2.0), nan, 1.0}, ArrayEncoding::kRaw, false},
      {{std::sqrt(2.0), -inf}, ArrayEncoding::kRaw, false},
      {{std::sqrt(2.0), 4.9e-324, -0.0}, ArrayEncoding::kRaw, true},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> bytes;
    ASSERT_EQ(encode_array(c.values.data(), int64_t(c.values.size()), bytes), c.encoding);
    EXPECT_EQ(encoded_array_finite(bytes.data(), int64_t(bytes.size()), int64_t(c.values.size())),
              c.finite)
        << to_string(c.encoding) << " " << c.values[0];
  }
  const uint8_t unknown[2] = {9, 0};
  EXPECT_THROW(encoded_array_finite(unknown, 2, 1), DataError);
}

}  // namespace
}  // namespace ddgnn
