#pragma once
// 2-D max and average pooling (PyTorch's MaxPool2d / AvgPool2d without padding,
// floor mode), NCHW. Max pooling keeps the index of each window's maximum (the
// first one, or the last NaN, as PyTorch's kernels: ew::max_pool_takes) for backward.
#include <cstdint>

#include "mpiddp/device/device.hpp"

namespace mpiddp {

struct PoolGeometry {
  int n = 0, c = 0, h = 0, w = 0;  // input
  int kernel = 2, stride = 2;
  // Average pooling only (takes_blocked_average): x, y and their gradients in
  // oneDNN's nChw16c (nn/layouts.hpp) instead of NCHW.
  bool blocked = false;
  int out_h() const { return (h - kernel) / stride + 1; }
  int out_w() const { return (w - kernel) / stride + 1; }
};

class PoolOps : public OpFamily {
 public:
  // argmax[n, c, oh, ow]: the position (row * w + col) of the maximum in its plane.
  virtual void max_pool_forward(const float* x, float* y, std::int32_t* argmax, const PoolGeometry& g) = 0;
  virtual void max_pool_backward(const float* dy, const std::int32_t* argmax, float* dx, const PoolGeometry& g) = 0;
  // Whether average pooling takes PoolGeometry::blocked.
  virtual bool takes_blocked_average() const { return false; }
  virtual void avg_pool_forward(const float* x, float* y, const PoolGeometry& g) = 0;
  virtual void avg_pool_backward(const float* dy, float* dx, const PoolGeometry& g) = 0;
};

}  // namespace mpiddp
