#include "mpiddp/optim/optimizer.hpp"

#include <algorithm>
#include <cmath>

#include "mpiddp/common/simd.hpp"

namespace mpiddp {

// The update loops run once per step over every parameter (see simd.hpp).

namespace {

MPIDDP_VECTOR_CLONES
void sgd_update(float* __restrict params, const float* __restrict grads, float* __restrict buf, std::size_t count,
                float rate, float wd, float mu, bool first, bool nesterov) {
  for (std::size_t i = 0; i < count; ++i) {
    float g = grads[i] + wd * params[i];
    if (buf) {
      // PyTorch starts the buffer at the first gradient rather than at zero.
      const float b = first ? g : mu * buf[i] + g;
      buf[i] = b;
      g = nesterov ? g + mu * b : b;
    }
    params[i] -= rate * g;
  }
}

MPIDDP_VECTOR_CLONES
void adamw_update(float* __restrict params, const float* __restrict grads, float* __restrict m, float* __restrict v,
                  std::size_t count, float decay, float b1, float one_minus_b1, float b2, float one_minus_b2,
                  float step_size, float inv_sqrt_bias2, float eps) {
  for (std::size_t i = 0; i < count; ++i) {
    const float g = grads[i];
    const float mi = b1 * m[i] + one_minus_b1 * g;
    const float vi = b2 * v[i] + one_minus_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) * inv_sqrt_bias2 + eps;
    params[i] = params[i] * decay - step_size * mi / denom;
  }
}

}  // namespace

void Sgd::step(float* params, const float* grads, std::size_t count, double lr) {
  const bool first = momentum_buffer_.empty();
  if (momentum_ != 0.0 && first) momentum_buffer_.assign(count, 0.0f);
  sgd_update(params, grads, momentum_ != 0.0 ? momentum_buffer_.data() : nullptr, count, static_cast<float>(lr),
             static_cast<float>(weight_decay_), static_cast<float>(momentum_), first, nesterov_);
  ++steps_;
}

void AdamW::step(float* params, const float* grads, std::size_t count, double lr) {
  if (m_.empty()) {
    m_.assign(count, 0.0f);
    v_.assign(count, 0.0f);
  }
  ++steps_;
  const double bias1 = 1.0 - std::pow(beta1_, static_cast<double>(steps_));
  const double bias2 = 1.0 - std::pow(beta2_, static_cast<double>(steps_));
  // 1 - beta in double, as PyTorch does (1.0f - 0.999f is off by 1.3e-5 relative).
  adamw_update(params, grads, m_.data(), v_.data(), count, static_cast<float>(1.0 - lr * weight_decay_),
               static_cast<float>(beta1_), static_cast<float>(1.0 - beta1_), static_cast<float>(beta2_),
               static_cast<float>(1.0 - beta2_), static_cast<float>(lr / bias1),
               static_cast<float>(1.0 / std::sqrt(bias2)), static_cast<float>(eps_));
}

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& c) {
  if (c.name == "adamw") return std::make_unique<AdamW>(c.beta1, c.beta2, c.eps, c.weight_decay);
  return std::make_unique<Sgd>(c.momentum, c.nesterov, c.weight_decay);
}

LrSchedule::LrSchedule(const OptimConfig& config, std::int64_t steps_per_epoch, std::int64_t total_steps)
    : config_(config), steps_per_epoch_(std::max<std::int64_t>(1, steps_per_epoch)), total_steps_(total_steps) {}

double LrSchedule::at(std::int64_t step) const {
  const double peak = config_.lr;
  const std::int64_t warmup = config_.warmup_steps;
  if (config_.schedule != "constant" && step < warmup) return peak * static_cast<double>(step + 1) / warmup;
  if (config_.schedule == "step") {
    const std::int64_t epoch = step / steps_per_epoch_;
    return peak * std::pow(config_.gamma, static_cast<double>(epoch / config_.step_epochs));
  }
  if (config_.schedule == "cosine") {
    const double span = static_cast<double>(std::max<std::int64_t>(1, total_steps_ - warmup));
    const double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
    return config_.min_lr + 0.5 * (peak - config_.min_lr) * (1.0 + std::cos(M_PI * progress));
  }
  return peak;
}

}  // namespace mpiddp
