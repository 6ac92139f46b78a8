#include "mpiddp/nn/sequential.hpp"

#include <cstdio>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/trace.hpp"

namespace mpiddp {

std::string layer_position(std::size_t index) {
  return "layer " + std::to_string(index + 1) + " (layers." + std::to_string(index) + ")";
}

Sequential::Sequential(std::vector<std::unique_ptr<Layer>> layers, const Shape& input, std::uint64_t seed,
                       Device* device)
    : layers_(std::move(layers)),
      device_(device ? device : &cpu_device()),
      grad_a_(device_),
      grad_b_(device_),
      grad_output_(device_) {
  for (std::size_t i = 0; i <= layers_.size(); ++i) activations_.emplace_back(device_);
  shapes_.push_back(input);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    try {
      shapes_.push_back(layers_[i]->output_shape(shapes_.back()));
      layers_[i]->bind(*device_);
      layers_[i]->declare(params_, "layers." + std::to_string(i), shapes_[i]);
    } catch (const LayerError& e) {
      throw LayerError(layer_position(i) + " " + layers_[i]->kind() + ": " + e.what());
    }
  }
  params_.allocate(device_);
  for (auto& layer : layers_) layer->initialize(params_, seed);
  params_.push_values();  // initial values are drawn on the host
  params_.push_buffers();
}

void Sequential::set_cross_rank(CrossRank* collectives) {
  for (auto& layer : layers_) layer->set_cross_rank(collectives);
}

const Matrix& Sequential::forward(const Matrix& x, const ForwardContext& ctx) {
  const Matrix* input = &x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    TraceSpan span("forward layer", static_cast<int>(i));
    try {
      layers_[i]->forward(*input, activations_[i + 1], ctx);
    } catch (const LayerError& e) {
      throw InputError("model.layers: " + layer_position(i) + " " + layers_[i]->kind() + ": " + e.what());
    }
    input = &activations_[i + 1];
  }
  first_input_ = &x;  // the caller owns the input; backward reads it from there
  return *input;
}

void Sequential::backward(const Matrix& grad_output, bool accumulate, const GradReadyHook& on_ready,
                          Matrix* input_grad) {
  const Matrix* grad = &grad_output;
  Matrix* buffers[2] = {&grad_a_, &grad_b_};
  for (std::size_t i = layers_.size(); i-- > 0;) {
    TraceSpan span("backward layer", static_cast<int>(i));
    const Matrix& input = i == 0 ? *first_input_ : activations_[i];
    // The network input needs no gradient: skipping it saves the largest GEMM.
    Matrix* grad_input = i == 0 ? input_grad : buffers[i % 2];
    layers_[i]->backward(input, activations_[i + 1], *grad, grad_input, params_, accumulate);
    const auto owned = layers_[i]->parameter_indices();
    if (!owned.empty() && on_ready) on_ready(owned);
    grad = grad_input;
  }
}

std::string Sequential::describe() const {
  std::string text;
  char line[256];
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    std::size_t count = 0;
    for (std::size_t index : layers_[i]->parameter_indices()) count += params_.list()[index].count;
    const std::string module = layers_[i]->kind() + "(" + layers_[i]->arguments() + ")";
    std::snprintf(line, sizeof(line), "  layers.%-3zu %-48s %-14s %10zu\n", i, module.c_str(),
                  shape_text(shapes_[i + 1]).c_str(), count);
    text += line;
  }
  return text;
}

}  // namespace mpiddp
