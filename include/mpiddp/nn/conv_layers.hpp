#pragma once
// The image layers: Conv2d and 2-D pooling, on samples of shape {C, H, W}.
#include <optional>

#include "ops/conv/conv_ops.hpp"
#include "ops/pool/pool_ops.hpp"
#include "mpiddp/device/index_buffer.hpp"
#include "mpiddp/nn/layer.hpp"

namespace mpiddp {

// The {C, H, W} of a sample, or a LayerError naming what `what` needs.
Shape image_shape(const Shape& in, const char* what);

class Conv2d final : public Layer {
 public:
  Conv2d(std::size_t out_channels, int kernel, int stride, int padding)
      : out_c_(out_channels), kernel_(kernel), stride_(stride), padding_(padding) {}
  std::string kind() const override { return "Conv2d"; }
  bool needs_images() const override { return true; }
  bool has_own_products() const override { return true; }
  bool has_own_kernels() const override;
  bool own_kernels_suit(int threads) const override;
  bool has_winograd() const override;
  bool winograd_suits(int threads) const override;
  bool has_winograd_weight_gradient() const override;
  bool winograd_weight_gradient_suits(int threads) const override;
  bool has_own_winograd() const override;
  bool own_winograd_suits(int threads) const override;
  Shape output_shape(const Shape& in) const override;
  double scratch_bytes(const Shape& in, std::size_t samples) const override;
  double forward_flops(const Shape& in) const override;
  std::string arguments() const override;
  void declare(ParameterStore& params, const std::string& prefix, const Shape& in) override;
  // PyTorch's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = C * k * k.
  void initialize(ParameterStore& params, std::uint64_t seed) override;
  LayoutRole layout_role() const override;
  void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) override;
  void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                bool accumulate) override;
  std::vector<std::size_t> parameter_indices() const override { return {weight_, bias_}; }
  // A BatchNorm after it takes each sample as it is written and gives each
  // sample's gradient as it is read, where this layer runs sample by sample
  // (ConvOps::conv_forward_by_sample: mpiddp's own kernels).
  void feed_samples_to(SampleConsumer* next) override { next_ = next; }

 private:
  ConvGeometry geometry(std::size_t samples) const;
  ConvOps& conv() const { return device().ops<ConvOps>(); }
  void on_bind() override {
    scratch_ = conv().make_scratch();
    sample_grad_ = Matrix(&device());
  }

  std::size_t out_c_;
  int kernel_, stride_, padding_;
  Shape in_;
  std::size_t weight_ = 0, bias_ = 0;
  ParameterStore* params_ = nullptr;
  std::unique_ptr<LayerScratch> scratch_;
  SampleConsumer* next_ = nullptr;
  Matrix sample_grad_{nullptr};  // one sample's output gradient, from next_
  mutable std::optional<bool> winograd_;                  // has_winograd(), once known
  mutable std::optional<bool> winograd_weight_gradient_;  // has_winograd_weight_gradient(), once known
};

enum class PoolKind { max, average };

class Pool2d final : public Layer {
 public:
  Pool2d(PoolKind kind, int kernel, int stride) : pool_(kind), kernel_(kernel), stride_(stride) {}
  std::string kind() const override { return pool_ == PoolKind::max ? "MaxPool2d" : "AvgPool2d"; }
  bool needs_images() const override { return true; }
  Shape output_shape(const Shape& in) const override;
  double scratch_bytes(const Shape& in, std::size_t samples) const override;
  std::string arguments() const override;
  void declare(ParameterStore&, const std::string&, const Shape& in) override { in_ = image_shape(in, "pooling"); }
  int tiling_max_pool_window() const override { return pool_ == PoolKind::max && kernel_ == stride_ ? kernel_ : 0; }
  // Average pooling keeps its input's layout where the device's ops take both.
  LayoutRole layout_role() const override {
    return pool_ == PoolKind::average && pool().takes_blocked_average() ? LayoutRole::preserving
                                                                         : LayoutRole::nchw_only;
  }
  void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) override;
  void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                bool accumulate) override;

 private:
  PoolGeometry geometry(std::size_t samples) const;
  PoolOps& pool() const { return device().ops<PoolOps>(); }
  void on_bind() override;

  PoolKind pool_;
  int kernel_, stride_;
  Shape in_;
  // Max pooling's window maxima from the last forward, in the device's memory.
  IndexBuffer argmax_;
};

}  // namespace mpiddp
