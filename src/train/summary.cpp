#include "mpiddp/train/summary.hpp"

#include <cstdio>

#include "mpiddp/common/json.hpp"

namespace mpiddp {

void write_summary(const TrainSummary& sm, bool classification, RunOutput& output) {
  const bool accuracy = sm.evaluated && classification;
  JsonObject json;
  json.add("status", sm.preempted ? "preempted" : "completed")
      .add("test_accuracy", accuracy ? sm.test_accuracy : -1.0)
      .add("test_loss", sm.evaluated ? sm.test_loss : -1.0)
      .add("final_train_loss", sm.final_train_loss)
      .add("epochs", sm.epochs)
      .add("steps", sm.steps)
      .add("skipped_steps", sm.skipped_steps)
      .add("world_size", sm.world_size)
      .add("global_batch", sm.global_batch)
      .add("train_samples", sm.train_samples)
      .add("train_samples_per_s", sm.train_samples_per_s)
      .add("train_s", sm.train_s)
      .add("wall_s", sm.wall_s)
      .add("data_wait_share", sm.data_wait_share)
      .add("compute_share", sm.compute_share)
      .add("allreduce_share", sm.allreduce_share);
  output.summary(json.str());
  std::printf("%s: %lld steps in %s, %.0f samples/s (data wait %.1f%%, all-reduce %.1f%%)",
              sm.preempted ? "preempted" : "done", static_cast<long long>(sm.steps),
              format_duration(sm.wall_s).c_str(), sm.train_samples_per_s, 100 * sm.data_wait_share,
              100 * sm.allreduce_share);
  if (accuracy) std::printf(", test accuracy %.4f", sm.test_accuracy);
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace mpiddp
