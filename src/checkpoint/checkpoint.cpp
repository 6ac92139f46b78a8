#include "mpiddp/checkpoint/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <new>
#include <random>
#include <set>

#include "array_values.hpp"
#include "attribute_checks.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/fresh_file.hpp"
#include "mpiddp/common/printable.hpp"
#include "flat_range.hpp"
#include "mpiddp/data/sampler.hpp"
#include "mpiddp/nn/kernel_choices.hpp"
#include "format3.hpp"
#include "io/create_failure.hpp"
#include "io/hdf5_util.hpp"
#include "io/stored_extent.hpp"

namespace mpiddp {
namespace {

h5::Handle create_array(hid_t group, const std::string& name, const std::vector<std::size_t>& shape,
                        const std::string& path) {
  // A shapeless array is stored as one element. Sized once and filled (not grown
  // by push_back), which also keeps GCC 12 from a false -Wfree-nonheap-object.
  std::vector<hsize_t> dims(std::max<std::size_t>(shape.size(), 1), 1);
  std::copy(shape.begin(), shape.end(), dims.begin());
  h5::Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  return h5::Handle(h5::check_id<RuntimeError>(H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space.get(),
                                                          H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                               path + ": cannot create dataset " + name + " (disk full?)"),
                    H5Dclose);
}

void write_array(hid_t group, const std::string& name, const float* data, const std::vector<std::size_t>& shape,
                 const std::string& path) {
  h5::Handle dataset = create_array(group, name, shape, path);
  h5::check<RuntimeError>(H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
                          path + ": cannot write dataset " + name + " (disk full?)");
}

h5::Handle make_group(hid_t parent, const char* name, const std::string& path) {
  return h5::Handle(h5::check_id<RuntimeError>(H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                               path + ": cannot create group " + name + " (disk full?)"),
                    H5Gclose);
}

// Names must match both ways: an array the model lacks would be dropped silently.
void refuse_unknown_members(hid_t file, const std::string& group, const std::set<std::string>& known,
                            const std::string& path, const std::string& what) {
  h5::Handle g(H5Gopen2(file, group.c_str(), H5P_DEFAULT), H5Gclose);
  if (!g) throw InputError(path + ": '" + group + "' is not a group (damaged?)");
  for (const std::string& name : h5::link_names(g.get(), path))
    if (!known.count(name))
      throw InputError(path + ": '" + (group == "/" ? "" : group + "/") + name + "' is not " + what +
                       " (a checkpoint of another model?)");
}

// `total` zeroed floats to read group's arrays into; the model itself is in memory
// already, so running out here is named, not a bare std::bad_alloc.
void stage(std::vector<float>& out, std::size_t total, const std::string& group, const std::string& path) {
  try {
    out.assign(total, 0.0f);
  } catch (const std::bad_alloc&) {
    throw RuntimeError(path + ": out of memory while reading '" + group + "' (" + std::to_string(total) + " floats)");
  }
}

// Reads group/<param name> for every parameter into `out` (same layout as the
// flat buffers), checking names both ways and shapes.
// With read_data false only the names and shapes are checked (`out` is left as it is).
void read_arrays(hid_t file, const std::string& group, const std::vector<Parameter>& list, std::size_t total,
                 std::vector<float>& out, const std::string& path, const std::set<std::string>& also_known = {},
                 bool read_data = true) {
  std::set<std::string> names = also_known;
  for (const auto& p : list) names.insert(p.name);
  if (H5Lexists(file, group.c_str(), H5P_DEFAULT) > 0)
    refuse_unknown_members(file, group, names, path,
                           group == "buffers" ? "a buffer of this model" : "a parameter of this model");
  if (read_data) stage(out, total, group, path);
  for (const auto& p : list) {
    const std::string name = group + "/" + p.name;
    if (H5Lexists(file, group.c_str(), H5P_DEFAULT) <= 0 || H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0)
      throw InputError(path + ": no dataset '" + name + "' (a checkpoint of another model?)");
    h5::Handle dataset(H5Oopen(file, name.c_str(), H5P_DEFAULT), H5Oclose);
    if (!dataset || H5Iget_type(dataset.get()) != H5I_DATASET)
      throw InputError(path + ": '" + name + "' is not a dataset (damaged or edited file?)");
    h5::Handle type(H5Dget_type(dataset.get()), H5Tclose);
    if (!type || H5Tget_class(type.get()) != H5T_FLOAT)
      throw InputError(path + ": '" + name + "' does not hold floating-point values (damaged or edited file?)");
    const std::vector<hsize_t> dims = h5::dataset_extent(dataset.get());
    const std::vector<std::size_t> shape(dims.begin(), dims.end());
    if (shape != p.shape) {
      auto text = [](const std::vector<std::size_t>& s) {
        std::string t;
        for (auto d : s) t += (t.empty() ? "" : "x") + std::to_string(d);
        return t.empty() ? std::string("a scalar") : t;
      };
      throw InputError(path + ": '" + name + "' is " + text(shape) + " but the model's is " + text(p.shape) +
                       " (a checkpoint of another model?)");
    }
    if (!read_data) continue;
    // A dataset never written reads as its fill value: zeros (or any value the
    // file chose) in place of weights, without a word.
    h5::check_plain_stored(dataset.get(), dims, path + ": '" + name + "'");
    h5::check<InputError>(
        H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data() + p.offset),
        path + ": cannot read '" + name + "' (damaged file?)");
    check_array_values(out.data() + p.offset, p.count, 0, name, path);
  }
}

void read_arrays(hid_t file, const std::string& group, const ParameterStore& params, std::vector<float>& out,
                 const std::string& path) {
  read_arrays(file, group, params.list(), params.total(), out, path);
}

// /buffers: BatchNorm's running statistics (float32) and num_batches_tracked
// (an int64 scalar), under PyTorch's state_dict names. Only models with buffers have the group.
void write_buffers(hid_t file, const ParameterStore& params, const std::string& path) {
  if (params.buffer_list().empty() && params.counter_names().empty()) return;
  h5::Handle group = make_group(file, "buffers", path);
  for (const auto& b : params.buffer_list())
    write_array(group.get(), b.name, params.host_buffers() + b.offset, b.shape, path);
  for (std::size_t i = 0; i < params.counter_names().size(); ++i) {
    const std::string& name = params.counter_names()[i];
    h5::Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    h5::Handle dataset(h5::check_id<RuntimeError>(H5Dcreate2(group.get(), name.c_str(), H5T_STD_I64LE, space.get(),
                                                             H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                                                  path + ": cannot create dataset " + name + " (disk full?)"),
                       H5Dclose);
    const std::int64_t value = params.counter(i);
    h5::check<RuntimeError>(H5Dwrite(dataset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value),
                            path + ": cannot write dataset " + name + " (disk full?)");
  }
}

struct StagedBuffers {
  std::vector<float> values;
  std::vector<std::int64_t> counters;
};

// Reads /buffers, checking names both ways; an int64 counter must be a scalar (or one element) >= 0.
StagedBuffers read_buffers(hid_t file, const ParameterStore& params, const std::string& path) {
  StagedBuffers staged;
  const std::set<std::string> counters(params.counter_names().begin(), params.counter_names().end());
  read_arrays(file, "buffers", params.buffer_list(), params.buffer_total(), staged.values, path, counters);
  for (const std::string& counter : params.counter_names()) {
    const std::string name = "buffers/" + counter;
    if (H5Lexists(file, "buffers", H5P_DEFAULT) <= 0 || H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0)
      throw InputError(path + ": no dataset '" + name + "' (a checkpoint of another model?)");
    h5::Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose);
    h5::Handle space(H5Dget_space(dataset.get()), H5Sclose);
    std::int64_t value = -1;
    if (dataset) h5::check_plain_stored(dataset.get(), h5::dataset_extent(dataset.get()), path + ": '" + name + "'");
    if (H5Sget_simple_extent_npoints(space.get()) != 1 ||
        H5Dread(dataset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value) < 0 || value < 0)
      throw InputError(path + ": '" + name + "' is not one count of at least 0 (damaged or edited checkpoint)");
    staged.counters.push_back(value);
  }
  return staged;
}

void commit_buffers(StagedBuffers staged, ParameterStore& params) {
  std::copy(staged.values.begin(), staged.values.end(), params.host_buffers());
  params.push_buffers();
  for (std::size_t i = 0; i < staged.counters.size(); ++i) params.counter(i) = staged.counters[i];
}

}  // namespace

void write_checkpoint(const std::string& path, const ParameterStore& params, Optimizer& optimizer,
                      const TrainingState& state, StateShards* shards) {
  h5::silence_errors();
  std::lock_guard<std::mutex> hdf5(h5::library_mutex());
  const std::string temp = path + ".tmp";
  try {
    // A new file, never through a link left at the temporary's name.
    clear_path(temp);
    h5::Handle file(H5Fcreate(temp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
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
    h5::write_int_attribute(f, "epoch_samples_done", state.epoch_samples_done);
    h5::write_int_attribute(f, "epoch_length", state.epoch_length);
    h5::write_int_attribute(f, "epoch_shuffled", state.epoch_shuffled ? 1 : 0);
    h5::write_int_attribute(f, "elastic_resumes", state.elastic_resumes);
    h5::write_double_attribute(f, "log_window_loss", state.log_window_loss);
    h5::write_double_attribute(f, "log_window_samples", state.log_window_samples);
    if (!state.run_id.empty()) h5::write_string_attribute(f, "run_id", state.run_id);
    if (!state.cpu_kernels.empty()) h5::write_string_attribute(f, "cpu_kernels", state.cpu_kernels);

    h5::Handle param_group = make_group(f, "params", path);
    for (const auto& p : params.list()) write_array(param_group.get(), p.name, params.host_values() + p.offset, p.shape, path);
    write_buffers(f, params, path);

    h5::Handle optim_group = make_group(f, "optimizer", path);
    h5::write_string_attribute(optim_group.get(), "name", optimizer.name());
    h5::write_int_attribute(optim_group.get(), "step", optimizer.steps_taken());
    const auto buffers = optimizer.state();
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      const auto& buffer = buffers[i];
      if (buffer.values->empty()) continue;  // not created yet (no step taken, or no momentum)
      h5::Handle g = make_group(optim_group.get(), buffer.name.c_str(), path);
      if (!shards) {
        for (const auto& p : params.list()) write_array(g.get(), p.name, buffer.values->host().data() + p.offset, p.shape, path);
        continue;
      }
      // ddp.zero_stage = 1: the same full arrays, filled one rank's shard at a time.
      for (const auto& p : params.list()) create_array(g.get(), p.name, p.shape, path);
      const ShardLayout& layout = shards->layout();
      for (int r = 0; r < layout.world; ++r)
        if (layout.count(r) > 0)
          write_flat_shard(g.get(), params.list(), layout.begin(r), layout.end(r), shards->fetch(i, r), path);
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

namespace {

// 0 or 1, as written; anything else is not a flag this program wrote.
bool read_flag(hid_t f, const char* name, const std::string& path) {
  const std::int64_t value = h5::read_int_attribute(f, name, path);
  if (value != 0 && value != 1)
    throw InputError(path + ": attribute '" + name + "' is " + std::to_string(value) +
                     ", must be 0 or 1 (damaged or edited checkpoint)");
  return value == 1;
}

// The elastic-resume attributes, or for a file of older mpiddp, the values its
// one-geometry arithmetic implies (a damaged world size or batch is refused later).
void read_epoch_order(hid_t f, TrainingState& state, const std::string& path) {
  // Written together since they exist: a file with some of them is not an older
  // file but a damaged one, and deriving the missing ones would skip samples.
  const char* const names[] = {"elastic_resumes", "epoch_samples_done", "epoch_length", "epoch_shuffled"};
  int present = 0;
  for (const char* name : names) present += h5::has_attribute(f, name) ? 1 : 0;
  if (present != 0 && present != 4)
    for (const char* name : names)
      if (!h5::has_attribute(f, name))
        throw InputError(path + ": attribute '" + name + "' is missing while the other elastic-resume attributes " +
                         "are there (damaged or edited checkpoint)");
  if (present == 4) state.elastic_resumes = h5::read_int_attribute(f, "elastic_resumes", path);
  state.epoch_order_stored = present == 4;
  if (state.epoch_order_stored) {
    state.epoch_samples_done = h5::read_int_attribute(f, "epoch_samples_done", path);
    state.epoch_length = h5::read_int_attribute(f, "epoch_length", path);
    state.epoch_shuffled = read_flag(f, "epoch_shuffled", path);
    return;
  }
  state.epoch_shuffled = state.shuffle;
  const bool sane = state.world_size >= 1 && state.world_size <= INT32_MAX && state.dataset_size >= 1 &&
                    state.batch_size >= 1 && state.accumulate >= 1 && state.step_in_epoch >= 0 &&
                    state.batch_size <= INT32_MAX / state.accumulate;
  if (!sane || state.step_in_epoch == 0) return;
  const int world = static_cast<int>(state.world_size);
  state.epoch_length = epoch_order_length(state.dataset_size, world, state.drop_last);
  if (state.epoch_length < 1) return;
  state.epoch_samples_done =
      samples_consumed(state.epoch_length, world, state.batch_size * state.accumulate, state.step_in_epoch);
}

TrainingState read_attributes(hid_t f, std::int64_t format, const std::string& path) {
  TrainingState state;
  state.epoch = h5::read_int_attribute(f, "epoch", path);
  state.step_in_epoch = h5::read_int_attribute(f, "step_in_epoch", path);
  state.global_step = h5::read_int_attribute(f, "global_step", path);
  const std::int64_t micro_batches = h5::read_int_attribute(f, "micro_batches", path);
  if (micro_batches < 0)
    throw InputError(path + ": attribute 'micro_batches' is " + std::to_string(micro_batches) +
                     ", must be at least 0 (damaged or edited checkpoint)");
  state.micro_batches = static_cast<std::uint64_t>(micro_batches);
  state.world_size = h5::read_int_attribute(f, "world_size", path);
  state.seed = static_cast<std::uint64_t>(h5::read_int_attribute(f, "seed", path));
  state.config_ini = h5::read_string_attribute(f, "config", path);
  state.dataset_size = h5::read_int_attribute(f, "dataset_size", path);
  if (format == 3) {
    read_format3_sample_order(state, path);
  } else {
    state.batch_size = h5::read_int_attribute(f, "batch_size", path);
    state.accumulate = h5::read_int_attribute(f, "accumulate", path);
    state.shuffle = read_flag(f, "shuffle", path);
    state.drop_last = read_flag(f, "drop_last", path);
  }
  state.skipped_steps = h5::read_int_attribute(f, "skipped_steps", path);
  read_epoch_order(f, state, path);
  state.log_window_loss = h5::read_double_attribute(f, "log_window_loss", path);
  state.log_window_samples = h5::read_double_attribute(f, "log_window_samples", path);
  if (h5::has_attribute(f, "run_id")) state.run_id = h5::read_string_attribute(f, "run_id", path);
  if (h5::has_attribute(f, "cpu_kernels")) {
    state.cpu_kernels = h5::read_string_attribute(f, "cpu_kernels", path);
    if (!valid_kernel_choices(state.cpu_kernels))
      throw InputError(path + ": attribute 'cpu_kernels' is '" + printable(state.cpu_kernels) +
                       "', must be onednn or openblas, then ';layer=library' entries (library onednn, openblas, own, "
                       "winograd, winograd_all, own_winograd or own_winograd4; damaged or edited checkpoint)");
  }
  return state;
}

}  // namespace

std::string new_run_id() {
  std::random_device device;
  const std::uint64_t bits = (std::uint64_t{device()} << 32) ^ device() ^
                             static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(bits));
  return text;
}

std::string checkpoint_run_id(const std::string& path) {
  h5::silence_errors();
  std::lock_guard<std::mutex> hdf5(h5::library_mutex());
  try {
    h5::Handle file = h5::open_read_only(path, path);
    if (!file || !h5::has_attribute(file.get(), "format_version") || !h5::has_attribute(file.get(), "run_id")) return "";
    return h5::read_string_attribute(file.get(), "run_id", path);
  } catch (const InputError&) {
    return "";
  }
}

void read_initial_weights(const std::string& path, ParameterStore& params, const std::string& named) {
  h5::silence_errors();
  std::lock_guard<std::mutex> hdf5(h5::library_mutex());
  const std::string where = named.empty() ? "model.init " + path : named;
  if (::access(path.c_str(), R_OK) != 0) throw InputError(where + ": cannot read (" + std::strerror(errno) + ")");
  h5::Handle file = h5::open_read_only(path, where);
  if (!file) throw InputError(where + ": not a readable HDF5 file");
  h5::refuse_outside_storage(file.get(), where);
  if (H5Lexists(file.get(), "params", H5P_DEFAULT) <= 0)
    throw InputError(where + ": no /params group (write one with scripts/from-torch)");
  std::vector<float> values;
  read_arrays(file.get(), "params", params, values, where);
  StagedBuffers buffers = read_buffers(file.get(), params, where);
  std::copy(values.begin(), values.end(), params.host_values());
  params.push_values();
  commit_buffers(std::move(buffers), params);
}

TrainingState read_checkpoint(const std::string& path, ParameterStore& params, Optimizer& optimizer,
                              const AcceptCheckpoint& accept, const ShardLayout* shards) {
  h5::silence_errors();
  std::lock_guard<std::mutex> hdf5(h5::library_mutex());
  if (::access(path.c_str(), R_OK) != 0) throw InputError(path + ": cannot read checkpoint (" + std::strerror(errno) + ")");
  h5::Handle file = h5::open_read_only(path, path);
  if (!file) throw InputError(path + ": not a readable HDF5 checkpoint (truncated or damaged?)");
  h5::refuse_outside_storage(file.get(), path);
  const hid_t f = file.get();
  if (!h5::has_attribute(f, "format_version")) throw InputError(path + ": not an mpiddp checkpoint (no format_version)");
  const std::int64_t format = h5::read_int_attribute(f, "format_version", path);
  if (format < kOldestCheckpointFormat || format > kCheckpointFormat)
    throw InputError(path + ": checkpoint format version " + std::to_string(format) + " is not supported (this mpiddp " +
                     MPIDDP_VERSION + " reads versions " + std::to_string(kOldestCheckpointFormat) + " to " +
                     std::to_string(kCheckpointFormat) + ")");
  TrainingState state = read_attributes(f, format, path);
  h5::Handle optim_group(H5Gopen2(f, "optimizer", H5P_DEFAULT), H5Gclose);
  if (!optim_group) throw InputError(path + ": no optimizer state");
  const std::string name = h5::read_string_attribute(optim_group.get(), "name", path);
  if (parse_choice<OptimizerKind>(name) != optimizer.kind())
    throw InputError(path + ": optimizer state is " + name + " but optim.name is " + optimizer.name());
  state.optimizer_steps = h5::read_int_attribute(optim_group.get(), "step", path);
  check_attributes(state, path);
  if (accept) accept(state);
  check_counters(state, path);

  // Only the model's and the optimizer's arrays, nothing more and nothing less.
  const bool has_buffers = !params.buffer_list().empty() || !params.counter_names().empty();
  refuse_unknown_members(f, "/", has_buffers ? std::set<std::string>{"params", "optimizer", "buffers"}
                                             : std::set<std::string>{"params", "optimizer"},
                         path, "part of a checkpoint");
  auto buffers = optimizer.state();
  std::set<std::string> state_names;
  for (const auto& buffer : buffers) state_names.insert(buffer.name);
  refuse_unknown_members(f, "optimizer", state_names, path, "state of " + optimizer.name());

  // Stage everything, then commit: a failure leaves the model untouched.
  std::vector<float> values;
  read_arrays(f, "params", params, values, path);
  StagedBuffers model_buffers = read_buffers(f, params, path);
  std::vector<std::vector<float>> staged(buffers.size());
  std::vector<bool> present(buffers.size(), false);
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const std::string group = "optimizer/" + buffers[i].name;
    if (H5Lexists(f, group.c_str(), H5P_DEFAULT) <= 0) continue;  // never created (e.g. no momentum)
    if (shards) {
      // ddp.zero_stage = 1: every array checked, only rank 0's shard read (scatter_state_shards sends the others).
      read_arrays(f, group, params.list(), params.total(), staged[i], path, {}, false);
      staged[i].assign(shards->count(), 0.0f);
      h5::Handle g(H5Gopen2(f, group.c_str(), H5P_DEFAULT), H5Gclose);
      read_flat_shard(g.get(), params.list(), shards->begin(), shards->end(), staged[i].data(), path);
      check_flat_range_values(staged[i].data(), shards->begin(), shards->end(), params.list(), group, path);
    } else {
      read_arrays(f, group, params, staged[i], path);
    }
    present[i] = true;
  }
  std::copy(values.begin(), values.end(), params.host_values());
  params.push_values();
  commit_buffers(std::move(model_buffers), params);
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (present[i]) buffers[i].values->host() = std::move(staged[i]);
    else buffers[i].values->host().clear();
    buffers[i].values->push();
  }
  optimizer.set_steps_taken(state.optimizer_steps);
  state.path = path;
  return state;
}

}  // namespace mpiddp
