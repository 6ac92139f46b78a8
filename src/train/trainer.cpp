// The training loop. Read top to bottom: set-up (every failure agreed by all
// ranks so the job ends cleanly), then epochs of steps, evaluation, checkpoint.
#include "mpiddp/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/json.hpp"
#include "mpiddp/data/loader.hpp"
#include "mpiddp/data/sampler.hpp"
#include "mpiddp/ddp/reducer.hpp"
#include "mpiddp/tensor/cpu_ops.hpp"
#include "mpiddp/train/run_output.hpp"
#include "mpiddp/train/step.hpp"

namespace mpiddp {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

int blas_threads_for(const TrainConfig& train, int local_size) {
  if (train.threads > 0) return train.threads;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_size));
}

void print_banner(const Config& config, ProcessGroup& group, const ShardedDataset& train,
                  const ShardedDataset* test, const Sequential& model, int threads) {
  Communicator& comm = group.world();
  // Every rank's (host, local rank) so the mapping is visible in the job log.
  struct Placement {
    char host[64];
    int local_rank, local_size;
  } mine{}, *all = nullptr;
  std::snprintf(mine.host, sizeof(mine.host), "%s", group.host().c_str());
  mine.local_rank = group.local_rank();
  mine.local_size = group.local_size();
  std::vector<Placement> placements(static_cast<std::size_t>(comm.size()));
  all = placements.data();
  comm.allgather(&mine, sizeof(mine), all);
  if (comm.rank() != 0) return;
  std::printf("mpiddp %s: train %s\n", MPIDDP_VERSION, config.source.empty() ? "(defaults)" : config.source.c_str());
  std::printf("world %d rank(s), backend %s, device %s, %d BLAS thread(s) per rank\n", comm.size(),
              comm.backend_name().c_str(), config.train.device.c_str(), threads);
  for (int r = 0; r < comm.size(); ++r)
    std::printf("  rank %d: host %s, local rank %d of %d\n", r, all[r].host, all[r].local_rank, all[r].local_size);
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

}  // namespace

TrainSummary run_training(const Config& config, ProcessGroup& group) {
  const auto run_start = Clock::now();
  Communicator& comm = group.world();
  const bool root = comm.rank() == 0;
  const bool classification = config.data.task == "classification";
  const LabelKind label_kind = classification ? LabelKind::class_id : LabelKind::target;

  // ---- set-up: any rank's failure ends every rank with that rank's message ----
  const int threads = blas_threads_for(config.train, group.local_size());
  cpu::set_blas_threads(threads);
  std::optional<ShardedDataset> train_data, test_data;
  std::unique_ptr<RunOutput> output;
  std::size_t outputs = 0;
  agree_or_fail(comm, [&] {
    train_data.emplace(config.data.train, config.data.features, config.data.labels, label_kind);
    if (config.train.eval && !config.data.test.empty()) {
      test_data.emplace(config.data.test, config.data.features, config.data.labels, label_kind);
      if (test_data->feature_dim() != train_data->feature_dim())
        throw InputError(config.data.test + ": " + std::to_string(test_data->feature_dim()) +
                         " features per sample, but " + config.data.train + " has " +
                         std::to_string(train_data->feature_dim()));
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
    if (root) output = std::make_unique<RunOutput>(config.run.dir, config.resolved_ini);
  });

  auto model = build_mlp(config.model, train_data->feature_dim(), outputs, config.train.seed);
  ParameterStore& params = model->parameters();
  GradientReducer reducer(params, comm, static_cast<std::size_t>(config.ddp.first_bucket_mb * 1048576.0),
                          static_cast<std::size_t>(config.ddp.bucket_mb * 1048576.0));
  agree_or_fail(comm, [&] { reducer.synchronize_parameters(); });
  auto optimizer = make_optimizer(config.optim);
  print_banner(config, group, *train_data, test_data ? &*test_data : nullptr, *model, threads);

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

  // ---- training ----
  TrainSummary summary;
  summary.world_size = comm.size();
  summary.global_batch = global_batch;
  double train_s = 0.0, data_wait_s = 0.0;
  std::int64_t global_step = 0;
  std::uint64_t micro_counter = 0;
  double local_samples = 0.0;
  Evaluation last_eval;
  bool evaluated = false;

  for (int epoch = 0; epoch < config.train.epochs && global_step < total_steps; ++epoch) {
    const auto epoch_start = Clock::now();
    SamplerOptions sampling;
    sampling.size = train_data->size();
    sampling.world = comm.size();
    sampling.rank = comm.rank();
    sampling.seed = config.train.seed;
    sampling.epoch = static_cast<std::uint64_t>(epoch);
    sampling.shuffle = config.data.shuffle;
    sampling.drop_last = config.data.drop_last;
    BatchLoader loader(*train_data, distributed_sampler_indices(sampling),
                       static_cast<std::size_t>(config.train.batch_size), static_cast<std::size_t>(config.data.prefetch));

    double window_loss = 0.0, window_count = 0.0;
    auto window_start = Clock::now();
    std::int64_t window_steps = 0;
    std::vector<Batch> micro;
    for (std::int64_t step = 0; step < steps_per_epoch && global_step < total_steps; ++step) {
      // A read error on one rank (bad label, damaged shard) ends all ranks here,
      // at a step boundary, instead of leaving the others in the all-reduce.
      micro.clear();
      agree_or_fail(comm, [&] {
        for (int m = 0; m < config.train.accumulate; ++m) {
          auto batch = loader.next();
          if (!batch) break;
          micro.push_back(std::move(*batch));
        }
      });
      StepInputs in;
      in.micro_batches = &micro;
      in.classification = classification;
      in.lr = schedule.at(global_step);
      in.context.seed = config.train.seed;
      in.context.stream = static_cast<std::uint64_t>(comm.rank());
      in.context.counter = micro_counter;
      const LossResult r = train_step(*model, reducer, *optimizer, in);
      micro_counter += micro.size();
      ++global_step;
      ++window_steps;
      window_loss += r.loss_sum;
      window_count += static_cast<double>(r.count);
      local_samples += static_cast<double>(r.count);

      const bool last_of_epoch = step + 1 == steps_per_epoch || global_step == total_steps;
      if (global_step % config.train.log_every == 0 || last_of_epoch) {
        double sums[2] = {window_loss, window_count};
        comm.allreduce_sum(sums, 2);
        const double elapsed = seconds_since(window_start);
        const double rate = sums[1] / std::max(1e-9, elapsed);
        const double per_step = seconds_since(epoch_start) / static_cast<double>(step + 1);
        const double eta = per_step * static_cast<double>(total_steps - global_step);
        summary.final_train_loss = sums[0] / std::max(1.0, sums[1]);
        if (root) {
          std::printf("epoch %d/%d step %lld/%lld loss %.4f lr %.3g %.0f samples/s ETA %s\n", epoch + 1,
                      config.train.epochs, static_cast<long long>(step + 1), static_cast<long long>(steps_per_epoch),
                      summary.final_train_loss, in.lr, rate, format_duration(eta).c_str());
          std::fflush(stdout);
          output->metric(JsonObject()
                             .add("type", "train")
                             .add("epoch", epoch + 1)
                             .add("step", step + 1)
                             .add("global_step", global_step)
                             .add("loss", summary.final_train_loss)
                             .add("lr", in.lr)
                             .add("samples_per_s", rate)
                             .str());
        }
        window_loss = window_count = 0.0;
        window_steps = 0;
        window_start = Clock::now();
      }
    }
    train_s += seconds_since(epoch_start);
    data_wait_s += loader.wait_s();
    summary.epochs = epoch + 1;

    if (test_data) {
      last_eval = evaluate(*model, *test_data, comm, config, classification);
      evaluated = true;
      if (root) {
        std::printf("epoch %d/%d test loss %.4f accuracy %.4f (%lld samples)\n", epoch + 1, config.train.epochs,
                    last_eval.loss, last_eval.accuracy, static_cast<long long>(last_eval.samples));
        std::fflush(stdout);
        output->metric(JsonObject()
                           .add("type", "eval")
                           .add("epoch", epoch + 1)
                           .add("global_step", global_step)
                           .add("test_loss", last_eval.loss)
                           .add("test_accuracy", last_eval.accuracy)
                           .add("samples", last_eval.samples)
                           .str());
      }
    }
    if (config.checkpoint.every_epochs > 0 && (epoch + 1) % config.checkpoint.every_epochs == 0) {
      agree_or_fail(comm, [&] {
        if (!root) return;
        CheckpointMeta meta;
        meta.epoch = epoch + 1;
        meta.global_step = global_step;
        meta.world_size = comm.size();
        meta.seed = config.train.seed;
        meta.config_ini = config.resolved_ini;
        char name[64];
        std::snprintf(name, sizeof(name), "ckpt-epoch-%04d.h5", epoch + 1);
        write_checkpoint(config.run.dir + "/checkpoints", name, params, *optimizer, meta);
      });
    }
  }

  // ---- summary ----
  summary.steps = global_step;
  summary.train_s = train_s;
  summary.wall_s = seconds_since(run_start);
  // The slowest rank sets the pace: report the shares of the worst rank.
  double shares[3] = {data_wait_s, reducer.communication_wait_s(), local_samples};
  comm.allreduce_sum(shares, 3);
  summary.train_samples = static_cast<std::int64_t>(shares[2]);
  shares[0] /= comm.size();
  shares[1] /= comm.size();
  const double max_train_s = static_cast<double>(comm.allreduce_max(static_cast<std::int64_t>(train_s * 1e6))) / 1e6;
  summary.train_samples_per_s = static_cast<double>(summary.train_samples) / std::max(1e-9, max_train_s);
  summary.data_wait_share = shares[0] / std::max(1e-9, train_s);
  summary.allreduce_share = shares[1] / std::max(1e-9, train_s);
  summary.compute_share = std::max(0.0, 1.0 - summary.data_wait_share - summary.allreduce_share);
  if (evaluated) {
    summary.test_accuracy = last_eval.accuracy;
    summary.test_loss = last_eval.loss;
  }
  if (root) {
    JsonObject json;
    json.add("test_accuracy", evaluated && classification ? summary.test_accuracy : -1.0)
        .add("test_loss", evaluated ? summary.test_loss : -1.0)
        .add("final_train_loss", summary.final_train_loss)
        .add("epochs", summary.epochs)
        .add("steps", summary.steps)
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
    std::printf("done: %lld steps in %s, %.0f samples/s (data wait %.1f%%, all-reduce %.1f%%)", 
                static_cast<long long>(summary.steps), format_duration(summary.wall_s).c_str(),
                summary.train_samples_per_s, 100 * summary.data_wait_share, 100 * summary.allreduce_share);
    if (evaluated && classification) std::printf(", test accuracy %.4f", summary.test_accuracy);
    std::printf("\n");
    std::fflush(stdout);
  }
  return summary;
}

}  // namespace mpiddp
