#pragma once
// Causal multi-head self-attention's core, between nanoGPT's c_attn and c_proj:
// qkv holds, per position, q, k and v (each D = heads x head_dim wide, heads
// side by side as view(B, T, H, D/H) splits them); for each sample and head,
// scores = q k^T / sqrt(head_dim) over keys at or before the query's position,
// softmax, then y = weights x v, heads side by side again. The weights are the
// probabilities, or, in training with attention dropout, them times the layer's
// dropout mask: the two halves are separate so the mask goes in between.
#include "mpiddp/device/device.hpp"

namespace mpiddp {

struct AttentionGeometry {
  int samples = 0;
  int positions = 0;  // T
  int heads = 0;      // H
  int head_dim = 0;   // D / H
  int width() const { return heads * head_dim; }
};

class AttentionOps : public OpFamily {
 public:
  // qkv[samples x T][3D] -> probs[samples][H][T][T], the causal softmax of the scores (0 above the diagonal).
  virtual void probabilities(const float* qkv, float* probs, const AttentionGeometry& g) = 0;
  // y[samples x T][D] = weights x v per sample and head.
  virtual void weighted_sum(const float* weights, const float* qkv, float* y, const AttentionGeometry& g) = 0;
  // From dy[samples x T][D]: dv into dqkv's v part, and dweights[samples][H][T][T] = dy v^T.
  virtual void weighted_sum_backward(const float* weights, const float* qkv, const float* dy, float* dqkv,
                                     float* dweights, const AttentionGeometry& g) = 0;
  // dprobs -> d(scores) in place (the softmax's gradient), then dq and dk into dqkv's q and k parts.
  virtual void probabilities_backward(const float* probs, float* dprobs, const float* qkv, float* dqkv,
                                      const AttentionGeometry& g) = 0;
};

}  // namespace mpiddp
