#include "mpiddp/nn/layernorm.hpp"

#include <cstdio>

namespace mpiddp {

Shape LayerNorm::output_shape(const Shape& in) const {
  if (in.empty() || in.back() == 0) throw LayerError("layernorm needs samples with a last dimension, but gets " +
                                                     shape_text(in));
  // LayerNormGeometry holds both as ints (rows for the largest batch are checked in forward).
  indexable(in.back(), "its normalised dimension");
  indexable(element_count(in) / in.back(), "its rows per sample");
  return in;
}

std::string LayerNorm::arguments() const {
  char text[96];
  std::snprintf(text, sizeof(text), "(%zu,), eps=%g, elementwise_affine=True", d_, eps_);
  return text;
}

void LayerNorm::declare(ParameterStore& params, const std::string& prefix, const Shape& in) {
  output_shape(in);
  d_ = in.back();
  rows_per_sample_ = element_count(in) / d_;
  weight_ = params.add(prefix + ".weight", {d_});
  bias_ = params.add(prefix + ".bias", {d_});
}

void LayerNorm::initialize(ParameterStore& params, std::uint64_t) {
  float* weight = params.host_values() + params.list()[weight_].offset;
  float* bias = params.host_values() + params.list()[bias_].offset;
  for (std::size_t j = 0; j < d_; ++j) {
    weight[j] = 1.0f;
    bias[j] = 0.0f;
  }
  params_ = &params;
}

LayerNormGeometry LayerNorm::geometry(std::size_t samples) const {
  LayerNormGeometry g;
  g.rows = static_cast<int>(indexable(samples * rows_per_sample_, "rows in a batch"));
  g.d = static_cast<int>(d_);
  return g;
}

void LayerNorm::forward(const Matrix& x, Matrix& y, const ForwardContext&) {
  const LayerNormGeometry g = geometry(x.rows());
  y.resize(x.rows(), x.cols());
  saved_.resize(2, static_cast<std::size_t>(g.rows));
  device().ops<LayerNormOps>().forward(x.data(), y.data(), params_->value(weight_), params_->value(bias_),
                                       static_cast<float>(eps_), saved_.data(), g);
}

void LayerNorm::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx, ParameterStore& params,
                         bool accumulate) {
  const LayerNormGeometry g = geometry(x.rows());
  if (dx) dx->resize(x.rows(), x.cols());
  device().ops<LayerNormOps>().backward(x.data(), dy.data(), params.value(weight_), saved_.data(),
                                        dx ? dx->data() : nullptr, params.grad(weight_), params.grad(bias_),
                                        accumulate, g);
}

}  // namespace mpiddp
