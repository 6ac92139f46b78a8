#pragma once
// A stack of layers with cached activations, built from the input file.
#include <functional>
#include <memory>
#include <vector>

#include "mpiddp/config/config.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp {

class Sequential {
 public:
  // Parameters and activations live on `device` (the CPU when null).
  Sequential(std::vector<std::unique_ptr<Layer>> layers, std::size_t in_features, std::uint64_t seed,
             Device* device = nullptr);

  Device& device() const { return *device_; }
  // Scratch for dL/d(output), on the model's device.
  Matrix& output_grad() { return grad_output_; }

  ParameterStore& parameters() { return params_; }
  const ParameterStore& parameters() const { return params_; }
  std::size_t in_features() const { return in_features_; }
  std::size_t out_features() const { return out_features_; }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }

  // Returns the output of the last layer (valid until the next forward).
  const Matrix& forward(const Matrix& x, const ForwardContext& ctx);

  // Called with a layer's parameter indices as soon as its gradients are final,
  // last layer first: the DDP reducer starts bucket reductions from here.
  using GradReadyHook = std::function<void(const std::vector<std::size_t>&)>;
  // dL/d(output) -> parameter gradients; overwrites gradients unless accumulate.
  void backward(const Matrix& grad_output, bool accumulate, const GradReadyHook& on_ready);

  std::string describe() const;  // "Linear(784->256) ReLU ..."

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Matrix> activations_;  // activations_[i + 1] is the output of layer i
  Device* device_;
  Matrix grad_a_, grad_b_, grad_output_;
  const Matrix* first_input_ = nullptr;
  ParameterStore params_;
  std::size_t in_features_, out_features_;
};

// MLP from [model]: Linear + activation (+ Dropout) per hidden width, then Linear.
std::unique_ptr<Sequential> build_mlp(const ModelConfig& model, std::size_t in_features, std::size_t out_features,
                                      std::uint64_t seed, Device* device = nullptr);

}  // namespace mpiddp
