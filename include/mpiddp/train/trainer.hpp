#pragma once
// `mpiddp train`: the whole data-parallel training run.
#include <cstdint>
#include <string>

#include "mpiddp/config/config.hpp"
#include "mpiddp/dist/process_group.hpp"

namespace mpiddp {

struct TrainSummary {
  bool evaluated = false;                         // the test set was evaluated at least once
  double test_accuracy = -1.0, test_loss = -1.0;  // -1 = not evaluated
  double final_train_loss = 0.0;
  std::int64_t epochs = 0, steps = 0, train_samples = 0;
  std::int64_t skipped_steps = 0;  // train.nonfinite = skip
  int world_size = 1;
  std::int64_t global_batch = 0;
  double train_samples_per_s = 0.0;
  double train_s = 0.0, wall_s = 0.0;
  double data_wait_share = 0.0, compute_share = 0.0, allreduce_share = 0.0;
  bool preempted = false;  // stopped by a signal after checkpointing
};

// `resume`: "" (fresh), "auto" or a checkpoint path (see resume.hpp).
TrainSummary run_training(const Config& config, ProcessGroup& group, const std::string& resume);

}  // namespace mpiddp
