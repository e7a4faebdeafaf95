// libFuzzer target: the exact array encodings (loader/array_codec.h). Any bytes after the first
// two (a value count, 0..4095) are decoded as an encoded array: a DataError or the values, never
// a crash or a read past the bytes. The same bytes taken as float64 values must come back bit
// for bit through encode and decode, whatever they hold (NaNs, infinities, denormals, -0.0).
// The bytes are also read as one graph's record (loader/packed.h: header, atomic numbers as they
// are or as a palette, the arrays): a DataError or a graph, never a crash; and their low bits as
// atomic numbers must come back exactly through a record.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "loader/array_codec.h"
#include "loader/packed.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddgnn;
  if (size < 2) return 0;
  const int64_t n = int64_t((data[0] | (data[1] << 8)) & 0x0FFF);
  const uint8_t* bytes = data + 2;
  const int64_t available = int64_t(size) - 2;
  // Exactly the bytes given (a copy, so that ASan sees a read past them).
  std::vector<uint8_t> exact(bytes, bytes + available);
  std::vector<double> out(size_t(n) + 1);
  fuzz::expect_clean([&] {
    const int64_t used = decode_array(exact.data(), available, n, out.data());
    if (used < 1 || used > available) std::abort();
    if (encoded_array_size(exact.data(), available, n) != used) std::abort();
  });

  std::vector<double> values(size_t(available / 8));
  if (!values.empty()) std::memcpy(values.data(), bytes, 8 * values.size());
  std::vector<uint8_t> enc;
  encode_array(values.data(), int64_t(values.size()), enc);
  std::vector<double> back(values.size() + 1);
  if (decode_array(enc.data(), int64_t(enc.size()), int64_t(values.size()), back.data()) !=
      int64_t(enc.size()))
    std::abort();
  if (!values.empty() && std::memcmp(values.data(), back.data(), 8 * values.size()) != 0)
    std::abort();

  const int64_t offsets[2] = {0, available};
  fuzz::expect_clean([&] { unpack_records(exact.data(), offsets, 1, {}, {}); });

  GraphBlock b;
  b.first = 0;
  b.n_atoms = {int32_t(std::max<int64_t>(available, 1))};
  b.atom_start = {0};
  for (int64_t i = 0; i < b.n_atoms[0]; ++i)
    b.z.push_back(uint8_t(1 + (available > 0 ? bytes[i] % (data[0] % 118 + 1) : 0)));
  b.energy = {0.0};
  b.cell.assign(9, 0.0);
  b.pbc.assign(3, 0);
  b.stress.assign(9, 0.0);
  b.config_type = {0};
  b.pos.assign(3 * b.z.size(), 0.0);
  std::vector<uint8_t> record;
  const std::vector<int64_t> record_offsets = pack_records(b, record);
  if (unpack_records(record.data(), record_offsets.data(), 1, {}, {}).z != b.z) std::abort();
  return 0;
}
