// CRC-32 through zlib, fed in pieces below zlib's 32-bit length limit.
#include "core/checksum.h"

#include <zlib.h>

#include <algorithm>

namespace ddgnn {

uint32_t crc32(const void* data, size_t n_bytes, uint32_t crc) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  constexpr size_t kPiece = size_t(1) << 30;
  while (n_bytes > 0) {
    const size_t n = std::min(n_bytes, kPiece);
    c = ::crc32(c, p, static_cast<uInt>(n));
    p += n;
    n_bytes -= n;
  }
  return static_cast<uint32_t>(c);
}

uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, size_t n_bytes_b) {
  return static_cast<uint32_t>(::crc32_combine64(crc_a, crc_b, static_cast<z_off64_t>(n_bytes_b)));
}

}  // namespace ddgnn
