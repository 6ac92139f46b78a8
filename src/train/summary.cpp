#include "mpiddp/train/summary.hpp"

#include <cstdio>

#include <algorithm>

#include "mpiddp/common/json.hpp"
#include "mpiddp/common/memory.hpp"

namespace mpiddp {

void record_memory(TrainSummary& sm, const TrainingSession& session) {
  Communicator& comm = session.comm;
  sm.zero_stage = session.reducer->zero_stage();
  sm.parameter_bytes = static_cast<std::int64_t>(session.model->parameters().total() * sizeof(float));
  sm.optimizer_state_bytes_per_rank = session.optimizer_state_bytes_per_rank();
  const std::int64_t mine[2] = {static_cast<std::int64_t>(peak_resident_bytes()),
                                static_cast<std::int64_t>(session.compute.device->peak_allocated_bytes())};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(comm.size()));
  comm.allgather(mine, sizeof(mine), all.data());
  sm.peak_host_bytes_per_rank.clear();
  sm.peak_device_bytes_per_rank.clear();
  for (int r = 0; r < comm.size(); ++r) {
    sm.peak_host_bytes_per_rank.push_back(all[2 * static_cast<std::size_t>(r)]);
    sm.peak_device_bytes_per_rank.push_back(all[2 * static_cast<std::size_t>(r) + 1]);
  }
  sm.peak_host_bytes = *std::max_element(sm.peak_host_bytes_per_rank.begin(), sm.peak_host_bytes_per_rank.end());
  sm.peak_device_bytes = *std::max_element(sm.peak_device_bytes_per_rank.begin(), sm.peak_device_bytes_per_rank.end());
}

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
  if (sm.context > 0) {  // a sequence model: every sample is `context` target tokens
    json["train_tokens_per_s"] = sm.train_samples_per_s * sm.context;
    json["test_bits_per_token"] = sm.evaluated ? sm.test_loss / kLn2 : -1.0;
  }
  json["train_flops_per_sample"] = sm.train_flops_per_sample;
  json["train_gflops_per_s_per_rank"] = sm.train_gflops_per_s_per_rank;
  json["train_s"] = sm.train_s;
  json["wall_s"] = sm.wall_s;
  json["data_wait_share"] = sm.data_wait_share;
  json["compute_share"] = sm.compute_share;
  json["allreduce_share"] = sm.allreduce_share;
  json["zero_stage"] = sm.zero_stage;
  json["parameter_bytes"] = sm.parameter_bytes;
  json["optimizer_state_bytes_per_rank"] = sm.optimizer_state_bytes_per_rank;
  json["peak_host_bytes"] = sm.peak_host_bytes;
  json["peak_device_bytes"] = sm.peak_device_bytes;
  json["peak_host_bytes_per_rank"] = sm.peak_host_bytes_per_rank;
  json["peak_device_bytes_per_rank"] = sm.peak_device_bytes_per_rank;
  output.summary(json_line(json));
  std::printf("%s: %lld steps in %s, %.0f samples/s (data wait %.1f%%, all-reduce %.1f%%)",
              sm.preempted ? "preempted" : "done", static_cast<long long>(sm.steps),
              format_duration(sm.wall_s).c_str(), sm.train_samples_per_s, 100 * sm.data_wait_share,
              100 * sm.allreduce_share);
  if (sm.context > 0) std::printf(", %.0f tokens/s", sm.train_samples_per_s * sm.context);
  if (sm.train_gflops_per_s_per_rank > 0) std::printf(", %.1f GFLOP/s per rank", sm.train_gflops_per_s_per_rank);
  if (accuracy && sm.context > 0)
    std::printf(", test loss %.4f nats/token (%.4f bits/token)", sm.test_loss, sm.test_loss / kLn2);
  else if (accuracy)
    std::printf(", test accuracy %.4f", sm.test_accuracy);
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace mpiddp
