// The training loop, read top to bottom: a session is set up (every failure
// agreed by all ranks), then epochs of steps, each epoch followed by an
// evaluation and a checkpoint, then the summary.
#include "mpiddp/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/json.hpp"
#include "mpiddp/data/sampler.hpp"
#include "mpiddp/dist/watchdog.hpp"
#include "mpiddp/train/batch_source.hpp"
#include "mpiddp/train/checkpointer.hpp"
#include "mpiddp/train/elastic.hpp"
#include "mpiddp/train/evaluation.hpp"
#include "mpiddp/train/failure_injection.hpp"
#include "mpiddp/train/progress.hpp"
#include "mpiddp/train/sample_log.hpp"
#include "mpiddp/train/session.hpp"
#include "mpiddp/train/signals.hpp"
#include "mpiddp/train/step.hpp"
#include "mpiddp/train/summary.hpp"
#include "mpiddp/train/trace_window.hpp"

namespace mpiddp {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

class Trainer {
 public:
  Trainer(TrainingSession& session, Clock::time_point run_start)
      : s_(session),
        config_(session.config),
        state_(session.state),
        schedule_(session.config.optim, session.plan.steps_per_epoch, session.plan.total_steps),
        // On a GPU the next step's first batch is read and copied to the device
        // while this step computes. Not with NaN injection, which edits batches
        // on the host before use.
        batches_(*session.train_data, static_cast<std::size_t>(config_.train.batch_size),
                 static_cast<std::size_t>(config_.data.prefetch), *session.compute.device,
                 !session.compute.device->is_host() && config_.debug.fail_mode != FailMode::nan,
                 session.augmenter ? &*session.augmenter : nullptr, session.loader.background),
        progress_(session),
        checkpointer_(session),
        tracing_(session.config, session.comm, nested_layer_count(session.model->layers()),
                 session.reducer->buckets().size(), *session.compute.device, session.state.global_step),
        start_(run_start) {
    if (s_.resumed && s_.root) skipped_steps_ = s_.resumed->skipped_steps;
    agree_or_fail(s_.comm, [&] { sample_log_.emplace(config_.debug.sample_log, s_.comm.rank()); });
  }

  TrainSummary run() {
    summary_.world_size = s_.comm.size();
    summary_.global_batch = s_.plan.global_batch;
    for (; state_.epoch < config_.train.epochs && !max_steps_reached(state_.global_step); ++state_.epoch) {
      if (!run_epoch()) break;  // stopped by a signal, or max_steps inside the epoch
      end_epoch();
    }
    if (!summary_.preempted && checkpointer_.enabled() && checkpointer_.last_step() != state_.global_step)
      checkpointer_.save(position(), progress_.totals(), skipped_steps_, false);
    return finish();
  }

 private:
  // train.max_steps caps the steps taken (global_step), whatever the world size.
  bool max_steps_reached(std::int64_t global_step) const {
    return config_.train.max_steps > 0 && global_step >= config_.train.max_steps;
  }

  // The rest of epoch state_.epoch, from the samples of its order already done
  // on. False when the epoch did not end (a stop signal or train.max_steps).
  bool run_epoch() {
    const auto epoch_start = Clock::now();
    start_epoch();
    batches_.start_epoch(share_.indices, static_cast<std::uint64_t>(state_.epoch));
    std::int64_t step = 0;
    for (; step < epoch_steps_left_ && !max_steps_reached(state_.global_step); ++step) {
      if (!run_step()) break;
      ++state_.step_in_epoch;
      state_.epoch_samples_done = samples_done_after(step + 1);
      if (progress_due()) {
        const double per_step = seconds_since(epoch_start) / static_cast<double>(step + 1);
        record_progress(per_step * static_cast<double>(steps_left_in_run()));
      }
      if (checkpointer_.due_after_step(state_.global_step))
        checkpointer_.save(position(), progress_.totals(), skipped_steps_, false);
    }
    train_s_ += seconds_since(epoch_start);
    data_wait_s_ += batches_.wait_s();
    return !summary_.preempted && step == epoch_steps_left_;
  }

  // This rank's share of the rest of the epoch: of its whole order at a fresh
  // start (PyTorch's DistributedSampler), of what the finished steps left of it
  // after a resume, at whatever world size those steps ran.
  void start_epoch() {
    if (state_.epoch_samples_done == 0) {  // not begun: this job's settings order it
      state_.epoch_length = epoch_order_length(s_.train_data->size(), s_.comm.size(), config_.data.drop_last);
      state_.epoch_shuffled = config_.data.shuffle;
    }
    SamplerOptions sampling;
    sampling.size = s_.train_data->size();
    sampling.world = s_.comm.size();
    sampling.rank = s_.comm.rank();
    sampling.seed = config_.train.seed;
    sampling.epoch = static_cast<std::uint64_t>(state_.epoch);
    sampling.shuffle = state_.epoch_shuffled;
    share_ = remaining_share(sampling, state_.epoch_length, state_.epoch_samples_done);
    segment_start_ = state_.epoch_samples_done;
    epoch_steps_left_ = steps_left_in_epoch(config_, state_.epoch_length, segment_start_, s_.comm.size());
    epoch_steps_ = state_.step_in_epoch + epoch_steps_left_;
  }

  // Every rank has read the same count of its share: together a prefix of the
  // rest of the epoch's order (the padding at its end aside).
  std::int64_t samples_done_after(std::int64_t steps) const {
    const std::int64_t per_step = static_cast<std::int64_t>(config_.train.batch_size) * config_.train.accumulate;
    const auto read = std::min(static_cast<std::int64_t>(share_.indices.size()), steps * per_step);
    return std::min(state_.epoch_length, segment_start_ + read * s_.comm.size());
  }

  // For the ETA: the rest of this epoch, then whole epochs of this job's plan.
  std::int64_t steps_left_in_run() const {
    const std::int64_t in_epoch = epoch_steps_ - state_.step_in_epoch;
    std::int64_t left = in_epoch + (config_.train.epochs - state_.epoch - 1) * s_.plan.steps_per_epoch;
    if (config_.train.max_steps > 0) left = std::min(left, config_.train.max_steps - state_.global_step);
    return left;
  }

  // One optimizer step. False when a stop signal ended the run (checkpointed).
  bool run_step() {
    const std::int64_t step = state_.global_step;
    tracing_.before_step();
    TraceSpan span("step", static_cast<int>(step));
    Watchdog::instance().set_step(step);
    // One small all-reduce per step: a read error on any rank (bad label,
    // damaged shard), a stop signal on any rank, and rank 0's clock-based
    // checkpoint decision reach every rank together.
    const auto flags = agree();
    if (flags[0] != 0) {
      if (s_.root) std::printf("stop requested by a signal: checkpointing at step %lld\n", static_cast<long long>(step));
      checkpointer_.save(position(), progress_.totals(), skipped_steps_, false);  // the point of stopping is to resume
      summary_.preempted = true;
      return false;
    }
    if (flags[1] != 0) checkpointer_.save(position(), progress_.totals(), skipped_steps_, false);

    inject_failure(config_.debug, s_.comm.rank(), step, micro_);
    log_samples(step);
    const LossResult r = compute_step(step);
    apply_update(r, step);
    state_.micro_batches += micro_.size();
    ++state_.global_step;
    progress_.add(r);
    // A sequence model's loss counts target tokens: data.context per sample.
    local_samples_ += static_cast<double>(r.count) / std::max(1, config_.data.context);
    return true;
  }

  // The step's data (read here) and its agreement, one all-reduce.
  std::vector<std::int64_t> agree() {
    TraceSpan span("agree");
    return agree_step(
        s_.comm,
        [&] {
          TraceSpan wait("data wait");
          batches_.next_step(micro_, config_.train.accumulate);
        },
        {stop_requested() ? 1 : 0, checkpointer_.due_by_clock() ? 1 : 0});
  }

  LossResult compute_step(std::int64_t step) {
    TraceSpan span("compute");
    StepInputs in;
    in.micro_batches = &micro_;
    in.classification = s_.classification;
    in.label_smoothing = static_cast<float>(config_.train.label_smoothing);
    in.lr = lr_ = schedule_.at(schedule_step(s_.plan, state_.epoch, state_.epoch_samples_done));
    in.context.seed = config_.train.seed;
    in.context.stream = static_cast<std::uint64_t>(s_.comm.rank());
    in.context.counter = state_.micro_batches;
    in.first_staged = batches_.staged_first();
    in.while_device_runs = [&] {
      const bool another_step = state_.step_in_epoch + 1 < epoch_steps_ && !max_steps_reached(state_.global_step + 1);
      if (!another_step) return;
      TraceSpan prefetch("prefetch");
      batches_.prefetch(state_.micro_batches + micro_.size());
    };
    try {
      return forward_backward(*s_.model, *s_.reducer, in);
    } catch (const RuntimeError& e) {
      throw RuntimeError("step " + std::to_string(step) + ": " + e.what());
    }
  }

  // The optimizer step, unless the reduced gradients hold NaN/Inf (the same
  // verdict on every rank): then skip or stop, as train.nonfinite says.
  void apply_update(const LossResult& r, std::int64_t step) {
    if (r.finite) {
      s_.reducer->update(*s_.optimizer, lr_);  // at ddp.zero_stage = 1: this rank's shard, then the all-gather
    } else if (config_.train.nonfinite == NonfinitePolicy::skip) {
      ++skipped_steps_;
      // Counted from 1, as the progress lines and metrics.jsonl's global_step count.
      if (s_.root)
        std::fprintf(stderr, "mpiddp: warning: global step %lld: non-finite gradient, step skipped\n",
                     static_cast<long long>(step + 1));
    } else {
      if (s_.root)
        report_error(0, "global step " + std::to_string(step + 1) + ": non-finite loss or gradient (NaN/Inf); " +
                            "set train.nonfinite = skip to drop such steps");
      throw JobFailed(kExitRuntimeError);
    }
  }

  // Called after a step (global_step and step_in_epoch count it).
  bool progress_due() const {
    const bool last_of_epoch = state_.step_in_epoch == epoch_steps_ || max_steps_reached(state_.global_step);
    return state_.global_step % config_.train.log_every == 0 || last_of_epoch;
  }

  void record_progress(double eta_s) {
    RecordPoint at;
    at.epoch = state_.epoch + 1;
    at.step_in_epoch = state_.step_in_epoch;
    at.steps_per_epoch = epoch_steps_;
    at.global_step = state_.global_step;
    at.lr = lr_;
    at.eta_s = eta_s;
    summary_.final_train_loss = progress_.record(at);
  }

  // After a complete epoch: evaluation, then the epoch's checkpoint.
  void end_epoch() {
    const std::int64_t completed = state_.epoch + 1;
    summary_.epochs = completed;
    if (s_.test_data) evaluate_epoch(completed);
    if (checkpointer_.due_after_epoch(completed))
      checkpointer_.save({completed, 0, 0, 0, config_.data.shuffle}, progress_.totals(), skipped_steps_, true);
    state_.step_in_epoch = 0;
    state_.epoch_samples_done = state_.epoch_length = 0;  // the next epoch is ordered when it starts
  }

  void evaluate_epoch(std::int64_t completed) {
    // Every rank evaluates with rank 0's running statistics, those the checkpoint holds.
    s_.reducer->broadcast_buffers();
    last_eval_ = evaluate(*s_.model, *s_.test_data, s_.comm, config_, s_.classification, s_.loader.background);
    evaluated_ = true;
    // Every rank ends with rank 0's line when the record cannot be written.
    agree_or_fail(s_.comm, [&] {
      if (s_.root) record_evaluation(completed);
    });
  }

  void record_evaluation(std::int64_t completed) {
    const bool tokens = config_.data.context > 0;  // the loss is per target token: also in bits
    if (tokens)
      std::printf("epoch %lld/%d test loss %.4f nats/token (%.4f bits/token), next-token accuracy %.4f (%lld tokens)\n",
                  static_cast<long long>(completed), config_.train.epochs, last_eval_.loss, last_eval_.loss / kLn2,
                  last_eval_.accuracy, static_cast<long long>(last_eval_.samples));
    else
      std::printf("epoch %lld/%d test loss %.4f accuracy %.4f (%lld samples)\n", static_cast<long long>(completed),
                  config_.train.epochs, last_eval_.loss, last_eval_.accuracy,
                  static_cast<long long>(last_eval_.samples));
    std::fflush(stdout);
    Json record;
    record["type"] = "eval";
    record["epoch"] = completed;
    record["global_step"] = state_.global_step;
    record["test_loss"] = last_eval_.loss;
    if (tokens) record["test_bits_per_token"] = last_eval_.loss / kLn2;
    record["test_accuracy"] = last_eval_.accuracy;
    record["samples"] = last_eval_.samples;
    s_.output->metric(json_line(record));
  }

  ResumePoint position() const {
    return {state_.epoch, state_.step_in_epoch, state_.epoch_samples_done, state_.epoch_length, state_.epoch_shuffled};
  }

  // debug.sample_log: the indices the step about to run trains on.
  void log_samples(std::int64_t step) {
    if (!sample_log_->enabled()) return;
    const std::size_t per_step = static_cast<std::size_t>(config_.train.batch_size) * config_.train.accumulate;
    const auto first = static_cast<std::size_t>(state_.step_in_epoch - (epoch_steps_ - epoch_steps_left_)) * per_step;
    sample_log_->record(state_.epoch, step, share_.indices, share_.real, first, first + per_step);
  }

  TrainSummary finish();

  TrainingSession& s_;
  const Config& config_;
  TrainingState& state_;
  const LrSchedule schedule_;
  BatchSource batches_;
  ProgressLog progress_;
  Checkpointer checkpointer_;
  TraceWindow tracing_;
  std::vector<Batch> micro_;
  // The rest of the epoch in progress: this rank's share, where in the epoch's
  // order it began, its steps, and the epoch's steps in all (for progress lines).
  RemainingShare share_;
  std::int64_t segment_start_ = 0, epoch_steps_left_ = 0, epoch_steps_ = 0;
  std::optional<SampleLog> sample_log_;
  double lr_ = 0.0;
  std::int64_t skipped_steps_ = 0;
  double train_s_ = 0.0, data_wait_s_ = 0.0, local_samples_ = 0.0;
  Evaluation last_eval_;
  bool evaluated_ = false;
  TrainSummary summary_;
  Clock::time_point start_;
};

// Collective: run-wide totals, summary.json and the closing line.
TrainSummary Trainer::finish() {
  tracing_.finish();
  Communicator& comm = s_.comm;
  summary_.steps = state_.global_step;
  summary_.train_s = train_s_;
  summary_.wall_s = seconds_since(start_);
  double totals[3] = {data_wait_s_, s_.reducer->communication_wait_s(), local_samples_};
  comm.allreduce_sum(totals, 3);
  summary_.train_samples = static_cast<std::int64_t>(totals[2]);
  const double slowest_train_s =
      static_cast<double>(comm.allreduce_max(static_cast<std::int64_t>(train_s_ * 1e6))) / 1e6;
  summary_.train_samples_per_s = static_cast<double>(summary_.train_samples) / std::max(1e-9, slowest_train_s);
  summary_.context = config_.data.context;
  summary_.train_flops_per_sample = s_.model->training_flops_per_sample();
  summary_.train_gflops_per_s_per_rank =
      summary_.train_flops_per_sample * summary_.train_samples_per_s / comm.size() / 1e9;
  summary_.data_wait_share = totals[0] / comm.size() / std::max(1e-9, train_s_);
  summary_.allreduce_share = totals[1] / comm.size() / std::max(1e-9, train_s_);
  summary_.compute_share = std::max(0.0, 1.0 - summary_.data_wait_share - summary_.allreduce_share);
  summary_.skipped_steps = skipped_steps_;
  summary_.evaluated = evaluated_;
  if (evaluated_) {
    summary_.test_accuracy = last_eval_.accuracy;
    summary_.test_loss = last_eval_.loss;
  }
  record_memory(summary_, s_);
  if (s_.root) write_summary(summary_, s_.classification, *s_.output);
  return summary_;
}

}  // namespace

// The one line for a run that is already complete.
static std::string describe_complete_run(const TrainingSession& session) {
  const TrainingState& at = *session.resumed;
  const Config& config = session.config;
  const bool by_steps = config.train.max_steps > 0 && at.global_step >= config.train.max_steps;
  std::string line = "run.dir " + config.run.dir + ": the run is complete (" +
                     (by_steps ? "train.max_steps = " + std::to_string(config.train.max_steps) + " reached"
                               : "epoch " + std::to_string(at.epoch) + " of train.epochs = " +
                                     std::to_string(config.train.epochs) + " done") +
                     ", global step " + std::to_string(at.global_step) + "); nothing to train, no file changed";
  std::error_code ec;
  if (!std::filesystem::exists(config.run.dir + "/summary.json", ec)) line += " (it has no summary.json)";
  return line + "; raise " + (by_steps ? "train.max_steps" : "train.epochs") + " to train it further";
}

TrainSummary run_training(const Config& config, ProcessGroup& group, const std::string& resume) {
  const auto start = Clock::now();
  Watchdog::instance().start(config.dist.timeout_s, group.world().rank());
  TrainSummary summary;
  {
    TrainingSession session(config, group, resume);
    if (session.complete) {
      if (session.root) std::printf("%s\n", describe_complete_run(session).c_str());
      Watchdog::instance().stop();
      summary.complete = true;
      return summary;
    }
    session.print_banner();
    summary = Trainer(session, start).run();
  }  // the session's teardown (GPU waits, ncclCommFinalize) still runs under the watchdog
  Watchdog::instance().stop();
  return summary;
}

}  // namespace mpiddp
