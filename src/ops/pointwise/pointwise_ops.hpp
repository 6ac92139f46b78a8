#pragma once
// Element-wise layer math over n floats (activations, dropout, scaling), written
// once in elementwise.hpp and run by each device's loops or kernels.
#include <cstddef>
#include <cstdint>

#include "mpiddp/device/device.hpp"
#include "mpiddp/device/elementwise.hpp"

namespace mpiddp {

class PointwiseOps : public OpFamily {
 public:
  virtual void activation_forward(ActivationKind kind, const float* x, float* y, std::size_t n) = 0;
  virtual void activation_backward(ActivationKind kind, const float* x, const float* y, const float* dy, float* dx,
                                   std::size_t n) = 0;
  // y = x * mask with mask from ew::dropout_mask(key, i, ...); the mask is kept for backward.
  virtual void dropout_forward(const float* x, float* y, float* mask, std::size_t n, std::uint64_t key, float p,
                               float keep_scale) = 0;
  // out = a + b; out may be a or b.
  virtual void add(const float* a, const float* b, float* out, std::size_t n) = 0;
  // out = relu(a + b) (a residual's sum and the ReLU after it): the bits of add,
  // then the ReLU; out may be a or b.
  virtual void add_relu(const float* a, const float* b, float* out, std::size_t n) = 0;
  virtual void multiply(const float* a, const float* b, float* out, std::size_t n) = 0;
  virtual void scale(float* data, std::size_t n, float factor) = 0;
};

}  // namespace mpiddp
