#include "mpiddp/checkpoint/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "mpiddp/common/error.hpp"
#include "format3.hpp"
#include "io/create_failure.hpp"
#include "io/hdf5_util.hpp"

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

std::string parent_of(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

void publish(const std::string& temp, const std::string& final_path) {
  fsync_path(temp, false);
  if (std::rename(temp.c_str(), final_path.c_str()) != 0)
    throw RuntimeError(final_path + ": rename failed (" + std::strerror(errno) + ")");
  fsync_path(parent_of(final_path), true);
}

void write_array(hid_t group, const std::string& name, const float* data, const std::vector<std::size_t>& shape,
                 const std::string& path) {
  // A shapeless array is stored as one element. Sized once and filled (not grown
  // by push_back), which also keeps GCC 12 from a false -Wfree-nonheap-object.
  std::vector<hsize_t> dims(std::max<std::size_t>(shape.size(), 1), 1);
  std::copy(shape.begin(), shape.end(), dims.begin());
  h5::Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  h5::Handle dataset(h5::check_id<RuntimeError>(H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space.get(),
                                                           H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                                path + ": cannot create dataset " + name + " (disk full?)"),
                     H5Dclose);
  h5::check<RuntimeError>(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                          path + ": cannot write dataset " + name + " (disk full?)");
}

h5::Handle make_group(hid_t parent, const char* name, const std::string& path) {
  return h5::Handle(h5::check_id<RuntimeError>(H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                               path + ": cannot create group " + name + " (disk full?)"),
                    H5Gclose);
}

// Reads group/<param name> for every parameter into `out` (same layout as the
// flat buffers), checking names and element counts.
void read_arrays(hid_t file, const std::string& group, const ParameterStore& params, std::vector<float>& out,
                 const std::string& path) {
  out.assign(params.total(), 0.0f);
  for (const auto& p : params.list()) {
    const std::string name = group + "/" + p.name;
    if (H5Lexists(file, group.c_str(), H5P_DEFAULT) <= 0 || H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0)
      throw InputError(path + ": no dataset '" + name + "' (a checkpoint of another model?)");
    h5::Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
    h5::Handle space(H5Dget_space(dataset.get()), H5Sclose);
    std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(0, H5Sget_simple_extent_ndims(space.get()))));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    const std::vector<std::size_t> shape(dims.begin(), dims.end());
    if (shape != p.shape) {
      auto text = [](const std::vector<std::size_t>& s) {
        std::string t;
        for (auto d : s) t += (t.empty() ? "" : "x") + std::to_string(d);
        return t;
      };
      throw InputError(path + ": '" + name + "' is " + text(shape) + " but the model's is " + text(p.shape) +
                       " (a checkpoint of another model?)");
    }
    h5::check<InputError>(
        H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data() + p.offset),
        path + ": cannot read '" + name + "' (damaged file?)");
  }
}

}  // namespace

void write_checkpoint(const std::string& path, const ParameterStore& params, Optimizer& optimizer,
                      const TrainingState& state) {
  h5::silence_errors();
  std::lock_guard<std::mutex> hdf5(h5::library_mutex());
  const std::string temp = path + ".tmp";
  try {
    h5::Handle file(H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!file) throw RuntimeError(temp + ": cannot create checkpoint (" + h5::why_not_creatable(temp) + ")");
    const hid_t f = file.get();
    h5::write_int_attribute(f, "format_version", kCheckpointFormat);
    h5::write_string_attribute(f, "mpiddp_version", MPIDDP_VERSION);
    h5::write_int_attribute(f, "epoch", state.epoch);
    h5::write_int_attribute(f, "step_in_epoch", state.step_in_epoch);
    h5::write_int_attribute(f, "global_step", state.global_step);
    h5::write_int_attribute(f, "micro_batches", static_cast<std::int64_t>(state.micro_batches));
    h5::write_int_attribute(f, "world_size", state.world_size);
    h5::write_int_attribute(f, "seed", static_cast<std::int64_t>(state.seed));
    h5::write_string_attribute(f, "config", state.config_ini);
    h5::write_int_attribute(f, "dataset_size", state.dataset_size);
    h5::write_int_attribute(f, "batch_size", state.batch_size);
    h5::write_int_attribute(f, "accumulate", state.accumulate);
    h5::write_int_attribute(f, "shuffle", state.shuffle ? 1 : 0);
    h5::write_int_attribute(f, "drop_last", state.drop_last ? 1 : 0);
    h5::write_int_attribute(f, "skipped_steps", state.skipped_steps);
    h5::write_double_attribute(f, "log_window_loss", state.log_window_loss);
    h5::write_double_attribute(f, "log_window_samples", state.log_window_samples);

    h5::Handle param_group = make_group(f, "params", path);
    for (const auto& p : params.list()) write_array(param_group.get(), p.name, params.host_values() + p.offset, p.shape, path);

    h5::Handle optim_group = make_group(f, "optimizer", path);
    h5::write_string_attribute(optim_group.get(), "name", optimizer.name());
    h5::write_int_attribute(optim_group.get(), "step", optimizer.steps_taken());
    for (const auto& buffer : optimizer.state()) {
      if (buffer.values->empty()) continue;  // not created yet (no step taken, or no momentum)
      h5::Handle g = make_group(optim_group.get(), buffer.name.c_str(), path);
      for (const auto& p : params.list()) write_array(g.get(), p.name, buffer.values->host().data() + p.offset, p.shape, path);
    }
    h5::check<RuntimeError>(H5Fflush(f, H5F_SCOPE_GLOBAL), temp + ": flush failed (disk full?)");
    // Closing writes the last metadata: close the groups, then check the file's
    // close instead of trusting a destructor (with open objects it would be deferred).
    param_group.reset();
    optim_group.reset();
    h5::check<RuntimeError>(H5Fclose(file.get()), temp + ": close failed (disk full?)");
    file.release();
  } catch (...) {
    std::remove(temp.c_str());  // a failed write leaves nothing behind; older checkpoints are untouched
    throw;
  }
  publish(temp, path);
}

TrainingState read_checkpoint(const std::string& path, ParameterStore& params, Optimizer& optimizer) {
  h5::silence_errors();
  std::lock_guard<std::mutex> hdf5(h5::library_mutex());
  if (::access(path.c_str(), R_OK) != 0) throw InputError(path + ": cannot read checkpoint (" + std::strerror(errno) + ")");
  h5::Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file) throw InputError(path + ": not a readable HDF5 checkpoint (truncated or damaged?)");
  const hid_t f = file.get();
  if (!h5::has_attribute(f, "format_version")) throw InputError(path + ": not an mpiddp checkpoint (no format_version)");
  const std::int64_t format = h5::read_int_attribute(f, "format_version", path);
  if (format < kOldestCheckpointFormat || format > kCheckpointFormat)
    throw InputError(path + ": checkpoint format version " + std::to_string(format) + " is not supported (this mpiddp " +
                     MPIDDP_VERSION + " reads versions " + std::to_string(kOldestCheckpointFormat) + " to " +
                     std::to_string(kCheckpointFormat) + ")");
  TrainingState state;
  state.epoch = h5::read_int_attribute(f, "epoch", path);
  state.step_in_epoch = h5::read_int_attribute(f, "step_in_epoch", path);
  state.global_step = h5::read_int_attribute(f, "global_step", path);
  state.micro_batches = static_cast<std::uint64_t>(h5::read_int_attribute(f, "micro_batches", path));
  state.world_size = h5::read_int_attribute(f, "world_size", path);
  state.seed = static_cast<std::uint64_t>(h5::read_int_attribute(f, "seed", path));
  state.config_ini = h5::read_string_attribute(f, "config", path);
  state.dataset_size = h5::read_int_attribute(f, "dataset_size", path);
  if (format == 3) {
    read_format3_sample_order(state, path);
  } else {
    state.batch_size = h5::read_int_attribute(f, "batch_size", path);
    state.accumulate = h5::read_int_attribute(f, "accumulate", path);
    state.shuffle = h5::read_int_attribute(f, "shuffle", path) != 0;
    state.drop_last = h5::read_int_attribute(f, "drop_last", path) != 0;
  }
  state.skipped_steps = h5::read_int_attribute(f, "skipped_steps", path);
  state.log_window_loss = h5::read_double_attribute(f, "log_window_loss", path);
  state.log_window_samples = h5::read_double_attribute(f, "log_window_samples", path);

  // Stage everything, then commit: a failure leaves the model untouched.
  std::vector<float> values;
  read_arrays(f, "params", params, values, path);
  h5::Handle optim_group(H5Gopen2(f, "optimizer", H5P_DEFAULT), H5Gclose);
  if (!optim_group) throw InputError(path + ": no optimizer state");
  const std::string name = h5::read_string_attribute(optim_group.get(), "name", path);
  if (parse_choice<OptimizerKind>(name) != optimizer.kind())
    throw InputError(path + ": optimizer state is " + name + " but optim.name is " + optimizer.name());
  const std::int64_t steps = h5::read_int_attribute(optim_group.get(), "step", path);
  auto buffers = optimizer.state();
  std::vector<std::vector<float>> staged(buffers.size());
  std::vector<bool> present(buffers.size(), false);
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const std::string group = "optimizer/" + buffers[i].name;
    if (H5Lexists(f, group.c_str(), H5P_DEFAULT) <= 0) continue;  // never created (e.g. no momentum)
    read_arrays(f, group, params, staged[i], path);
    present[i] = true;
  }
  std::copy(values.begin(), values.end(), params.host_values());
  params.push_values();
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (present[i]) buffers[i].values->host() = std::move(staged[i]);
    else buffers[i].values->host().clear();
    buffers[i].values->push();
  }
  optimizer.set_steps_taken(steps);
  return state;
}

// ---- the directory of a run's checkpoints ----

CheckpointDirectory::CheckpointDirectory(std::string dir, int keep, int keep_every_epochs)
    : dir_(std::move(dir)), keep_(keep), keep_every_epochs_(keep_every_epochs) {}

std::string CheckpointDirectory::save(const ParameterStore& params, Optimizer& optimizer, const TrainingState& state,
                                      bool epoch_boundary) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw InputError(dir_ + ": cannot create checkpoint directory (" + ec.message() + ")");
  char name[64];
  std::snprintf(name, sizeof(name), "ckpt-step-%09lld.h5", static_cast<long long>(state.global_step));
  const std::string path = dir_ + "/" + name;
  write_checkpoint(path, params, optimizer, state);

  // `latest` names the newest complete checkpoint; it is replaced atomically too.
  const std::string latest = dir_ + "/latest", temp = latest + ".tmp";
  std::FILE* out = std::fopen(temp.c_str(), "w");
  if (!out) throw RuntimeError(temp + ": cannot write (" + std::strerror(errno) + ")");
  const bool ok = std::fprintf(out, "%s\n", name) > 0;
  if (std::fclose(out) != 0 || !ok) throw RuntimeError(temp + ": write failed (disk full?)");
  publish(temp, latest);

  // Permanent keepers are hard links: no copy, and pruning the original keeps them.
  if (epoch_boundary && keep_every_epochs_ > 0 && state.epoch % keep_every_epochs_ == 0) {
    char keeper[64];
    std::snprintf(keeper, sizeof(keeper), "keep-epoch-%04lld.h5", static_cast<long long>(state.epoch));
    const std::string keeper_path = dir_ + "/" + keeper;
    std::filesystem::remove(keeper_path, ec);
    std::filesystem::create_hard_link(path, keeper_path, ec);
    if (ec) throw RuntimeError(keeper_path + ": cannot create (" + ec.message() + ")");
  }
  if (keep_ > 0) {
    const auto all = complete_checkpoints();
    for (std::size_t i = static_cast<std::size_t>(keep_); i < all.size(); ++i) std::filesystem::remove(all[i], ec);
  }
  return path;
}

void CheckpointDirectory::remove_stale_temporaries() const {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.substr(name.size() - 4) == ".tmp") std::filesystem::remove(entry.path(), ec);
  }
}

std::vector<std::string> CheckpointDirectory::complete_checkpoints() const {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-step-", 0) == 0 && name.size() > 3 && name.substr(name.size() - 3) == ".h5")
      found.push_back(entry.path().string());
  }
  std::sort(found.rbegin(), found.rend());  // zero-padded step numbers: newest first
  return found;
}

}  // namespace mpiddp
