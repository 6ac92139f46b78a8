#pragma once
// The layers of an MLP (Linear, activations, Dropout) and Flatten.
#include "mpiddp/nn/embedding.hpp"
#include "ops/dense/dense_ops.hpp"
#include "ops/pointwise/pointwise_ops.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp {

// U(-bound, bound) into parameter `index`, a counter-based stream of (seed, index).
void fill_uniform(ParameterStore& params, std::size_t index, float bound, std::uint64_t seed);

class Linear final : public Layer {
 public:
  explicit Linear(std::size_t out, bool bias = true) : out_(out), has_bias_(bias) {}
  // linear(tie=K): the product uses embedding layer K's weight ([V, D], GPT-2's
  // lm_head = wte) and has no bias or parameter of its own; the weight's gradient
  // is written here first and the embedding adds to it, and the all-reduce sees
  // it ready only after the embedding's backward (its last use).
  // Without a width of its own (`own_width` false) it maps to the embedding's rows.
  void tie_to(Embedding& embedding, std::size_t k, bool own_width);
  std::string kind() const override { return "Linear"; }
  bool has_own_products() const override { return true; }
  Shape output_shape(const Shape& in) const override;
  double forward_flops(const Shape& in) const override;
  std::string arguments() const override;
  void declare(ParameterStore& params, const std::string& prefix, const Shape& in) override;
  // PyTorch's default: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
  void initialize(ParameterStore& params, std::uint64_t seed) override;
  void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) override;
  void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                bool accumulate) override;
  std::vector<std::size_t> parameter_indices() const override;

 private:
  std::size_t in_ = 0, out_;
  bool has_bias_;
  Embedding* tied_ = nullptr;
  std::size_t tied_layer_ = 0;
  std::size_t rows_per_sample_ = 1;  // positions of a sequence {T, D}: the product acts on D
  DenseOps& dense() const { return device().ops<DenseOps>(); }
  int product_rows(const Matrix& x) const;
  void on_bind() override { scratch_ = dense().make_scratch(); }

  std::size_t weight_ = 0, bias_ = 0;
  ParameterStore* params_ = nullptr;
  std::unique_ptr<LayerScratch> scratch_;  // the device's, kept from forward to backward
};
class Activation final : public Layer {
 public:
  explicit Activation(ActivationKind kind) : kind_(kind) {}
  std::string kind() const override;
  std::string arguments() const override { return kind_ == ActivationKind::gelu_tanh ? "approximate='tanh'" : ""; }
  bool is_relu() const override { return kind_ == ActivationKind::relu; }
  // Element by element: any layout.
  LayoutRole layout_role() const override { return LayoutRole::preserving; }
  void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) override;
  void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                bool accumulate) override;

 private:
  ActivationKind kind_;
};

// The key of a layer's dropout masks in one forward pass: a hash of (seed, rank,
// micro-batch, layer), so masks need no RNG state to checkpoint and repeat on resume.
std::uint64_t dropout_key(const ForwardContext& ctx, std::uint64_t layer_id);
// Inverted dropout on `device`: y = x * mask, each mask element 0 (probability p)
// or 1/(1-p), a hash of (key, element); the mask is kept for backward.
void apply_dropout(Device& device, const Matrix& x, Matrix& y, Matrix& mask, double p, std::uint64_t key);

// Inverted dropout (apply_dropout, keyed by dropout_key).
class Dropout final : public Layer {
 public:
  Dropout(double p, std::uint64_t layer_id) : p_(p), layer_id_(layer_id) {}

  std::string kind() const override { return "Dropout"; }
  std::string arguments() const override;
  double scratch_bytes(const Shape& in, std::size_t samples) const override;  // the mask
  void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) override;
  void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                bool accumulate) override;

 private:
  void on_bind() override { mask_ = Matrix(&device()); }


  double p_;
  std::uint64_t layer_id_;
  Matrix mask_{nullptr};  // 0 or 1/(1-p), from the last training forward (on the device after bind)
  bool masked_ = false;
};

// Flattens each sample to one dimension (PyTorch's Flatten: start_dim=1); the
// data does not move, rows already hold samples in C order.
class Flatten final : public Layer {
 public:
  std::string kind() const override { return "Flatten"; }
  Shape output_shape(const Shape& in) const override { return {element_count(in)}; }
  void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) override;
  void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                bool accumulate) override;
};

}  // namespace mpiddp
