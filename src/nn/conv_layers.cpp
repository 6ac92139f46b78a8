#include "mpiddp/nn/conv_layers.hpp"

#include <algorithm>
#include <cmath>

#include "mpiddp/device/cpu_gemm.hpp"
#include "mpiddp/nn/layers.hpp"
#include "ops/conv/onednn_conv.hpp"
#include "ops/conv/own_winograd.hpp"
#include "ops/conv/thin_conv.hpp"

namespace mpiddp {
namespace {

// Where auto runs Winograd's weight gradient (Conv2d::winograd_weight_gradient_suits).
constexpr int kSmallPlane = 14 * 14;  // output positions per plane, at most
constexpr int kWideChannels = 48;   // input and output channels, at least

}  // namespace

Shape image_shape(const Shape& in, const char* what) {
  if (in.size() == 3) return in;
  // Which earlier layer made the data flat (or that the data came flat) is the
  // model builder's to say: it knows the list and where the input shape came from.
  throw LayerError(std::string(what) + " needs images (channels x height x width), but gets " +
                   (in.size() == 1 ? std::to_string(in[0]) + " flat features" : shape_text(in)));
}

// ---- Conv2d --------------------------------------------------------------------

Shape Conv2d::output_shape(const Shape& in) const {
  const Shape image = image_shape(in, "conv2d");
  // ConvGeometry and the im2col loops compute in int: every size they touch must fit one.
  indexable(image[0], "its input channels");
  const std::size_t pad = checked_product(2, static_cast<std::size_t>(padding_), "twice its padding");
  const std::string padded = "its input " + shape_text(image) + " padded by " + std::to_string(padding_);
  const std::size_t span_h = indexable(checked_sum(image[1], pad, padded), padded + ": the height");
  const std::size_t span_w = indexable(checked_sum(image[2], pad, padded), padded + ": the width");
  if (static_cast<std::size_t>(kernel_) > span_h || static_cast<std::size_t>(kernel_) > span_w)
    throw LayerError("kernel " + std::to_string(kernel_) + " is larger than its input " + shape_text(image) +
                     " with padding " + std::to_string(padding_));
  const std::size_t k = static_cast<std::size_t>(kernel_);
  const std::size_t out_h = (span_h - k) / stride_ + 1, out_w = (span_w - k) / stride_ + 1;
  indexable(checked_product(out_h, out_w, "its output positions"),
            "its output positions " + std::to_string(out_h) + " x " + std::to_string(out_w));
  const std::size_t rows = checked_product(image[0], checked_product(k, k, "its kernel"), "its im2col rows");
  indexable(rows, "its im2col rows (input channels x kernel x kernel)");
  const Shape out{out_c_, out_h, out_w};
  element_count(out);
  return out;
}

// The CPU's im2col buffers (cpu_conv_ops.cpp): columns and their gradient
// (rows x positions per sample), the product and dy (out_c x positions), for
// as many samples as fit kCpuColumnBudget floats, at least one.
double Conv2d::scratch_bytes(const Shape& in, std::size_t samples) const {
  const Shape out = output_shape(in);
  const double rows = static_cast<double>(in[0]) * kernel_ * kernel_;
  const double positions = static_cast<double>(out[1]) * static_cast<double>(out[2]);
  const double per_sample = std::max(rows * positions, 1.0);
  const double chunk = std::clamp(std::floor(static_cast<double>(kCpuColumnBudget) / per_sample), 1.0,
                                  std::max(static_cast<double>(samples), 1.0));
  return chunk * positions * (2 * rows + 2 * static_cast<double>(out_c_)) * sizeof(float);
}

double Conv2d::forward_flops(const Shape& in) const {
  const Shape out = output_shape(in);
  return 2 * static_cast<double>(element_count(out)) * static_cast<double>(in[0]) * kernel_ * kernel_;
}

std::string Conv2d::arguments() const {
  std::string text = std::to_string(in_.empty() ? 0 : in_[0]) + ", " + std::to_string(out_c_) +
                     ", kernel_size=" + std::to_string(kernel_);
  if (stride_ != 1) text += ", stride=" + std::to_string(stride_);
  if (padding_ != 0) text += ", padding=" + std::to_string(padding_);
  return text;
}

void Conv2d::declare(ParameterStore& params, const std::string& prefix, const Shape& in) {
  winograd_.reset();
  winograd_weight_gradient_.reset();
  in_ = image_shape(in, "conv2d");
  const std::size_t k = static_cast<std::size_t>(kernel_);
  weight_ = params.add(prefix + ".weight", {out_c_, in_[0], k, k});
  bias_ = params.add(prefix + ".bias", {out_c_});
}

void Conv2d::initialize(ParameterStore& params, std::uint64_t seed) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_[0] * kernel_ * kernel_));
  for (std::size_t index : {weight_, bias_}) fill_uniform(params, index, bound, seed);
  params_ = &params;
}

ConvGeometry Conv2d::geometry(std::size_t samples) const {
  ConvGeometry g;
  g.n = static_cast<int>(samples);
  g.c = static_cast<int>(in_[0]);
  g.h = static_cast<int>(in_[1]);
  g.w = static_cast<int>(in_[2]);
  g.out_c = static_cast<int>(out_c_);
  g.kh = g.kw = kernel_;
  g.stride = stride_;
  g.padding = padding_;
  g.blocked_in = blocked_in();
  g.blocked_out = blocked_out();
  return g;
}

// oneDNN's convolutions read and write either layout; the others NCHW.
LayoutRole Conv2d::layout_role() const {
  const cpu::LibraryScope library(cpu_kernels());
  return !in_.empty() && conv().takes_blocked(geometry(1)) ? LayoutRole::free : LayoutRole::nchw_only;
}

// After declare(): the input shape decides.
bool Conv2d::has_own_kernels() const { return !in_.empty() && cpu::thin_conv::supports(geometry(1)); }
bool Conv2d::own_kernels_suit(int threads) const { return !in_.empty() && cpu::thin_conv::suits(geometry(1), threads); }
// Asked of oneDNN once (it builds the primitives to know): the geometry is fixed after declare().
bool Conv2d::has_winograd() const {
  if (in_.empty()) return false;
  if (!winograd_) winograd_ = cpu::onednn_conv::winograd_available(geometry(1));
  return *winograd_;
}
// Not for few input channels (the rows own kernels suit), whatever the threads and
// CPU: there Winograd's transforms outweigh its savings (a 1-channel ResNet stem
// took 3x the direct convolution's time).
bool Conv2d::winograd_suits(int /*threads*/) const {
  const ConvGeometry g = geometry(1);
  return has_winograd() && g.c * g.kh * g.kw > cpu::thin_conv::kSuitedRows;
}
bool Conv2d::has_winograd_weight_gradient() const {
  if (in_.empty() || !has_winograd()) return false;
  if (!winograd_weight_gradient_) winograd_weight_gradient_ = cpu::onednn_conv::winograd_available(geometry(1), true);
  return *winograd_weight_gradient_;
}
// Winograd's weight gradient ran 10-55% faster than the direct one on planes of at
// most 8 x 8 outputs with 48 to 128 channels; at 14 x 14 22-33% faster on an Intel
// Xeon and even to 25% faster on an AMD EPYC (run to run); either way at 28 x 28,
// even or slower with 32 channels or fewer (docs/performance.md). A rule, not a
// timing, so two runs of one input file choose alike.
bool Conv2d::winograd_weight_gradient_suits(int threads) const {
  const ConvGeometry g = geometry(1);
  return winograd_suits(threads) && g.out_h() * g.out_w() <= kSmallPlane && g.c >= kWideChannels &&
         g.out_c >= kWideChannels && has_winograd_weight_gradient();
}
bool Conv2d::has_own_winograd() const { return !in_.empty() && cpu::own_winograd::supports(geometry(1)); }
// Their transforms run on one thread: with more per rank, the libraries' direct
// kernels use them all.
bool Conv2d::own_winograd_suits(int threads) const {
  return has_own_winograd() && threads == 1;
}

void Conv2d::forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) {
  const ConvGeometry g = geometry(x.rows());
  y.resize(x.rows(), out_c_ * static_cast<std::size_t>(g.out_h()) * g.out_w());
  const float* weight = params_->value(weight_);
  const float* bias = params_->value(bias_);
  if (next_ && ctx.training && !ctx.alone) {
    const int n = static_cast<int>(x.rows());
    const auto written = [this, n](int i, const float* y_i) { next_->input_sample_written(i, n, y_i); };
    if (conv().conv_forward_by_sample(x.data(), weight, bias, y.data(), g, scratch_.get(), written)) return;
  }
  conv().conv_forward(x.data(), weight, bias, y.data(), g, scratch_.get());
}

void Conv2d::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx, ParameterStore& params,
                      bool accumulate) {
  const ConvGeometry g = geometry(x.rows());
  if (next_ && next_->input_grad_waiting(dy.data())) {
    // Without an input gradient of its own, each sample's dy is written as the
    // weight gradient reads it; else all of dy first (before dx may reuse its memory).
    sample_grad_.resize(1, dy.cols());
    const auto dy_of = [this](int i) {
      next_->write_input_grad_sample(i, sample_grad_.data());
      return static_cast<const float*>(sample_grad_.data());
    };
    if (!dx && conv().conv_backward_params_by_sample(x.data(), dy_of, params.grad(weight_), params.grad(bias_), g,
                                                     accumulate, scratch_.get()))
      return;
    next_->write_input_grad();
  }
  conv().conv_backward_params(x.data(), dy.data(), params.grad(weight_), params.grad(bias_), g, accumulate,
                              scratch_.get());
  if (!dx) return;
  dx->resize(x.rows(), x.cols());
  conv().conv_backward_input(dy.data(), params.value(weight_), dx->data(), g, scratch_.get());
}

// ---- Pooling -------------------------------------------------------------------

void Pool2d::on_bind() { argmax_.bind(device()); }

Shape Pool2d::output_shape(const Shape& in) const {
  const Shape image = image_shape(in, pool_ == PoolKind::max ? "maxpool2d" : "avgpool2d");
  // The kernels index a plane with int (max pooling keeps int32 positions in it).
  indexable(image[0], "its input channels");
  indexable(checked_product(image[1], image[2], "its input plane"),
            "its input plane " + std::to_string(image[1]) + " x " + std::to_string(image[2]));
  if (static_cast<std::size_t>(kernel_) > image[1] || static_cast<std::size_t>(kernel_) > image[2])
    throw LayerError("kernel " + std::to_string(kernel_) + " is larger than its input " + shape_text(image));
  return {image[0], (image[1] - kernel_) / stride_ + 1, (image[2] - kernel_) / stride_ + 1};
}

double Pool2d::scratch_bytes(const Shape& in, std::size_t samples) const {
  if (pool_ != PoolKind::max) return 0;
  return static_cast<double>(samples) * static_cast<double>(element_count(output_shape(in))) *
         sizeof(std::int32_t);  // argmax
}

std::string Pool2d::arguments() const {
  return "kernel_size=" + std::to_string(kernel_) + ", stride=" + std::to_string(stride_);
}

PoolGeometry Pool2d::geometry(std::size_t samples) const {
  PoolGeometry g;
  g.n = static_cast<int>(samples);
  g.c = static_cast<int>(in_[0]);
  g.h = static_cast<int>(in_[1]);
  g.w = static_cast<int>(in_[2]);
  g.kernel = kernel_;
  g.stride = stride_;
  g.blocked = pool_ == PoolKind::average && blocked_in();
  return g;
}

void Pool2d::forward(const Matrix& x, Matrix& y, const ForwardContext&) {
  const PoolGeometry g = geometry(x.rows());
  const std::size_t outputs = static_cast<std::size_t>(g.c) * g.out_h() * g.out_w();
  y.resize(x.rows(), outputs);
  if (pool_ == PoolKind::average) return pool().avg_pool_forward(x.data(), y.data(), g);
  pool().max_pool_forward(x.data(), y.data(), argmax_.reserve(y.size()), g);
}

void Pool2d::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx, ParameterStore&, bool) {
  if (!dx) return;
  const PoolGeometry g = geometry(x.rows());
  dx->resize(x.rows(), x.cols());
  if (pool_ == PoolKind::average) pool().avg_pool_backward(dy.data(), dx->data(), g);
  else pool().max_pool_backward(dy.data(), argmax_.data(), dx->data(), g);
}

}  // namespace mpiddp
