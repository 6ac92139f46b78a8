#pragma once
// The sizes a job is built from (samples and features declared by the shards,
// model.hidden, train.batch_size, data.prefetch) are multiplied out before
// anything is allocated from them: a job that cannot fit in this node's memory is
// refused with one line naming the data and the sizes, instead of ending in
// std::bad_alloc or in the kernel's OOM killer half-way through set-up.
#include <cstddef>
#include <cstdint>
#include <string>

#include "mpiddp/config/config.hpp"

namespace mpiddp {

struct JobShape {
  std::int64_t samples = 0;     // training samples (the sampler permutes them all each epoch)
  std::size_t features = 0;     // per sample
  std::size_t outputs = 0;      // classes or regression targets
  int ranks_on_node = 1;        // ranks sharing this node's memory
  std::string source;           // what the sizes came from, for the message (data.train, "bench mlp")
};

// Bytes one rank needs, roughly and from above where it matters.
double estimated_rank_bytes(const Config& config, const JobShape& shape);

// Throws InputError when ranks_on_node x estimated_rank_bytes exceeds this node's
// physical memory (nothing is checked when the memory size is unknown).
void check_memory_budget(const Config& config, const JobShape& shape);

}  // namespace mpiddp
