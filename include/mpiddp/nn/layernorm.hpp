#pragma once
// LayerNorm over the last dimension of each sample (nn.LayerNorm(d), with
// elementwise_affine): a sample {d} is one row, a sequence {T, d} is T rows.
// PyTorch's math: the biased variance of each row, weight 1 and bias 0 at the start.
#include "mpiddp/nn/layer.hpp"
#include "ops/layernorm/layernorm_ops.hpp"

namespace mpiddp {

class LayerNorm final : public Layer {
 public:
  explicit LayerNorm(double eps) : eps_(eps) {}
  std::string kind() const override { return "LayerNorm"; }
  Shape output_shape(const Shape& in) const override;
  std::string arguments() const override;  // "(64,), eps=1e-05, elementwise_affine=True"
  void declare(ParameterStore& params, const std::string& prefix, const Shape& in) override;
  void initialize(ParameterStore& params, std::uint64_t seed) override;
  void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) override;
  void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                bool accumulate) override;
  std::vector<std::size_t> parameter_indices() const override { return {weight_, bias_}; }

 private:
  LayerNormGeometry geometry(std::size_t samples) const;
  void on_bind() override { saved_ = Matrix(&device()); }

  double eps_;
  std::size_t d_ = 0, rows_per_sample_ = 1;
  std::size_t weight_ = 0, bias_ = 0;
  ParameterStore* params_ = nullptr;
  Matrix saved_{nullptr};  // each row's mean and rstd [2][rows], from forward for backward
};

}  // namespace mpiddp
