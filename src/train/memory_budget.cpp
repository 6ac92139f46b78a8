#include "mpiddp/train/memory_budget.hpp"

#include <string>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/memory.hpp"

namespace mpiddp {
namespace {

struct Parts {
  double parameters = 0, model = 0, batches = 0, sampler = 0;
  double total() const { return model + batches + sampler; }
};

// Doubles throughout: hostile sizes multiply past 64 bits.
Parts parts_of(const Config& config, const JobShape& shape) {
  Parts p;
  double in = static_cast<double>(shape.features), activations = 0;
  auto layer = [&](double out) {
    p.parameters += (in + 1) * out;
    activations += out;
    in = out;
  };
  for (const int width : config.model.hidden_sizes) layer(width);
  layer(static_cast<double>(shape.outputs));
  // Weights, gradients, gradient buckets and up to two optimizer moments.
  p.model = p.parameters * sizeof(float) * 5;
  const double batch = config.train.batch_size;
  // Batches in flight (the prefetch queue, the one being read, the one training)
  // and each layer's output and its gradient.
  p.batches = batch * (static_cast<double>(shape.features + shape.outputs) * (config.data.prefetch + 2) +
                       activations * 2) * sizeof(float);
  // The epoch's permutation of every sample, and this rank's share of it.
  p.sampler = static_cast<double>(shape.samples) * sizeof(std::int64_t) * 2;
  return p;
}

}  // namespace

double estimated_rank_bytes(const Config& config, const JobShape& shape) { return parts_of(config, shape).total(); }

void check_memory_budget(const Config& config, const JobShape& shape) {
  const double memory = static_cast<double>(physical_memory_bytes());
  const Parts p = parts_of(config, shape);
  const double need = p.total() * shape.ranks_on_node;
  if (memory <= 0 || need <= memory) return;
  const std::string samples = shape.samples > 0 ? std::to_string(shape.samples) + " samples of " : "";
  throw InputError(shape.source + ": " + samples + std::to_string(shape.features) + " features with model.hidden = '" + config.model.hidden +
                   "' and train.batch_size = " + std::to_string(config.train.batch_size) + " need about " +
                   bytes_text(p.total()) + " per rank (model " + bytes_text(p.model) + ", batches " +
                   bytes_text(p.batches) + ", sampler " + bytes_text(p.sampler) + ") x " +
                   std::to_string(shape.ranks_on_node) + " rank(s) on this node, more than its " +
                   bytes_text(memory) + " of memory");
}

}  // namespace mpiddp
