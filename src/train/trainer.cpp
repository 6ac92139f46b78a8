// The training loop. Read top to bottom: set-up (every failure agreed by all
// ranks so the job ends cleanly), then epochs of steps, evaluation, checkpoint.
#include "mpiddp/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <csignal>
#include <cmath>
#include <limits>
#include <thread>
#include <utility>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/json.hpp"
#include "mpiddp/data/loader.hpp"
#include "mpiddp/data/sampler.hpp"
#include "mpiddp/ddp/reducer.hpp"
#include "mpiddp/device/select.hpp"
#include "mpiddp/tensor/cpu_ops.hpp"
#include "mpiddp/dist/watchdog.hpp"
#include "mpiddp/train/resume.hpp"
#include "mpiddp/train/run_output.hpp"
#include "mpiddp/train/signals.hpp"
#include "mpiddp/train/step.hpp"

namespace mpiddp {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

int blas_threads_for(const TrainConfig& train, int local_size) {
  if (train.threads > 0) return train.threads;
  // Under Slurm the allocation says how many CPUs each task owns.
  if (const char* per_task = std::getenv("SLURM_CPUS_PER_TASK"); per_task && std::atoi(per_task) > 0)
    return std::atoi(per_task);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_size));
}

void print_banner(const Config& config, Communicator& comm, const ComputeSetup& compute, const ShardedDataset& train,
                  const ShardedDataset* test, const Sequential& model, int threads) {
  if (comm.rank() != 0) return;
  std::printf("mpiddp %s: train %s\n", MPIDDP_VERSION, config.source.empty() ? "(defaults)" : config.source.c_str());
  if (!compute.note.empty()) std::printf("note: %s\n", compute.note.c_str());
  std::printf("world %d rank(s), device %s, precision %s, gradients over %s, %d BLAS thread(s) per rank\n",
              comm.size(), device_kind_name(compute.device->kind()), precision_name(compute.device->precision()),
              compute.transport->name().c_str(), threads);
  // Every rank's placement, so the rank -> node -> GPU mapping is in the job log.
  for (const Placement& p : compute.placements) {
    std::printf("  rank %d: host %s, local rank %d of %d", p.rank, p.host, p.local_rank, p.local_size);
    if (p.device >= 0)
      std::printf(", GPU %d (PCI %s, CUDA_VISIBLE_DEVICES=%s)", p.device, p.pci_bus_id, p.visible);
    std::printf("\n");
  }
  if (!compute.device->is_host()) std::printf("rank 0 device: %s\n", compute.device->describe().c_str());
  std::printf("train data: %s\n", train.describe().c_str());
  if (test) std::printf("test data: %s\n", test->describe().c_str());
  std::printf("model: %s (%zu parameters)\n", model.describe().c_str(), model.parameters().total());
  std::printf("--- resolved input file ---\n%s---\n", config.resolved_ini.c_str());
  std::fflush(stdout);
}

struct Evaluation {
  double loss = 0.0, accuracy = 0.0;
  std::int64_t samples = 0;
};

// Every sample exactly once: rank r takes r, r + W, ... (no sampler padding,
// which would count duplicated samples twice).
Evaluation evaluate(Sequential& model, ShardedDataset& data, Communicator& comm, const Config& config,
                    bool classification) {
  std::vector<std::int64_t> indices;
  for (std::int64_t i = comm.rank(); i < data.size(); i += comm.size()) indices.push_back(i);
  const std::size_t batch = static_cast<std::size_t>(std::max(256, config.train.batch_size));
  double sums[3] = {0.0, 0.0, 0.0};  // loss, correct, count
  agree_or_fail(comm, [&] {
    BatchLoader loader(data, std::move(indices), batch, static_cast<std::size_t>(config.data.prefetch));
    while (auto b = loader.next()) {
      const LossResult r = evaluate_batch(model, *b, classification);
      sums[0] += r.loss_sum;
      sums[1] += static_cast<double>(r.correct);
      sums[2] += static_cast<double>(r.count);
    }
  });
  comm.allreduce_sum(sums, 3);
  Evaluation e;
  e.samples = static_cast<std::int64_t>(sums[2]);
  e.loss = sums[0] / std::max(1.0, sums[2]);
  e.accuracy = classification ? sums[1] / std::max(1.0, sums[2]) : 0.0;
  return e;
}

// debug.fail_*: makes one rank fail at one step in the requested way (tests).
void inject_failure(const DebugConfig& debug, int rank, std::int64_t step, std::vector<Batch>& micro) {
  if (debug.fail_mode == FailMode::none || rank != debug.fail_rank || step != debug.fail_step) return;
  const std::string where =
      std::string("debug.fail_mode = ") + name_of(debug.fail_mode) + " at step " + std::to_string(step);
  if (debug.fail_mode == FailMode::throw_error) throw RuntimeError(where);
  if (debug.fail_mode == FailMode::nan) {
    micro.front().features.data()[0] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  if (debug.fail_mode == FailMode::signal) {
    std::raise(SIGUSR1);
    return;
  }
  std::fprintf(stderr, "mpiddp: debug: rank %d: %s\n", rank, where.c_str());
  std::fflush(stderr);
  if (debug.fail_mode == FailMode::exit) std::_Exit(kExitRuntimeError);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // hang
}

}  // namespace

TrainSummary run_training(const Config& config, ProcessGroup& group, const std::string& resume) {
  const auto run_start = Clock::now();
  Communicator& comm = group.world();
  const bool root = comm.rank() == 0;
  const bool classification = config.data.task == DataTask::classification;
  const LabelKind label_kind = classification ? LabelKind::class_id : LabelKind::target;
  Watchdog::instance().start(config.dist.timeout_s, comm.rank());

  // ---- set-up: any rank's failure ends every rank with that rank's message ----
  const int threads = blas_threads_for(config.train, group.local_size());
  cpu::set_blas_threads(threads);
  std::optional<ShardedDataset> train_data, test_data;
  std::size_t outputs = 0;
  agree_or_fail(comm, [&] {
    train_data.emplace(config.data.train, config.data.features, config.data.labels, label_kind);
    if (config.train.eval && !config.data.test.empty()) {
      test_data.emplace(config.data.test, config.data.features, config.data.labels, label_kind);
      if (test_data->feature_dim() != train_data->feature_dim())
        throw InputError(config.data.test + ": " + std::to_string(test_data->feature_dim()) +
                         " features per sample, but " + config.data.train + " has " +
                         std::to_string(train_data->feature_dim()));
      if (!classification && test_data->target_dim() != train_data->target_dim())
        throw InputError(config.data.test + ": " + std::to_string(test_data->target_dim()) +
                         " regression targets per sample, but " + config.data.train + " has " +
                         std::to_string(train_data->target_dim()));
    }
    if (classification) {
      int classes = config.model.classes > 0 ? config.model.classes : train_data->declared_classes();
      if (classes < 2)
        throw InputError("model.classes: number of classes unknown (shards carry no num_classes attribute); set it");
      train_data->set_classes(classes);
      if (test_data) test_data->set_classes(classes);
      outputs = static_cast<std::size_t>(classes);
    } else {
      outputs = train_data->target_dim();
    }
    if (samples_per_rank(train_data->size(), comm.size(), config.data.drop_last) < 1)
      throw InputError(config.data.train + ": " + std::to_string(train_data->size()) + " samples cannot feed " +
                       std::to_string(comm.size()) + " ranks with data.drop_last");
  });

  // Declared before the model: the device outlives everything allocated on it.
  ComputeSetup compute = setup_compute(config, group);
  std::unique_ptr<Sequential> model;
  agree_or_fail(comm, [&] { model = build_mlp(config.model, train_data->feature_dim(), outputs, config.train.seed,
                                              compute.device); });
  ParameterStore& params = model->parameters();
  GradientReducer reducer(params, comm, static_cast<std::size_t>(config.ddp.first_bucket_mb * 1048576.0),
                          static_cast<std::size_t>(config.ddp.bucket_mb * 1048576.0), compute.transport.get());
  agree_or_fail(comm, [&] { reducer.synchronize_parameters(); });
  auto optimizer = make_optimizer(config.optim, compute.device);
  CheckpointDirectory checkpoints(config.run.dir + "/checkpoints", config.checkpoint.keep,
                                  config.checkpoint.keep_every_epochs);
  if (root) checkpoints.remove_stale_temporaries();
  TrainingState state = fresh_training_state(config, comm.size(), train_data->size());
  const auto resumed = resume_training(resume, checkpoints, config, state.dataset_size, params, *optimizer, comm);
  if (resumed) {
    state.epoch = resumed->epoch;
    state.step_in_epoch = resumed->step_in_epoch;
    state.global_step = resumed->global_step;
    state.micro_batches = resumed->micro_batches;
  }
  std::unique_ptr<RunOutput> output;
  agree_or_fail(comm, [&] {
    if (root)
      output = std::make_unique<RunOutput>(config.run.dir, config.resolved_ini, resumed ? state.global_step : -1,
                                           state.epoch);
  });
  print_banner(config, comm, compute, *train_data, test_data ? &*test_data : nullptr, *model, threads);

  const std::int64_t per_rank = samples_per_rank(train_data->size(), comm.size(), config.data.drop_last);
  const std::int64_t batches_per_epoch = (per_rank + config.train.batch_size - 1) / config.train.batch_size;
  const std::int64_t steps_per_epoch = (batches_per_epoch + config.train.accumulate - 1) / config.train.accumulate;
  std::int64_t total_steps = steps_per_epoch * config.train.epochs;
  if (config.train.max_steps > 0) total_steps = std::min(total_steps, config.train.max_steps);
  const LrSchedule schedule(config.optim, steps_per_epoch, total_steps);
  const std::int64_t global_batch =
      static_cast<std::int64_t>(config.train.batch_size) * config.train.accumulate * comm.size();
  if (root)
    std::printf("%lld steps per epoch, global batch %lld (%d per rank x %d micro-batch(es) x %d rank(s))\n",
                static_cast<long long>(steps_per_epoch), static_cast<long long>(global_batch),
                config.train.batch_size, config.train.accumulate, comm.size());

  // ---- checkpoints: rank 0 writes, every rank learns whether it worked ----
  const bool checkpointing = config.checkpoint.every_epochs > 0 || config.checkpoint.every_steps > 0 ||
                             config.checkpoint.every_minutes > 0.0;
  auto last_checkpoint_time = Clock::now();
  std::int64_t last_checkpoint_step = resumed ? state.global_step : -1;
  double window_loss = 0.0, window_count = 0.0;  // see the training section
  std::int64_t skipped_steps = 0;
  auto save_checkpoint = [&](bool epoch_boundary) {
    double window[2] = {window_loss, window_count};
    comm.allreduce_sum(window, 2);
    state.log_window_loss = window[0];
    state.log_window_samples = window[1];
    state.skipped_steps = skipped_steps;
    params.pull_values();  // checkpoints hold the host copies
    optimizer->pull_state();
    agree_or_fail(comm, [&] {
      if (!root) return;
      const auto start = Clock::now();
      const std::string path = checkpoints.save(params, *optimizer, state, epoch_boundary);
      std::error_code ec;
      const auto bytes = std::filesystem::file_size(path, ec);
      std::printf("checkpoint %s (step %lld, %.1f MB, %.3f s)\n", path.c_str(),
                  static_cast<long long>(state.global_step), ec ? 0.0 : static_cast<double>(bytes) / 1e6,
                  seconds_since(start));
      std::fflush(stdout);
    });
    last_checkpoint_time = Clock::now();
    last_checkpoint_step = state.global_step;
  };

  // ---- training ----
  TrainSummary summary;
  summary.world_size = comm.size();
  summary.global_batch = global_batch;
  double train_s = 0.0, data_wait_s = 0.0, local_samples = 0.0;
  // Loss and samples since the last progress record; a resumed run starts from
  // the checkpoint's (rank 0 holds the all-rank totals) so its records match.
  if (resumed && root) {
    skipped_steps = resumed->skipped_steps;
    window_loss = resumed->log_window_loss;
    window_count = resumed->log_window_samples;
  }
  Evaluation last_eval;
  bool evaluated = false;

  for (; state.epoch < config.train.epochs && state.global_step < total_steps && !summary.preempted;
       ++state.epoch, state.step_in_epoch = 0) {
    const auto epoch_start = Clock::now();
    SamplerOptions sampling;
    sampling.size = train_data->size();
    sampling.world = comm.size();
    sampling.rank = comm.rank();
    sampling.seed = config.train.seed;
    sampling.epoch = static_cast<std::uint64_t>(state.epoch);
    sampling.shuffle = config.data.shuffle;
    sampling.drop_last = config.data.drop_last;
    std::vector<std::int64_t> order = distributed_sampler_indices(sampling);
    // Resuming mid-epoch: skip what the finished steps consumed.
    const std::size_t consumed = std::min(
        order.size(), static_cast<std::size_t>(state.step_in_epoch * config.train.accumulate * config.train.batch_size));
    order.erase(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(consumed));
    BatchLoader loader(*train_data, std::move(order), static_cast<std::size_t>(config.train.batch_size),
                       static_cast<std::size_t>(config.data.prefetch));

    auto window_start = Clock::now();
    const std::int64_t first_step = state.step_in_epoch;
    std::vector<Batch> micro;
    // On a GPU the next step's first batch is read and copied to the device while
    // this step computes (a read error is kept for the next step's agreement).
    // Not with NaN injection, which edits batches on the host before use.
    const bool prefetching = !compute.device->is_host() && config.debug.fail_mode != FailMode::nan;
    std::optional<Batch> next_batch;
    std::optional<StagedBatch> next_staged;
    std::exception_ptr next_error;
    for (; state.step_in_epoch < steps_per_epoch && state.global_step < total_steps; ++state.step_in_epoch) {
      const std::int64_t step = state.global_step;
      Watchdog::instance().set_step(step);
      // One small all-reduce per step: a read error on any rank (bad label,
      // damaged shard), a stop signal on any rank, and rank 0's clock-based
      // checkpoint decision reach every rank together.
      const bool checkpoint_due = root && config.checkpoint.every_minutes > 0.0 &&
                                  seconds_since(last_checkpoint_time) >= 60.0 * config.checkpoint.every_minutes;
      micro.clear();
      const auto flags = agree_step(
          comm,
          [&] {
            if (next_error) std::rethrow_exception(std::exchange(next_error, nullptr));
            if (next_batch) {
              micro.push_back(std::move(*next_batch));
              next_batch.reset();
            }
            for (int m = static_cast<int>(micro.size()); m < config.train.accumulate; ++m) {
              auto batch = loader.next();
              if (!batch) break;
              micro.push_back(std::move(*batch));
            }
          },
          {stop_requested() ? 1 : 0, checkpoint_due ? 1 : 0});
      if (flags[0] != 0) {
        if (root) std::printf("stop requested by a signal: checkpointing at step %lld\n", static_cast<long long>(step));
        save_checkpoint(false);  // always: the point of stopping is to resume
        summary.preempted = true;
        break;
      }
      if (flags[1] != 0) save_checkpoint(false);

      inject_failure(config.debug, comm.rank(), step, micro);
      StepInputs in;
      in.micro_batches = &micro;
      in.classification = classification;
      in.lr = schedule.at(step);
      in.context.seed = config.train.seed;
      in.context.stream = static_cast<std::uint64_t>(comm.rank());
      in.context.counter = state.micro_batches;
      const std::optional<StagedBatch> staged_first = std::exchange(next_staged, std::nullopt);
      in.first_staged = staged_first ? &*staged_first : nullptr;
      in.while_device_runs = [&] {
        const bool another_step = state.step_in_epoch + 1 < steps_per_epoch && state.global_step + 1 < total_steps;
        if (!prefetching || !another_step) return;
        try {
          auto batch = loader.next();
          if (!batch) return;
          next_batch = std::move(*batch);
          // The slot of the next micro-batch number, as forward_backward would choose.
          const auto slot = static_cast<int>((state.micro_batches + micro.size()) % 2);
          next_staged = compute.device->stage(*next_batch, slot);
        } catch (...) {
          next_error = std::current_exception();
          next_batch.reset();
          next_staged.reset();
        }
      };
      LossResult r;
      try {
        r = forward_backward(*model, reducer, in);
      } catch (const RuntimeError& e) {
        throw RuntimeError("step " + std::to_string(step) + ": " + e.what());
      }
      if (r.finite) {
        optimizer->step(params.values(), params.grads(), params.total(), in.lr);
      } else if (config.train.nonfinite == NonfinitePolicy::skip) {
        ++skipped_steps;
        if (root) std::fprintf(stderr, "mpiddp: warning: step %lld: non-finite gradient, step skipped\n",
                               static_cast<long long>(step));
      } else {
        if (root)
          report_error(0, "step " + std::to_string(step) + ": non-finite loss or gradient (NaN/Inf); " +
                              "set train.nonfinite = skip to drop such steps");
        throw JobFailed(kExitRuntimeError);
      }
      state.micro_batches += micro.size();
      ++state.global_step;
      window_loss += r.loss_sum;
      window_count += static_cast<double>(r.count);
      local_samples += static_cast<double>(r.count);

      const bool last_of_epoch = state.step_in_epoch + 1 == steps_per_epoch || state.global_step == total_steps;
      if (state.global_step % config.train.log_every == 0 || last_of_epoch) {
        double sums[2] = {window_loss, window_count};
        comm.allreduce_sum(sums, 2);
        const double rate = sums[1] / std::max(1e-9, seconds_since(window_start));
        const double per_step = seconds_since(epoch_start) / static_cast<double>(state.step_in_epoch + 1 - first_step);
        const double eta = per_step * static_cast<double>(total_steps - state.global_step);
        summary.final_train_loss = sums[0] / std::max(1.0, sums[1]);
        if (root) {
          std::printf("epoch %lld/%d step %lld/%lld loss %.4f lr %.3g %.0f samples/s ETA %s\n",
                      static_cast<long long>(state.epoch + 1), config.train.epochs,
                      static_cast<long long>(state.step_in_epoch + 1), static_cast<long long>(steps_per_epoch),
                      summary.final_train_loss, in.lr, rate, format_duration(eta).c_str());
          std::fflush(stdout);
          output->metric(JsonObject()
                             .add("type", "train")
                             .add("epoch", static_cast<std::int64_t>(state.epoch + 1))
                             .add("step", static_cast<std::int64_t>(state.step_in_epoch + 1))
                             .add("global_step", state.global_step)
                             .add("loss", summary.final_train_loss)
                             .add("lr", in.lr)
                             .add("samples_per_s", rate)
                             .str());
        }
        window_loss = window_count = 0.0;
        window_start = Clock::now();
      }
      if (config.checkpoint.every_steps > 0 && state.global_step % config.checkpoint.every_steps == 0) {
        ++state.step_in_epoch;  // the checkpoint records the step as done
        save_checkpoint(false);
        --state.step_in_epoch;
      }
    }
    train_s += seconds_since(epoch_start);
    data_wait_s += loader.wait_s();
    if (summary.preempted || state.step_in_epoch < steps_per_epoch) break;  // stopped, or max_steps inside the epoch
    summary.epochs = state.epoch + 1;

    if (test_data) {
      last_eval = evaluate(*model, *test_data, comm, config, classification);
      evaluated = true;
      if (root) {
        std::printf("epoch %lld/%d test loss %.4f accuracy %.4f (%lld samples)\n",
                    static_cast<long long>(state.epoch + 1), config.train.epochs, last_eval.loss, last_eval.accuracy,
                    static_cast<long long>(last_eval.samples));
        std::fflush(stdout);
        output->metric(JsonObject()
                           .add("type", "eval")
                           .add("epoch", static_cast<std::int64_t>(state.epoch + 1))
                           .add("global_step", state.global_step)
                           .add("test_loss", last_eval.loss)
                           .add("test_accuracy", last_eval.accuracy)
                           .add("samples", last_eval.samples)
                           .str());
      }
    }
    if (config.checkpoint.every_epochs > 0 && (state.epoch + 1) % config.checkpoint.every_epochs == 0) {
      ++state.epoch;  // the checkpoint records the epoch as complete
      state.step_in_epoch = 0;
      save_checkpoint(true);
      --state.epoch;
      state.step_in_epoch = steps_per_epoch;
    }
  }
  if (!summary.preempted && checkpointing && last_checkpoint_step != state.global_step) save_checkpoint(false);

  // ---- summary ----
  summary.steps = state.global_step;
  summary.train_s = train_s;
  summary.wall_s = seconds_since(run_start);
  double totals[3] = {data_wait_s, reducer.communication_wait_s(), local_samples};
  comm.allreduce_sum(totals, 3);
  summary.train_samples = static_cast<std::int64_t>(totals[2]);
  const double slowest_train_s =
      static_cast<double>(comm.allreduce_max(static_cast<std::int64_t>(train_s * 1e6))) / 1e6;
  summary.train_samples_per_s = static_cast<double>(summary.train_samples) / std::max(1e-9, slowest_train_s);
  summary.data_wait_share = totals[0] / comm.size() / std::max(1e-9, train_s);
  summary.allreduce_share = totals[1] / comm.size() / std::max(1e-9, train_s);
  summary.compute_share = std::max(0.0, 1.0 - summary.data_wait_share - summary.allreduce_share);
  if (evaluated) {
    summary.test_accuracy = last_eval.accuracy;
    summary.test_loss = last_eval.loss;
  }
  if (root) {
    JsonObject json;
    json.add("status", summary.preempted ? "preempted" : "completed")
        .add("test_accuracy", evaluated && classification ? summary.test_accuracy : -1.0)
        .add("test_loss", evaluated ? summary.test_loss : -1.0)
        .add("final_train_loss", summary.final_train_loss)
        .add("epochs", summary.epochs)
        .add("steps", summary.steps)
        .add("skipped_steps", skipped_steps)
        .add("world_size", summary.world_size)
        .add("global_batch", summary.global_batch)
        .add("train_samples", summary.train_samples)
        .add("train_samples_per_s", summary.train_samples_per_s)
        .add("train_s", summary.train_s)
        .add("wall_s", summary.wall_s)
        .add("data_wait_share", summary.data_wait_share)
        .add("compute_share", summary.compute_share)
        .add("allreduce_share", summary.allreduce_share);
    output->summary(json.str());
    std::printf("%s: %lld steps in %s, %.0f samples/s (data wait %.1f%%, all-reduce %.1f%%)",
                summary.preempted ? "preempted" : "done", static_cast<long long>(summary.steps),
                format_duration(summary.wall_s).c_str(), summary.train_samples_per_s, 100 * summary.data_wait_share,
                100 * summary.allreduce_share);
    if (evaluated && classification) std::printf(", test accuracy %.4f", summary.test_accuracy);
    std::printf("\n");
    std::fflush(stdout);
  }
  Watchdog::instance().stop();
  return summary;
}

}  // namespace mpiddp
