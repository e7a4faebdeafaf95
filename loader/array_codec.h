// Exact compact encodings of float64 arrays, for the records of a dataset: each array gets the
// cheapest encoding that gives back every bit (NaN payloads, -0.0, denormals and infinities
// included):
//   constant  every value the same 64 bits: the value once (a molecule's zero cell, NaN stress)
//   decimal   every value k / 10^e for one e and whole k (values written as text with at most e
//             decimals: what extxyz files hold): k as a frame of reference (the smallest k) plus
//             bit-packed offsets. Decoding divides double(k) by 10^e, both exact, so IEEE's
//             correctly rounded division gives the double nearest to k / 10^e: the value strtod
//             read from the text.
//   float32   every value a float32 widened: 4 bytes each
//   raw       8 bytes each
// Layout of one encoded array of n values (n is known to the reader, from the record):
//   byte 0: the encoding (ArrayEncoding)
//   constant: 8 bytes, the value
//   decimal:  byte e (0..22), byte bits (0..56), 8 bytes base k (int64, little-endian), then
//             ceil(n bits / 8) bytes: value i's offset k - base at bits [i bits, (i + 1) bits)
//   float32:  4 n bytes;  raw: 8 n bytes
// Torch-free and MPI-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddgnn {

enum class ArrayEncoding : uint8_t { kConstant = 0, kDecimal = 1, kFloat32 = 2, kRaw = 3 };
const char* to_string(ArrayEncoding encoding);

// Appends the cheapest exact encoding of values[0, n) to `out` (`compact` false: raw); returns
// the encoding chosen.
ArrayEncoding encode_array(const double* values, int64_t n, std::vector<uint8_t>& out,
                           bool compact = true);

// Bytes the encoding of n values starting at `data` takes, reading no more than `available`
// bytes; DataError (what is wrong, at which byte) when the bytes are not a valid encoding of n
// values.
int64_t encoded_array_size(const uint8_t* data, int64_t available, int64_t n);

// Whether every value of the encoding of n values at `data` is finite, without decoding it (the
// bytes checked as encoded_array_size checks them): a decimal's always are (whole numbers below
// 2^63 over a power of ten), a constant's one value, a float32 or raw array's each.
bool encoded_array_finite(const uint8_t* data, int64_t available, int64_t n);

// Decodes n values from `data` (at most `available` bytes) into out[0, n); returns the bytes
// read. DataError as encoded_array_size.
int64_t decode_array(const uint8_t* data, int64_t available, int64_t n, double* out);

}  // namespace ddgnn
