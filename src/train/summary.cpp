#include "mpiddp/train/summary.hpp"

#include <cstdio>

#include "mpiddp/common/json.hpp"

namespace mpiddp {

void write_summary(const TrainSummary& sm, bool classification, RunOutput& output) {
  const bool accuracy = sm.evaluated && classification;
  Json json;
  json["status"] = sm.preempted ? "preempted" : "completed";
  json["test_accuracy"] = accuracy ? sm.test_accuracy : -1.0;
  json["test_loss"] = sm.evaluated ? sm.test_loss : -1.0;
  json["final_train_loss"] = sm.final_train_loss;
  json["epochs"] = sm.epochs;
  json["steps"] = sm.steps;
  json["skipped_steps"] = sm.skipped_steps;
  json["world_size"] = sm.world_size;
  json["global_batch"] = sm.global_batch;
  json["train_samples"] = sm.train_samples;
  json["train_samples_per_s"] = sm.train_samples_per_s;
  json["train_s"] = sm.train_s;
  json["wall_s"] = sm.wall_s;
  json["data_wait_share"] = sm.data_wait_share;
  json["compute_share"] = sm.compute_share;
  json["allreduce_share"] = sm.allreduce_share;
  output.summary(json_line(json));
  std::printf("%s: %lld steps in %s, %.0f samples/s (data wait %.1f%%, all-reduce %.1f%%)",
              sm.preempted ? "preempted" : "done", static_cast<long long>(sm.steps),
              format_duration(sm.wall_s).c_str(), sm.train_samples_per_s, 100 * sm.data_wait_share,
              100 * sm.allreduce_share);
  if (accuracy) std::printf(", test accuracy %.4f", sm.test_accuracy);
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace mpiddp
