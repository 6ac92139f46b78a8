#pragma once
// The typed configuration every module reads. Values come from an INI input file
// ([section] key = value) and from `--section.key value` command-line overrides,
// which win over the file. Unknown keys and malformed values are InputErrors.
// Enum-valued keys are parsed here, once (see choices.hpp).
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mpiddp/config/choices.hpp"

namespace mpiddp {

// One transform of data.augment, applied to training samples in list order.
struct AugmentStep {
  AugmentKind kind = AugmentKind::hflip;
  int padding = 0;                   // crop(P): zero padding on every side, then a crop back to size
  double probability = 0.0;          // erase(P): the chance that a sample gets a box erased
  bool operator==(const AugmentStep&) const = default;
};

// `text` as a whole number from 0 to 2^64 - 1: digits only, no sign or spaces (Boost's
// conversion takes "-1" as the largest value, silently); nullopt for anything else.
std::optional<std::uint64_t> parse_whole_number(const std::string& text);

// A list setting in its written form ("256,128", "1,28,28", "hflip crop(4)"), as
// the resolved dump and --help show it.
std::string written_form(const std::vector<int>& values);
std::string written_form(const std::vector<std::size_t>& values);
std::string written_form(const std::vector<AugmentStep>& steps);

struct DataConfig {
  std::string train;                 // shard directory, glob or single .h5 file
  std::string test;                  // same, evaluated after each epoch (optional)
  std::string features = "features";  // dataset name inside each shard
  std::string labels = "labels";
  DataTask task = DataTask::classification;
  int prefetch = 4;                  // batches read ahead by the loader thread
  LoaderPlacement loader = LoaderPlacement::automatic;  // a loader thread, or reads in the training thread
  bool shuffle = true;
  bool drop_last = false;            // DistributedSampler's drop_last
  std::vector<AugmentStep> augment;  // training-sample transforms in order (written "hflip crop(4)"; empty = none)
  int context = 0;                   // > 0: token shards, samples are windows of context + 1 tokens
};

struct ModelConfig {
  // A Sequential layer list (see nn/model_builder.hpp); "" = the MLP of `hidden`.
  std::string layers;
  std::vector<std::size_t> input_shape;  // C,H,W (or H,W, F): overrides the shards' sample_shape; empty = theirs
  bool sync_batchnorm = false;       // BatchNorm statistics over all ranks' batches (SyncBatchNorm)
  std::vector<int> hidden = {256, 128};  // hidden widths (written "256,128"; empty = linear model)
  ActivationKind activation = ActivationKind::relu;
  double dropout = 0.0;              // after every hidden activation, 0 = none
  int classes = 0;                   // 0 = take the shards' num_classes attribute
  std::string init;                  // start from these weights (/params of an HDF5 file); "" = seeded init
};

struct TrainConfig {
  int batch_size = 64;               // per rank, per micro-batch
  int accumulate = 1;                // micro-batches per optimizer step
  int epochs = 10;
  std::uint64_t seed = 0;
  int log_every = 50;                // optimizer steps between progress lines
  int trace_steps = 0;               // steps traced to <run.dir>/trace/ after the warm-up, 0 = off
  int trace_after = 2;               // warm-up: steps this process runs before the traced ones
  bool eval = true;                  // evaluate data.test after each epoch
  int threads = 0;                   // BLAS threads per rank, 0 = cores / local ranks
  bool blocked_layout = true;        // CPU: activations between oneDNN's convolutions stay in nChw16c (same bits)
  CpuKernels cpu_kernels = CpuKernels::automatic;  // the CPU's matrix products: oneDNN where built, else OpenBLAS
  DeviceChoice device = DeviceChoice::automatic;  // auto: a usable GPU, else the CPU
  Precision precision = Precision::fp32;  // tf32, bf16: cuda only
  bool share_device = false;         // allow more ranks than GPUs on a node (dist.backend = mpi)
  NonfinitePolicy nonfinite = NonfinitePolicy::stop;  // NaN/Inf loss or gradient: stop, or skip that step
  std::int64_t max_steps = 0;        // stop after this many optimizer steps, 0 = no limit
  double label_smoothing = 0.0;      // classification loss: PyTorch's CrossEntropyLoss(label_smoothing)
};

struct OptimConfig {
  OptimizerKind name = OptimizerKind::sgd;
  double lr = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  ScheduleKind schedule = ScheduleKind::constant;
  std::int64_t warmup_steps = 0;     // linear warm-up (cosine and step)
  int step_epochs = 10;              // step: multiply lr by gamma every this many epochs
  double gamma = 0.1;
  double min_lr = 0.0;               // cosine: final learning rate
};

struct DdpConfig {
  double first_bucket_mb = 1.0;      // PyTorch DDP's first bucket cap (MiB)
  double bucket_mb = 25.0;           // later buckets (MiB)
  AllreduceDtype allreduce_dtype = AllreduceDtype::fp32;  // bf16 (nccl only): buckets travel as bf16
  int zero_stage = 0;                // 1: optimizer state sharded over the ranks (ZeRO stage 1)
};

struct DistConfig {
  DistBackend backend = DistBackend::automatic;  // auto: nccl on GPUs when built with it, else mpi
  double timeout_s = 300.0;          // a collective waiting longer ends the job, 0 = never
};

struct RunConfig {
  std::string dir = "run";           // metrics.jsonl, config.ini, summary.json, checkpoints/
};

struct CheckpointConfig {
  int every_epochs = 1;              // at the end of every N-th epoch, 0 = not by epochs
  std::int64_t every_steps = 0;      // every N optimizer steps, 0 = not by steps
  double every_minutes = 0.0;        // wall clock (rank 0 decides for all), 0 = not by time
  int keep = 3;                      // newest checkpoints kept, 0 = all
  int keep_every_epochs = 0;         // also keep the end of every N-th epoch forever, 0 = none
};

struct DebugConfig {                 // failure injection for tests; not for production runs
  int fail_rank = -1;
  std::int64_t fail_step = -1;       // global optimizer step (0-based) at which to fail
  FailMode fail_mode = FailMode::none;
  bool emulate_device = false;       // train on the emulated GPU (see make_emulated_device)
  std::string sample_log;            // per-rank record of the training samples (elastic resume tests)
};

struct Config {
  DataConfig data;
  ModelConfig model;
  TrainConfig train;
  OptimConfig optim;
  DdpConfig ddp;
  DistConfig dist;
  RunConfig run;
  CheckpointConfig checkpoint;
  DebugConfig debug;
  std::string source;                // the input file it came from ("" = defaults only)
  std::string resolved_ini;          // every key with its final value, as an INI file
};

// Parses `path` (may be empty) and the `--section.key value` overrides, validates
// every value and throws InputError naming the file and key on any problem.
Config load_config(const std::string& path, const std::vector<std::string>& overrides);
// Throws InputError naming the option when a command-line argument holds a
// control character (a tab aside): every option is one line of text, except the
// values of `free_text_option` (generate's --prompt), passed as they are.
void refuse_control_characters(const std::vector<std::string>& args, const std::string& free_text_option = "");
// The same for an input file's text (a checkpoint's stored one); `where` names it in messages.
Config load_config_text(const std::string& text, const std::string& where);

// Every key with its default and help text, for `mpiddp train --help`.
std::string config_reference();

// "section.key" -> value of a resolved input file (Config::resolved_ini).
std::map<std::string, std::string> resolved_values(const std::string& resolved_ini);

}  // namespace mpiddp
