#include "mpiddp/nn/attention.hpp"

#include <cmath>

#include "mpiddp/nn/layers.hpp"  // fill_uniform

namespace mpiddp {

Shape CausalSelfAttention::output_shape(const Shape& in) const {
  if (in.size() != 2)
    throw LayerError("causal_self_attention takes a sequence {positions, features}, but gets " + shape_text(in));
  if (heads_ == 0 || in[1] % heads_ != 0)
    throw LayerError(std::to_string(heads_) + " heads do not divide the width " + std::to_string(in[1]));
  indexable(checked_product(in[1], 3, "its q, k, v width"), "its q, k, v width");
  indexable(checked_product(in[0], in[0], "its scores per head"), "its scores per head");
  return in;
}

std::string CausalSelfAttention::arguments() const {
  return "n_embd=" + std::to_string(d_) + ", n_head=" + std::to_string(heads_);
}

double CausalSelfAttention::scratch_bytes(const Shape& in, std::size_t samples) const {
  const double n = static_cast<double>(samples), t = static_cast<double>(in[0]), d = static_cast<double>(in[1]);
  // q, k, v and their gradient; the heads joined and theirs; the softmax and its gradient.
  return sizeof(float) * n * (2 * 3 * t * d + 2 * t * d + 2 * static_cast<double>(heads_) * t * t);
}

void CausalSelfAttention::declare(ParameterStore& params, const std::string& prefix, const Shape& in) {
  output_shape(in);
  positions_ = in[0];
  d_ = in[1];
  attn_weight_ = params.add(prefix + ".c_attn.weight", {3 * d_, d_});
  attn_bias_ = params.add(prefix + ".c_attn.bias", {3 * d_});
  proj_weight_ = params.add(prefix + ".c_proj.weight", {d_, d_});
  proj_bias_ = params.add(prefix + ".c_proj.bias", {d_});
}

void CausalSelfAttention::initialize(ParameterStore& params, std::uint64_t seed) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(d_));  // both products take D inputs
  for (std::size_t index : parameter_indices()) fill_uniform(params, index, bound, seed);
  params_ = &params;
}

void CausalSelfAttention::on_bind() {
  for (Matrix* m : {&qkv_, &probs_, &joined_, &dqkv_, &djoined_}) *m = Matrix(&device());
  attn_scratch_ = device().ops<DenseOps>().make_scratch();
  proj_scratch_ = device().ops<DenseOps>().make_scratch();
}

AttentionGeometry CausalSelfAttention::geometry(std::size_t samples) const {
  AttentionGeometry g;
  g.samples = static_cast<int>(indexable(samples, "samples in a batch"));
  g.positions = static_cast<int>(positions_);
  g.heads = static_cast<int>(heads_);
  g.head_dim = static_cast<int>(d_ / heads_);
  return g;
}

int CausalSelfAttention::rows(std::size_t samples) const {
  return static_cast<int>(indexable(samples * positions_, "rows of its products (samples x positions)"));
}

void CausalSelfAttention::forward(const Matrix& x, Matrix& y, const ForwardContext&) {
  const std::size_t n = x.rows();
  const int r = rows(n), d = static_cast<int>(d_);
  DenseOps& dense = device().ops<DenseOps>();
  qkv_.resize(n, positions_ * 3 * d_);
  joined_.resize(n, positions_ * d_);
  probs_.resize(n, heads_ * positions_ * positions_);
  y.resize(n, positions_ * d_);
  dense.linear_forward(x.data(), params_->value(attn_weight_), params_->value(attn_bias_), qkv_.data(), r, d, 3 * d,
                       attn_scratch_.get());
  device().ops<AttentionOps>().forward(qkv_.data(), joined_.data(), probs_.data(), geometry(n));
  dense.linear_forward(joined_.data(), params_->value(proj_weight_), params_->value(proj_bias_), y.data(), r, d, d,
                       proj_scratch_.get());
}

void CausalSelfAttention::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx,
                                   ParameterStore& params, bool accumulate) {
  const std::size_t n = x.rows();
  const int r = rows(n), d = static_cast<int>(d_);
  DenseOps& dense = device().ops<DenseOps>();
  djoined_.resize(n, positions_ * d_);
  dqkv_.resize(n, positions_ * 3 * d_);
  dense.linear_backward_params(joined_.data(), dy.data(), params.grad(proj_weight_), params.grad(proj_bias_), r, d, d,
                               accumulate, proj_scratch_.get());
  dense.linear_backward_input(dy.data(), params.value(proj_weight_), djoined_.data(), r, d, d, proj_scratch_.get());
  device().ops<AttentionOps>().backward(qkv_.data(), probs_.data(), djoined_.data(), dqkv_.data(), geometry(n));
  dense.linear_backward_params(x.data(), dqkv_.data(), params.grad(attn_weight_), params.grad(attn_bias_), r, d,
                               3 * d, accumulate, attn_scratch_.get());
  if (dx) {
    dx->resize(n, x.cols());
    dense.linear_backward_input(dqkv_.data(), params.value(attn_weight_), dx->data(), r, d, 3 * d,
                                attn_scratch_.get());
  }
}

}  // namespace mpiddp
