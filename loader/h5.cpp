// HDF5 RAII handles and helpers; turns HDF5 error stacks into one ddgnn::DataError line.
#include "loader/h5.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <spdlog/spdlog.h>

#include "core/error.h"

namespace ddgnn::h5 {

namespace {

herr_t innermost(unsigned n, const H5E_error2_t* err, void* client) {
  auto* out = static_cast<std::string*>(client);
  if (n == 0 && err->desc) *out = err->desc;  // the innermost (most specific) entry is first
  return 0;
}

}  // namespace

void silence_errors() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

namespace {
std::atomic<bool> g_failed_close{false};
}  // namespace

void take_over_library_exit() {
  if (H5dont_atexit() < 0) return;  // the library already started: its own clean-up stays
  std::atexit([] {
    if (!g_failed_close.load()) H5close();
  });
}

void note_failed_close() {
  g_failed_close = true;
}

void fail(const char* expr, const char* file, int line, const std::string& context) {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, &detail);
  H5Eclear2(H5E_DEFAULT);
  // The call and the source line are for whoever debugs ddgnn, not for the user of a bad file.
  spdlog::debug("{}: HDF5 call `{}` failed at {}:{}: {}", context, expr, file, line, detail);
  throw DataError(context + ": the HDF5 library reports " +
                      (detail.empty() ? std::string("an error") : "'" + detail + "'"),
                  "check that the file exists, is readable, is not full, and was written by "
                  "`ddgnn convert` (run with --log-level debug for HDF5's details)");
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    m_id = other.m_id;
    other.m_id = H5I_INVALID_HID;
  }
  return *this;
}

void Handle::reset() {
  if (m_id >= 0) H5Idec_ref(m_id);  // works for every kind of id; never throws
  m_id = H5I_INVALID_HID;
}

template <>
hid_t native_type<uint8_t>() {
  return H5T_NATIVE_UINT8;
}
template <>
hid_t native_type<int32_t>() {
  return H5T_NATIVE_INT32;
}
template <>
hid_t native_type<int64_t>() {
  return H5T_NATIVE_INT64;
}
template <>
hid_t native_type<uint32_t>() {
  return H5T_NATIVE_UINT32;
}
template <>
hid_t native_type<double>() {
  return H5T_NATIVE_DOUBLE;
}
template <>
hid_t native_type<float>() {
  return H5T_NATIVE_FLOAT;
}

bool exists(hid_t loc, const std::string& path) {
  // Walk the path one link at a time: H5Lexists fails on a missing intermediate group.
  size_t pos = 0;
  while (true) {
    size_t slash = path.find('/', pos + 1);
    std::string prefix = path.substr(0, slash);
    if (H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
    pos = slash;
  }
}

bool has_attr(hid_t obj, const std::string& name) {
  return H5Aexists(obj, name.c_str()) > 0;
}

void write_attr_string(hid_t obj, const std::string& name, const std::string& value) {
  const std::string ctx = "writing attribute '" + name + "'";
  if (has_attr(obj, name)) H5_CHECK(H5Adelete(obj, name.c_str()), ctx);
  Handle type(H5_CHECK(H5Tcopy(H5T_C_S1), ctx));
  H5_CHECK(H5Tset_size(type, value.empty() ? 1 : value.size()), ctx);
  H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8), ctx);
  Handle space(H5_CHECK(H5Screate(H5S_SCALAR), ctx));
  Handle attr(H5_CHECK(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), ctx));
  const char* data = value.empty() ? "" : value.c_str();
  H5_CHECK(H5Awrite(attr, type, data), ctx);
}

void write_attr_int(hid_t obj, const std::string& name, int64_t value) {
  const std::string ctx = "writing attribute '" + name + "'";
  if (has_attr(obj, name)) H5_CHECK(H5Adelete(obj, name.c_str()), ctx);
  Handle space(H5_CHECK(H5Screate(H5S_SCALAR), ctx));
  Handle attr(
      H5_CHECK(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), ctx));
  H5_CHECK(H5Awrite(attr, H5T_NATIVE_INT64, &value), ctx);
}

namespace {

const char* const kNotOurs =
    "the file is corrupted or was not written by `ddgnn convert`; convert the input again";

void require_attr(hid_t obj, const std::string& name, const std::string& context) {
  if (!has_attr(obj, name))
    throw DataError(context + ": attribute '" + name + "' is missing",
                    "the file is incomplete or was not written by `ddgnn convert`; convert the "
                    "input again");
}

// The writer stores every attribute as one value in a scalar dataspace: anything else (an array
// read into one value would overrun it) is refused before it is read.
void require_scalar(hid_t attr, const std::string& name, const std::string& context) {
  Handle space(H5_CHECK(H5Aget_space(attr), context));
  const H5S_class_t kind = H5Sget_simple_extent_type(space);
  if (kind == H5S_SCALAR) return;
  const hssize_t n = kind == H5S_SIMPLE ? H5Sget_simple_extent_npoints(space) : 0;
  throw DataError(context + ": attribute '" + name + "' holds " +
                      (kind == H5S_SIMPLE ? "an array of " + std::to_string(n) + " values"
                                          : std::string("no value")) +
                      " where one value is written",
                  kNotOurs);
}

// Longest string attribute read (`sources` grows by one entry an input file).
constexpr size_t kMaxAttrString = size_t(256) << 20;

}  // namespace

std::vector<std::string> attr_names(hid_t obj, const std::string& context) {
  std::vector<std::string> names;
  hsize_t idx = 0;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  H5_CHECK(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &names), context);
  return names;
}

bool attr_is_string(hid_t obj, const std::string& name, const std::string& context) {
  Handle attr(H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT), context));
  Handle type(H5_CHECK(H5Aget_type(attr), context));
  return H5Tget_class(type) == H5T_STRING;
}

std::string read_attr_string(hid_t obj, const std::string& name, const std::string& context) {
  require_attr(obj, name, context);
  Handle attr(H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT), context));
  Handle type(H5_CHECK(H5Aget_type(attr), context));
  if (H5Tget_class(type) != H5T_STRING)
    throw DataError(context + ": attribute '" + name + "' is not a string", kNotOurs);
  require_scalar(attr, name, context);
  // The writer stores fixed-length strings only: a variable-length one is read through a heap
  // reference that libhdf5 follows unchecked (a damaged one crashes it), so it is never read.
  if (H5Tis_variable_str(type) != 0)
    throw DataError(context + ": attribute '" + name +
                        "' is a variable-length string, which `ddgnn convert` never writes",
                    kNotOurs);
  const size_t n = H5Tget_size(type);
  if (n == 0 || n > kMaxAttrString)
    throw DataError(context + ": attribute '" + name + "' is a string of " + std::to_string(n) +
                        " bytes (1.." + std::to_string(kMaxAttrString) + " are read)",
                    kNotOurs);
  std::string out(n, '\0');
  H5_CHECK(H5Aread(attr, type, out.data()), context);
  out.resize(std::strlen(out.c_str()));
  return out;
}

int64_t read_attr_int(hid_t obj, const std::string& name, const std::string& context) {
  require_attr(obj, name, context);
  Handle attr(H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT), context));
  Handle type(H5_CHECK(H5Aget_type(attr), context));
  if (H5Tget_class(type) != H5T_INTEGER || H5Tget_size(type) > sizeof(int64_t))
    throw DataError(context + ": attribute '" + name + "' is not an integer of 8 bytes or fewer",
                    kNotOurs);
  require_scalar(attr, name, context);
  int64_t v = 0;
  H5_CHECK(H5Aread(attr, H5T_NATIVE_INT64, &v), context);
  return v;
}

Handle create_rows(hid_t loc, const std::string& path, hid_t type, int n_cols, hsize_t chunk_rows) {
  const std::string ctx = "creating dataset '" + path + "'";
  const int rank = n_cols > 0 ? 2 : 1;
  hsize_t dims[2] = {0, hsize_t(n_cols)};
  hsize_t maxdims[2] = {H5S_UNLIMITED, hsize_t(n_cols)};
  hsize_t chunk[2] = {chunk_rows, hsize_t(n_cols)};
  Handle space(H5_CHECK(H5Screate_simple(rank, dims, maxdims), ctx));
  Handle dcpl(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), ctx));
  H5_CHECK(H5Pset_chunk(dcpl, rank, chunk), ctx);
  Handle lcpl(H5_CHECK(H5Pcreate(H5P_LINK_CREATE), ctx));
  H5_CHECK(H5Pset_create_intermediate_group(lcpl, 1), ctx);
  return Handle(H5_CHECK(H5Dcreate2(loc, path.c_str(), type, space, lcpl, dcpl, H5P_DEFAULT), ctx));
}

namespace {

// The extent of a dataspace of rank 1 or 2 (the only ranks the writer makes), its rank checked
// before the dimensions are copied (a rank of 32 written into two would overrun them).
int dims_of(hid_t space, hsize_t (&dims)[2], hid_t dset, const std::string& context) {
  const int rank = H5_CHECK(H5Sget_simple_extent_ndims(space), context);
  if (rank < 1 || rank > 2) {
    char name[256] = "";
    H5Iget_name(dset, name, sizeof name);
    throw DataError(context + ": array '" + (name[0] == '/' ? name + 1 : name) + "' has rank " +
                        std::to_string(rank) + " (1 or 2 are written)",
                    kNotOurs);
  }
  dims[1] = 0;
  H5_CHECK(H5Sget_simple_extent_dims(space, dims, nullptr), context);
  return rank;
}

}  // namespace

hsize_t n_rows(hid_t dset) {
  const std::string ctx = "reading a dataset's shape";
  Handle space(H5_CHECK(H5Dget_space(dset), ctx));
  hsize_t dims[2] = {0, 0};
  dims_of(space, dims, dset, ctx);
  return dims[0];
}

int n_cols(hid_t dset) {
  const std::string ctx = "reading a dataset's shape";
  Handle space(H5_CHECK(H5Dget_space(dset), ctx));
  hsize_t dims[2] = {0, 0};
  const int rank = dims_of(space, dims, dset, ctx);
  if (rank == 2 && dims[1] > hsize_t(std::numeric_limits<int>::max()))
    throw DataError(ctx + ": " + std::to_string(dims[1]) + " columns", kNotOurs);
  return rank == 2 ? int(dims[1]) : 0;
}

void append_rows(hid_t dset, hid_t type, const void* data, hsize_t n) {
  if (n == 0) return;
  const hsize_t old_rows = n_rows(dset);
  hsize_t new_dims[2] = {old_rows + n, hsize_t(n_cols(dset))};
  H5_CHECK(H5Dset_extent(dset, new_dims), "appending rows");
  write_rows(dset, type, old_rows, n, data);
}

static void select_rows(hid_t dset, hsize_t first, hsize_t n, Handle& file_space, Handle& mem_space,
                        const std::string& ctx) {
  file_space = Handle(H5_CHECK(H5Dget_space(dset), ctx));
  hsize_t dims[2] = {0, 0};
  const int rank = dims_of(file_space, dims, dset, ctx);
  if (first + n > dims[0])
    throw DataError(ctx + ": rows " + std::to_string(first) + ".." + std::to_string(first + n) +
                        " are past the end (" + std::to_string(dims[0]) + " rows)",
                    "the file is truncated or its offset table is corrupted");
  hsize_t start[2] = {first, 0};
  hsize_t count[2] = {n, rank == 2 ? dims[1] : 1};
  H5_CHECK(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, nullptr, count, nullptr), ctx);
  mem_space = Handle(H5_CHECK(H5Screate_simple(rank, count, nullptr), ctx));
}

void read_rows(hid_t dset, hid_t type, hsize_t first, hsize_t n, void* out,
               const std::string& context) {
  if (n == 0) return;
  Handle file_space, mem_space;
  select_rows(dset, first, n, file_space, mem_space, context);
  H5_CHECK(H5Dread(dset, type, mem_space, file_space, H5P_DEFAULT, out), context);
}

void write_rows(hid_t dset, hid_t type, hsize_t first, hsize_t n, const void* data) {
  if (n == 0) return;
  const std::string ctx = "writing rows";
  Handle file_space, mem_space;
  select_rows(dset, first, n, file_space, mem_space, ctx);
  H5_CHECK(H5Dwrite(dset, type, mem_space, file_space, H5P_DEFAULT, data), ctx);
}

void write_strings(hid_t loc, const std::string& path, const std::vector<std::string>& values) {
  // Fixed-length, NUL-padded: reading them back needs no pointers from the file (a crafted
  // variable-length string can make libhdf5 itself read out of bounds).
  const std::string ctx = "writing string array '" + path + "'";
  if (exists(loc, path)) H5_CHECK(H5Ldelete(loc, path.c_str(), H5P_DEFAULT), ctx);
  size_t width = 1;
  for (const auto& v : values) width = std::max(width, v.size());
  Handle type(H5_CHECK(H5Tcopy(H5T_C_S1), ctx));
  H5_CHECK(H5Tset_size(type, width), ctx);
  H5_CHECK(H5Tset_strpad(type, H5T_STR_NULLPAD), ctx);
  H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8), ctx);
  hsize_t dims[1] = {values.size()};
  Handle space(H5_CHECK(H5Screate_simple(1, dims, nullptr), ctx));
  Handle dset(H5_CHECK(
      H5Dcreate2(loc, path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), ctx));
  std::vector<char> buf(values.size() * width, '\0');
  for (size_t i = 0; i < values.size(); ++i)
    std::memcpy(buf.data() + i * width, values[i].data(), values[i].size());
  if (!values.empty())
    H5_CHECK(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), ctx);
}

std::vector<std::string> read_strings(hid_t loc, const std::string& path, size_t max_count,
                                      bool allow_variable, const std::string& context) {
  const std::string ctx = context + ": string array '" + path + "'";
  if (!exists(loc, path))
    throw DataError(ctx + " is missing", "the file is incomplete; convert the input again");
  Handle dset(H5_CHECK(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), ctx));
  Handle file_type(H5_CHECK(H5Dget_type(dset), ctx));
  if (H5Tget_class(file_type) != H5T_STRING)
    throw DataError(ctx + " does not hold strings", "the file is corrupted; convert it again");
  const hsize_t n = n_rows(dset);
  if (n > max_count)
    throw DataError(ctx + " has " + std::to_string(n) + " entries, more than the " +
                        std::to_string(max_count) + " possible",
                    "the file is corrupted; convert it again");
  std::vector<std::string> out;
  if (n == 0) return out;
  if (H5Tis_variable_str(file_type) > 0) {
    if (!allow_variable)
      throw DataError(ctx +
                          " holds variable-length strings, which this format version does not "
                          "write",
                      "the file is corrupted or was written by another tool; convert it again");
    Handle type(H5_CHECK(H5Tcopy(H5T_C_S1), ctx));
    H5_CHECK(H5Tset_size(type, H5T_VARIABLE), ctx);
    H5_CHECK(H5Tset_cset(type, H5Tget_cset(file_type)), ctx);
    std::vector<char*> ptrs(n, nullptr);
    H5_CHECK(H5Dread(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), ctx);
    for (char* p : ptrs) {
      out.emplace_back(p ? p : "");
      H5free_memory(p);
    }
    return out;
  }
  const size_t width = H5Tget_size(file_type);
  constexpr size_t kMaxWidth = 4096;
  if (width == 0 || width > kMaxWidth)
    throw DataError(ctx + " has strings of " + std::to_string(width) + " bytes (at most " +
                        std::to_string(kMaxWidth) + ")",
                    "the file is corrupted; convert it again");
  Handle type(H5_CHECK(H5Tcopy(H5T_C_S1), ctx));
  H5_CHECK(H5Tset_size(type, width), ctx);
  H5_CHECK(H5Tset_strpad(type, H5T_STR_NULLPAD), ctx);
  H5_CHECK(H5Tset_cset(type, H5Tget_cset(file_type)), ctx);
  std::vector<char> buf(n * width, '\0');
  H5_CHECK(H5Dread(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), ctx);
  for (hsize_t i = 0; i < n; ++i) {
    const char* s = buf.data() + i * width;
    out.emplace_back(s, strnlen(s, width));
  }
  return out;
}

void write_text(hid_t loc, const std::string& path, const std::string& text) {
  const std::string ctx = "writing array '" + path + "'";
  if (exists(loc, path)) H5_CHECK(H5Ldelete(loc, path.c_str(), H5P_DEFAULT), ctx);
  Handle dset = create_rows(loc, path, H5T_NATIVE_UINT8, 0, 1 << 16);
  append_rows(dset, H5T_NATIVE_UINT8, text.data(), text.size());
}

std::string read_text(hid_t loc, const std::string& path, size_t max_bytes,
                      const std::string& context) {
  const std::string ctx = context + ": array '" + path + "'";
  if (!exists(loc, path))
    throw DataError(ctx + " is missing", "the file is incomplete; convert the input again");
  Handle dset(H5_CHECK(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), ctx));
  Handle type(H5_CHECK(H5Dget_type(dset), ctx));
  if (H5Tget_class(type) != H5T_INTEGER || H5Tget_size(type) != 1 || n_cols(dset) != 0)
    throw DataError(ctx + " is not a 1-D array of bytes", kNotOurs);
  const hsize_t n = n_rows(dset);
  if (n > max_bytes)
    throw DataError(ctx + " holds " + std::to_string(n) + " bytes, more than the " +
                        std::to_string(max_bytes) + " it can",
                    kNotOurs);
  std::string text(size_t(n), '\0');
  read_rows(dset, H5T_NATIVE_UINT8, 0, n, text.data(), ctx);
  return text;
}

}  // namespace ddgnn::h5
