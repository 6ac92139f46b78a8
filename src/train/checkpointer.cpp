#include "mpiddp/train/checkpointer.hpp"

#include <cstdio>
#include <optional>
#include <filesystem>
#include <string>

#include "mpiddp/common/trace.hpp"
#include "mpiddp/dist/process_group.hpp"

namespace mpiddp {
namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

Checkpointer::Checkpointer(TrainingSession& session)
    : session_(session), last_step_(session.resumed ? session.state.global_step : -1) {}

bool Checkpointer::enabled() const {
  const CheckpointConfig& c = session_.config.checkpoint;
  return c.every_epochs > 0 || c.every_steps > 0 || c.every_minutes > 0.0;
}

bool Checkpointer::due_by_clock() const {
  const double minutes = session_.config.checkpoint.every_minutes;
  return session_.root && minutes > 0.0 && seconds_since(last_time_) >= 60.0 * minutes;
}

bool Checkpointer::due_after_step(std::int64_t global_step) const {
  const std::int64_t every = session_.config.checkpoint.every_steps;
  return every > 0 && global_step % every == 0;
}

bool Checkpointer::due_after_epoch(std::int64_t completed_epochs) const {
  const int every = session_.config.checkpoint.every_epochs;
  return every > 0 && completed_epochs % every == 0;
}

void Checkpointer::save(const ResumePoint& point, const WindowTotals& window, std::int64_t skipped_steps,
                        bool epoch_boundary) {
  TraceSpan span("checkpoint");
  TrainingState state = session_.state;
  state.epoch = point.epoch;
  state.step_in_epoch = point.step_in_epoch;
  state.epoch_samples_done = point.samples_done;
  state.epoch_length = point.length;
  state.epoch_shuffled = point.shuffled;
  state.log_window_loss = window.loss;
  state.log_window_samples = window.samples;
  state.skipped_steps = skipped_steps;
  ParameterStore& params = session_.model->parameters();
  params.pull_values();  // checkpoints hold the host copies
  params.pull_buffers();
  session_.optimizer->pull_state();
  // ddp.zero_stage = 1: rank 0 fetches the other ranks' optimizer shards while it writes.
  const ShardLayout& layout = session_.reducer->shards();
  if (layout.world > 1 && !session_.root) StateShards(layout, session_.comm, *session_.optimizer).serve();
  agree_or_fail(session_.comm, [&] {
    if (!session_.root) return;
    std::optional<StateShards> shards;  // its end (also by an exception) releases the serving ranks
    if (layout.world > 1) shards.emplace(layout, session_.comm, *session_.optimizer);
    const auto start = std::chrono::steady_clock::now();
    const std::string path =
        session_.checkpoints.save(params, *session_.optimizer, state, epoch_boundary, shards ? &*shards : nullptr);
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(path, ec);
    std::printf("checkpoint %s (step %lld, %.1f MB, %.3f s)\n", path.c_str(),
                static_cast<long long>(state.global_step), ec ? 0.0 : static_cast<double>(bytes) / 1e6,
                seconds_since(start));
    std::fflush(stdout);
  });
  last_time_ = std::chrono::steady_clock::now();
  last_step_ = state.global_step;
}

}  // namespace mpiddp
