#pragma once
// Everything a training run is made of, set up once and in order: data sets,
// device and gradient transport, model, reducer, optimizer, checkpoints, the
// position a resume continues from, the run directory's output, and the step
// arithmetic. Every set-up failure is agreed by all ranks (one line, every rank
// exits), so nothing after the constructor has to wonder about half-built state.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/data/augment.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/ddp/reducer.hpp"
#include "mpiddp/train/compute_setup.hpp"
#include "mpiddp/train/kernel_tuning.hpp"
#include "mpiddp/train/loader_placement.hpp"
#include "mpiddp/dist/process_group.hpp"
#include "mpiddp/nn/sequential.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "mpiddp/train/run_lock.hpp"
#include "mpiddp/train/run_output.hpp"

namespace mpiddp {

// How an epoch divides into steps, and where the run ends.
struct StepPlan {
  std::int64_t batches_per_epoch = 0;  // per rank (micro-batches)
  std::int64_t steps_per_epoch = 0;    // optimizer steps
  std::int64_t total_steps = 0;        // train.epochs x steps_per_epoch, capped by train.max_steps
  std::int64_t global_batch = 0;       // samples per optimizer step over all ranks
};
StepPlan plan_steps(const Config& config, std::int64_t dataset_size, int world);

class TrainingSession {
 public:
  // `resume`: "" (fresh), "auto" or a checkpoint path (see resume.hpp). Collective.
  TrainingSession(const Config& config, ProcessGroup& group, const std::string& resume);
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // Rank 0: the start-up banner (placements, data, model, resolved input file, steps).
  void print_banner() const;
  // Bytes of optimizer state on the rank holding the most (rank 0's shard at
  // ddp.zero_stage = 1, everything at 0), once the optimizer has stepped.
  std::int64_t optimizer_state_bytes_per_rank() const;

  const Config& config;
  Communicator& comm;
  const bool root;
  const bool classification;
  int blas_threads = 1;
  bool winograd_everywhere = false;  // every rank's CPU runs oneDNN's Winograd convolutions
  LoaderPlacementChoice loader;  // data.loader, resolved for this rank
  int ranks_with_loader_thread = 0;  // of all ranks (the banner)
  std::optional<ShardedDataset> train_data, test_data;
  std::optional<Augmenter> augmenter;  // data.augment of the training samples; empty: none
  std::size_t outputs = 0;  // classes, or regression targets
  // Declared before the model: the device outlives everything allocated on it.
  ComputeSetup compute;
  std::unique_ptr<Sequential> model;
  std::unique_ptr<GradientReducer> reducer;
  std::unique_ptr<Optimizer> optimizer;
  CheckpointDirectory checkpoints;
  // The position and counters of the run; a resume starts from the checkpoint's.
  TrainingState state;
  std::optional<TrainingState> resumed;
  // Set when a resume runs other CPU kernels than the run trained with (the banner prints it).
  std::string kernel_note;
  std::vector<TunedLayer> tuned;  // train.cpu_kernels = tune: what was timed, rank 0's choices
  RunLock lock;  // rank 0: one job per run.dir; declared before `output`, so it outlives it
  std::unique_ptr<RunOutput> output;  // rank 0 only; null when `complete`
  StepPlan plan;
  // The checkpoint resumed from ends the run (train.epochs done, or
  // train.max_steps reached): nothing is trained and no file is written.
  bool complete = false;

 private:
  void open_data(int ranks_on_node);
  void open_token_data();
  void build_model();
  Shape input_shape() const;
  void restore(const std::string& resume);
  void tune_kernels();
  void keep_kernels_every_rank_runs();
  void take_root_kernel_choices();
  void start_from_initial_weights();
};

}  // namespace mpiddp
