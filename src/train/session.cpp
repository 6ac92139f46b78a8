#include "mpiddp/train/session.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/printable.hpp"
#include "mpiddp/data/sampler.hpp"
#include "mpiddp/device/cpu_blas.hpp"
#include "mpiddp/device/cpu_gemm.hpp"
#include "mpiddp/nn/embedding.hpp"
#include "mpiddp/nn/kernel_choices.hpp"
#include "ops/conv/onednn_conv.hpp"
#include "ops/conv/thin_conv.hpp"
#include "mpiddp/nn/model_builder.hpp"
#include "mpiddp/train/elastic.hpp"
#include "mpiddp/train/kernel_tuning.hpp"
#include "mpiddp/train/memory_budget.hpp"
#include "mpiddp/train/resume.hpp"
#include "mpiddp/train/run_directory.hpp"
#include "mpiddp/train/same_settings.hpp"

namespace mpiddp {
namespace {

int blas_threads_for(const TrainConfig& train, int local_size) {
  if (train.threads > 0) return train.threads;
  // Under Slurm the allocation says how many CPUs each task owns.
  if (const char* per_task = std::getenv("SLURM_CPUS_PER_TASK"); per_task && std::atoi(per_task) > 0)
    return std::atoi(per_task);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_size));
}

// Every epoch ends with the rest of a rank's samples as a smaller batch. One that
// a layer cannot train on (BatchNorm needs 2 samples when each has one value
// per channel) would stop every rank mid-epoch, each with its own message:
// refused here, before anything starts, with the numbers that cause it.
// `per_rank`: a rank's samples in the epoch (`which`: "every epoch", or the
// resumed one).
void check_training_batches(const Sequential& model, const Config& config, std::int64_t per_rank,
                            const std::string& which) {
  const std::int64_t batch = config.train.batch_size;
  const std::int64_t smallest = std::min(batch, per_rank % batch == 0 ? batch : per_rank % batch);
  for (std::size_t i = 0; i < model.layers().size(); ++i) {
    const auto needed = static_cast<std::int64_t>(model.layers()[i]->min_training_batch());
    if (smallest >= needed) continue;
    const std::string why = smallest == batch ? "train.batch_size is " + std::to_string(batch)
                                              : "with " + std::to_string(per_rank) +
                                                    " samples per rank and train.batch_size " + std::to_string(batch) +
                                                    ", the last batch of " + which + " has " + std::to_string(smallest);
    throw InputError("model.layers: " + layer_position(i) + " " + model.layers()[i]->kind() +
                     ": a training batch needs at least " + std::to_string(needed) +
                     " samples (with 1 value per channel, fewer have no variance), but " + why +
                     "; choose another train.batch_size");
  }
}

// A resume continues on the CPU kernels the run trained with (its checkpoint names
// them, per layer after train.cpu_kernels = tune), so it stays bit-exact: with
// train.cpu_kernels = auto or tune they are taken where this build has them.
// Otherwise (an explicit other choice, or oneDNN missing from this build) the job
// goes on with its own, and the returned note says that the rounding will differ
// from an uninterrupted run. Every rank decides alike: the checkpoint's choices
// reached all of them, and `available` says whether every rank can run them (a
// requeue may land on nodes with other CPUs).
std::string keep_trained_kernels(const Config& config, const std::string& trained, bool available,
                                 Sequential& model, const std::string& source) {
  if (trained.empty()) return "";  // an older checkpoint: unknown
  const std::string current = kernel_choices_text(model, cpu::gemm_library());
  if (trained == current) return "";
  check_kernel_choices_fit(model, trained, source);
  const bool follows =
      config.train.cpu_kernels == CpuKernels::automatic || config.train.cpu_kernels == CpuKernels::tune;
  if (follows && available) {
    cpu::use_gemm_library(apply_kernel_choices(model, trained, source));
    return "";
  }
  return "this run trained with CPU kernels " + trained + " and continues with " + current +
         (available ? " (train.cpu_kernels)"
                    : " (this mpiddp was built without oneDNN, or a rank's CPU cannot run mpiddp's own kernels or "
                      "oneDNN's Winograd convolutions for a layer they name)") +
         ": training goes on correctly, but its results differ in rounding from an uninterrupted run";
}

// A rank-local answer as 1 or 0, and 0 if finding it throws: every rank must
// reach the collective it feeds, so nothing may leave a rank on the way.
template <class Question>
std::int64_t one_or_zero(Question&& ask) {
  try {
    return ask() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

}  // namespace

StepPlan plan_steps(const Config& config, std::int64_t dataset_size, int world) {
  StepPlan plan;
  const std::int64_t per_rank = samples_per_rank(dataset_size, world, config.data.drop_last);
  plan.batches_per_epoch = (per_rank + config.train.batch_size - 1) / config.train.batch_size;
  plan.steps_per_epoch = (plan.batches_per_epoch + config.train.accumulate - 1) / config.train.accumulate;
  plan.total_steps = plan.steps_per_epoch * config.train.epochs;
  if (config.train.max_steps > 0) plan.total_steps = std::min(plan.total_steps, config.train.max_steps);
  plan.global_batch = static_cast<std::int64_t>(config.train.batch_size) * config.train.accumulate * world;
  return plan;
}

TrainingSession::TrainingSession(const Config& config_, ProcessGroup& group, const std::string& resume)
    : config(config_),
      comm(group.world()),
      root(group.world().rank() == 0),
      classification(config_.data.task == DataTask::classification),
      checkpoints(config_.run.dir + "/checkpoints", config_.checkpoint.keep, config_.checkpoint.keep_every_epochs) {
  // Read before anything below could pin the calling thread (a BLAS or OpenMP runtime binding it).
  const int cpus = usable_cpus();
  check_same_settings(comm, config, resume);
  blas_threads = blas_threads_for(config.train, group.local_size());
  cpu::set_blas_threads(blas_threads);
  agree_or_fail(comm, [&] { cpu::use_gemm_library(config.train.cpu_kernels); });
  open_data(group.local_size());
  compute = setup_compute(config, group);
  loader = place_loader(config.data.loader, !compute.device->is_host(), blas_threads, cpus);
  // Each rank decides from its own binding: the banner says how many read on a thread.
  double on_thread = loader.background ? 1.0 : 0.0;
  comm.allreduce_sum(&on_thread, 1);
  ranks_with_loader_thread = static_cast<int>(on_thread);
  build_model();
  restore(resume);
  plan = plan_steps(config, train_data->size(), comm.size());
}

namespace {

// Token ids go to an embedding, and only there: refused before the model is
// built, so the message names the real mismatch and not a shape it causes.
void check_token_input(const Config& config, bool tokens, std::size_t vocab) {
  if (config.model.layers.empty()) {
    if (tokens) throw InputError("data.context reads token ids: set model.layers, starting with embedding(V, D)");
    return;
  }
  std::vector<std::unique_ptr<Layer>> layers;
  try {
    layers = build_layers(config.model.layers, 1, false);
  } catch (const LayerError& e) {
    throw InputError(std::string("model.layers: ") + e.what());  // as build_model says it
  }
  for (std::size_t i = 1; i < layers.size(); ++i)
    if (layers[i]->takes_tokens())
      throw InputError("model.layers: " + layer_position(i) + " " + layers[i]->kind() +
                       ": reads token ids, so it must be the first layer");
  if (!tokens && layers[0]->takes_tokens())
    throw InputError("model.layers: layer 1 (layers.0) " + layers[0]->kind() + ": reads token ids, but " +
                     config.data.train + " is read as rows of features: set data.context for token shards");
  if (tokens && !layers[0]->takes_tokens())
    throw InputError("model.layers: layer 1 (layers.0) " + layers[0]->kind() + ": data.context = " +
                     std::to_string(config.data.context) +
                     " reads token ids, which only embedding(V, D) takes as the first layer");
  if (const auto* embedding = dynamic_cast<const Embedding*>(layers[0].get());
      tokens && embedding && embedding->entries() < vocab)
    throw InputError("model.layers: layer 1 (layers.0) Embedding: num_embeddings " +
                     std::to_string(embedding->entries()) + " is below the vocabulary size " + std::to_string(vocab) +
                     " of " + config.data.train);
}

}  // namespace

// Token shards (data.context): windows of tokens, a class (the next token) per position.
void TrainingSession::open_token_data() {
  const int context = config.data.context;
  if (!classification)
    throw InputError("data.context = " + std::to_string(context) +
                     ": token shards train a classifier of the next token; data.task must be classification");
  if (!config.data.augment.empty())
    throw InputError("data.augment: transforms images, but data.context = " + std::to_string(context) +
                     " reads token shards");
  train_data.emplace(config.data.train, context);
  if (config.train.eval && !config.data.test.empty()) test_data.emplace(config.data.test, context);
}

void TrainingSession::open_data(int ranks_on_node) {
  const LabelKind label_kind = classification ? LabelKind::class_id : LabelKind::target;
  agree_or_fail(comm, [&] {
    if (config.data.context > 0) {
      open_token_data();
    } else {
      train_data.emplace(config.data.train, config.data.features, config.data.labels, label_kind);
    }
    if (config.train.eval && !config.data.test.empty() && config.data.context == 0) {
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
      // A declared num_classes below 2 was refused when the shard was opened.
      const int declared = train_data->declared_classes();
      if (test_data && test_data->declared_classes() > 0 && declared > 0 && test_data->declared_classes() != declared)
        throw InputError(config.data.test + (train_data->holds_tokens() ? ": vocab_size " : ": num_classes ") +
                         std::to_string(test_data->declared_classes()) + ", but " + config.data.train + " has " +
                         std::to_string(declared));
      const int classes = config.model.classes > 0 ? config.model.classes : declared;
      if (classes == 0)
        throw InputError(config.data.train + ": the shards carry no num_classes attribute; set model.classes");
      train_data->set_classes(classes);
      if (test_data) test_data->set_classes(classes);
      outputs = static_cast<std::size_t>(classes);
    } else {
      outputs = train_data->target_dim();
    }
    check_token_input(config, train_data->holds_tokens(), outputs);  // before any shape pass names a symptom
    if (!config.data.augment.empty())
      augmenter.emplace(config.data.augment,
                        augment_image_shape(config.data.augment, train_data->sample_shape(), config.data.train),
                        config.train.seed);
    check_memory_budget(config,
                        {train_data->size(), train_data->feature_dim(), outputs, ranks_on_node, config.data.train,
                         train_data->sample_shape()});
    if (samples_per_rank(train_data->size(), comm.size(), config.data.drop_last) < 1)
      throw InputError(config.data.train + ": " + std::to_string(train_data->size()) + " samples cannot feed " +
                       std::to_string(comm.size()) + " ranks with data.drop_last");
  });
}

namespace {
// "model.layers (59120 bytes)": the longest line of a resolved input file, by its key.
std::string longest_setting(const std::string& ini) {
  std::string section, longest;
  std::size_t most = 0, start = 0;
  while (start < ini.size()) {
    std::size_t end = ini.find('\n', start);
    if (end == std::string::npos) end = ini.size();
    const std::string line = ini.substr(start, end - start);
    start = end + 1;
    if (!line.empty() && line.front() == '[') {
      section = line.substr(1, line.find(']') - 1);
    } else if (line.size() > most) {
      most = line.size();
      longest = section + "." + line.substr(0, line.find_first_of(" ="));
    }
  }
  return printable(longest, 200) + " (" + std::to_string(most) + " bytes)";
}
}  // namespace

void TrainingSession::build_model() {
  agree_or_fail(comm, [&] {
    model = mpiddp::build_model(config.model, input_shape(), outputs, config.train.seed, compute.device);
    check_training_batches(*model, config, samples_per_rank(train_data->size(), comm.size(), config.data.drop_last),
                           "every epoch");
    model->set_cross_rank(compute.transport.get());
    // Checkpoints keep the settings in one HDF5 attribute, which holds at most
    // 64 KiB: found now, not at the first checkpoint after the training it cost.
    constexpr std::size_t kMaxResolvedBytes = 60000;
    if (config.resolved_ini.size() > kMaxResolvedBytes)
      throw InputError("the resolved settings take " + std::to_string(config.resolved_ini.size()) + " bytes, over the " +
                       std::to_string(kMaxResolvedBytes) +
                       " a checkpoint stores (the longest is " + longest_setting(config.resolved_ini) + ")");
  });
  reducer = std::make_unique<GradientReducer>(
      model->parameters(), comm, static_cast<std::size_t>(config.ddp.first_bucket_mb * 1048576.0),
      static_cast<std::size_t>(config.ddp.bucket_mb * 1048576.0), compute.transport.get());
  reducer->set_broadcast_buffers(!config.model.sync_batchnorm);
  reducer->set_zero_stage(config.ddp.zero_stage);
  agree_or_fail(comm, [&] { reducer->synchronize_parameters(); });
  optimizer = make_optimizer(config.optim, compute.device);
  // A resume then takes the checkpoint's choices instead (keep_trained_kernels).
  // The emulated GPU runs the CPU's ops, so it gets the CPU's choices (and its bits).
  if (compute.device->kind() == DeviceKind::cuda) return;
  // train.cpu_kernels = winograd(_all) needs Winograd's kernels on every rank's CPU; auto
  // takes them and tune times them only then (tune_kernels). onednn and the others
  // never ask oneDNN.
  const CpuKernels setting = config.train.cpu_kernels;
  if (setting != CpuKernels::onednn && setting != CpuKernels::openblas)
    winograd_everywhere = comm.allreduce_min(one_or_zero([] { return cpu::onednn_conv::winograd_runs(); })) == 1;
  agree_or_fail(comm, [&] { give_own_kernels(*model, config.train.cpu_kernels, blas_threads, winograd_everywhere); });
  take_root_kernel_choices();
  keep_kernels_every_rank_runs();
}

// Ranks may differ in threads (one node with more cores) or CPU; every rank runs
// rank 0's choices, the ones its checkpoints name, so a resume repeats them all.
void TrainingSession::take_root_kernel_choices() {
  std::string text = root ? kernel_choices_text(*model, cpu::gemm_library()) : "";
  std::uint64_t size = text.size();
  comm.broadcast(&size, sizeof(size), 0);
  text.resize(size);
  comm.broadcast(text.data(), text.size(), 0);
  agree_or_fail(comm, [&] {
    const CpuKernels process = apply_kernel_choices(*model, text, "rank 0's CPU kernel choices");
    // Every rank runs one mpiddp build: one without oneDNN would round every product otherwise.
    if (process == CpuKernels::onednn && !cpu::onednn_linked())
      throw InputError("rank 0 runs its matrix products on oneDNN, which this rank's mpiddp was built without: "
                       "give every rank the same mpiddp");
    cpu::use_gemm_library(process);
  });
}

// A layer keeps its kernels only where every rank's CPU runs them; the others
// run the process's library, on every rank, so the replicas compute alike. A
// rank without AVX2 takes own kernels from all; oneDNN may run Winograd for a
// shape on one CPU and not on another (other caches), which takes it from that
// layer only; a layer on winograd_all that some rank cannot run keeps winograd
// where every rank runs that. One allreduce per layer with products (every rank
// holds the same choices, so every rank asks the same questions).
void TrainingSession::keep_kernels_every_rank_runs() {
  const auto everywhere = [&](Layer& layer, CpuKernels library) {
    return comm.allreduce_min(one_or_zero([&] { return runs_here(layer, library); })) == 1;
  };
  model->visit_layers([&](const std::string&, Layer& layer, const Shape&) {
    if (!layer.has_own_products() || everywhere(layer, layer.cpu_kernels())) return;
    const bool winograd = layer.cpu_kernels() == CpuKernels::winograd_all && everywhere(layer, CpuKernels::winograd);
    layer.set_cpu_kernels(winograd ? CpuKernels::winograd : CpuKernels::automatic);
  });
}

// One sample's shape: model.input_shape, else the shards' sample_shape attribute.
Shape TrainingSession::input_shape() const {
  const std::vector<std::size_t>& dims = config.model.input_shape;
  if (dims.empty()) return train_data->sample_shape();
  if (element_count(dims) != train_data->feature_dim())
    throw InputError("model.input_shape " + written_form(config.model.input_shape) + " has " + std::to_string(element_count(dims)) +
                     " elements, but the samples of " + config.data.train + " have " +
                     std::to_string(train_data->feature_dim()) + " features");
  return dims;
}

// The position to start from (a checkpoint's, or the beginning), and the run
// directory's output cut back to match it. Nothing in run.dir is written before
// every check passed: the directory first, then the checkpoint to resume from.
void TrainingSession::restore(const std::string& resume) {
  state = fresh_training_state(config, comm.size(), train_data->size());
  agree_or_fail(comm, [&] {
    if (!root) return;
    check_run_dir(config.run.dir, resume, resume == "auto" && !checkpoints.complete_checkpoints().empty());
    // Locked before any checkpoint is read, then checked again: another job may
    // have written into it meanwhile.
    if (std::filesystem::is_directory(config.run.dir)) {
      lock.acquire(config.run.dir);
      check_run_dir(config.run.dir, resume, resume == "auto" && !checkpoints.complete_checkpoints().empty());
    }
    if (!resume.empty() && resume != "auto") check_resume_into(config.run.dir, checkpoints, resume);
  });
  const ShardLayout* shards = reducer->shards().world > 1 ? &reducer->shards() : nullptr;  // ddp.zero_stage = 1
  resumed = resume_training(resume, checkpoints, config, state.dataset_size, train_data->sample_shape(),
                            model->parameters(), *optimizer, comm,
                            shards);
  if (!resumed && !config.model.init.empty()) start_from_initial_weights();
  // An epoch continued at another world size ends with its own last batch.
  if (resumed && resumed->epoch_samples_done > 0)
    agree_or_fail(comm, [&] {
      check_training_batches(*model, config,
                             remaining_per_rank(resumed->epoch_length, resumed->epoch_samples_done, comm.size()),
                             "the resumed epoch " + std::to_string(resumed->epoch + 1));
    });
  if (resumed) {
    state.epoch = resumed->epoch;
    state.step_in_epoch = resumed->step_in_epoch;
    state.global_step = resumed->global_step;
    state.micro_batches = resumed->micro_batches;
    // The epoch in progress keeps its own order, whatever this job's settings.
    state.epoch_samples_done = resumed->epoch_samples_done;
    state.epoch_length = resumed->epoch_length;
    state.epoch_shuffled = resumed->epoch_shuffled;
    state.elastic_resumes = resumed->elastic_resumes + (geometry_changed(*resumed, state) ? 1 : 0);
  }
  // Re-running a finished run (what a requeue or a sweep task does with
  // --resume auto) leaves it as it is: no output is reopened, so no file changes.
  complete = resumed && (resumed->epoch >= config.train.epochs ||
                         (config.train.max_steps > 0 && resumed->global_step >= config.train.max_steps));
  if (resumed) {
    const bool available =
        comm.allreduce_min(one_or_zero([&] { return kernel_choices_available(*model, resumed->cpu_kernels); })) == 1;
    agree_or_fail(comm, [&] {
      kernel_note = keep_trained_kernels(config, resumed->cpu_kernels, available, *model,
                                         resumed->path.empty() ? "the checkpoint" : resumed->path);
    });
  }
  if (!complete && config.train.cpu_kernels == CpuKernels::tune && (!resumed || resumed->cpu_kernels.empty()))
    tune_kernels();
  state.cpu_kernels = kernel_choices_text(*model, cpu::gemm_library());
  // After every kernel choice: a convolution keeps the blocked layout only on oneDNN's.
  model->plan_layouts(config.train.blocked_layout && compute.device->kind() == DeviceKind::cpu);
  if (complete) return;
  // A resumed run stays the run it continues (its checkpoints are the ones it prunes).
  if (root) state.run_id = resumed && !resumed->run_id.empty() ? resumed->run_id : new_run_id();
  agree_or_fail(comm, [&] {
    if (!root) return;
    if (!lock.tried()) {  // run.dir did not exist: a fresh start, which creates it now
      std::error_code ec;
      std::filesystem::create_directories(config.run.dir, ec);
      if (ec) throw InputError("run.dir " + config.run.dir + ": cannot create (" + ec.message() + ")");
      lock.acquire(config.run.dir);
      check_run_dir(config.run.dir, "", false);  // a fresh start: a job that raced this one may have written there
    }
    lock.record_holder();
    checkpoints.remove_stale_temporaries();
    output = std::make_unique<RunOutput>(config.run.dir, config.resolved_ini, resumed ? state.global_step : -1,
                                         state.epoch);
  });
}

// train.cpu_kernels = tune: every rank times its layers (as they will run, side
// by side), and rank 0's choices go to all, so the ranks compute alike.
void TrainingSession::tune_kernels() {
  agree_or_fail(comm, [&] {
    tuned = tune_cpu_kernels(*model, static_cast<std::size_t>(config.train.batch_size), blas_threads,
                             winograd_everywhere);
  });
  std::vector<std::uint8_t> chosen(tuned.size());
  for (std::size_t i = 0; i < tuned.size(); ++i) chosen[i] = static_cast<std::uint8_t>(tuned[i].chosen);
  if (!chosen.empty()) comm.broadcast(chosen.data(), chosen.size(), 0);
  std::size_t next = 0;
  model->visit_layers([&](const std::string&, Layer& layer, const Shape&) {
    if (!layer.has_own_products() || next >= chosen.size()) return;
    tuned[next].chosen = static_cast<CpuKernels>(chosen[next]);
    layer.set_cpu_kernels(tuned[next].chosen);
    ++next;
  });
  // Rank 0's fastest may not run on another rank's CPU (Winograd for a shape):
  // such a layer gets the process's library, named as the others are, so the
  // banner's table and the checkpoint's choices agree.
  keep_kernels_every_rank_runs();
  next = 0;
  model->visit_layers([&](const std::string&, Layer& layer, const Shape&) {
    if (!layer.has_own_products() || next >= tuned.size()) return;
    if (layer.cpu_kernels() == CpuKernels::automatic) layer.set_cpu_kernels(cpu::gemm_library());
    tuned[next].chosen = layer.cpu_kernels();
    ++next;
  });
}

// model.init on a fresh start (a resume takes the checkpoint's weights): rank 0
// reads the file, then the same broadcast as at construction gives every rank its
// weights. The optimizer state stays fresh.
void TrainingSession::start_from_initial_weights() {
  agree_or_fail(comm, [&] {
    if (root) read_initial_weights(config.model.init, model->parameters());
  });
  agree_or_fail(comm, [&] { reducer->synchronize_parameters(); });
}

std::int64_t TrainingSession::optimizer_state_bytes_per_rank() const {
  return static_cast<std::int64_t>(optimizer->state_floats_per_parameter()) *
         static_cast<std::int64_t>(reducer->shards().count(0) * sizeof(float));
}

void TrainingSession::print_banner() const {
  if (!root) return;
  std::printf("mpiddp %s: train %s\n", MPIDDP_VERSION, config.source.empty() ? "(defaults)" : config.source.c_str());
  if (!compute.note.empty()) std::printf("note: %s\n", compute.note.c_str());
  const bool onednn = cpu::gemm_library() == CpuKernels::onednn;
  std::printf("world %d rank(s), device %s, precision %s, gradients over %s, %d BLAS thread(s) per rank, "
              "CPU kernels: %s%s (matrix products; convolutions: %s)\n",
              comm.size(), device_kind_name(compute.device->kind()), name_of(compute.device->precision()),
              compute.transport->name().c_str(), blas_threads, onednn ? "oneDNN " : "OpenBLAS",
              onednn ? cpu::onednn_version().c_str() : "", cpu::convolution_method(cpu::gemm_library()));
  const std::string own = layers_on(*model, CpuKernels::own);
  if (!own.empty()) std::printf("CPU kernels of mpiddp's own (%s): %s\n", cpu::thin_conv::isa(), own.c_str());
  const std::string winograd = layers_on(*model, CpuKernels::winograd);
  if (!winograd.empty()) std::printf("oneDNN's Winograd convolutions (forward and input gradient): %s\n", winograd.c_str());
  const std::string winograd_all = layers_on(*model, CpuKernels::winograd_all);
  if (!winograd_all.empty())
    std::printf("oneDNN's Winograd convolutions (forward, input and weight gradients): %s\n", winograd_all.c_str());
  const std::string own_winograd = layers_on(*model, CpuKernels::own_winograd);
  if (!own_winograd.empty())
    std::printf("mpiddp's own Winograd convolutions F(2x2, 3x3): %s\n", own_winograd.c_str());
  const std::string own_winograd4 = layers_on(*model, CpuKernels::own_winograd4);
  if (!own_winograd4.empty())
    std::printf("mpiddp's own Winograd convolutions F(4x4, 3x3): %s\n", own_winograd4.c_str());
  if (const std::size_t blocked = model->blocked_activations())
    std::printf("oneDNN's blocked layout (nChw16c) kept for %zu layer outputs (train.blocked_layout)\n", blocked);
  if (!tuned.empty()) std::printf("%s", describe_tuning(tuned).c_str());
  else if (config.train.cpu_kernels == CpuKernels::tune && !resumed)
    std::printf("note: train.cpu_kernels = tune has one library to choose from here (%s)\n",
                cpu::onednn_linked() ? "off the CPU" : "this mpiddp was built without oneDNN");
  if (!kernel_note.empty()) std::printf("note: %s\n", kernel_note.c_str());
  // Every rank's placement, so the rank -> node -> GPU mapping is in the job log.
  for (const Placement& p : compute.placements) {
    std::printf("  rank %d: host %s, local rank %d of %d", p.rank, p.host, p.local_rank, p.local_size);
    if (p.device >= 0)
      std::printf(", GPU %d (PCI %s, CUDA_VISIBLE_DEVICES=%s)", p.device, p.pci_bus_id, p.visible);
    std::printf("\n");
  }
  if (!compute.device->is_host()) std::printf("rank 0 device: %s\n", compute.device->describe().c_str());
  std::printf("train data: %s\n", train_data->describe().c_str());
  std::printf("batches read %s on rank 0; %d of %d rank(s) read on a loader thread\n", loader.reason.c_str(),
              ranks_with_loader_thread, comm.size());
  if (test_data) std::printf("test data: %s\n", test_data->describe().c_str());
  std::printf("model: %zu parameters, input %s\n%s", model->parameters().total(),
              shape_text(model->input_shape()).c_str(), model->describe().c_str());
  std::printf("parameter_bytes %lld, optimizer_state_bytes_per_rank %lld (%s, ddp.zero_stage %d%s)\n",
              static_cast<long long>(model->parameters().total() * sizeof(float)),
              static_cast<long long>(optimizer_state_bytes_per_rank()), optimizer->name().c_str(),
              reducer->zero_stage(), reducer->shards().world > 1 ? ": sharded over the ranks" : "");
  if (!resumed && !config.model.init.empty()) std::printf("initial weights: %s\n", config.model.init.c_str());
  std::printf("--- resolved input file ---\n%s---\n", config.resolved_ini.c_str());
  std::printf("%lld steps per epoch, global batch %lld (%d per rank x %d micro-batch(es) x %d rank(s))\n",
              static_cast<long long>(plan.steps_per_epoch), static_cast<long long>(plan.global_batch),
              config.train.batch_size, config.train.accumulate, comm.size());
  if (resumed && geometry_changed(*resumed, state))
    std::printf("%s\n", describe_elastic_resume(*resumed, state, config, plan).c_str());
  std::fflush(stdout);
}

}  // namespace mpiddp
