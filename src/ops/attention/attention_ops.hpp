#pragma once
// Causal multi-head self-attention's core, between nanoGPT's c_attn and c_proj:
// qkv holds, per position, q, k and v (each D = heads x head_dim wide, heads
// side by side as view(B, T, H, D/H) splits them); for each sample and head,
// scores = q k^T / sqrt(head_dim) over keys at or before the query's position,
// softmax, then y = probabilities x v, heads side by side again.
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
  // qkv[samples x T][3D] -> y[samples x T][D]; probs[samples][H][T][T] keeps the
  // softmax for backward (0 above the diagonal).
  virtual void forward(const float* qkv, float* y, float* probs, const AttentionGeometry& g) = 0;
  // dy[samples x T][D] -> dqkv[samples x T][3D] (overwritten).
  virtual void backward(const float* qkv, const float* probs, const float* dy, float* dqkv,
                        const AttentionGeometry& g) = 0;
};

}  // namespace mpiddp
