// Editing a dataset file behind the writer's back, for tests of corruption detection: plain
// overwrites (the checksums then disagree), and overwrites that repair the checksums, so that the
// file's bytes are what its checksums say and only its content is wrong.
#pragma once

#include <hdf5.h>

#include <string>
#include <vector>

#include "core/checksum.h"
#include "loader/dataset_layout.h"
#include "loader/h5.h"

namespace ddgnn::testing {

// Writes `value` (memory type `type`) at (row, col) of the 1-D or 2-D HDF5 dataset `name`.
template <class T>
void overwrite_value(const std::string& path, const std::string& name, hsize_t row, hsize_t col,
                     hid_t type, T value) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  hid_t space = H5Dget_space(d);
  const int rank = H5Sget_simple_extent_ndims(space);
  hsize_t start[2] = {row, col}, count[2] = {1, 1};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t mem = H5Screate_simple(rank, count, nullptr);
  H5Dwrite(d, type, mem, space, H5P_DEFAULT, &value);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
}

// Writes `value` at (row, col) of the 2-D float64 HDF5 dataset `name` in the file at `path`.
inline void overwrite_double(const std::string& path, const std::string& name, hsize_t row,
                             hsize_t col, double value) {
  overwrite_value(path, name, row, col, H5T_NATIVE_DOUBLE, value);
}

// Recomputes the CRC-32 of the checksum block of array `name` (a path of loader/FORMAT.md) that
// holds `row`, as the writer would have.
inline void repair_checksum(const std::string& path, const std::string& name, hsize_t row) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  int64_t block_rows = 0;
  hid_t a = H5Aopen(d, "checksum_block_rows", H5P_DEFAULT);
  H5Aread(a, H5T_NATIVE_INT64, &block_rows);
  H5Aclose(a);
  hid_t space = H5Dget_space(d);
  hsize_t dims[2] = {0, 1};
  const int rank = H5Sget_simple_extent_dims(space, dims, nullptr);
  hid_t type = H5Dget_type(d);
  const size_t row_bytes = H5Tget_size(type) * (rank == 2 ? dims[1] : 1);
  const hsize_t b = row / hsize_t(block_rows), first = b * hsize_t(block_rows);
  const hsize_t n = std::min<hsize_t>(hsize_t(block_rows), dims[0] - first);
  hsize_t start[2] = {first, 0}, count[2] = {n, rank == 2 ? dims[1] : 1};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t mem = H5Screate_simple(rank, count, nullptr);
  std::vector<char> buf(n * row_bytes);
  H5Dread(d, type, mem, space, H5P_DEFAULT, buf.data());
  const uint32_t crc = ddgnn::crc32(buf.data(), buf.size());
  H5Sclose(mem);
  H5Sclose(space);
  H5Tclose(type);
  H5Dclose(d);
  H5Fclose(f);
  overwrite_value(path, layout::checksum_path(name), b, 0, H5T_NATIVE_UINT32, crc);
}

// overwrite_value, then repair_checksum: the block's checksum matches its new content.
template <class T>
void overwrite_checksummed(const std::string& path, const std::string& name, hsize_t row,
                           hsize_t col, hid_t type, T value) {
  overwrite_value(path, name, row, col, type, value);
  repair_checksum(path, name, row);
}

// Row `row` of the 1-D array `name` (graphs/record_start, records) as `T`.
template <class T>
T read_value(const std::string& path, const std::string& name, hsize_t row, hid_t type) {
  T value{};
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  hid_t space = H5Dget_space(d);
  hsize_t start[1] = {row}, count[1] = {1};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t mem = H5Screate_simple(1, count, nullptr);
  H5Dread(d, type, mem, space, H5P_DEFAULT, &value);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  return value;
}

// Where graph g's record starts in `records` (format version 4).
inline int64_t record_start(const std::string& path, hsize_t g) {
  return read_value<int64_t>(path, "graphs/record_start", g, H5T_NATIVE_INT64);
}

// Flips every bit of byte `at` of the records (format version 4), behind the checksums' back.
inline void flip_record_byte(const std::string& path, hsize_t at) {
  const auto b = read_value<uint8_t>(path, "records", at, H5T_NATIVE_UINT8);
  overwrite_value(path, "records", at, 0, H5T_NATIVE_UINT8, uint8_t(~b));
}

// Recomputes the root attribute metadata_crc32 from the file's attributes, species table and
// config type names, as the writer would have.
inline void repair_metadata_checksum(const std::string& path) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "species", H5P_DEFAULT);
  hid_t space = H5Dget_space(d);
  std::vector<uint8_t> species(size_t(H5Sget_simple_extent_npoints(space)));
  H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, species.data());
  H5Sclose(space);
  H5Dclose(d);
  const auto types = h5::read_strings(f, "config_types", 1u << 30, true, path);
  const int64_t crc = layout::metadata_checksum(f, species, types, path);
  hid_t a = H5Aopen(f, "metadata_crc32", H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &crc);
  H5Aclose(a);
  H5Fclose(f);
}

}  // namespace ddgnn::testing
