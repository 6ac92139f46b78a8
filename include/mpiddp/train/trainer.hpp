#pragma once
// `mpiddp train`: the whole data-parallel training run.
#include <cstdint>
#include <vector>
#include <string>

#include "mpiddp/config/config.hpp"
#include "mpiddp/dist/process_group.hpp"

namespace mpiddp {

constexpr double kLn2 = 0.6931471805599453;  // nats per bit

struct TrainSummary {
  bool evaluated = false;                         // the test set was evaluated at least once
  double test_accuracy = -1.0, test_loss = -1.0;  // -1 = not evaluated
  double final_train_loss = 0.0;
  std::int64_t epochs = 0, steps = 0, train_samples = 0;
  std::int64_t skipped_steps = 0;  // train.nonfinite = skip
  int world_size = 1;
  std::int64_t global_batch = 0;
  double train_samples_per_s = 0.0;
  int context = 0;  // data.context: > 0 for a sequence model, whose loss is per token
  // The matrix products' floating-point operations per training sample (Sequential::
  // training_flops_per_sample), and what the throughput makes of them per rank.
  double train_flops_per_sample = 0.0, train_gflops_per_s_per_rank = 0.0;
  double train_s = 0.0, wall_s = 0.0;
  double data_wait_share = 0.0, compute_share = 0.0, allreduce_share = 0.0;
  bool preempted = false;  // stopped by a signal after checkpointing
  bool complete = false;   // resumed from the run's end: nothing was trained
  // Memory (docs/zero.md): the optimizer state one rank holds (the largest
  // shard's at ddp.zero_stage = 1), all parameters' bytes, and each rank's peak
  // host (VmHWM) and device (allocator) memory, with their maximum over ranks.
  int zero_stage = 0;
  std::int64_t optimizer_state_bytes_per_rank = 0, parameter_bytes = 0;
  std::int64_t peak_host_bytes = 0, peak_device_bytes = 0;
  std::vector<std::int64_t> peak_host_bytes_per_rank, peak_device_bytes_per_rank;
};

// `resume`: "" (fresh), "auto" or a checkpoint path (see resume.hpp).
TrainSummary run_training(const Config& config, ProcessGroup& group, const std::string& resume);

}  // namespace mpiddp
