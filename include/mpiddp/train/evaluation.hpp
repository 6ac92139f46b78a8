#pragma once
// Test-set evaluation after an epoch: every sample exactly once over all ranks.
#include <cstdint>

#include "mpiddp/config/config.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/dist/communicator.hpp"
#include "mpiddp/nn/sequential.hpp"

namespace mpiddp {

struct Evaluation {
  double loss = 0.0, accuracy = 0.0;
  std::int64_t samples = 0;
};

// Collective. Rank r takes samples r, r + W, ... (no sampler padding, which
// would count duplicated samples twice); read errors are agreed. `loader_thread`:
// batches are read on a loader thread, else inline (data.loader).
Evaluation evaluate(Sequential& model, ShardedDataset& data, Communicator& comm, const Config& config,
                    bool classification, bool loader_thread);

}  // namespace mpiddp
