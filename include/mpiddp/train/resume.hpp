#pragma once
// `--resume auto|PATH`: rank 0 reads the checkpoint, every rank receives the same
// weights, optimizer state and position, so the run continues bit-exactly.
#include <optional>
#include <string>
#include <vector>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/dist/communicator.hpp"

namespace mpiddp {

// The state of a run at its start: position 0, and the settings that fix its
// sample order, which every checkpoint records (a resume must match the data
// set size and seed; the others may change: elastic.hpp).
TrainingState fresh_training_state(const Config& config, int world_size, std::int64_t dataset_size);

// `resume`: "" (fresh start), "auto" (newest complete checkpoint in `directory`
// of the run that `latest` names, fresh start if there is none), or a checkpoint
// path. Another world size, batch size, accumulation, shuffle or drop_last is
// an elastic resume (elastic.hpp). Refuses a checkpoint of another data set size,
// seed or model, or a position this job's train.epochs / max_steps end before
// (IncompatibleCheckpoint); and one whose position does not fit the writer's
// step arithmetic (InputError, like a damaged file: auto falls back to an older one).
// `data_shape`: the training shards' sample shape (model.input_shape is checked
// against the writer's, resolved the same way). Returns nullopt for a fresh start. `shards` (ddp.zero_stage = 1 on several
// ranks): each rank loads only its shard of the optimizer state.
std::optional<TrainingState> resume_training(const std::string& resume, const CheckpointDirectory& directory,
                                             const Config& config, std::int64_t dataset_size,
                                             const std::vector<std::size_t>& data_shape, ParameterStore& params,
                                             Optimizer& optimizer, Communicator& comm,
                                             const ShardLayout* shards = nullptr);

}  // namespace mpiddp
