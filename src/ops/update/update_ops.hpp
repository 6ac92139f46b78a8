#pragma once
// Optimizer updates over flat parameter buffers (the math is in elementwise.hpp).
#include <cstddef>

#include "mpiddp/device/device.hpp"
#include "mpiddp/device/elementwise.hpp"

namespace mpiddp {

class UpdateOps : public OpFamily {
 public:
  virtual void sgd_update(float* params, const float* grads, float* buffer, std::size_t n,
                          const ew::SgdCoefficients& k) = 0;
  virtual void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                            const ew::AdamWCoefficients& k) = 0;
};

}  // namespace mpiddp
