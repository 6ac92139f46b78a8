#include "mpiddp/train/elastic.hpp"

#include <cstdio>

#include "mpiddp/data/sampler.hpp"

namespace mpiddp {
namespace {

std::string flag_text(bool value) { return value ? "true" : "false"; }

// "world size 3 -> 2, train.batch_size 16 -> 32": the settings that differ.
std::string changes(const TrainingState& then, const TrainingState& now) {
  std::string text;
  auto add = [&](const char* what, const std::string& before, const std::string& after) {
    if (before == after) return;
    text += (text.empty() ? "" : ", ") + std::string(what) + " " + before + " -> " + after;
  };
  add("world size", std::to_string(then.world_size), std::to_string(now.world_size));
  add("train.batch_size", std::to_string(then.batch_size), std::to_string(now.batch_size));
  add("train.accumulate", std::to_string(then.accumulate), std::to_string(now.accumulate));
  add("data.shuffle", flag_text(then.shuffle), flag_text(now.shuffle));
  add("data.drop_last", flag_text(then.drop_last), flag_text(now.drop_last));
  return text;
}

}  // namespace

std::int64_t schedule_step(const StepPlan& plan, std::int64_t epoch, std::int64_t samples_done) {
  return epoch * plan.steps_per_epoch + samples_done / plan.global_batch;
}

std::int64_t steps_left_in_epoch(const Config& config, std::int64_t length, std::int64_t done, int world) {
  const std::int64_t per_step = static_cast<std::int64_t>(config.train.batch_size) * config.train.accumulate;
  return (remaining_per_rank(length, done, world) + per_step - 1) / per_step;
}

bool geometry_changed(const TrainingState& then, const TrainingState& now) {
  return then.world_size != now.world_size || then.batch_size != now.batch_size ||
         then.accumulate != now.accumulate || then.shuffle != now.shuffle || then.drop_last != now.drop_last;
}

std::string describe_elastic_resume(const TrainingState& then, const TrainingState& now, const Config& config,
                                    const StepPlan& plan) {
  const std::int64_t then_batch = then.batch_size * then.accumulate * then.world_size;
  std::string text = "resume: " + changes(then, now) + " (global batch " + std::to_string(then_batch) + " -> " +
                     std::to_string(plan.global_batch) + ")";
  const std::string epoch = std::to_string(then.epoch + 1);
  if (then.epoch_samples_done == 0) {
    text += "; epoch " + epoch + " starts with the new settings";
  } else {
    const int world = static_cast<int>(now.world_size);
    const std::int64_t left = then.epoch_length - then.epoch_samples_done;
    text += "; epoch " + epoch + " continues with " + std::to_string(left) + " of its " +
            std::to_string(then.epoch_length) + " samples left (" +
            std::to_string(remaining_per_rank(then.epoch_length, then.epoch_samples_done, world)) + " per rank, " +
            std::to_string(steps_left_in_epoch(config, then.epoch_length, then.epoch_samples_done, world)) +
            " steps), in its own order (data.shuffle " + flag_text(then.epoch_shuffled) + ")";
  }
  const std::int64_t at = schedule_step(plan, then.epoch, then.epoch_samples_done);
  const LrSchedule schedule(config.optim, plan.steps_per_epoch, plan.total_steps);
  char lr[32];
  std::snprintf(lr, sizeof(lr), "%.6g", schedule.at(at));
  text += "\nresume: learning-rate schedule continues at step " + std::to_string(at) + " of " +
          std::to_string(plan.total_steps) + " (" + std::to_string(plan.steps_per_epoch) +
          " steps per epoch at this global batch; lr " + lr + "); global step " + std::to_string(then.global_step) +
          " keeps counting the steps taken";
  return text;
}

}  // namespace mpiddp
