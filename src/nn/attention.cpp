#include "mpiddp/nn/attention.hpp"

#include <cmath>
#include <cstdio>

#include "mpiddp/common/random.hpp"  // hash_combine
#include "mpiddp/nn/layers.hpp"       // fill_uniform, dropout_key, apply_dropout
#include "ops/pointwise/pointwise_ops.hpp"

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
  std::string text = "n_embd=" + std::to_string(d_) + ", n_head=" + std::to_string(heads_);
  if (dropout_ > 0) {
    char p[32];
    std::snprintf(p, sizeof(p), ", dropout=%g", dropout_);
    text += p;
  }
  return text;
}

double CausalSelfAttention::scratch_bytes(const Shape& in, std::size_t samples) const {
  const double n = static_cast<double>(samples), t = static_cast<double>(in[0]), d = static_cast<double>(in[1]);
  // q, k, v and their gradient; the heads joined and theirs; the softmax and its gradient;
  // with dropout, the weights, their mask and gradient, c_proj's output, its mask and gradient.
  const double masks = dropout_ > 0 ? 3 * static_cast<double>(heads_) * t * t + 3 * t * d : 0;
  return sizeof(float) * n * (2 * 3 * t * d + 2 * t * d + 2 * static_cast<double>(heads_) * t * t + masks);
}

double CausalSelfAttention::forward_flops(const Shape& in) const {
  const double t = static_cast<double>(in[0]), d = static_cast<double>(in[1]);
  // c_attn and c_proj per position; q k^T and weights x v per head, over the
  // whole T x T square (the products compute it; the mask zeroes half after).
  return 2 * t * d * (3 * d) + 2 * t * d * d + 2 * (2 * t * t * d);
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
  for (Matrix* m : {&qkv_, &probs_, &joined_, &weights_, &attn_mask_, &proj_out_, &resid_mask_, &dqkv_, &djoined_,
                    &dprobs_, &dweights_, &dproj_})
    *m = Matrix(&device());
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

void CausalSelfAttention::forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) {
  const std::size_t n = x.rows();
  const int r = rows(n), d = static_cast<int>(d_);
  DenseOps& dense = device().ops<DenseOps>();
  AttentionOps& attention = device().ops<AttentionOps>();
  masked_ = ctx.training && dropout_ > 0.0;
  qkv_.resize(n, positions_ * 3 * d_);
  joined_.resize(n, positions_ * d_);
  probs_.resize(n, heads_ * positions_ * positions_);
  y.resize(n, positions_ * d_);
  dense.linear_forward(x.data(), params_->value(attn_weight_), params_->value(attn_bias_), qkv_.data(), r, d, 3 * d,
                       attn_scratch_.get());
  attention.probabilities(qkv_.data(), probs_.data(), geometry(n));
  if (!masked_) {
    attention.weighted_sum(probs_.data(), qkv_.data(), joined_.data(), geometry(n));
    dense.linear_forward(joined_.data(), params_->value(proj_weight_), params_->value(proj_bias_), y.data(), r, d, d,
                         proj_scratch_.get());
    return;
  }
  // The masks of a Dropout layer at this place in the list, told apart by a last key part.
  const std::uint64_t key = dropout_key(ctx, layer_id_);
  apply_dropout(device(), probs_, weights_, attn_mask_, dropout_, hash_combine(key, 1));
  attention.weighted_sum(weights_.data(), qkv_.data(), joined_.data(), geometry(n));
  proj_out_.resize(n, positions_ * d_);
  dense.linear_forward(joined_.data(), params_->value(proj_weight_), params_->value(proj_bias_), proj_out_.data(), r,
                       d, d, proj_scratch_.get());
  apply_dropout(device(), proj_out_, y, resid_mask_, dropout_, hash_combine(key, 2));
}

void CausalSelfAttention::backward(const Matrix& x, const Matrix&, const Matrix& dy, Matrix* dx,
                                   ParameterStore& params, bool accumulate) {
  const std::size_t n = x.rows();
  const int r = rows(n), d = static_cast<int>(d_);
  DenseOps& dense = device().ops<DenseOps>();
  AttentionOps& attention = device().ops<AttentionOps>();
  PointwiseOps& pointwise = device().ops<PointwiseOps>();
  djoined_.resize(n, positions_ * d_);
  dqkv_.resize(n, positions_ * 3 * d_);
  dprobs_.resize(n, heads_ * positions_ * positions_);
  const Matrix* dout = &dy;
  if (masked_) {
    dproj_.resize(n, positions_ * d_);
    pointwise.multiply(dy.data(), resid_mask_.data(), dproj_.data(), dy.size());
    dout = &dproj_;
  }
  dense.linear_backward_params(joined_.data(), dout->data(), params.grad(proj_weight_), params.grad(proj_bias_), r, d,
                               d, accumulate, proj_scratch_.get());
  dense.linear_backward_input(dout->data(), params.value(proj_weight_), djoined_.data(), r, d, d, proj_scratch_.get());
  if (masked_) {  // d(weights), then through the mask to d(probs)
    dweights_.resize(n, heads_ * positions_ * positions_);
    attention.weighted_sum_backward(weights_.data(), qkv_.data(), djoined_.data(), dqkv_.data(), dweights_.data(),
                                    geometry(n));
    pointwise.multiply(dweights_.data(), attn_mask_.data(), dprobs_.data(), dprobs_.size());
  } else {
    attention.weighted_sum_backward(probs_.data(), qkv_.data(), djoined_.data(), dqkv_.data(), dprobs_.data(),
                                    geometry(n));
  }
  attention.probabilities_backward(probs_.data(), dprobs_.data(), qkv_.data(), dqkv_.data(), geometry(n));
  dense.linear_backward_params(x.data(), dqkv_.data(), params.grad(attn_weight_), params.grad(attn_bias_), r, d,
                               3 * d, accumulate, attn_scratch_.get());
  if (dx) {
    dx->resize(n, x.cols());
    dense.linear_backward_input(dqkv_.data(), params.value(attn_weight_), dx->data(), r, d, 3 * d,
                                attn_scratch_.get());
  }
}

}  // namespace mpiddp
