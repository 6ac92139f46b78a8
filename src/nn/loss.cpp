#include "mpiddp/nn/loss.hpp"

#include <algorithm>
#include <cmath>

namespace mpiddp {

LossResult softmax_cross_entropy(const Matrix& logits, const std::int32_t* labels, Matrix* grad) {
  const std::size_t n = logits.rows(), c = logits.cols();
  LossResult result;
  result.count = static_cast<std::int64_t>(n);
  if (grad) grad->resize(n, c);
  const float inv_n = 1.0f / static_cast<float>(n);
  for (std::size_t r = 0; r < n; ++r) {
    const float* z = logits.row(r);
    const float* top = std::max_element(z, z + c);
    double sum = 0.0;
    for (std::size_t k = 0; k < c; ++k) sum += std::exp(static_cast<double>(z[k] - *top));
    const double log_sum = std::log(sum) + *top;
    const auto label = static_cast<std::size_t>(labels[r]);
    result.loss_sum += log_sum - z[label];
    if (static_cast<std::size_t>(top - z) == label) ++result.correct;
    if (grad) {
      float* g = grad->row(r);
      for (std::size_t k = 0; k < c; ++k)
        g[k] = static_cast<float>(std::exp(static_cast<double>(z[k]) - log_sum)) * inv_n;
      g[label] -= inv_n;
    }
  }
  return result;
}

LossResult mean_squared_error(const Matrix& output, const float* targets, Matrix* grad) {
  const std::size_t n = output.rows(), t = output.cols();
  LossResult result;
  result.count = static_cast<std::int64_t>(n);
  if (grad) grad->resize(n, t);
  const float scale = 2.0f / static_cast<float>(n * t);
  for (std::size_t i = 0; i < n * t; ++i) {
    const float diff = output.data()[i] - targets[i];
    result.loss_sum += static_cast<double>(diff) * diff / static_cast<double>(t);
    if (grad) grad->data()[i] = scale * diff;
  }
  return result;
}

}  // namespace mpiddp
