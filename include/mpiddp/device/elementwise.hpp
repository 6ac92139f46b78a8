#pragma once
// The per-element and per-row math of training, written once for the CPU loops
// and the CUDA kernels (see hd.hpp). Each function follows PyTorch's formula.
#include <math.h>

#include <cstdint>
#include <cstring>

#include "mpiddp/common/random.hpp"
#include "mpiddp/common/hd.hpp"
#include "mpiddp/config/choices.hpp"  // ActivationKind

namespace mpiddp {

namespace ew {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// max(x, 0) that lets NaN through, as PyTorch's relu and clamp(min=0) do: a NaN
// that turned into 0 would hide a broken input or weight. (Written as !(x <= 0)
// so that every other value, -0 included, gives what x > 0 ? x : 0 gave.)
template <class T>
MPIDDP_HD T max_zero(T x) {
  return !(x <= T(0)) ? x : T(0);
}

// ---- activations: forward value and dL/dx from (x, y = f(x), dL/dy) ----
MPIDDP_HD float relu(float x) { return max_zero(x); }
// PyTorch's threshold_backward: the gradient passes unless x <= 0, so also at NaN.
MPIDDP_HD float relu_grad(float x, float, float g) { return x <= 0.0f ? 0.0f : g; }
// Exact (erf) GELU, PyTorch's default.
MPIDDP_HD float gelu(float x) { return 0.5f * x * (1.0f + erff(x * kInvSqrt2)); }
MPIDDP_HD float gelu_grad(float x, float, float g) {
  const float cdf = 0.5f * (1.0f + erff(x * kInvSqrt2));
  const float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
  return g * (cdf + x * pdf);
}
// e^y from arithmetic alone, so a loop of it vectorises (libm's expf and tanhf
// are calls, one value at a time): e^y = 2^k e^r with k = round(y / ln 2) and
// |r| <= ln(2) / 2, e^r by its Taylor series to r^7 (relative error below 3e-7
// on that interval), 2^k put into the exponent bits. y is clamped to where
// e^y is a normal float.
MPIDDP_HD float exp_arith(float y) {
  y = y < -87.0f ? -87.0f : y > 88.0f ? 88.0f : y;  // not fminf: a call unless NaN is ruled out; NaN stays NaN
  const float k = rintf(y * 1.4426950408889634f);
  const float r = (y - k * 0.693145751953125f) - k * 1.428606765330187e-06f;  // ln 2 in two parts
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(k) + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}
// tanh(u) = 1 - 2 / (e^(2u) + 1), within about 3e-7 of it (absolutely): for
// GELU's tanh form, where tanh is added to 1.
MPIDDP_HD float tanh_arith(float u) { return 1.0f - 2.0f / (exp_arith(2.0f * u) + 1.0f); }

// GELU's tanh approximation (PyTorch's approximate='tanh', GPT-2's), with
// PyTorch's own derivative.
constexpr float kGeluBeta = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluKappa = 0.044715f;
MPIDDP_HD float gelu_tanh(float x) {
  const float inner = kGeluBeta * (x + kGeluKappa * x * x * x);
  return 0.5f * x * (1.0f + tanh_arith(inner));
}
MPIDDP_HD float gelu_tanh_grad(float x, float, float g) {
  const float x_sq = x * x;
  const float t = tanh_arith(kGeluBeta * (x + kGeluKappa * x_sq * x));
  const float left = 0.5f * x, right = 1.0f + t;
  const float inner_derivative = kGeluBeta * (1.0f + 3.0f * kGeluKappa * x_sq);
  return g * (0.5f * right + left * (1.0f - t * t) * inner_derivative);
}
MPIDDP_HD float tanh_value(float x) { return tanhf(x); }
MPIDDP_HD float tanh_grad(float, float y, float g) { return g * (1.0f - y * y); }

// ---- max pooling: whether value v takes over a window's maximum `best` ----
// The first maximum wins, but every NaN takes over (the last NaN of the window,
// as PyTorch's CPU and CUDA kernels pick it), so the window's output is NaN and
// its gradient goes where PyTorch sends it.
MPIDDP_HD bool max_pool_takes(float v, float best) { return v > best || v != v; }

// ---- inverted dropout: element i keeps with probability 1 - p ----
MPIDDP_HD float dropout_mask(std::uint64_t key, std::uint64_t i, float p, float keep_scale) {
  return CounterRng(key).uniform(i) < p ? 0.0f : keep_scale;
}

// ---- optimizers (torch.optim.SGD and AdamW, float arithmetic like PyTorch's kernels) ----
struct SgdCoefficients {
  float rate, weight_decay, momentum;
  bool first, nesterov, has_buffer;
};
MPIDDP_HD void sgd_update(float& param, float grad, float* buffer, const SgdCoefficients& k) {
  float g = grad + k.weight_decay * param;
  if (k.has_buffer) {
    // PyTorch starts the buffer at the first gradient rather than at zero.
    const float b = k.first ? g : k.momentum * *buffer + g;
    *buffer = b;
    g = k.nesterov ? g + k.momentum * b : b;
  }
  param -= k.rate * g;
}

struct AdamWCoefficients {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, inv_sqrt_bias2, eps;
};
MPIDDP_HD void adamw_update(float& param, float grad, float& m, float& v, const AdamWCoefficients& k) {
  const float mi = k.beta1 * m + k.one_minus_beta1 * grad;
  const float vi = k.beta2 * v + k.one_minus_beta2 * grad * grad;
  m = mi;
  v = vi;
  const float denom = sqrtf(vi) * k.inv_sqrt_bias2 + k.eps;
  param = param * k.decay - k.step_size * mi / denom;
}

// ---- attention: one row of causal scores at a time ----
// Softmax over the first n of a row's t scores (the keys at or before the
// query), in place; the rest become 0. The sum is a double, added in order.
MPIDDP_HD void causal_softmax_row(float* p, int n, int t) {
  float top = p[0];
  for (int k = 1; k < n; ++k) top = p[k] > top ? p[k] : top;
  double sum = 0.0;
  for (int k = 0; k < n; ++k) p[k] = exp_arith(p[k] - top);  // vectorises
  for (int k = 0; k < n; ++k) sum += p[k];
  const float inv = static_cast<float>(1.0 / sum);
  for (int k = 0; k < n; ++k) p[k] *= inv;
  for (int k = n; k < t; ++k) p[k] = 0.0f;
}
// d(scores) from d(probabilities) dp, in place: p (dp - sum(p dp)) over the first
// n, 0 after (the masked scores have no gradient).
MPIDDP_HD void causal_softmax_grad_row(const float* p, float* dp, int n, int t) {
  double dot = 0.0;
  for (int k = 0; k < n; ++k) dot += static_cast<double>(p[k]) * dp[k];
  const float d = static_cast<float>(dot);
  for (int k = 0; k < n; ++k) dp[k] = p[k] * (dp[k] - d);
  for (int k = n; k < t; ++k) dp[k] = 0.0f;
}

// ---- losses, one sample (row) at a time ----
// Softmax cross-entropy of a row of logits z against its label, in pieces that
// the CPU (one row in order, below) and the GPU (one warp per row, kernels.cu)
// both use. The terms of the log-sum-exp are doubles, so the loss is the same
// on every device up to the order of the sum.
//   top: the arg-max (the first one on ties), which also decides `correct`.
MPIDDP_HD double softmax_term(float z, float top_value) { return exp(static_cast<double>(z - top_value)); }
MPIDDP_HD double softmax_log_sum(double term_sum, float top_value) { return log(term_sum) + top_value; }
// d(mean loss)/dz for one logit before the label's -inv_n: softmax(z) * inv_n.
MPIDDP_HD float softmax_grad(float z, double log_sum, float inv_n) {
  return static_cast<float>(exp(static_cast<double>(z) - log_sum)) * inv_n;
}

// Label smoothing (PyTorch's CrossEntropyLoss(label_smoothing=s)): the target is
// 1 - s on the label plus s / c on every class. The gradient subtracts each share
// (times inv_n) from softmax(z) * inv_n; s = 0 subtracts exactly inv_n at the label.
struct SmoothedShares {
  float label;  // (1 - s) * inv_n
  float each;   // s / c * inv_n
};
MPIDDP_HD SmoothedShares smoothed_shares(float smoothing, int c, float inv_n) {
  return {(1.0f - smoothing) * inv_n, smoothing / static_cast<float>(c) * inv_n};
}
// The loss of a row with log-sum-exp log_sum: -(1 - s) log p[label] - s/c sum_k log p[k],
// with log p[k] = z[k] - log_sum; z_sum (sum of the row's logits) matters only when s > 0.
MPIDDP_HD double smoothed_loss(double log_sum, float z_label, double z_sum, float smoothing, int c) {
  if (smoothing == 0.0f) return log_sum - z_label;
  return log_sum - (1.0 - smoothing) * static_cast<double>(z_label) - smoothing * z_sum / c;
}

// The whole row: returns the loss, sets *correct when the arg-max is the label,
// and writes d(mean loss)/dz = (softmax - target) * inv_n into g when g is not null.
MPIDDP_HD double softmax_cross_entropy_row(const float* z, int c, int label, float inv_n, float smoothing, float* g,
                                           bool* correct) {
  int top = 0;
  for (int k = 1; k < c; ++k)
    if (z[k] > z[top]) top = k;
  double sum = 0.0, z_sum = 0.0;
  for (int k = 0; k < c; ++k) sum += softmax_term(z[k], z[top]);
  if (smoothing != 0.0f)
    for (int k = 0; k < c; ++k) z_sum += z[k];
  const double log_sum = softmax_log_sum(sum, z[top]);
  *correct = top == label;
  if (g) {
    const SmoothedShares share = smoothed_shares(smoothing, c, inv_n);
    for (int k = 0; k < c; ++k) g[k] = softmax_grad(z[k], log_sum, inv_n);
    if (share.each != 0.0f)
      for (int k = 0; k < c; ++k) g[k] -= share.each;
    g[label] -= share.label;
  }
  return smoothed_loss(log_sum, z[label], z_sum, smoothing, c);
}

// Squared error of one row against its targets, divided by the row width
// (PyTorch's MSELoss 'mean' is the mean of these over rows); g gets
// d(mean loss)/d(output) = scale * diff with scale = 2 / (n * t).
MPIDDP_HD double squared_error_row(const float* y, const float* target, int t, float scale, float* g) {
  double sum = 0.0;
  for (int k = 0; k < t; ++k) {
    const float diff = y[k] - target[k];
    sum += static_cast<double>(diff) * diff;
    if (g) g[k] = scale * diff;
  }
  return sum / static_cast<double>(t);
}

// ---- layer normalisation (PyTorch's LayerNorm over the last dimension) ----
// 1 / sqrt(biased variance + eps) of a row of d values from its sum of squared
// deviations from the mean (summed in double, in a fixed order, by the caller).
MPIDDP_HD float layernorm_rstd(double squared_deviations, int d, float eps) {
  return static_cast<float>(1.0 / sqrt(squared_deviations / d + eps));
}
MPIDDP_HD float layernorm_value(float x, float mean, float rstd, float weight, float bias) {
  return (x - mean) * rstd * weight + bias;
}
// dL/dx of one element: g = dy * weight, xhat = (x - mean) * rstd, and the row's
// means of g and of g * xhat.
MPIDDP_HD float layernorm_grad(float g, float xhat, float rstd, float mean_g, float mean_g_xhat) {
  return rstd * (g - mean_g - xhat * mean_g_xhat);
}

// ---- batch normalisation (PyTorch's BatchNorm / SyncBatchNorm) ----
// M2 from squares summed around a float `centre` near the mean (so a large mean
// costs no precision), corrected to the exact mean: sum (x - c)^2 - n (mean - c)^2.
MPIDDP_HD double bn_corrected_m2(double squares, double count, double mean, float centre) {
  const double shift = mean - centre;
  return max_zero(squares - count * shift * shift);  // a NaN input stays NaN, as in PyTorch's statistics
}
// Adds batch b's (count, mean, M2) to the running (count, mean, m2): one step of
// Chan et al.'s pairwise combination, done in rank order.
MPIDDP_HD void bn_combine(double& count, double& mean, double& m2, double count_b, double mean_b, double m2_b) {
  if (count_b <= 0) return;
  const double total = count + count_b, delta = mean_b - mean;
  mean += delta * count_b / total;
  m2 += m2_b + delta * delta * count * count_b / total;
  count = total;
}
MPIDDP_HD float bn_invstd(double variance, float eps) { return static_cast<float>(1.0 / sqrt(variance + eps)); }
// running = (1 - momentum) running + momentum batch (the unbiased variance for running_var).
MPIDDP_HD float bn_running(float running, float momentum, double batch) {
  return static_cast<float>((1.0 - momentum) * running + momentum * batch);
}
MPIDDP_HD double bn_unbiased_variance(double m2, double count) { return count > 1 ? m2 / (count - 1) : 0.0; }
// dx from this element and its channel's terms: mean_dy = sum_dy / count,
// projection = sum_dy_xmu / count * invstd^2, scale = invstd * weight.
MPIDDP_HD float bn_input_grad(float x, float dy, float mean, float mean_dy, float projection, float scale) {
  return (dy - mean_dy - (x - mean) * projection) * scale;
}

}  // namespace ew
}  // namespace mpiddp
