#include "mpiddp/nn/sequential.hpp"

#include <cstdio>
#include <functional>
#include <new>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/memory.hpp"
#include "mpiddp/common/trace.hpp"
#include "mpiddp/device/cpu_gemm.hpp"
#include "mpiddp/nn/layouts.hpp"

namespace mpiddp {

namespace {

// Layers with those inside residual blocks, at any depth, that `counts` says yes to.
std::size_t count_nested_layers(const std::vector<std::unique_ptr<Layer>>& layers,
                                const std::function<bool(const Layer&)>& counts) {
  std::size_t count = 0;
  std::vector<const Layer*> open;
  for (const auto& layer : layers) open.push_back(layer.get());
  while (!open.empty()) {
    const Layer* layer = open.back();
    open.pop_back();
    count += counts(*layer);
    for (const InnerLayer& inner : layer->inner_layers()) open.push_back(inner.layer);
  }
  return count;
}

}  // namespace

std::string layer_position(std::size_t index) {
  return "layer " + std::to_string(index + 1) + " (layers." + std::to_string(index) + ")";
}

// What a failed allocation in a layer becomes: one line naming the layer and
// its sizes, never "std::bad_alloc".
RuntimeError Sequential::out_of_memory(const char* pass, std::size_t index, std::size_t samples) const {
  const double bytes = static_cast<double>(samples) * static_cast<double>(element_count(shapes_[index + 1])) *
                       sizeof(float);
  return RuntimeError("out of memory while running the " + std::string(pass) + " pass of " +
                      layer_position(index) + " " + layers_[index]->kind() + " on " + std::to_string(samples) +
                      " samples (its output alone is " + bytes_text(bytes) + ")");
}

Sequential::Sequential(std::vector<std::unique_ptr<Layer>> layers, const Shape& input, std::uint64_t seed,
                       Device* device)
    : layers_(std::move(layers)),
      device_(device ? device : &cpu_device()),
      grad_a_(device_),
      grad_b_(device_),
      grad_output_(device_) {
  for (std::size_t i = 0; i <= layers_.size(); ++i) activations_.emplace_back(device_);
  for (auto& layer : layers_) {
    layer->bind(*device_);
    kinds_.push_back(trace_label(layer->kind()));
  }
  shapes_ = declare_layers(layers_, input, params_);
  absorbed_ = absorb_layers(layers_);
  link_sample_consumers(layers_, absorbed_);
  outputs_.assign(layers_.size(), nullptr);
  try {
    params_.allocate(device_);
  } catch (const std::bad_alloc&) {
    const double floats = 2.0 * static_cast<double>(params_.declared_total()) + params_.declared_buffer_total();
    throw RuntimeError("out of memory while allocating the model's " + std::to_string(params_.declared_total()) +
                       " parameters with their gradients and buffers (" + bytes_text(floats * sizeof(float)) + ")");
  }
  for (auto& layer : layers_) layer->initialize(params_, seed);
  params_.push_values();  // initial values are drawn on the host
  params_.push_buffers();
}

std::vector<Shape> declare_layers(const std::vector<std::unique_ptr<Layer>>& layers, const Shape& input,
                                  ParameterStore& params) {
  std::vector<Shape> shapes{input};
  for (std::size_t i = 0; i < layers.size(); ++i) {
    try {
      shapes.push_back(layers[i]->output_shape(shapes.back()));
      layers[i]->declare(params, "layers." + std::to_string(i), shapes[i]);
    } catch (const LayerError& e) {
      throw LayerError(layer_position(i) + " " + layers[i]->kind() + ": " + e.what());
    }
  }
  return shapes;
}

void Sequential::visit_layers(const LayerVisitor& visit) {
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const std::string name = "layers." + std::to_string(i);
    visit(name, *layers_[i], shapes_[i]);
    layers_[i]->visit_inner(name, visit);
  }
}

void Sequential::plan_layouts(bool allow) {
  // Each layer asks its ops what they take under its own kernel choice.
  begin_layout_planning();
  apply_chain_layouts(layers_, absorbed_, shapes_, false, false, allow);
}

std::size_t Sequential::blocked_activations() const {
  // A residual block writes a tensor of its own too (the sum); a layer taken into
  // the one before it writes none (set NCHW).
  return count_nested_layers(layers_, [](const Layer& layer) { return layer.blocked_out(); });
}

void Sequential::set_cross_rank(CrossRank* collectives) {
  for (auto& layer : layers_) layer->set_cross_rank(collectives);
}

const Matrix& Sequential::forward(const Matrix& x, const ForwardContext& ctx) {
  const Matrix* input = &x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    outputs_[i] = input;  // a layer done inside the one before passes its output on
    if (absorbed_[i]) continue;
    TraceSpan span("forward layer", static_cast<int>(i), kinds_[i]);
    const cpu::LibraryScope library(layers_[i]->cpu_kernels());
    try {
      layers_[i]->forward(*input, activations_[i + 1], ctx);
    } catch (const LayerError& e) {
      throw InputError("model.layers: " + layer_position(i) + " " + layers_[i]->kind() + ": " + e.what());
    } catch (const std::bad_alloc&) {
      throw out_of_memory("forward", i, input->rows());
    }
    input = outputs_[i] = &activations_[i + 1];
  }
  first_input_ = &x;  // the caller owns the input; backward reads it from there
  return *input;
}

void Sequential::backward(const Matrix& grad_output, bool accumulate, const GradReadyHook& on_ready,
                          Matrix* input_grad) {
  const Matrix* grad = &grad_output;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    if (absorbed_[i]) continue;  // its gradient is taken inside the layer before
    TraceSpan span("backward layer", static_cast<int>(i), kinds_[i]);
    const Matrix& input = i == 0 ? *first_input_ : *outputs_[i - 1];
    // The network input needs no gradient: skipping it saves the largest GEMM.
    Matrix* grad_input = i == 0 ? input_grad : grad == &grad_a_ ? &grad_b_ : &grad_a_;
    const cpu::LibraryScope library(layers_[i]->cpu_kernels());
    try {
      layers_[i]->backward(input, *outputs_[i], *grad, grad_input, params_, accumulate);
    } catch (const std::bad_alloc&) {
      throw out_of_memory("backward", i, input.rows());
    }
    const auto owned = layers_[i]->parameter_indices();
    if (!owned.empty() && on_ready) on_ready(owned);
    grad = grad_input;
  }
}

namespace {

// One line for `layer` named `name`, then its inner layers indented under it.
void describe_layer(const Layer& layer, const std::string& name, const Shape& output, const ParameterStore& params,
                    int depth, std::string& text) {
  std::size_t count = 0;
  for (std::size_t index : layer.parameter_indices()) count += params.list()[index].count;
  const std::string module = layer.kind() + "(" + layer.arguments() + ")";
  const std::string label = std::string(2 * static_cast<std::size_t>(depth), ' ') + name;
  char line[512];
  std::snprintf(line, sizeof(line), "  %-10s %-48s %-14s %10zu\n", label.c_str(), module.c_str(),
                shape_text(output).c_str(), count);
  text += line;
  for (const InnerLayer& inner : layer.inner_layers())
    describe_layer(*inner.layer, inner.name, inner.output, params, depth + 1, text);
}

}  // namespace

std::size_t nested_layer_count(const std::vector<std::unique_ptr<Layer>>& layers) {
  return count_nested_layers(layers, [](const Layer&) { return true; });
}

double Sequential::training_flops_per_sample() const {
  double flops = 0;
  for (std::size_t i = 0; i < layers_.size(); ++i) flops += (i == 0 ? 2 : 3) * layers_[i]->forward_flops(shapes_[i]);
  return flops;
}

std::string Sequential::describe() const {
  std::string text;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    describe_layer(*layers_[i], "layers." + std::to_string(i), shapes_[i + 1], params_, 0, text);
  return text;
}

}  // namespace mpiddp
