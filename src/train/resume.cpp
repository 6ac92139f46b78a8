#include "mpiddp/train/resume.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"
#include "mpiddp/data/sampler.hpp"
#include "mpiddp/dist/process_group.hpp"
#include "mpiddp/train/session.hpp"

namespace mpiddp {
namespace {

std::string text_of(std::int64_t value) { return std::to_string(value); }
std::string text_of(std::uint64_t value) { return std::to_string(value); }

// What a resume cannot change: the data set's size and train.seed fix every
// epoch's order, so the finished steps' samples would no longer be a part of
// the epoch in progress. (World size, batch, accumulation, shuffle and drop_last
// may change: see elastic.hpp.)
void check_same_data(const std::string& path, const TrainingState& then, const TrainingState& now) {
  auto require_same = [&](const char* what, auto written, auto current) {
    if (written == current) return;
    throw IncompatibleCheckpoint(path + ": written with " + what + " " + text_of(written) + ", this job has " +
                                 text_of(current) + "; the rest of the run would see other samples, so resume with " +
                                 "the same " + what);
  };
  require_same("training set size", then.dataset_size, now.dataset_size);
  require_same("train.seed", then.seed, now.seed);
}

// A layer list as written, without the spaces that do not change it.
std::string canonical_layer_list(const std::string& text) {
  std::string out;
  int depth = 0;
  bool gap = false;
  for (char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    if (space) {
      gap = gap || depth == 0;
      continue;
    }
    if (gap && !out.empty()) out += ' ';
    gap = false;
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    out += c;
  }
  return out;
}

// A checkpoint's weights belong to its layer list. Another list may still fit
// the arrays by name and shape (relu for tanh, avgpool2d for maxpool2d, another
// stride) and would then go on silently as a different model; one that does not
// fit would only be refused array by array, without saying why.
void check_same_layers(const std::string& path, const TrainingState& then, const Config& config) {
  const auto written = resolved_values(then.config_ini), current = resolved_values(config.resolved_ini);
  const auto old_layers = written.find("model.layers"), new_layers = current.find("model.layers");
  if (old_layers == written.end() || new_layers == current.end()) return;  // written before model.layers existed
  if (canonical_layer_list(old_layers->second) == canonical_layer_list(new_layers->second)) return;
  auto shown = [](const std::string& list) {
    return list.empty() ? std::string("empty (the model.hidden MLP)") : "'" + list + "'";
  };
  throw IncompatibleCheckpoint(path + ": written with model.layers " + shown(old_layers->second) + ", this job has " +
                               shown(new_layers->second) +
                               "; the checkpoint holds the weights of its own layers, so resume with the same "
                               "model.layers (or start a new run.dir)");
}

// "1, 28,28" -> {1, 28, 28}; empty for empty text or anything else.
std::vector<std::size_t> dims_of(const std::string& text) {
  std::vector<std::size_t> dims;
  std::size_t value = 0;
  bool digits = false;
  for (char c : text + ",") {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (value > (SIZE_MAX - 9) / 10) return {};
      value = value * 10 + static_cast<std::size_t>(c - '0');
      digits = true;
    } else if (c == ',') {
      if (!digits) return {};
      dims.push_back(value);
      value = 0;
      digits = false;
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      return {};
    }
  }
  return dims;
}

std::string dims_text(const std::vector<std::size_t>& dims) {
  std::string text;
  for (std::size_t d : dims) text += (text.empty() ? "" : ",") + std::to_string(d);
  return text;
}

// The shape one sample has for the model: model.input_shape, else the shards'
// sample shape. Another shape with the same element count fits every array of
// a layer list that starts with a dense layer, and would go on as another model.
void check_same_input_shape(const std::string& path, const TrainingState& then, const Config& config,
                            const std::vector<std::size_t>& data_shape) {
  const auto written = resolved_values(then.config_ini);
  const auto stored = written.find("model.input_shape");
  if (stored == written.end()) return;  // written before model.input_shape existed
  const std::vector<std::size_t> was = stored->second.empty() ? data_shape : dims_of(stored->second);
  const std::vector<std::size_t> is = config.model.input_shape.empty() ? data_shape : config.model.input_shape;
  if (was == is) return;
  const std::string shown = was.empty() ? "'" + stored->second + "'" : dims_text(was);
  throw IncompatibleCheckpoint(path + ": written for input shape " + shown + " (model.input_shape), this job has " +
                               dims_text(is) + "; resume with the same model.input_shape (or start a new run.dir)");
}

// The MLP shorthand's widths, when neither run has a layer list: another MLP's
// arrays would be refused one by one without saying why.
void check_same_widths(const std::string& path, const TrainingState& then, const Config& config) {
  const auto written = resolved_values(then.config_ini);
  const auto layers = written.find("model.layers"), hidden = written.find("model.hidden");
  if (!config.model.layers.empty() || (layers != written.end() && !layers->second.empty()) || hidden == written.end())
    return;
  auto widths = [](std::string text) {
    text.erase(std::remove_if(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); }), text.end());
    return text;
  };
  const std::string mine = written_form(config.model.hidden);
  if (widths(hidden->second) != mine)
    throw IncompatibleCheckpoint(path + ": written for model.hidden = '" + hidden->second + "', this job has '" +
                                 mine + "' (a checkpoint of another model)");
}

[[noreturn]] void refuse_position(const std::string& path, const char* attribute, std::int64_t value,
                                  const std::string& rule) {
  throw InputError(path + ": attribute '" + attribute + "' is " + std::to_string(value) + ", " + rule +
                   " (damaged or edited checkpoint)");
}

// The step arithmetic of the run that wrote the checkpoint (its world size,
// batch, accumulation and drop_last), with this job's epochs and max_steps.
StepPlan writers_plan(const std::string& path, const TrainingState& then, const Config& config) {
  auto fits_int = [&](const char* attribute, std::int64_t value) {
    if (value > INT32_MAX) refuse_position(path, attribute, value, "more than any run can have");
  };
  fits_int("world_size", then.world_size);
  fits_int("batch_size", then.batch_size);
  fits_int("accumulate", then.accumulate);
  if (then.batch_size * then.accumulate > INT32_MAX)
    refuse_position(path, "accumulate", then.accumulate, "too many samples per step with its batch_size");
  Config writer = config;
  writer.train.batch_size = static_cast<int>(then.batch_size);
  writer.train.accumulate = static_cast<int>(then.accumulate);
  writer.data.drop_last = then.drop_last;
  return plan_steps(writer, then.dataset_size, static_cast<int>(then.world_size));
}

// A run that kept one geometry: its position is the plain arithmetic of the
// writer's step plan, checked to the last counter.
void check_one_geometry(const std::string& path, const TrainingState& then, const StepPlan& plan, int epochs) {
  const std::int64_t per_epoch = plan.steps_per_epoch;
  if (then.step_in_epoch > per_epoch)
    refuse_position(path, "step_in_epoch", then.step_in_epoch,
                    "beyond the " + std::to_string(per_epoch) + " steps of an epoch");
  // epoch x steps per epoch + step_in_epoch, checked for overflow (absurd epochs).
  const bool consistent = then.epoch <= (INT64_MAX - then.step_in_epoch) / per_epoch &&
                          then.epoch * per_epoch + then.step_in_epoch == then.global_step;
  if (!consistent && then.epoch > epochs)
    refuse_position(path, "epoch", then.epoch,
                    "but global step " + std::to_string(then.global_step) + " is in epoch " +
                        std::to_string(then.global_step / per_epoch));
  if (!consistent)
    refuse_position(path, "global_step", then.global_step,
                    "but epoch " + std::to_string(then.epoch) + " step " + std::to_string(then.step_in_epoch) +
                        " is global step " + std::to_string(then.epoch * per_epoch + then.step_in_epoch));
  // Every step takes `accumulate` micro-batches, the last of an epoch what is left.
  const std::int64_t micro = then.epoch * plan.batches_per_epoch +
                             std::min(then.step_in_epoch * then.accumulate, plan.batches_per_epoch);
  if (static_cast<std::int64_t>(then.micro_batches) != micro)
    refuse_position(path, "micro_batches", static_cast<std::int64_t>(then.micro_batches),
                    "but global step " + std::to_string(then.global_step) + " has consumed " + std::to_string(micro));
  if (!then.epoch_order_stored || then.step_in_epoch == 0) return;
  const int world = static_cast<int>(then.world_size);
  const std::int64_t length = epoch_order_length(then.dataset_size, world, then.drop_last);
  if (then.epoch_length != length)
    refuse_position(path, "epoch_length", then.epoch_length,
                    "but world size " + std::to_string(world) + " orders " + std::to_string(length) + " samples");
  const std::int64_t done = samples_consumed(length, world, then.batch_size * then.accumulate, then.step_in_epoch);
  if (then.epoch_samples_done != done)
    refuse_position(path, "epoch_samples_done", then.epoch_samples_done,
                    "but step " + std::to_string(then.step_in_epoch) + " of the epoch has consumed " +
                        std::to_string(done));
  if (then.epoch_shuffled != then.shuffle)
    refuse_position(path, "epoch_shuffled", then.epoch_shuffled ? 1 : 0, "but the run's data.shuffle differs");
}

// The position must be one this run can continue from: a step number out of the
// writer's plan would train on other samples, and save over other checkpoints' names.
void check_position(const std::string& path, const TrainingState& then, const Config& config, int world) {
  const StepPlan written = writers_plan(path, then, config);
  if (then.elastic_resumes == 0) {
    check_one_geometry(path, then, written, config.train.epochs);
  } else {
    // Steps of another geometry came before: only what holds for any history.
    if (then.step_in_epoch > then.global_step)
      refuse_position(path, "step_in_epoch", then.step_in_epoch,
                      "more than global_step " + std::to_string(then.global_step));
    if (static_cast<std::int64_t>(then.micro_batches) < then.global_step)
      refuse_position(path, "micro_batches", static_cast<std::int64_t>(then.micro_batches),
                      "fewer than global_step " + std::to_string(then.global_step));
  }
  // A sound checkpoint this job's settings end before. (With this job's step
  // arithmetic, a position inside epoch train.epochs + 1 is past its last step.)
  const StepPlan now = plan_steps(config, then.dataset_size, world);
  const bool same_arithmetic = then.elastic_resumes == 0 && written.steps_per_epoch == now.steps_per_epoch;
  const bool inside_next = then.epoch == config.train.epochs && then.epoch_samples_done > 0;
  if (then.epoch > config.train.epochs || (inside_next && !same_arithmetic))
    throw IncompatibleCheckpoint(path + ": written at epoch " + std::to_string(then.epoch) + ", beyond train.epochs " +
                                 std::to_string(config.train.epochs) + " of this job; raise train.epochs to continue it");
  const std::int64_t last = same_arithmetic           ? now.total_steps
                            : config.train.max_steps > 0 ? config.train.max_steps
                                                         : INT64_MAX;
  if (then.global_step > last)
    throw IncompatibleCheckpoint(path + ": written at global step " + std::to_string(then.global_step) +
                                 ", past the last step " + std::to_string(last) +
                                 " of this job; raise train.max_steps to continue it");
}

// --resume auto's candidates, newest first: the complete checkpoints of the run
// that `latest` names (retention keeps and counts the same ones); every complete
// checkpoint where `latest` names no readable checkpoint with a run id.
std::vector<std::string> runs_checkpoints(const CheckpointDirectory& directory) {
  std::vector<std::string> all = directory.complete_checkpoints();
  std::string latest_name;
  std::ifstream(directory.dir() + "/latest") >> latest_name;
  // Only a complete checkpoint of this directory counts: never a path out of it.
  const auto named_at = std::find_if(all.begin(), all.end(), [&](const std::string& file) {
    return latest_name.find('/') == std::string::npos && std::filesystem::path(file).filename() == latest_name;
  });
  if (!latest_name.empty() && named_at == all.end()) {
    std::fprintf(stderr, "mpiddp: warning: %s/latest names '%s', not a complete checkpoint there; ignoring it\n",
                 directory.dir().c_str(), printable(latest_name).c_str());
    return all;
  }
  const std::string run = latest_name.empty() ? "" : checkpoint_run_id(*named_at);
  if (run.empty()) return all;
  std::vector<std::string> ours;
  for (const std::string& path : all) {
    if (checkpoint_run_id(path) == run) ours.push_back(path);
    else std::fprintf(stderr, "mpiddp: warning: skipping %s: not a checkpoint of the run that %s/latest names\n",
                      path.c_str(), directory.dir().c_str());
  }
  return ours;
}

// Rank 0's choice and contents, read under agree_or_fail so that a bad file ends
// every rank with rank 0's message.
std::optional<TrainingState> load_on_root(const std::string& resume, const CheckpointDirectory& directory,
                                          const Config& config, std::int64_t dataset_size,
                                          const std::vector<std::size_t>& data_shape, ParameterStore& params,
                                          Optimizer& optimizer, int world, const ShardLayout* shards) {
  std::vector<std::string> candidates;
  if (resume == "auto") {
    candidates = runs_checkpoints(directory);
    if (candidates.empty()) {
      std::printf("resume auto: no checkpoint in %s, starting from the beginning\n", directory.dir().c_str());
      return std::nullopt;
    }
  } else {
    candidates = {resume};
  }
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    try {
      // Checked before any array is loaded.
      const auto accept = [&](const TrainingState& then) {
        check_same_data(candidates[i], then, fresh_training_state(config, world, dataset_size));
        check_same_layers(candidates[i], then, config);
        check_same_input_shape(candidates[i], then, config, data_shape);
        check_position(candidates[i], then, config, world);
        check_same_widths(candidates[i], then, config);
      };
      TrainingState state = read_checkpoint(candidates[i], params, optimizer, accept, shards);
      std::printf("resuming from %s: epoch %lld, step %lld of it, global step %lld\n", candidates[i].c_str(),
                  static_cast<long long>(state.epoch + 1), static_cast<long long>(state.step_in_epoch),
                  static_cast<long long>(state.global_step));
      return state;
    } catch (const IncompatibleCheckpoint&) {
      throw;  // another run's checkpoint: an older one of it would not fit either
    } catch (const InputError& e) {
      // With `auto`, a damaged newest file falls back to the one before it.
      if (resume != "auto" || i + 1 == candidates.size()) throw;
      std::fprintf(stderr, "mpiddp: warning: skipping %s\n", e.what());
    }
  }
  return std::nullopt;
}

// The code the resume header carries for a checkpoint's CPU kernels (see resume_training).
std::int64_t kernels_code(const std::string& text) {
  if (text == "openblas") return 1;
  if (text == "onednn") return 2;
  return text.empty() ? 0 : 3;
}

}  // namespace

TrainingState fresh_training_state(const Config& config, int world_size, std::int64_t dataset_size) {
  TrainingState state;
  state.world_size = world_size;
  state.seed = config.train.seed;
  state.config_ini = config.resolved_ini;
  state.dataset_size = dataset_size;
  state.batch_size = config.train.batch_size;
  state.accumulate = config.train.accumulate;
  state.shuffle = config.data.shuffle;
  state.drop_last = config.data.drop_last;
  return state;
}

std::optional<TrainingState> resume_training(const std::string& resume, const CheckpointDirectory& directory,
                                             const Config& config, std::int64_t dataset_size,
                                             const std::vector<std::size_t>& data_shape, ParameterStore& params,
                                             Optimizer& optimizer, Communicator& comm, const ShardLayout* shards) {
  if (resume.empty()) return std::nullopt;
  std::optional<TrainingState> state;
  agree_or_fail(comm, [&] {
    if (comm.rank() == 0)
      state = load_on_root(resume, directory, config, dataset_size, data_shape, params, optimizer, comm.size(),
                           shards);
  });
  // The position and the writer's geometry reach every rank (an elastic resume
  // splits the rest of the epoch by them).
  // The kernels it trained with travel as a code: 0 unknown (older file), 1 openblas, 2 onednn,
  // 3 per-layer choices (their text follows, its length in the last slot).
  std::int64_t header[17] = {};
  if (state) {
    const std::int64_t values[17] = {1,
                                     state->epoch,
                                     state->step_in_epoch,
                                     state->global_step,
                                     static_cast<std::int64_t>(state->micro_batches),
                                     optimizer.steps_taken(),
                                     state->epoch_samples_done,
                                     state->epoch_length,
                                     state->epoch_shuffled ? 1 : 0,
                                     state->elastic_resumes,
                                     state->world_size,
                                     state->batch_size,
                                     state->accumulate,
                                     state->shuffle ? 1 : 0,
                                     state->drop_last ? 1 : 0,
                                     kernels_code(state->cpu_kernels),
                                     static_cast<std::int64_t>(state->cpu_kernels.size())};
    std::copy(std::begin(values), std::end(values), std::begin(header));
  }
  comm.broadcast(header, sizeof(header), 0);
  if (header[0] == 0) return std::nullopt;
  std::string kernels = state ? state->cpu_kernels : std::string(static_cast<std::size_t>(header[16]), ' ');
  if (header[15] == 3) comm.broadcast(kernels.data(), kernels.size(), 0);
  if (!state) {
    state.emplace();
    state->epoch = header[1];
    state->step_in_epoch = header[2];
    state->global_step = header[3];
    state->micro_batches = static_cast<std::uint64_t>(header[4]);
    optimizer.set_steps_taken(header[5]);
    state->epoch_samples_done = header[6];
    state->epoch_length = header[7];
    state->epoch_shuffled = header[8] != 0;
    state->elastic_resumes = header[9];
    state->world_size = header[10];
    state->batch_size = header[11];
    state->accumulate = header[12];
    state->shuffle = header[13] != 0;
    state->drop_last = header[14] != 0;
    state->cpu_kernels = header[15] == 1 ? "openblas" : header[15] == 2 ? "onednn" : header[15] == 3 ? kernels : "";
  }
  // Host copies travel over MPI (rank 0 read them), then go to each device.
  comm.broadcast(params.host_values(), params.total() * sizeof(float), 0);
  params.push_values();
  broadcast_model_buffers(params, comm);
  // ddp.zero_stage = 1: each rank gets only its shard of the optimizer state.
  if (shards) {
    scatter_state_shards(state->path, params.list(), optimizer, *shards, comm);
    return state;
  }
  for (auto& buffer : optimizer.state()) {
    std::uint64_t size = buffer.values->size();
    comm.broadcast(&size, sizeof(size), 0);
    buffer.values->host().resize(size);
    if (size) comm.broadcast(buffer.values->host().data(), size * sizeof(float), 0);
    buffer.values->push();
  }
  return state;
}

}  // namespace mpiddp
