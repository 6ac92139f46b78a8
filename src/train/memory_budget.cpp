#include "mpiddp/train/memory_budget.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/memory.hpp"
#include "mpiddp/nn/model_builder.hpp"

namespace mpiddp {
namespace {

// Doubles throughout: hostile sizes multiply past 64 bits.
struct Parts {
  ModelPlan plan;
  double model = 0, batches = 0, sampler = 0, trace = 0;
  double total() const { return model + batches + sampler + trace; }
};

// The shape the model will be built for, as the session chooses it: model.input_shape,
// else the shards' sample_shape. `known` is false when neither was given and the
// list is not the MLP (which flattens any shape): then flat features are a guess.
Shape model_input(const Config& config, const JobShape& shape, bool& known) {
  Shape sample(config.model.input_shape.begin(), config.model.input_shape.end());
  if (sample.empty()) sample = shape.sample_shape;
  known = !sample.empty() || config.model.layers.empty();
  if (sample.empty()) sample = {shape.features};
  // A model.input_shape that does not describe the samples is refused when the model is built.
  if (element_count(sample) != shape.features) {
    known = false;
    sample = {shape.features};
  }
  return sample;
}

// The model's part: a shape-only pass over its layers, or nothing when its
// input shape is only a guess and the layers do not take it (build_model will
// name the problem with the real shape).
ModelPlan plan_of(const Config& config, const JobShape& shape) {
  bool known = true;
  const Shape input = model_input(config, shape, known);
  try {
    return plan_model(config.model, input, shape.outputs, static_cast<std::size_t>(config.train.batch_size));
  } catch (const InputError&) {
    if (known) throw;
    return {};
  }
}

double bucket_count(const Config& config, const ModelPlan& plan) {
  const double cap = std::min(config.ddp.first_bucket_mb, config.ddp.bucket_mb) * 1048576.0;
  return std::min(static_cast<double>(plan.arrays), 2 + plan.parameters * sizeof(float) / cap);
}

Parts parts_of(const Config& config, const JobShape& shape) {
  Parts p;
  p.plan = plan_of(config, shape);
  const ModelPlan& m = p.plan;
  // Weights, gradients, gradient buckets and up to two optimizer moments; buffers.
  p.model = (m.parameters * 5 + m.buffers) * sizeof(float);
  const double batch = config.train.batch_size;
  // Batches in flight (the prefetch queue, the one being read, the one training),
  // each layer's output, the two gradient buffers backward alternates, and the
  // layers' scratch (im2col columns, masks).
  p.batches = batch *
                  (static_cast<double>(shape.features + shape.outputs) * (config.data.prefetch + 2) +
                   m.activation_floats + 2 * m.largest_floats) *
                  sizeof(float) +
              m.scratch_bytes;
  // The epoch's permutation of every sample, and this rank's share of it.
  p.sampler = static_cast<double>(shape.samples) * sizeof(std::int64_t) * 2;
  if (config.train.trace_steps > 0)
    p.trace = trace_window_events(config, static_cast<double>(m.layers), bucket_count(config, m)) * kTraceEventBytes;
  return p;
}

// "model.layers = '...'"; a long list is cut.
std::string model_text(const Config& config) {
  std::string text = config.model.layers.empty() ? "model.hidden = '" + written_form(config.model.hidden) + "'"
                                                 : "model.layers = '" + config.model.layers + "'";
  return text.size() > 100 ? text.substr(0, 96) + "...'" : text;
}

// "4.49 MiB for 235146 parameters"
std::string model_bytes_text(const Parts& p) {
  char count[48];
  std::snprintf(count, sizeof(count), " for %.0f parameters", p.plan.parameters);
  return bytes_text(p.model) + count;
}

}  // namespace

double trace_window_events(const Config& config, double layers, double buckets) {
  const double per_step = static_cast<double>(config.train.accumulate) * (2 * layers + 3) + buckets + 16;
  return per_step * config.train.trace_steps;
}

double estimated_rank_bytes(const Config& config, const JobShape& shape) {
  return parts_of(config, shape).total();
}

void check_memory_budget(const Config& config, const JobShape& shape) {
  const double memory = static_cast<double>(physical_memory_bytes());
  const Parts p = parts_of(config, shape);
  const double need = p.total() * shape.ranks_on_node;
  if (memory <= 0 || need <= memory) return;
  const std::string samples = shape.samples > 0 ? std::to_string(shape.samples) + " samples of " : "";
  const std::string trace = p.trace > 0 ? ", trace window " + bytes_text(p.trace) +
                                              " for train.trace_steps = " + std::to_string(config.train.trace_steps)
                                        : "";
  throw InputError(shape.source + ": " + samples + std::to_string(shape.features) + " features with " +
                   model_text(config) + " and train.batch_size = " + std::to_string(config.train.batch_size) +
                   " need about " + bytes_text(p.total()) + " per rank (model " + model_bytes_text(p) + ", batches " +
                   bytes_text(p.batches) + ", sampler " + bytes_text(p.sampler) + trace + ") x " +
                   std::to_string(shape.ranks_on_node) + " rank(s) on this node, more than its " + bytes_text(memory) +
                   " of memory");
}

}  // namespace mpiddp
