// `mpiddp inspect checkpoint FILE`: what a checkpoint holds, one line per array
// with its shape and a checksum of its bytes, so two runs' weights can be
// compared with `diff` on any machine (no Python or HDF5 tools needed).
#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"
#include "io/hdf5_util.hpp"
#include "io/stored_extent.hpp"

namespace mpiddp {
namespace {

// FNV-1a, 64 bit: equal bytes give equal sums; any change almost surely shows.
std::uint64_t fnv1a(const void* data, std::size_t bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 0x100000001b3ULL;
  return hash;
}

struct ArraySummary {
  std::vector<hsize_t> shape;
  std::uint64_t checksum = 0;
};

// The object-visiting API changed in HDF5 1.12.
#if H5_VERSION_GE(1, 12, 0)
using ObjectInfo = H5O_info2_t;
#define MPIDDP_H5OVISIT(file, fn, data) H5Ovisit3(file, H5_INDEX_NAME, H5_ITER_INC, fn, data, H5O_INFO_BASIC)
#else
using ObjectInfo = H5O_info_t;
#define MPIDDP_H5OVISIT(file, fn, data) H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, fn, data, H5O_INFO_BASIC)
#endif

struct Visit {
  std::string path;
  std::map<std::string, ArraySummary> arrays;  // sorted by name: stable output
  std::string problem;                         // why the visit stopped, if it did
};

herr_t collect(hid_t group, const char* name, const ObjectInfo* info, void* out) {
  if (info->type != H5O_TYPE_DATASET || std::string(name) == ".") return 0;
  auto& visit = *static_cast<Visit*>(out);
  h5::Handle set(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose);
  h5::Handle space(H5Dget_space(set.get()), H5Sclose);
  if (!set || !space) return -1;
  ArraySummary summary;
  summary.shape.resize(static_cast<std::size_t>(std::max(0, H5Sget_simple_extent_ndims(space.get()))));
  H5Sget_simple_extent_dims(space.get(), summary.shape.data(), nullptr);
  // The buffer below is sized from the header: the file must hold that much.
  try {
    h5::check_plain_stored(set.get(), summary.shape, visit.path + ": dataset '" + name + "'");
  } catch (const InputError& e) {  // not through HDF5's C frames: stop the visit and rethrow after it
    visit.problem = e.what();
    return -1;
  }
  std::size_t count = 1;
  for (hsize_t d : summary.shape) count *= d;
  std::vector<float> values(count);
  if (count && H5Dread(set.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) return -1;
  summary.checksum = fnv1a(values.data(), values.size() * sizeof(float));
  visit.arrays[name] = std::move(summary);
  return 0;
}

}  // namespace

int inspect_checkpoint(const std::string& path) {
  h5::silence_errors();
  h5::Handle file = h5::open_read_only(path, path);
  if (!file) throw InputError(path + ": not a readable HDF5 file");
  h5::refuse_outside_storage(file.get(), path);
  for (const char* key : {"format_version", "epoch", "step_in_epoch", "global_step", "world_size", "seed",
                          "epoch_samples_done", "epoch_length", "elastic_resumes"})
    if (h5::has_attribute(file.get(), key))
      std::printf("%s = %lld\n", key, static_cast<long long>(h5::read_int_attribute(file.get(), key, path)));
  if (h5::has_attribute(file.get(), "run_id"))  // which run it belongs to (retention counts only that run's)
    std::printf("run_id = %s\n", printable(h5::read_string_attribute(file.get(), "run_id", path)).c_str());
  Visit visit{path, {}, {}};
  if (MPIDDP_H5OVISIT(file.get(), collect, &visit) < 0)
    throw InputError(visit.problem.empty() ? path + ": cannot read its arrays (damaged?)" : visit.problem);
  for (const auto& [name, a] : visit.arrays) {
    std::string shape;
    for (hsize_t d : a.shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
    // Names from the file: escapes and newlines as \xNN, never raw on the terminal (nor as a line of their own).
    std::printf("%s [%s] %016llx\n", printable(name).c_str(), shape.c_str(),
                static_cast<unsigned long long>(a.checksum));
  }
  return kExitOk;
}

}  // namespace mpiddp
