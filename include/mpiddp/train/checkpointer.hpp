#pragma once
// When and what the trainer checkpoints: rank 0 writes, every rank learns
// whether it worked. A checkpoint records the position a resume continues from,
// given by the caller (the loop's own counters are never adjusted for it).
#include <chrono>
#include <cstdint>

#include "mpiddp/train/progress.hpp"
#include "mpiddp/train/session.hpp"

namespace mpiddp {

// The next step a resume takes: epoch (0-based), steps of it already done, and
// the part of the epoch's global order they consumed (see TrainingState).
struct ResumePoint {
  std::int64_t epoch = 0, step_in_epoch = 0;
  std::int64_t samples_done = 0, length = 0;
  bool shuffled = true;
};

class Checkpointer {
 public:
  explicit Checkpointer(TrainingSession& session);
  // Any of checkpoint.every_epochs / every_steps / every_minutes set.
  bool enabled() const;
  // Rank 0's clock says checkpoint.every_minutes have passed (agreed by the step).
  bool due_by_clock() const;
  bool due_after_step(std::int64_t global_step) const;
  bool due_after_epoch(std::int64_t completed_epochs) const;
  // Collective. The session's state (global step, micro-batches) at `point`, with
  // the progress window and the count of skipped steps.
  void save(const ResumePoint& point, const WindowTotals& window, std::int64_t skipped_steps, bool epoch_boundary);
  // The global step of the newest checkpoint of this run (-1: none yet).
  std::int64_t last_step() const { return last_step_; }

 private:
  TrainingSession& session_;
  std::chrono::steady_clock::time_point last_time_ = std::chrono::steady_clock::now();
  std::int64_t last_step_ = -1;
};

}  // namespace mpiddp
