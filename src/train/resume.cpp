#include "mpiddp/train/resume.hpp"

#include <cstdio>

#include "mpiddp/common/error.hpp"
#include "mpiddp/dist/process_group.hpp"

namespace mpiddp {
namespace {

// Rank 0's choice and contents, read under agree_or_fail so that a bad file ends
// every rank with rank 0's message.
std::optional<TrainingState> load_on_root(const std::string& resume, const CheckpointDirectory& directory,
                                          ParameterStore& params, Optimizer& optimizer, int world) {
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
      if (state.world_size != world)
        throw InputError(candidates[i] + ": written by " + std::to_string(state.world_size) +
                         " rank(s), this job has " + std::to_string(world) +
                         "; the interrupted epoch's sample order depends on the world size, so resume with " +
                         std::to_string(state.world_size) + " rank(s)");
      std::printf("resuming from %s: epoch %lld, step %lld of it, global step %lld\n", candidates[i].c_str(),
                  static_cast<long long>(state.epoch + 1), static_cast<long long>(state.step_in_epoch),
                  static_cast<long long>(state.global_step));
      return state;
    } catch (const InputError& e) {
      // With `auto`, a damaged newest file falls back to the one before it.
      const bool last = i + 1 == candidates.size();
      const bool world_mismatch = std::string(e.what()).find("rank(s), this job has") != std::string::npos;
      if (resume != "auto" || last || world_mismatch) throw;
      std::fprintf(stderr, "mpiddp: warning: skipping %s\n", e.what());
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<TrainingState> resume_training(const std::string& resume, const CheckpointDirectory& directory,
                                             ParameterStore& params, Optimizer& optimizer, Communicator& comm) {
  if (resume.empty()) return std::nullopt;
  std::optional<TrainingState> state;
  agree_or_fail(comm, [&] {
    if (comm.rank() == 0) state = load_on_root(resume, directory, params, optimizer, comm.size());
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
  comm.broadcast(params.values(), params.total() * sizeof(float), 0);
  for (auto& buffer : optimizer.state()) {
    std::uint64_t size = buffer.values->size();
    comm.broadcast(&size, sizeof(size), 0);
    buffer.values->resize(size);
    if (size) comm.broadcast(buffer.values->data(), size * sizeof(float), 0);
  }
  return state;
}

}  // namespace mpiddp
