// Exact compact encodings of float64 arrays (array_codec.h).
#include "loader/array_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace ddgnn {

namespace {

constexpr int kMaxExponent = 22;  // 10^22 is the largest power of ten a double holds exactly
constexpr int kMaxBits = 56;      // an offset and its shift fit one unaligned 64-bit read
constexpr double kMaxWhole = 9007199254740992.0;  // 2^53: larger k are not all exact doubles
constexpr int64_t kDecimalHeader = 1 + 1 + 1 + 8;

const double* powers_of_ten() {
  static const double p[kMaxExponent + 1] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                             1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                             1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  return p;
}

uint64_t bits_of(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}

int64_t packed_bytes(int64_t n, int bits) {
  return (n * bits + 7) / 8;
}

// The smallest exponent e at which every value is k / 10^e exactly, with the smallest k and the
// bits the offsets need; false when there is none (or the offsets need more than kMaxBits).
bool find_decimal(const double* v, int64_t n, int& exponent, int64_t& base, int& bits) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i])) return false;
  const double* p10 = powers_of_ten();
  for (int e = 0; e <= kMaxExponent; ++e) {
    bool exact = true, too_large = false;
    int64_t lo = 0, hi = 0;
    for (int64_t i = 0; i < n && exact; ++i) {
      const double x = v[i] * p10[e];
      if (!(std::fabs(x) < kMaxWhole)) {
        too_large = true;
        break;
      }
      const auto k = int64_t(std::llround(x));
      exact = bits_of(double(k) / p10[e]) == bits_of(v[i]);  // -0.0 is not k / 10^e
      lo = i == 0 ? k : std::min(lo, k);
      hi = i == 0 ? k : std::max(hi, k);
    }
    if (too_large) return false;  // a larger e only makes k larger
    if (!exact) continue;
    const auto range = uint64_t(hi - lo);
    bits = 0;
    while (bits < 64 && (range >> bits) != 0) ++bits;
    if (bits > kMaxBits) return false;
    exponent = e;
    base = lo;
    return true;
  }
  return false;
}

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int b = 0; b < 8; ++b) out.push_back(uint8_t(v >> (8 * b)));
}

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int b = 0; b < 8; ++b) v |= uint64_t(p[b]) << (8 * b);
  return v;
}

[[noreturn]] void bad(const std::string& what) {
  throw DataError("encoded array: " + what,
                  "the record's bytes are damaged; convert the extxyz file again");
}

// Checks the bytes at `data` as an encoding of n values; returns its size and, for decimal, its
// parameters.
int64_t check(const uint8_t* data, int64_t available, int64_t n, int& exponent, int& bits,
              int64_t& base) {
  if (available < 1) bad("no byte for the encoding of " + std::to_string(n) + " values");
  if (n < 0) bad("a negative count of values");
  const auto need = [&](int64_t bytes, const char* what) {
    if (bytes > available)
      bad(std::string(what) + " of " + std::to_string(n) + " values needs " +
          std::to_string(bytes) + " bytes, " + std::to_string(available) + " are left");
    return bytes;
  };
  switch (data[0]) {
    case uint8_t(ArrayEncoding::kConstant):
      return need(9, "a constant");
    case uint8_t(ArrayEncoding::kFloat32):
      if (n > (INT64_MAX - 1) / 4) bad("too many values");
      return need(1 + 4 * n, "float32");
    case uint8_t(ArrayEncoding::kRaw):
      if (n > (INT64_MAX - 1) / 8) bad("too many values");
      return need(1 + 8 * n, "raw float64");
    case uint8_t(ArrayEncoding::kDecimal): {
      need(kDecimalHeader, "the decimal header");
      exponent = data[1];
      bits = data[2];
      base = int64_t(get_u64(data + 3));
      if (exponent > kMaxExponent)
        bad("decimal exponent " + std::to_string(exponent) + " > " + std::to_string(kMaxExponent));
      if (bits > kMaxBits) bad("decimal offsets of " + std::to_string(bits) + " bits > 56");
      if (!(std::fabs(double(base)) <= kMaxWhole)) bad("decimal base beyond 2^53");
      if (n > INT64_MAX / 64) bad("too many values");
      return need(kDecimalHeader + packed_bytes(n, bits), "decimal");
    }
    default:
      bad("unknown encoding " + std::to_string(int(data[0])));
  }
}

}  // namespace

const char* to_string(ArrayEncoding encoding) {
  switch (encoding) {
    case ArrayEncoding::kConstant:
      return "constant";
    case ArrayEncoding::kDecimal:
      return "decimal";
    case ArrayEncoding::kFloat32:
      return "float32";
    case ArrayEncoding::kRaw:
      return "raw";
  }
  return "?";
}

ArrayEncoding encode_array(const double* v, int64_t n, std::vector<uint8_t>& out, bool compact) {
  if (compact && n > 0 &&
      std::all_of(v, v + n, [&](double x) { return bits_of(x) == bits_of(v[0]); })) {
    out.push_back(uint8_t(ArrayEncoding::kConstant));
    put_u64(out, bits_of(v[0]));
    return ArrayEncoding::kConstant;
  }
  int exponent = 0, bits = 0;
  int64_t base = 0;
  const bool decimal = compact && find_decimal(v, n, exponent, base, bits);
  const bool float32 = compact && std::all_of(v, v + n, [](double x) {
                         return bits_of(double(static_cast<float>(x))) == bits_of(x);
                       });
  const int64_t decimal_size = decimal ? kDecimalHeader + packed_bytes(n, bits) : INT64_MAX;
  const int64_t float_size = float32 ? 1 + 4 * n : INT64_MAX;
  if (decimal && decimal_size <= float_size && decimal_size < 1 + 8 * n) {
    out.push_back(uint8_t(ArrayEncoding::kDecimal));
    out.push_back(uint8_t(exponent));
    out.push_back(uint8_t(bits));
    put_u64(out, uint64_t(base));
    const size_t at = out.size();
    const int64_t bytes = packed_bytes(n, bits);
    out.resize(at + size_t(bytes) + 8, 0);  // 8 bytes of slack for the last word, cut below
    const double p10 = powers_of_ten()[exponent];
    for (int64_t i = 0; i < n; ++i) {
      const auto off = uint64_t(int64_t(std::llround(v[i] * p10)) - base);
      const int64_t bit = i * bits;
      uint8_t* word = out.data() + at + size_t(bit >> 3);
      uint64_t w;
      std::memcpy(&w, word, 8);
      w |= off << (bit & 7);
      std::memcpy(word, &w, 8);
    }
    out.resize(at + size_t(bytes));
    return ArrayEncoding::kDecimal;
  }
  if (float32 && float_size < 1 + 8 * n) {
    out.push_back(uint8_t(ArrayEncoding::kFloat32));
    const size_t at = out.size();
    out.resize(at + size_t(4 * n));
    for (int64_t i = 0; i < n; ++i) {
      const auto f = static_cast<float>(v[i]);
      std::memcpy(out.data() + at + size_t(4 * i), &f, 4);
    }
    return ArrayEncoding::kFloat32;
  }
  out.push_back(uint8_t(ArrayEncoding::kRaw));
  const size_t at = out.size();
  out.resize(at + size_t(8 * n));
  if (n > 0) std::memcpy(out.data() + at, v, size_t(8 * n));
  return ArrayEncoding::kRaw;
}

int64_t encoded_array_size(const uint8_t* data, int64_t available, int64_t n) {
  int exponent = 0, bits = 0;
  int64_t base = 0;
  return check(data, available, n, exponent, bits, base);
}

bool encoded_array_finite(const uint8_t* data, int64_t available, int64_t n) {
  int exponent = 0, bits = 0;
  int64_t base = 0;
  check(data, available, n, exponent, bits, base);
  const auto finite64 = [](const uint8_t* p) {  // exponent bits not all ones
    return (get_u64(p) & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
  };
  switch (ArrayEncoding(data[0])) {
    case ArrayEncoding::kConstant:
      return n == 0 || finite64(data + 1);
    case ArrayEncoding::kDecimal:
      return true;
    case ArrayEncoding::kFloat32:
      for (int64_t i = 0; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, data + 1 + 4 * i, 4);
        if ((u & 0x7f800000u) == 0x7f800000u) return false;
      }
      return true;
    case ArrayEncoding::kRaw:
      for (int64_t i = 0; i < n; ++i)
        if (!finite64(data + 1 + 8 * i)) return false;
      return true;
  }
  return false;
}

int64_t decode_array(const uint8_t* data, int64_t available, int64_t n, double* out) {
  int exponent = 0, bits = 0;
  int64_t base = 0;
  const int64_t size = check(data, available, n, exponent, bits, base);
  switch (ArrayEncoding(data[0])) {
    case ArrayEncoding::kConstant: {
      double v;
      std::memcpy(&v, data + 1, 8);
      std::fill(out, out + n, v);
      break;
    }
    case ArrayEncoding::kRaw:
      if (n > 0) std::memcpy(out, data + 1, size_t(8 * n));
      break;
    case ArrayEncoding::kFloat32:
      for (int64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, data + 1 + 4 * i, 4);
        out[i] = double(f);
      }
      break;
    case ArrayEncoding::kDecimal: {
      const uint8_t* packed = data + kDecimalHeader;
      const int64_t bytes = packed_bytes(n, bits);
      const uint64_t mask = bits == 0 ? 0 : (~uint64_t(0) >> (64 - bits));
      const double p10 = powers_of_ten()[exponent];
      for (int64_t i = 0; i < n; ++i) {
        const int64_t bit = i * bits, byte = bit >> 3;
        uint64_t w = 0;
        if (byte + 8 <= bytes)
          std::memcpy(&w, packed + byte, 8);
        else if (byte < bytes)
          std::memcpy(&w, packed + byte, size_t(bytes - byte));
        const uint64_t off = (w >> (bit & 7)) & mask;
        out[i] = double(int64_t(uint64_t(base) + off)) / p10;
      }
      break;
    }
  }
  return size;
}

}  // namespace ddgnn
