#pragma once
// A residual block: y = f(x) + x, or y = f(x) + g(x) when a shortcut g is given
// (a ResNet block whose body changes the shape: g is then e.g. a strided 1x1
// convolution and BatchNorm). f and g are layer lists of their own; their
// parameters are named as PyTorch names a module with `body` and `shortcut`
// Sequentials: layers.<i>.body.<j>.weight, layers.<i>.shortcut.<j>.weight.
#include <cstdint>
#include <memory>
#include <vector>

#include "mpiddp/nn/layer.hpp"

namespace mpiddp {

// Layers in a row with the outputs they keep for backward (a residual branch).
class LayerChain {
 public:
  explicit LayerChain(std::vector<std::unique_ptr<Layer>> layers) : layers_(std::move(layers)) {}
  bool empty() const { return layers_.empty(); }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // The output shape for `in`; throws LayerError naming the layer as "<name> layer N (<name>.J)".
  Shape output_shape(const Shape& in, const std::string& name) const;
  void declare(ParameterStore& params, const std::string& prefix, const std::string& name, const Shape& in);
  void bind(Device& device);
  const Matrix& forward(const Matrix& x, const ForwardContext& ctx);
  // dx (not null) receives dL/dx; `x` is forward's input.
  void backward(const Matrix& x, const Matrix& dy, Matrix* dx, ParameterStore& params, bool accumulate);
  // Per batch: the outputs kept for backward and the layers' own scratch.
  double scratch_bytes(const Shape& in, std::size_t samples) const;
  double forward_flops(const Shape& in) const;  // per sample, all its layers'
  // Each layer as "<name>.<j>" with its output shape (after declare()).
  void list_inner(const std::string& name, std::vector<InnerLayer>& out) const;
  // Each layer, at any depth, as "<path>.<j>..." with its input shape (after declare()).
  void visit(const std::string& path, const LayerVisitor& visit);
  // After bind(): whether it can run with its input and output blocked (nn/layouts.hpp).
  bool can_run_blocked() const;
  // Plans its layers' layouts for these ends and tells them (nn/layouts.hpp).
  void set_layouts(bool in_blocked, bool out_blocked, bool allow);

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> shapes_;     // [j]: input of layer j
  std::vector<Matrix> outputs_;   // [j]: output of layer j
  std::vector<bool> absorbed_;    // layers done inside the one before (absorb_layers)
  std::vector<const Matrix*> passed_;  // [j]: layer j's output from the last forward (its input when absorbed)
  Matrix grad_a_{nullptr}, grad_b_{nullptr};
  // Trace span names ("forward layers.3.body.0") and the layer's kind, made once in declare().
  struct SpanLabels {
    const char *forward, *backward, *kind;
  };
  std::vector<SpanLabels> spans_;
};

class Residual final : public Layer {
 public:
  Residual(std::vector<std::unique_ptr<Layer>> body, std::vector<std::unique_ptr<Layer>> shortcut)
      : body_(std::move(body)), shortcut_(std::move(shortcut)) {}
  std::string kind() const override { return "Residual"; }
  Shape output_shape(const Shape& in) const override;
  bool needs_images() const override;
  std::size_t min_training_batch() const override;
  double scratch_bytes(const Shape& in, std::size_t samples) const override;
  double forward_flops(const Shape& in) const override;
  void declare(ParameterStore& params, const std::string& prefix, const Shape& in) override;
  void initialize(ParameterStore& params, std::uint64_t seed) override;
  std::string arguments() const override;
  void set_cross_rank(CrossRank* collectives) override;
  void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) override;
  void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                bool accumulate) override;
  std::vector<std::size_t> parameter_indices() const override;
  std::vector<InnerLayer> inner_layers() const override;
  void visit_inner(const std::string& name, const LayerVisitor& visit) override;
  // Its output in its input's layout (the sum is element-wise), where both branches can run that way.
  LayoutRole layout_role() const override;
  bool blocked_inside() const override { return true; }
  void set_layouts(bool blocked_in, bool blocked_out, bool allow) override;
  // Takes a ReLU after it: the sum is written through it in the same pass, and
  // backward masks dy by its own output (0 exactly where the sum was <= 0).
  bool absorb_next(const Layer* next, int taken) override;
  const LayerChain& body() const { return body_; }
  const LayerChain& shortcut() const { return shortcut_; }

 private:
  void on_bind() override;
  std::vector<const Layer*> inner() const;

  LayerChain body_, shortcut_;  // an empty shortcut: the identity
  // layout_role(), worked out once per planning pass (nn/layouts.hpp).
  mutable LayoutRole role_ = LayoutRole::nchw_only;
  mutable std::uint64_t role_pass_ = ~std::uint64_t{0};  // none yet
  Matrix shortcut_grad_{nullptr};
  bool relu_after_ = false;        // a ReLU taken in (absorb_next)
  Matrix relu_grad_{nullptr};      // dy through that ReLU, for both branches
};

}  // namespace mpiddp
