#pragma once
// Losses and the NaN/Inf check, accumulated on the device and read back once per
// step (take_loss), so a GPU step waits for the device only there.
#include <cstddef>
#include <cstdint>

#include "mpiddp/device/device.hpp"

namespace mpiddp {

struct LossResult {
  double loss_sum = 0.0;     // summed over samples (divide by count for the mean)
  std::int64_t correct = 0;  // classification only
  std::int64_t count = 0;
  bool finite = true;        // forward_backward: the reduced gradients had no NaN/Inf
};

class LossOps : public OpFamily {
 public:
  // Add to the running sums; grad (may be null) receives d(mean loss)/d(output)
  // over these n rows. smoothing: PyTorch's label_smoothing (0 = plain cross-entropy).
  virtual void softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* grad, int n, int c,
                                     float smoothing) = 0;
  virtual void mean_squared_error(const float* y, const float* targets, float* grad, int n, int t) = 0;
  // Queues a NaN/Inf check of data; take_loss() reports it (one wait for both).
  virtual void check_finite(const float* data, std::size_t n) = 0;
  // Waits, returns what the losses accumulated since the last call (and whether
  // the data of the last check_finite, if any, was finite), and resets both.
  virtual LossResult take_loss() = 0;
  // Waits and tells whether data holds no NaN/Inf (leaves the running sums alone).
  virtual bool all_finite(const float* data, std::size_t n) = 0;
};

}  // namespace mpiddp
