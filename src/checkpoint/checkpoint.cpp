#include "mpiddp/checkpoint/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "mpiddp/common/error.hpp"
#include "mpiddp/data/hdf5_util.hpp"

namespace mpiddp {
namespace {

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) throw RuntimeError(path + ": cannot open for fsync (" + std::strerror(errno) + ")");
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) throw RuntimeError(path + ": fsync failed (" + std::strerror(saved) + ")");
}

void publish(const std::string& temp, const std::string& final_path, const std::string& dir) {
  fsync_path(temp, false);
  if (std::rename(temp.c_str(), final_path.c_str()) != 0)
    throw RuntimeError(final_path + ": rename failed (" + std::strerror(errno) + ")");
  fsync_path(dir, true);
}

void write_array(hid_t group, const std::string& name, const float* data, const std::vector<std::size_t>& shape,
                 const std::string& path) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  if (dims.empty()) dims.push_back(1);
  h5::Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  h5::Handle dataset(
      h5::check_id<RuntimeError>(H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                 path + ": cannot create dataset " + name),
      H5Dclose);
  h5::check<RuntimeError>(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                          path + ": cannot write dataset " + name + " (disk full?)");
}

h5::Handle make_group(hid_t parent, const char* name, const std::string& path) {
  return h5::Handle(h5::check_id<RuntimeError>(H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                               path + ": cannot create group " + name),
                    H5Gclose);
}

}  // namespace

std::string write_checkpoint(const std::string& dir, const std::string& name, const ParameterStore& params,
                             Optimizer& optimizer, const CheckpointMeta& meta) {
  h5::silence_errors();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(dir + ": cannot create checkpoint directory (" + ec.message() + ")");
  const std::string path = dir + "/" + name;
  const std::string temp = path + ".tmp";
  {
    h5::Handle file(h5::check_id<RuntimeError>(H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                                               temp + ": cannot create checkpoint"),
                    H5Fclose);
    h5::write_int_attribute(file.get(), "format_version", kCheckpointFormat);
    h5::write_string_attribute(file.get(), "mpiddp_version", MPIDDP_VERSION);
    h5::write_int_attribute(file.get(), "epoch", meta.epoch);
    h5::write_int_attribute(file.get(), "global_step", meta.global_step);
    h5::write_int_attribute(file.get(), "world_size", meta.world_size);
    h5::write_int_attribute(file.get(), "seed", static_cast<std::int64_t>(meta.seed));
    h5::write_string_attribute(file.get(), "config", meta.config_ini);

    h5::Handle param_group = make_group(file.get(), "params", path);
    for (const auto& p : params.list())
      write_array(param_group.get(), p.name, params.values() + p.offset, p.shape, path);

    h5::Handle optim_group = make_group(file.get(), "optimizer", path);
    h5::write_string_attribute(optim_group.get(), "name", optimizer.name());
    h5::write_int_attribute(optim_group.get(), "step", optimizer.steps_taken());
    for (const auto& state : optimizer.state()) {
      if (state.values->empty()) continue;  // not created yet (no step taken, or no momentum)
      h5::Handle g = make_group(optim_group.get(), state.name.c_str(), path);
      for (const auto& p : params.list()) write_array(g.get(), p.name, state.values->data() + p.offset, p.shape, path);
    }
    h5::check<RuntimeError>(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), temp + ": flush failed");
  }
  publish(temp, path, dir);

  const std::string latest = dir + "/latest";
  const std::string latest_temp = latest + ".tmp";
  {
    std::FILE* f = std::fopen(latest_temp.c_str(), "w");
    if (!f) throw RuntimeError(latest_temp + ": cannot write (" + std::strerror(errno) + ")");
    const bool ok = std::fprintf(f, "%s\n", name.c_str()) > 0;
    if (std::fclose(f) != 0 || !ok) throw RuntimeError(latest_temp + ": write failed");
  }
  publish(latest_temp, latest, dir);
  return path;
}

CheckpointMeta read_checkpoint(const std::string& path, ParameterStore& params) {
  h5::silence_errors();
  h5::Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file) throw InputError(path + ": not a readable HDF5 checkpoint");
  const std::int64_t format = h5::read_int_attribute(file.get(), "format_version", path);
  if (format != kCheckpointFormat)
    throw InputError(path + ": checkpoint format " + std::to_string(format) + " is not supported (expected " +
                     std::to_string(kCheckpointFormat) + ")");
  CheckpointMeta meta;
  meta.epoch = h5::read_int_attribute(file.get(), "epoch", path);
  meta.global_step = h5::read_int_attribute(file.get(), "global_step", path);
  meta.world_size = h5::read_int_attribute(file.get(), "world_size", path);
  meta.seed = static_cast<std::uint64_t>(h5::read_int_attribute(file.get(), "seed", path));
  meta.config_ini = h5::read_string_attribute(file.get(), "config", path);
  std::vector<float> staged(params.total());
  for (const auto& p : params.list()) {
    const std::string name = "params/" + p.name;
    h5::Handle dataset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
    if (!dataset) throw InputError(path + ": no parameter '" + p.name + "' (checkpoint of another model?)");
    h5::Handle space(H5Dget_space(dataset.get()), H5Sclose);
    if (static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.get())) != p.count)
      throw InputError(path + ": parameter '" + p.name + "' has a different shape than the model");
    h5::check<InputError>(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, staged.data() + p.offset),
                          path + ": cannot read parameter '" + p.name + "'");
  }
  std::copy(staged.begin(), staged.end(), params.values());  // all or nothing
  return meta;
}

}  // namespace mpiddp
