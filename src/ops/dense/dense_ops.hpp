#pragma once
// Dense (Linear) layer products, PyTorch layout: x[n, in], w[out, in], b[out],
// y[n, out]; b and db are null for a layer without bias. A sequence's rows
// (samples x positions) are n. On the CPU: BLAS; on the GPU: cuBLAS in the
// device's precision.
#include <memory>

#include "mpiddp/device/device.hpp"

namespace mpiddp {

class DenseOps : public OpFamily {
 public:
  // The layer's own scratch (may be null): the backward calls of a layer then
  // reuse what its last forward prepared.
  virtual std::unique_ptr<LayerScratch> make_scratch() { return nullptr; }
  virtual void linear_forward(const float* x, const float* w, const float* b, float* y, int n, int in, int out,
                              LayerScratch* scratch) = 0;
  // dw (+)= dy^T x; db (+)= column sums of dy (overwritten unless accumulate).
  virtual void linear_backward_params(const float* x, const float* dy, float* dw, float* db, int n, int in, int out,
                                      bool accumulate, LayerScratch* scratch) = 0;
  // dx = dy w
  virtual void linear_backward_input(const float* dy, const float* w, float* dx, int n, int in, int out,
                                     LayerScratch* scratch) = 0;
};

}  // namespace mpiddp
