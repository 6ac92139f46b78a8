#pragma once
// Layer normalisation over the last dimension (nn.LayerNorm(d)): each row of d
// values, one per position of each sample, is normalised with its own mean and
// biased variance, then scaled and shifted per column. Sums are taken in double in
// a fixed order, so a run repeats bit for bit.
#include "mpiddp/device/device.hpp"

namespace mpiddp {

struct LayerNormGeometry {
  int rows = 0;  // samples x positions
  int d = 0;     // values per row (the normalised dimension)
};

class LayerNormOps : public OpFamily {
 public:
  // y = (x - mean) * rstd * weight + bias; saved[2][rows] keeps each row's mean and rstd for backward.
  virtual void forward(const float* x, float* y, const float* weight, const float* bias, float eps, float* saved,
                       const LayerNormGeometry& g) = 0;
  // dweight (+)= sum over rows of dy * xhat, dbias (+)= sum of dy (overwritten unless accumulate);
  // dx (when not null) = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight.
  virtual void backward(const float* x, const float* dy, const float* weight, const float* saved, float* dx,
                        float* dweight, float* dbias, bool accumulate, const LayerNormGeometry& g) = 0;
};

}  // namespace mpiddp
