#pragma once
// HDF5 checkpoints written by rank 0 (layout in docs/outputs-and-checkpoints.md).
// A checkpoint is written to a temporary file in the same directory, fsync'ed,
// renamed into place, the directory fsync'ed, and only then is the `latest`
// pointer replaced the same way, so a crash leaves either the old or the new
// checkpoint, never a torn one.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mpiddp/common/error.hpp"
#include "mpiddp/nn/parameters.hpp"
#include "mpiddp/checkpoint/state_shards.hpp"
#include "mpiddp/optim/optimizer.hpp"

namespace mpiddp {

inline constexpr std::int64_t kCheckpointFormat = 4;
// Format 3 is still read: it lacks the typed sample-order attributes (batch_size,
// accumulate, shuffle, drop_last), which are then taken from its stored input file.
inline constexpr std::int64_t kOldestCheckpointFormat = 3;

// A readable checkpoint that this job must not continue from (it would see other
// samples). Unlike a damaged file, `--resume auto` does not skip it for an older one.
struct IncompatibleCheckpoint : InputError {
  using InputError::InputError;
};

// Everything besides weights and optimizer buffers that a bit-exact resume needs.
struct TrainingState {
  std::int64_t epoch = 0;          // epoch in progress (0-based)
  std::int64_t step_in_epoch = 0;  // optimizer steps of that epoch already taken
  std::int64_t global_step = 0;    // optimizer steps taken in total
  std::uint64_t micro_batches = 0; // micro-batches consumed: the dropout stream position
  std::int64_t world_size = 1;
  std::uint64_t seed = 0;          // train.seed: weights, sampler (seed + epoch), dropout
  std::string config_ini;          // the resolved input file of the run that wrote it
  std::int64_t dataset_size = 0;   // training samples: the sampler's order depends on it
  // With world_size, seed and dataset_size, the settings that fix the sample order.
  std::int64_t batch_size = 0;     // train.batch_size
  std::int64_t accumulate = 0;     // train.accumulate
  bool shuffle = true;             // data.shuffle
  bool drop_last = false;          // data.drop_last
  std::int64_t skipped_steps = 0;  // steps dropped by train.nonfinite = skip
  // The epoch in progress as a part of its global order (see sampler.hpp), so a
  // resume at another world size or batch continues it: the prefix of the order
  // the finished steps consumed, the order's length (padding aside) and whether it
  // is shuffled. Files without them (older mpiddp) get them derived from
  // step_in_epoch and the sample-order settings above (epoch_order_stored false).
  std::int64_t epoch_samples_done = 0;
  std::int64_t epoch_length = 0;   // 0 while the epoch has not begun (done = 0)
  bool epoch_shuffled = true;
  bool epoch_order_stored = false; // read: the file had the three attributes
  // Resumes that changed the world size or a sample-order setting; while 0, the
  // position is the plain arithmetic of one geometry and is checked as such.
  std::int64_t elastic_resumes = 0;
  // The progress record in progress: loss and samples (all ranks) since the last
  // metrics.jsonl line, so a resumed run writes the same records.
  double log_window_loss = 0.0, log_window_samples = 0.0;
  std::string path;                  // the file it was read from (read_checkpoint), not stored
  std::int64_t optimizer_steps = 0;  // the optimizer's step count (AdamW's bias correction), read only
  // Names the run a checkpoint belongs to: made at a fresh start, carried over by
  // every resume. Retention counts and deletes only checkpoints with this run's
  // id. Empty in checkpoints of mpiddp before run ids (such files are never pruned).
  std::string run_id;
  // The CPU kernels the run trained with ("onednn" or "openblas", train.cpu_kernels
  // resolved): a resume with auto keeps them, so it stays bit-exact. "" in older files.
  std::string cpu_kernels;
};

// A new run id (random, 16 hex digits).
std::string new_run_id();

// Writes `path` atomically (temporary file, fsync, rename, directory fsync).
// `shards` (ddp.zero_stage = 1, rank 0): the optimizer holds only rank 0's shard
// of its state; the other ranks' shards are fetched one at a time (state_shards.hpp).
void write_checkpoint(const std::string& path, const ParameterStore& params, Optimizer& optimizer,
                      const TrainingState& state, StateShards* shards = nullptr);

// Called with a checkpoint's attributes (already range-checked on their own)
// before any array is read; throws to refuse the file.
using AcceptCheckpoint = std::function<void(const TrainingState&)>;

// Reads a checkpoint into `params` and `optimizer`. Everything is checked
// (format version, every attribute's range, `accept`, names both ways and shapes
// of every array, optimizer kind) before anything is changed: on error nothing
// has been loaded.
// `shards` (ddp.zero_stage = 1, rank 0): the optimizer state is checked whole
// but only this rank's shard of it is loaded (scatter_state_shards does the rest).
TrainingState read_checkpoint(const std::string& path, ParameterStore& params, Optimizer& optimizer,
                              const AcceptCheckpoint& accept = {}, const ShardLayout* shards = nullptr);

// model.init: reads only the weights (/params) of an HDF5 file (scripts/from-torch's
// output, or any mpiddp checkpoint) into `params`. Names must match the model both
// ways with its shapes; a /buffers group may hold only buffers of the model (this
// model has none). Nothing is changed unless every check passed.
// `where` names the file in errors (model.init's by default; generate's checkpoint by its path).
void read_initial_weights(const std::string& path, ParameterStore& params, const std::string& where = "");

// The run id a checkpoint file carries; empty when the file is not a readable
// mpiddp checkpoint or has none.
std::string checkpoint_run_id(const std::string& path);

// Whether `name` is a checkpoint's file name (ckpt-step-N.h5) or, `temporary`,
// the name it is written under before it is published (ckpt-step-N.h5.tmp).
bool checkpoint_file_name(const std::string& name, bool temporary);
// The name of an entry of the checkpoint directory `dir` that is a directory under
// a checkpoint's name (or its temporary's), where a checkpoint would be written; "" if none.
std::string directory_at_checkpoint_name(const std::string& dir);

// The checkpoints of one run directory: `ckpt-step-000001234.h5` files, a
// `latest` pointer, pruning to the newest K plus permanent epoch keepers. Only
// files of the saving run (same run id) are ever counted, replaced or deleted; a
// file of another run (or no checkpoint at all) in the way of a new one's name is
// moved aside to NAME.not-this-run[.N].
class CheckpointDirectory {
 public:
  CheckpointDirectory(std::string dir, int keep, int keep_every_epochs);
  // Writes the checkpoint, points `latest` at it, prunes the run's (state.run_id)
  // older ones. Returns its path.
  std::string save(const ParameterStore& params, Optimizer& optimizer, const TrainingState& state,
                   bool epoch_boundary, StateShards* shards = nullptr);
  // Deletes temporary files left by a writer that was killed (rank 0, at start).
  void remove_stale_temporaries() const;
  // Complete checkpoints, newest first (temporary files never count).
  std::vector<std::string> complete_checkpoints() const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int keep_, keep_every_epochs_;
};

}  // namespace mpiddp
