#pragma once
// A stack of layers with cached activations, built from the input file
// (model_builder.hpp).
#include <functional>
#include <memory>
#include <vector>

#include "mpiddp/common/error.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp {

class Sequential {
 public:
  // Parameters and activations live on `device` (the CPU when null). `input`:
  // the shape of one sample. Throws LayerError naming the layer (as
  // "layer N (layers.I)") when a layer cannot take its input.
  Sequential(std::vector<std::unique_ptr<Layer>> layers, const Shape& input, std::uint64_t seed,
             Device* device = nullptr);

  Device& device() const { return *device_; }
  // Scratch for dL/d(output), on the model's device.
  Matrix& output_grad() { return grad_output_; }

  ParameterStore& parameters() { return params_; }
  const ParameterStore& parameters() const { return params_; }
  const Shape& input_shape() const { return shapes_.front(); }
  std::size_t in_features() const { return element_count(shapes_.front()); }
  std::size_t out_features() const { return element_count(shapes_.back()); }
  const Shape& output_shape() const { return shapes_.back(); }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // Every layer at any depth, in order, with its full name and input shape.
  void visit_layers(const LayerVisitor& visit);
  // [i]: whether layer i runs inside layer i - 1's passes (absorb_layers).
  const std::vector<bool>& absorbed() const { return absorbed_; }
  // Decides which activations are kept in oneDNN's blocked layout (nn/layouts.hpp;
  // none unless `allow`) and tells the layers. After the kernel choices: a
  // convolution keeps it only on oneDNN's kernels. The model's input and output stay NCHW.
  void plan_layouts(bool allow);
  // Activations (between layers, at any depth) that plan_layouts() blocked.
  std::size_t blocked_activations() const;
  // Gives layers that need them (SyncBatchNorm) their cross-rank collectives.
  void set_cross_rank(CrossRank* collectives);

  // Returns the output of the last layer (valid until the next forward).
  const Matrix& forward(const Matrix& x, const ForwardContext& ctx);

  // Called with a layer's parameter indices as soon as its gradients are final,
  // last layer first: the DDP reducer starts bucket reductions from here.
  using GradReadyHook = std::function<void(const std::vector<std::size_t>&)>;
  // dL/d(output) -> parameter gradients; overwrites gradients unless accumulate.
  // dL/d(input) only when input_grad is not null (tests: training never needs it).
  void backward(const Matrix& grad_output, bool accumulate, const GradReadyHook& on_ready,
                Matrix* input_grad = nullptr);

  // Floating-point operations of one training sample's matrix products:
  // forward, weight gradients and input gradients (each as many as the forward
  // pass), less the first layer's input gradient, which training never computes.
  double training_flops_per_sample() const;

  // One line per layer, like torchinfo: name, module, output shape, parameters.
  std::string describe() const;

 private:
  RuntimeError out_of_memory(const char* pass, std::size_t index, std::size_t samples) const;

  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> shapes_;        // shapes_[i]: input of layer i; the last: the model's output
  std::vector<Matrix> activations_;  // activations_[i + 1] is the output of layer i
  std::vector<bool> absorbed_;       // layers done inside the one before (absorb_layers)
  std::vector<const Matrix*> outputs_;  // [i]: layer i's output from the last forward (its input when absorbed)
  Device* device_;
  Matrix grad_a_, grad_b_, grad_output_;
  const Matrix* first_input_ = nullptr;
  ParameterStore params_;
  std::vector<const char*> kinds_;  // each layer's kind, for its trace spans (trace_label)
};

// Layers with those inside residual blocks, at any depth (after declare()): what
// the trace counts spans for.
std::size_t nested_layer_count(const std::vector<std::unique_ptr<Layer>>& layers);

// "layer 4 (layers.3)": how errors name a layer.
std::string layer_position(std::size_t index);

// Gives each layer its input shape and registers its parameters and buffers in
// `params` (names and shapes: nothing is allocated). Returns the shapes: [i] is
// layer i's input, the last the model's output. Throws LayerError naming the layer.
std::vector<Shape> declare_layers(const std::vector<std::unique_ptr<Layer>>& layers, const Shape& input,
                                  ParameterStore& params);

}  // namespace mpiddp
