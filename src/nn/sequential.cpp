#include "mpiddp/nn/sequential.hpp"

#include "mpiddp/common/trace.hpp"
#include "mpiddp/nn/layers.hpp"

namespace mpiddp {

Sequential::Sequential(std::vector<std::unique_ptr<Layer>> layers, std::size_t in_features, std::uint64_t seed,
                       Device* device)
    : layers_(std::move(layers)),
      device_(device ? device : &cpu_device()),
      grad_a_(device_),
      grad_b_(device_),
      grad_output_(device_),
      in_features_(in_features) {
  for (std::size_t i = 0; i <= layers_.size(); ++i) activations_.emplace_back(device_);
  std::size_t width = in_features;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->bind(*device_);
    layers_[i]->declare(params_, "layers." + std::to_string(i), width);
    width = layers_[i]->out_features(width);
  }
  out_features_ = width;
  params_.allocate(device_);
  for (auto& layer : layers_) layer->initialize(params_, seed);
  params_.push_values();  // initial values are drawn on the host
}

const Matrix& Sequential::forward(const Matrix& x, const ForwardContext& ctx) {
  const Matrix* input = &x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    TraceSpan span("forward layer", static_cast<int>(i));
    layers_[i]->forward(*input, activations_[i + 1], ctx);
    input = &activations_[i + 1];
  }
  first_input_ = &x;  // the caller owns the input; backward reads it from there
  return *input;
}

void Sequential::backward(const Matrix& grad_output, bool accumulate, const GradReadyHook& on_ready) {
  const Matrix* grad = &grad_output;
  Matrix* buffers[2] = {&grad_a_, &grad_b_};
  for (std::size_t i = layers_.size(); i-- > 0;) {
    TraceSpan span("backward layer", static_cast<int>(i));
    const Matrix& input = i == 0 ? *first_input_ : activations_[i];
    // The network input needs no gradient: skipping it saves the largest GEMM.
    Matrix* grad_input = i == 0 ? nullptr : buffers[i % 2];
    layers_[i]->backward(input, activations_[i + 1], *grad, grad_input, params_, accumulate);
    const auto owned = layers_[i]->parameter_indices();
    if (!owned.empty() && on_ready) on_ready(owned);
    grad = grad_input;
  }
}

std::string Sequential::describe() const {
  std::string text;
  std::size_t width = in_features_;
  for (const auto& layer : layers_) {
    const std::size_t out = layer->out_features(width);
    if (!text.empty()) text += " ";
    text += layer->kind();
    if (out != width || layer->kind() == "Linear") text += "(" + std::to_string(width) + "->" + std::to_string(out) + ")";
    width = out;
  }
  return text;
}

std::unique_ptr<Sequential> build_mlp(const ModelConfig& model, std::size_t in_features, std::size_t out_features,
                                      std::uint64_t seed, Device* device) {
  std::vector<std::unique_ptr<Layer>> layers;
  for (int width : model.hidden_sizes) {
    layers.push_back(std::make_unique<Linear>(static_cast<std::size_t>(width)));
    layers.push_back(std::make_unique<Activation>(model.activation));
    if (model.dropout > 0.0) layers.push_back(std::make_unique<Dropout>(model.dropout, layers.size()));
  }
  layers.push_back(std::make_unique<Linear>(out_features));
  return std::make_unique<Sequential>(std::move(layers), in_features, seed, device);
}

}  // namespace mpiddp
