#include "mpiddp/nn/loss.hpp"

#include "mpiddp/device/elementwise.hpp"

namespace mpiddp {

// Host versions of the device losses (same per-row math, see elementwise.hpp).

LossResult softmax_cross_entropy(const Matrix& logits, const std::int32_t* labels, Matrix* grad,
                                 float label_smoothing) {
  const std::size_t n = logits.rows(), c = logits.cols();
  LossResult result;
  result.count = static_cast<std::int64_t>(n);
  if (grad) grad->resize(n, c);
  const float inv_n = 1.0f / static_cast<float>(n);
  for (std::size_t r = 0; r < n; ++r) {
    bool correct = false;
    result.loss_sum += ew::softmax_cross_entropy_row(logits.row(r), static_cast<int>(c), labels[r], inv_n,
                                                     label_smoothing, grad ? grad->row(r) : nullptr, &correct);
    result.correct += correct;
  }
  return result;
}

LossResult mean_squared_error(const Matrix& output, const float* targets, Matrix* grad) {
  const std::size_t n = output.rows(), t = output.cols();
  LossResult result;
  result.count = static_cast<std::int64_t>(n);
  if (grad) grad->resize(n, t);
  const float scale = 2.0f / static_cast<float>(n * t);
  for (std::size_t r = 0; r < n; ++r)
    result.loss_sum += ew::squared_error_row(output.row(r), targets + r * t, static_cast<int>(t), scale,
                                             grad ? grad->row(r) : nullptr);
  return result;
}

}  // namespace mpiddp
