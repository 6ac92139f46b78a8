#pragma once
// Losses: mean over the batch, gradient with respect to the model output.
#include <cstdint>
#include <vector>

#include "ops/loss/loss_ops.hpp"  // LossResult
#include "mpiddp/device/matrix.hpp"

namespace mpiddp {

// Softmax cross-entropy with integer class labels. When grad is not null it
// receives d(mean loss)/d(logits) = (softmax - target) / n, the target one-hot
// unless smoothed (PyTorch's label_smoothing).
LossResult softmax_cross_entropy(const Matrix& logits, const std::int32_t* labels, Matrix* grad,
                                 float label_smoothing = 0.0f);

// Mean squared error over all elements (PyTorch's MSELoss 'mean'); per-sample
// loss_sum is the sum over targets divided by the target width.
LossResult mean_squared_error(const Matrix& output, const float* targets, Matrix* grad);

}  // namespace mpiddp
