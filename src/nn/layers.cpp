#include "mpiddp/nn/layers.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "mpiddp/common/random.hpp"

namespace mpiddp {

// ---- Linear ----------------------------------------------------------------

// On {features} as nn.Linear; on a sequence {T, D} on the last dimension, each
// position a row of the product (images need flatten first).
Shape Linear::output_shape(const Shape& in) const {
  if (in.size() != 1 && in.size() != 2)
    throw LayerError("linear needs one feature dimension per sample (or {positions, features}), but gets " +
                     shape_text(in) + " (put flatten before it)");
  // The matrix products take both widths and the rows as ints.
  indexable(in.back(), "its input width");
  indexable(in.front(), "its positions");
  if (in.size() == 2) return {in[0], indexable(out_, "its output width")};
  return {indexable(out_, "its output width")};
}

double Linear::forward_flops(const Shape& in) const {
  const double positions = in.size() == 2 ? static_cast<double>(in[0]) : 1.0;
  return 2 * positions * static_cast<double>(in.back()) * static_cast<double>(out_);
}

std::string Linear::arguments() const {
  return "in_features=" + std::to_string(in_) + ", out_features=" + std::to_string(out_) +
         (has_bias_ ? "" : ", bias=False") + (tied_ ? ", weight=layers." + std::to_string(tied_layer_) + ".weight" : "");
}

void Linear::tie_to(Embedding& embedding, std::size_t k, bool own_width) {
  if (!own_width) out_ = embedding.entries();
  tied_ = &embedding;
  tied_layer_ = k;
  has_bias_ = false;
  embedding.share_weight();
}

void Linear::declare(ParameterStore& params, const std::string& prefix, const Shape& in) {
  output_shape(in);
  in_ = in.back();
  rows_per_sample_ = in.size() == 2 ? in[0] : 1;
  if (tied_) {
    if (in_ != tied_->width() || out_ != tied_->entries())
      throw LayerError("tie=" + std::to_string(tied_layer_) + ": layer " + std::to_string(tied_layer_ + 1) +
                       "'s weight is " + std::to_string(tied_->entries()) + "x" + std::to_string(tied_->width()) +
                       ", but this linear maps " + std::to_string(in_) + " features to " + std::to_string(out_));
    weight_ = tied_->weight_index();
    return;
  }
  weight_ = params.add(prefix + ".weight", {out_, in_});
  if (has_bias_) bias_ = params.add(prefix + ".bias", {out_});
}

std::vector<std::size_t> Linear::parameter_indices() const {
  if (tied_) return {};  // the embedding reports the shared weight, after its use in backward
  if (has_bias_) return {weight_, bias_};
  return {weight_};
}

void fill_uniform(ParameterStore& params, std::size_t index, float bound, std::uint64_t seed) {
  // Values are drawn on the host; Sequential sends them to the device.
  CounterRng rng(hash_combine(seed, index));
  float* v = params.host_values() + params.list()[index].offset;
  for (std::size_t i = 0; i < params.list()[index].count; ++i) v[i] = (2.0f * rng.uniform(i) - 1.0f) * bound;
}

void Linear::initialize(ParameterStore& params, std::uint64_t seed) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  for (std::size_t index : parameter_indices()) fill_uniform(params, index, bound, seed);  // none when tied
  params_ = &params;
}

int Linear::product_rows(const Matrix& x) const {
  return static_cast<int>(indexable(x.rows() * rows_per_sample_, "rows of its product (samples x positions)"));
}

void Linear::forward(const Matrix& x, Matrix& y, const ForwardContext&) {
  y.resize(x.rows(), out_ * rows_per_sample_);
  dense().linear_forward(x.data(), params_->value(weight_), has_bias_ ? params_->value(bias_) : nullptr, y.data(),
                         product_rows(x), static_cast<int>(in_), static_cast<int>(out_), scratch_.get());
}

void Linear::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx, ParameterStore& params,
                      bool accumulate) {
  const int n = product_rows(x);
  dense().linear_backward_params(x.data(), dy.data(), params.grad(weight_), has_bias_ ? params.grad(bias_) : nullptr,
                                 n, static_cast<int>(in_), static_cast<int>(out_), accumulate, scratch_.get());
  if (dx) {
    dx->resize(x.rows(), x.cols());
    dense().linear_backward_input(dy.data(), params.value(weight_), dx->data(), n, static_cast<int>(in_),
                                   static_cast<int>(out_), scratch_.get());
  }
}

// ---- Activations -------------------------------------------------------------

std::string Activation::kind() const {
  switch (kind_) {
    case ActivationKind::relu: return "ReLU";
    case ActivationKind::gelu:
    case ActivationKind::gelu_tanh: return "GELU";
    case ActivationKind::tanh: return "Tanh";
  }
  return "?";
}

void Activation::forward(const Matrix& x, Matrix& y, const ForwardContext&) {
  y.resize(x.rows(), x.cols());
  device().ops<PointwiseOps>().activation_forward(kind_, x.data(), y.data(), x.size());
}

void Activation::backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore&, bool) {
  if (!dx) return;
  dx->resize(x.rows(), x.cols());
  device().ops<PointwiseOps>().activation_backward(kind_, x.data(), y.data(), dy.data(), dx->data(), x.size());
}

// ---- Dropout -----------------------------------------------------------------

std::string Dropout::arguments() const {
  char text[32];
  std::snprintf(text, sizeof(text), "p=%g", p_);
  return text;
}

double Dropout::scratch_bytes(const Shape& in, std::size_t samples) const {
  return static_cast<double>(samples) * static_cast<double>(element_count(in)) * sizeof(float);
}

std::uint64_t dropout_key(const ForwardContext& ctx, std::uint64_t layer_id) {
  return hash_combine(hash_combine(ctx.seed, ctx.stream), hash_combine(ctx.counter, layer_id));
}

void apply_dropout(Device& device, const Matrix& x, Matrix& y, Matrix& mask, double p, std::uint64_t key) {
  y.resize(x.rows(), x.cols());
  mask.resize(x.rows(), x.cols());
  device.ops<PointwiseOps>().dropout_forward(x.data(), y.data(), mask.data(), x.size(), key, static_cast<float>(p),
                                             static_cast<float>(1.0 / (1.0 - p)));
}

void Dropout::forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) {
  y.resize(x.rows(), x.cols());
  const std::size_t n = x.size();
  masked_ = ctx.training && p_ > 0.0;
  if (!masked_) {
    device().copy_within(y.data(), x.data(), n * sizeof(float));
    return;
  }
  apply_dropout(device(), x, y, mask_, p_, dropout_key(ctx, layer_id_));
}

void Dropout::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx, ParameterStore&, bool) {
  if (!dx) return;
  dx->resize(x.rows(), x.cols());
  if (masked_) device().ops<PointwiseOps>().multiply(dy.data(), mask_.data(), dx->data(), x.size());
  else device().copy_within(dx->data(), dy.data(), x.size() * sizeof(float));
}

// ---- Flatten -----------------------------------------------------------------

void Flatten::forward(const Matrix& x, Matrix& y, const ForwardContext&) {
  y.resize(x.rows(), x.cols());
  device().copy_within(y.data(), x.data(), x.size() * sizeof(float));
}

void Flatten::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx, ParameterStore&, bool) {
  if (!dx) return;
  dx->resize(x.rows(), x.cols());
  device().copy_within(dx->data(), dy.data(), x.size() * sizeof(float));
}

}  // namespace mpiddp
