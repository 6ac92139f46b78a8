#include "mpiddp/train/progress.hpp"

#include <algorithm>
#include <cstdio>

#include "mpiddp/common/json.hpp"

namespace mpiddp {

ProgressLog::ProgressLog(TrainingSession& session) : session_(session) {
  if (!session.resumed) return;  // the same on every rank
  double window[2] = {session.resumed->log_window_loss, session.resumed->log_window_samples};
  session.comm.broadcast(window, sizeof(window), 0);
  loss_ = window[0];
  samples_ = window[1];
}

void ProgressLog::add(const LossResult& step) {
  double sums[2] = {step.loss_sum, static_cast<double>(step.count)};
  session_.comm.allreduce_sum(sums, 2);
  loss_ += sums[0];
  samples_ += sums[1];
}

double ProgressLog::record(const RecordPoint& at) {
  const WindowTotals window = totals();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start_).count();
  // The window counts what the loss averages over: samples, or a sequence model's target tokens.
  const int context = session_.config.data.context;
  const double rate = window.samples / std::max(1e-9, seconds) / std::max(1, context);
  const double mean_loss = window.loss / std::max(1.0, window.samples);
  std::string line;
  if (session_.root) {
    std::printf("epoch %lld/%d step %lld/%lld loss %.4f lr %.3g %.0f %s/s ETA %s\n",
                static_cast<long long>(at.epoch), session_.config.train.epochs,
                static_cast<long long>(at.step_in_epoch), static_cast<long long>(at.steps_per_epoch), mean_loss,
                at.lr, context > 0 ? rate * context : rate, context > 0 ? "tokens" : "samples",
                format_duration(at.eta_s).c_str());
    std::fflush(stdout);
    Json record;
    record["type"] = "train";
    record["epoch"] = at.epoch;
    record["step"] = at.step_in_epoch;
    record["global_step"] = at.global_step;
    record["loss"] = mean_loss;
    record["lr"] = at.lr;
    record["samples_per_s"] = rate;
    if (session_.config.data.context > 0) record["tokens_per_s"] = rate * session_.config.data.context;
    line = json_line(record);
  }
  // Every rank ends with rank 0's line when the record cannot be written.
  agree_or_fail(session_.comm, [&] {
    if (session_.root) session_.output->metric(line);
  });
  loss_ = samples_ = 0.0;
  window_start_ = std::chrono::steady_clock::now();
  return mean_loss;
}

}  // namespace mpiddp
