#include "mpiddp/train/resume.hpp"

#include <cstdio>
#include <map>
#include <sstream>

#include "mpiddp/common/error.hpp"
#include "mpiddp/dist/process_group.hpp"

namespace mpiddp {
namespace {

// "section.key" -> value of an INI text as written by load_config.
std::map<std::string, std::string> ini_values(const std::string& text) {
  std::map<std::string, std::string> values;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    if (!line.empty() && line.front() == '[') {
      section = line.substr(1, line.find(']') - 1);
    } else if (const auto eq = line.find(" = "); eq != std::string::npos) {
      values[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
    }
  }
  return values;
}

// The settings that fix which samples the remaining steps see, in which order.
void check_same_sample_order(const std::string& path, const TrainingState& state, const Config& config,
                             std::int64_t dataset_size, int world) {
  auto refuse = [&](const std::string& what, const std::string& then, const std::string& now) {
    throw InputError(path + ": written with " + what + " " + then + ", this job has " + now +
                     "; the rest of the run would see other samples, so resume with the same " + what);
  };
  if (state.world_size != world) refuse("world size", std::to_string(state.world_size), std::to_string(world));
  if (state.dataset_size != dataset_size)
    refuse("training set size", std::to_string(state.dataset_size), std::to_string(dataset_size));
  const auto then = ini_values(state.config_ini), now = ini_values(config.resolved_ini);
  for (const char* key : {"train.seed", "train.batch_size", "train.accumulate", "data.shuffle", "data.drop_last"}) {
    const auto a = then.find(key), b = now.find(key);
    if (a != then.end() && b != now.end() && a->second != b->second) refuse(key, a->second, b->second);
  }
}

// Rank 0's choice and contents, read under agree_or_fail so that a bad file ends
// every rank with rank 0's message.
std::optional<TrainingState> load_on_root(const std::string& resume, const CheckpointDirectory& directory,
                                          const Config& config, std::int64_t dataset_size, ParameterStore& params,
                                          Optimizer& optimizer, int world) {
  std::vector<std::string> candidates;
  if (resume == "auto") {
    candidates = directory.complete_checkpoints();
    if (candidates.empty()) {
      std::printf("resume auto: no checkpoint in %s, starting from the beginning\n", directory.dir().c_str());
      return std::nullopt;
    }
  } else {
    candidates = {resume};
  }
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    try {
      TrainingState state = read_checkpoint(candidates[i], params, optimizer);
      check_same_sample_order(candidates[i], state, config, dataset_size, world);
      std::printf("resuming from %s: epoch %lld, step %lld of it, global step %lld\n", candidates[i].c_str(),
                  static_cast<long long>(state.epoch + 1), static_cast<long long>(state.step_in_epoch),
                  static_cast<long long>(state.global_step));
      return state;
    } catch (const InputError& e) {
      // With `auto`, a damaged newest file falls back to the one before it.
      const bool last = i + 1 == candidates.size();
      const bool other_run = std::string(e.what()).find("resume with the same") != std::string::npos;
      if (resume != "auto" || last || other_run) throw;
      std::fprintf(stderr, "mpiddp: warning: skipping %s\n", e.what());
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<TrainingState> resume_training(const std::string& resume, const CheckpointDirectory& directory,
                                             const Config& config, std::int64_t dataset_size, ParameterStore& params,
                                             Optimizer& optimizer, Communicator& comm) {
  if (resume.empty()) return std::nullopt;
  std::optional<TrainingState> state;
  agree_or_fail(comm, [&] {
    if (comm.rank() == 0) state = load_on_root(resume, directory, config, dataset_size, params, optimizer, comm.size());
  });
  std::int64_t header[6] = {};
  if (state) {
    header[0] = 1;
    header[1] = state->epoch;
    header[2] = state->step_in_epoch;
    header[3] = state->global_step;
    header[4] = static_cast<std::int64_t>(state->micro_batches);
    header[5] = optimizer.steps_taken();
  }
  comm.broadcast(header, sizeof(header), 0);
  if (header[0] == 0) return std::nullopt;
  if (!state) {
    state.emplace();
    state->epoch = header[1];
    state->step_in_epoch = header[2];
    state->global_step = header[3];
    state->micro_batches = static_cast<std::uint64_t>(header[4]);
    state->world_size = comm.size();
    optimizer.set_steps_taken(header[5]);
  }
  // Host copies travel over MPI (rank 0 read them), then go to each device.
  comm.broadcast(params.host_values(), params.total() * sizeof(float), 0);
  params.push_values();
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
