#pragma once
// HDF5 checkpoints written by rank 0 (layout in README "Checkpoint layout").
// A checkpoint is written to a temporary file in the same directory, fsync'ed,
// renamed into place, the directory fsync'ed, and only then is the `latest`
// pointer replaced the same way, so a crash leaves either the old or the new
// checkpoint, never a torn one.
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/nn/parameters.hpp"
#include "mpiddp/optim/optimizer.hpp"

namespace mpiddp {

inline constexpr std::int64_t kCheckpointFormat = 1;

struct CheckpointMeta {
  std::int64_t epoch = 0;        // epochs completed
  std::int64_t global_step = 0;  // optimizer steps taken
  std::int64_t world_size = 1;
  std::uint64_t seed = 0;
  std::string config_ini;
};

// Writes `dir`/`name` atomically and points `dir`/latest at it. Returns the path.
std::string write_checkpoint(const std::string& dir, const std::string& name, const ParameterStore& params,
                             Optimizer& optimizer, const CheckpointMeta& meta);

// Reads parameter values into `params` (names and shapes must match).
CheckpointMeta read_checkpoint(const std::string& path, ParameterStore& params);

}  // namespace mpiddp
