// Thin RAII layer over the HDF5 C API: owned handles, H5_CHECK with file:line, and typed helpers
// for the few operations the dataset format needs. HDF5 errors become ddgnn::DataError here.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "loader/h5_exit.h"

namespace ddgnn::h5 {

// Throws DataError "<context>: the HDF5 library reports '<innermost HDF5 message>'"; the call and
// its source line go to the debug log.
[[noreturn]] void fail(const char* expr, const char* file, int line, const std::string& context);

// Silences HDF5's own printing of error stacks (we report them ourselves). Idempotent.
void silence_errors();

#define H5_CHECK(expr, context)                                                      \
  ([&]() {                                                                           \
    auto h5_check_result_ = (expr);                                                  \
    if (h5_check_result_ < 0) ::ddgnn::h5::fail(#expr, __FILE__, __LINE__, context); \
    return h5_check_result_;                                                         \
  }())

// An owned hid_t (file, group, dataset, dataspace, type, property list): closed on destruction.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : m_id(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& other) noexcept : m_id(other.m_id) { other.m_id = H5I_INVALID_HID; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return m_id; }
  operator hid_t() const { return m_id; }
  bool valid() const { return m_id >= 0; }
  void reset();

 private:
  hid_t m_id = H5I_INVALID_HID;
};

// The HDF5 native type of a C++ element type.
template <class T>
hid_t native_type();

bool exists(hid_t loc, const std::string& path);
bool has_attr(hid_t obj, const std::string& name);

// Names of the attributes of `obj`, in name order; whether one of them is a string.
std::vector<std::string> attr_names(hid_t obj, const std::string& context);
bool attr_is_string(hid_t obj, const std::string& name, const std::string& context);

void write_attr_string(hid_t obj, const std::string& name, const std::string& value);
void write_attr_int(hid_t obj, const std::string& name, int64_t value);
std::string read_attr_string(hid_t obj, const std::string& name, const std::string& context);
int64_t read_attr_int(hid_t obj, const std::string& name, const std::string& context);

// Creates a chunked, extendible 1-D or 2-D dataset of T with `n_cols` columns (0 = 1-D), zero rows.
Handle create_rows(hid_t loc, const std::string& path, hid_t type, int n_cols, hsize_t chunk_rows);

// Number of rows (first dimension) and of columns (second dimension, 0 for 1-D) of a dataset.
hsize_t n_rows(hid_t dset);
int n_cols(hid_t dset);

// Appends `n` rows of raw memory (`type`) at the end of `dset`.
void append_rows(hid_t dset, hid_t type, const void* data, hsize_t n);

// Reads rows [first, first + n) into `out` (must hold n * max(1, n_cols) elements).
void read_rows(hid_t dset, hid_t type, hsize_t first, hsize_t n, void* out,
               const std::string& context);

// Overwrites rows [first, first + n) (used for the per-block checksum tables).
void write_rows(hid_t dset, hid_t type, hsize_t first, hsize_t n, const void* data);

// Writes a whole 1-D array of UTF-8 strings, fixed length (the longest), NUL-padded. Reads one
// back: at most max_count entries of at most 4096 bytes; variable-length strings only when
// allow_variable (files of format version 1). A missing or malformed array is a DataError.
void write_strings(hid_t loc, const std::string& path, const std::vector<std::string>& values);
std::vector<std::string> read_strings(hid_t loc, const std::string& path, size_t max_count,
                                      bool allow_variable, const std::string& context);

// Writes `text` as a whole 1-D array of bytes (uint8), replacing one of that name: metadata that
// grows with the data (an attribute holds at most 64 KiB). Reads one back: a DataError when it is
// missing, not a 1-D array of 1-byte integers, or longer than max_bytes.
void write_text(hid_t loc, const std::string& path, const std::string& text);
std::string read_text(hid_t loc, const std::string& path, size_t max_bytes,
                      const std::string& context);

}  // namespace ddgnn::h5
