#pragma once
// nanoGPT's CausalSelfAttention on a sequence {T, D}: c_attn (D -> 3D: q, k, v in
// that order), heads split as view(B, T, H, D/H), scores scaled by 1/sqrt(D/H),
// causal mask, softmax, dropout (attn_dropout), heads joined, c_proj (D -> D),
// dropout (resid_dropout), both with the module's one p. Parameters
// layers.<i>.c_attn.weight [3D, D], .c_attn.bias, .c_proj.weight [D, D],
// .c_proj.bias, initialised as nn.Linear's.
#include <memory>

#include "mpiddp/nn/layer.hpp"
#include "ops/attention/attention_ops.hpp"
#include "ops/dense/dense_ops.hpp"

namespace mpiddp {

class CausalSelfAttention final : public Layer {
 public:
  // layer_id: the layer's place in the list, which keys its dropout masks (as Dropout's).
  CausalSelfAttention(std::size_t heads, double dropout, std::uint64_t layer_id)
      : heads_(heads), dropout_(dropout), layer_id_(layer_id) {}
  std::string kind() const override { return "CausalSelfAttention"; }
  Shape output_shape(const Shape& in) const override;
  std::string arguments() const override;  // "n_embd=128, n_head=4"
  double scratch_bytes(const Shape& in, std::size_t samples) const override;
  double forward_flops(const Shape& in) const override;
  void declare(ParameterStore& params, const std::string& prefix, const Shape& in) override;
  void initialize(ParameterStore& params, std::uint64_t seed) override;
  void forward(const Matrix& x, Matrix& y, const ForwardContext& ctx) override;
  void backward(const Matrix& x, const Matrix& y, const Matrix& dy, Matrix* dx, ParameterStore& params,
                bool accumulate) override;
  std::vector<std::size_t> parameter_indices() const override {
    return {attn_weight_, attn_bias_, proj_weight_, proj_bias_};
  }

 private:
  void on_bind() override;
  AttentionGeometry geometry(std::size_t samples) const;
  int rows(std::size_t samples) const;

  std::size_t heads_;
  double dropout_;
  std::uint64_t layer_id_;
  std::size_t positions_ = 0, d_ = 0;
  std::size_t attn_weight_ = 0, attn_bias_ = 0, proj_weight_ = 0, proj_bias_ = 0;
  ParameterStore* params_ = nullptr;
  // Kept from forward for backward: q, k, v; the softmax; the heads joined. With
  // dropout in training (masked_): the weights (softmax x mask), both masks.
  Matrix qkv_{nullptr}, probs_{nullptr}, joined_{nullptr};
  Matrix weights_{nullptr}, attn_mask_{nullptr}, proj_out_{nullptr}, resid_mask_{nullptr};
  bool masked_ = false;
  Matrix dqkv_{nullptr}, djoined_{nullptr}, dprobs_{nullptr}, dweights_{nullptr}, dproj_{nullptr};
  std::unique_ptr<LayerScratch> attn_scratch_, proj_scratch_;
};

}  // namespace mpiddp
