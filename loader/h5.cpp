// HDF5 RAII handles and helpers; turns HDF5 error stacks into one ddgnn::DataError line.
#include "loader/h5.h"

#include <cstring>

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

void fail(const char* expr, const char* file, int line, const std::string& context) {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, &detail);
  H5Eclear2(H5E_DEFAULT);
  std::string msg =
      context + ": HDF5 call `" + expr + "` failed at " + file + ":" + std::to_string(line);
  if (!detail.empty()) msg += ": " + detail;
  throw DataError(msg,
                  "check that the file exists, is readable, and was written by `ddgnn convert`");
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

std::string read_attr_string(hid_t obj, const std::string& name, const std::string& context) {
  Handle attr(H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT), context));
  Handle type(H5_CHECK(H5Aget_type(attr), context));
  if (H5Tget_class(type) != H5T_STRING)
    throw DataError(context + ": attribute '" + name + "' is not a string");
  if (H5Tis_variable_str(type) > 0) {
    char* s = nullptr;
    Handle mem(H5_CHECK(H5Tcopy(H5T_C_S1), context));
    H5_CHECK(H5Tset_size(mem, H5T_VARIABLE), context);
    H5_CHECK(H5Tset_cset(mem, H5Tget_cset(type)), context);
    H5_CHECK(H5Aread(attr, mem, &s), context);
    std::string out = s ? s : "";
    H5free_memory(s);
    return out;
  }
  const size_t n = H5Tget_size(type);
  std::string out(n, '\0');
  H5_CHECK(H5Aread(attr, type, out.data()), context);
  out.resize(std::strlen(out.c_str()));
  return out;
}

int64_t read_attr_int(hid_t obj, const std::string& name, const std::string& context) {
  Handle attr(H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT), context));
  Handle type(H5_CHECK(H5Aget_type(attr), context));
  if (H5Tget_class(type) != H5T_INTEGER)
    throw DataError(context + ": attribute '" + name + "' is not an integer");
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

hsize_t n_rows(hid_t dset) {
  Handle space(H5_CHECK(H5Dget_space(dset), "reading a dataset's shape"));
  hsize_t dims[2] = {0, 0};
  H5_CHECK(H5Sget_simple_extent_dims(space, dims, nullptr), "reading a dataset's shape");
  return dims[0];
}

int n_cols(hid_t dset) {
  Handle space(H5_CHECK(H5Dget_space(dset), "reading a dataset's shape"));
  hsize_t dims[2] = {0, 0};
  int rank = H5_CHECK(H5Sget_simple_extent_dims(space, dims, nullptr), "reading a dataset's shape");
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
  const int rank = H5_CHECK(H5Sget_simple_extent_dims(file_space, dims, nullptr), ctx);
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
  const std::string ctx = "writing string array '" + path + "'";
  if (exists(loc, path)) H5_CHECK(H5Ldelete(loc, path.c_str(), H5P_DEFAULT), ctx);
  Handle type(H5_CHECK(H5Tcopy(H5T_C_S1), ctx));
  H5_CHECK(H5Tset_size(type, H5T_VARIABLE), ctx);
  H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8), ctx);
  hsize_t dims[1] = {values.size()};
  Handle space(H5_CHECK(H5Screate_simple(1, dims, nullptr), ctx));
  Handle dset(H5_CHECK(
      H5Dcreate2(loc, path.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), ctx));
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  if (!ptrs.empty())
    H5_CHECK(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), ctx);
}

std::vector<std::string> read_strings(hid_t loc, const std::string& path,
                                      const std::string& context) {
  Handle dset(H5_CHECK(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), context));
  const hsize_t n = n_rows(dset);
  std::vector<std::string> out;
  if (n == 0) return out;
  Handle type(H5_CHECK(H5Tcopy(H5T_C_S1), context));
  H5_CHECK(H5Tset_size(type, H5T_VARIABLE), context);
  H5_CHECK(H5Tset_cset(type, H5T_CSET_UTF8), context);
  std::vector<char*> ptrs(n, nullptr);
  H5_CHECK(H5Dread(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), context);
  for (char* p : ptrs) {
    out.emplace_back(p ? p : "");
    H5free_memory(p);
  }
  return out;
}

}  // namespace ddgnn::h5
