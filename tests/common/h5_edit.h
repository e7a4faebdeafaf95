// Editing a dataset file behind the writer's back, for tests of corruption detection.
#pragma once

#include <hdf5.h>

#include <string>

namespace ddgnn::testing {

// Writes `value` at (row, col) of the 2-D float64 HDF5 dataset `name` in the file at `path`.
inline void overwrite_double(const std::string& path, const std::string& name, hsize_t row,
                             hsize_t col, double value) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  hid_t space = H5Dget_space(d);
  hsize_t start[2] = {row, col}, count[2] = {1, 1};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t mem = H5Screate_simple(2, count, nullptr);
  H5Dwrite(d, H5T_NATIVE_DOUBLE, mem, space, H5P_DEFAULT, &value);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
}

}  // namespace ddgnn::testing
