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
  // Starts from the resumed checkpoint's window (rank 0 read it; every rank gets it).
  explicit ProgressLog(TrainingSession& session);
  // Collective, once per step: the step's loss and samples summed over all ranks
  // are added to the window on every rank. Summing each step across ranks first
  // keeps the order of additions the same whether or not the job stops and
  // resumes inside the window (a stop's checkpoint holds the window as it is),
  // so a resumed run logs the same bits; per-rank partial windows would not be.
  void add(const LossResult& step);
  // The current window over all ranks (every rank holds it), as a checkpoint stores it.
  WindowTotals totals() const { return {loss_, samples_}; }
  // Collective: prints and stores one record, then starts a new window. Returns
  // the window's mean loss.
  double record(const RecordPoint& at);

 private:
  TrainingSession& session_;
  double loss_ = 0.0, samples_ = 0.0;  // all ranks', the same on every rank
  std::chrono::steady_clock::time_point window_start_ = std::chrono::steady_clock::now();
};

}  // namespace mpiddp
