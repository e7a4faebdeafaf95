// Checksums of packed arrays (CRC-32 from zlib, the well-kept implementation that HDF5 already
// links). Used per block of rows in the dataset file, so a rank can verify just its own part.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ddgnn {

// CRC-32 (zlib polynomial) of `n_bytes` bytes, continuing from `crc` (start with 0).
uint32_t crc32(const void* data, size_t n_bytes, uint32_t crc = 0);

// CRC-32 of A followed by B, given crc(A), crc(B) and the length of B in bytes.
uint32_t crc32_combine(uint32_t crc_a, uint32_t crc_b, size_t n_bytes_b);

}  // namespace ddgnn
