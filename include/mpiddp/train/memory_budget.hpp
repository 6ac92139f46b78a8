#pragma once
// The sizes a job is built from (samples and features declared by the shards,
// the model's layers, train.batch_size, data.prefetch, train.trace_steps) are
// multiplied out before anything is allocated from them: a job that cannot fit
// in this node's memory is refused with one line naming the data and the sizes,
// instead of ending in std::bad_alloc or in the kernel's OOM killer half-way
// through set-up. The model is measured by a shape-only pass over its layers
// (nn::plan_model), so model.layers counts as model.hidden does.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/config/config.hpp"

namespace mpiddp {

struct JobShape {
  std::int64_t samples = 0;  // training samples (the sampler permutes them all each epoch)
  std::size_t features = 0;  // per sample
  std::size_t outputs = 0;   // classes or regression targets
  int ranks_on_node = 1;     // ranks sharing this node's memory
  std::string source;        // what the sizes came from, for the message (data.train, "bench mlp")
  // One sample's shape as the shards declare it (their sample_shape); empty =
  // not known: then model.input_shape, or flat features, is what the model gets.
  std::vector<std::size_t> sample_shape = {};
};

// Bytes one rank needs, roughly and from above where it matters.
double estimated_rank_bytes(const Config& config, const JobShape& shape);

// Throws InputError when ranks_on_node x estimated_rank_bytes exceeds this node's
// physical memory (nothing is checked when the memory size is unknown), or when
// the model itself cannot be built (the message build_model would give).
void check_memory_budget(const Config& config, const JobShape& shape);

// The events train.trace_steps reserves up front (TraceWindow): per micro-batch a
// forward and a backward span per layer (nested_layer_count: those inside residual
// blocks too) and 3 more, per step one per gradient bucket and 16 more. A double:
// hostile settings multiply past 64 bits.
double trace_window_events(const Config& config, double layers, double buckets);
// Bytes of one recorded trace event (Tracer's name, index, track, kind, start, duration).
constexpr double kTraceEventBytes = 40;

}  // namespace mpiddp
