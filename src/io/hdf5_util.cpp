#include "io/hdf5_util.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <mutex>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"

namespace mpiddp::h5 {

void silence_errors() {
  thread_local bool silenced = false;
  if (!silenced) H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  silenced = true;
}

std::mutex& library_mutex() {
  static std::mutex mutex;
  return mutex;
}

namespace {
struct StorageVisit {
  std::string where, problem;
  std::size_t objects = 0;
};

// HDF5's walk costs more than linearly in the depth (each object is opened by its
// whole path): 4000 nested groups took minutes. mpiddp's files nest 2 deep.
constexpr std::size_t kMaxDepth = 64;
constexpr std::size_t kMaxPathBytes = 4096;  // long names cost the same way
constexpr std::size_t kMaxObjects = 1000000;

const char* link_kind(H5L_type_t type) {
  if (type == H5L_TYPE_SOFT) return "a soft link";
  if (type == H5L_TYPE_EXTERNAL) return "an external link (into another file)";
  return "a user-defined link";
}

herr_t check_link(hid_t group, const char* name, const H5L_info_t* info, void* data) {
  auto& visit = *static_cast<StorageVisit*>(data);
  const std::size_t length = std::strlen(name);
  if (static_cast<std::size_t>(std::count(name, name + length, '/')) >= kMaxDepth) {
    visit.problem = visit.where + ": groups nested more than " + std::to_string(kMaxDepth) + " deep; refused";
    return 1;
  }
  if (length > kMaxPathBytes) {
    visit.problem = visit.where + ": an object's path is over " + std::to_string(kMaxPathBytes) + " bytes; refused";
    return 1;
  }
  if (++visit.objects > kMaxObjects) {
    visit.problem = visit.where + ": more than " + std::to_string(kMaxObjects) + " objects; refused";
    return 1;
  }
  const std::string object = visit.where + ": '" + printable(name) + "'";
  if (info->type != H5L_TYPE_HARD) {
    visit.problem = object + " is " + link_kind(info->type) + "; mpiddp reads only objects stored in the file itself";
    return 1;
  }
  Handle opened(H5Oopen(group, name, H5P_DEFAULT), H5Oclose);
  if (!opened) {
    visit.problem = object + ": cannot open (damaged?)";
    return 1;
  }
  if (H5Iget_type(opened.get()) != H5I_DATASET) return 0;
  Handle plist(H5Dget_create_plist(opened.get()), H5Pclose);
  if (!plist) {
    visit.problem = object + ": cannot read its storage layout (damaged?)";
    return 1;
  }
  if (H5Pget_layout(plist.get()) == H5D_VIRTUAL)
    visit.problem = object + " is a virtual dataset (its data lies in other files); refused";
  else if (H5Pget_external_count(plist.get()) != 0)
    visit.problem = object + " keeps its data in external files; refused";
  return visit.problem.empty() ? 0 : 1;
}
}  // namespace

void refuse_outside_storage(hid_t file, const std::string& where) {
  StorageVisit visit{where, {}};
  const herr_t rc = H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, check_link, &visit);
  if (!visit.problem.empty()) throw InputError(visit.problem);
  if (rc < 0) throw InputError(where + ": cannot list its objects (damaged?)");
}

std::int64_t file_bytes(hid_t file) {
  void* handle = nullptr;
  struct stat info {};
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || !handle ||
      ::fstat(*static_cast<const int*>(handle), &info) != 0)
    return -1;
  return static_cast<std::int64_t>(info.st_size);
}

void refuse_shrunk(hid_t file, std::int64_t bytes_at_open, const std::string& path) {
  if (bytes_at_open >= 0 && file_bytes(file) < bytes_at_open)
    throw InputError(path + ": shard was truncated while training");
}

Handle open_read_only(const std::string& path, const std::string& where, hid_t access) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    throw InputError(where + ": not a regular file (" +
                     (S_ISDIR(info.st_mode) ? "a directory" : S_ISFIFO(info.st_mode) ? "a FIFO" : "a device or socket") +
                     "); mpiddp reads HDF5 files");
  return Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, access), H5Fclose);
}

bool has_attribute(hid_t object, const char* name) { return H5Aexists(object, name) > 0; }

std::vector<std::string> link_names(hid_t group, const std::string& where) {
  H5G_info_t info{};
  check<InputError>(H5Gget_info(group, &info), where + ": cannot list a group (damaged?)");
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (size < 0) throw InputError(where + ": cannot read a member name (damaged?)");
    std::string name(static_cast<std::size_t>(size) + 1, '\0');
    H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT);
    name.resize(static_cast<std::size_t>(size));
    names.push_back(name);
  }
  return names;
}

namespace {
// The attribute `name` of `object`, open, after checking what it holds: values of
// one of `classes` (H5T_INTEGER, ...), and, with `single`, exactly one of them
// (a scalar or a one-element array). Readers size their buffers from these checks:
// an attribute of two values read into one would write past it.
Handle open_attribute(hid_t object, const char* name, std::initializer_list<H5T_class_t> classes, const char* kind,
                      bool single, const std::string& where) {
  const std::string attribute = where + ": attribute '" + name + "'";
  Handle attr(check_id<InputError>(H5Aopen(object, name, H5P_DEFAULT), where + ": missing attribute '" + name + "'"),
              H5Aclose);
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  const H5T_class_t found = type ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  if (std::find(classes.begin(), classes.end(), found) == classes.end())
    throw InputError(attribute + " is not " + kind + " (damaged or edited file?)");
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  const hssize_t values = space ? H5Sget_simple_extent_npoints(space.get()) : -1;
  if (values < 0) throw InputError(attribute + ": cannot read its extent (damaged file?)");
  if (single && values != 1)
    throw InputError(attribute + " holds " + std::to_string(values) + " values, not one (damaged or edited file?)");
  return attr;
}

template <class T>
T read_scalar(hid_t object, const char* name, hid_t type, std::initializer_list<H5T_class_t> classes,
              const char* kind, const std::string& where) {
  Handle attr = open_attribute(object, name, classes, kind, true, where);
  T value{};
  check<InputError>(H5Aread(attr.get(), type, &value), where + ": cannot read attribute '" + name + "'");
  return value;
}
template <class T>
void write_scalar(hid_t object, const char* name, hid_t type, T value) {
  if (has_attribute(object, name)) H5Adelete(object, name);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(check_id<RuntimeError>(H5Acreate2(object, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                                     std::string("cannot create attribute ") + name),
              H5Aclose);
  check<RuntimeError>(H5Awrite(attr.get(), type, &value), std::string("cannot write attribute ") + name);
}
}  // namespace

double read_double_attribute(hid_t object, const char* name, const std::string& where) {
  return read_scalar<double>(object, name, H5T_NATIVE_DOUBLE, {H5T_FLOAT, H5T_INTEGER}, "a number", where);
}
// An integer attribute stored as a float (256.7) is refused, not truncated.
std::int64_t read_int_attribute(hid_t object, const char* name, const std::string& where) {
  return read_scalar<std::int64_t>(object, name, H5T_NATIVE_INT64, {H5T_INTEGER}, "an integer", where);
}
void write_double_attribute(hid_t object, const char* name, double value) {
  write_scalar(object, name, H5T_NATIVE_DOUBLE, value);
}
void write_int_attribute(hid_t object, const char* name, std::int64_t value) {
  write_scalar(object, name, H5T_NATIVE_INT64, value);
}

std::vector<std::int64_t> read_int_array_attribute(hid_t object, const char* name, const std::string& where) {
  Handle attr = open_attribute(object, name, {H5T_INTEGER}, "integers", false, where);
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  std::vector<std::int64_t> values(static_cast<std::size_t>(n > 0 ? n : 0));
  if (!values.empty())
    check<InputError>(H5Aread(attr.get(), H5T_NATIVE_INT64, values.data()),
                      where + ": cannot read attribute '" + name + "'");
  return values;
}

void write_int_array_attribute(hid_t object, const char* name, const std::vector<std::int64_t>& values) {
  if (has_attribute(object, name)) H5Adelete(object, name);
  const hsize_t n = values.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle attr(check_id<RuntimeError>(H5Acreate2(object, name, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                                     std::string("cannot create attribute ") + name),
              H5Aclose);
  check<RuntimeError>(H5Awrite(attr.get(), H5T_NATIVE_INT64, values.data()),
                      std::string("cannot write attribute ") + name);
}

void write_string_attribute(hid_t object, const char* name, const std::string& value) {
  if (has_attribute(object, name)) H5Adelete(object, name);
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), value.empty() ? 1 : value.size());
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(check_id<RuntimeError>(H5Acreate2(object, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                                     std::string("cannot create attribute ") + name),
              H5Aclose);
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  check<RuntimeError>(H5Awrite(attr.get(), type.get(), padded.data()), std::string("cannot write attribute ") + name);
}

std::string read_string_attribute(hid_t object, const char* name, const std::string& where) {
  Handle attr = open_attribute(object, name, {H5T_STRING}, "text", true, where);
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tis_variable_str(type.get()) > 0) throw InputError(where + ": attribute '" + name + "' is a variable string");
  const std::size_t size = H5Tget_size(type.get());
  std::string value(size, '\0');
  check<InputError>(H5Aread(attr.get(), type.get(), value.data()), where + ": cannot read attribute '" + name + "'");
  // NULs pad a fixed-size string at its end; one before more text would cut it
  // short without a word (the rest of a kernel-choice list, say).
  const std::size_t end = value.find('\0');
  if (end != std::string::npos && value.find_first_not_of('\0', end) != std::string::npos)
    throw InputError(where + ": attribute '" + name + "' holds a NUL character inside its text (damaged or edited file?)");
  value.resize(end == std::string::npos ? value.size() : end);
  return value;
}

}  // namespace mpiddp::h5
