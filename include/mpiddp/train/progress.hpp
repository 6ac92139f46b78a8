#pragma once
// Progress records: the loss and samples since the last record (the "window"),
// printed as a progress line by rank 0 and appended to metrics.jsonl. The window
// is part of a checkpoint, so a resumed run writes the same records.
#include <chrono>
#include <cstdint>

#include "ops/loss/loss_ops.hpp"
#include "mpiddp/train/session.hpp"

namespace mpiddp {

// Loss and samples summed over all ranks.
struct WindowTotals {
  double loss = 0.0, samples = 0.0;
};

// Where a record is taken (1-based epoch and step, as printed).
struct RecordPoint {
  std::int64_t epoch = 0, step_in_epoch = 0, steps_per_epoch = 0, global_step = 0;
  double lr = 0.0;
  double eta_s = 0.0;
};

class ProgressLog {
 public:
  // Starts from the resumed checkpoint's window (rank 0 holds the all-rank totals).
  explicit ProgressLog(TrainingSession& session);
  void add(const LossResult& step) {
    loss_ += step.loss_sum;
    samples_ += static_cast<double>(step.count);
  }
  // Collective: the current window over all ranks.
  WindowTotals totals();
  // Collective: the window as a checkpoint stores it (all-rank totals), now
  // held by rank 0 alone, as a resume from that checkpoint holds it. The next
  // record then adds the same numbers in the same order whether or not the job
  // stopped there, so a resumed run logs the same bits.
  WindowTotals fold();
  // Collective: prints and stores one record, then starts a new window. Returns
  // the window's mean loss.
  double record(const RecordPoint& at);

 private:
  TrainingSession& session_;
  double loss_ = 0.0, samples_ = 0.0;  // this rank's
  std::chrono::steady_clock::time_point window_start_ = std::chrono::steady_clock::now();
};

}  // namespace mpiddp
