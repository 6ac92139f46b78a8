#include "mpiddp/optim/optimizer.hpp"

#include <algorithm>
#include <cmath>

namespace mpiddp {

void Sgd::step(float* params, const float* grads, std::size_t count, double lr) {
  const float wd = static_cast<float>(weight_decay_), mu = static_cast<float>(momentum_), rate = static_cast<float>(lr);
  const bool first = momentum_buffer_.empty();
  if (mu != 0.0f && first) momentum_buffer_.assign(count, 0.0f);
  float* buf = momentum_buffer_.data();
  for (std::size_t i = 0; i < count; ++i) {
    float g = grads[i] + wd * params[i];
    if (mu != 0.0f) {
      // PyTorch starts the buffer at the first gradient rather than at zero.
      buf[i] = first ? g : mu * buf[i] + g;
      g = nesterov_ ? g + mu * buf[i] : buf[i];
    }
    params[i] -= rate * g;
  }
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
  const float step_size = static_cast<float>(lr / bias1);
  const float inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(bias2));
  const float decay = static_cast<float>(1.0 - lr * weight_decay_);
  const float b1 = static_cast<float>(beta1_), b2 = static_cast<float>(beta2_), eps = static_cast<float>(eps_);
  for (std::size_t i = 0; i < count; ++i) {
    params[i] *= decay;
    m_[i] = b1 * m_[i] + (1.0f - b1) * grads[i];
    v_[i] = b2 * v_[i] + (1.0f - b2) * grads[i] * grads[i];
    const float denom = std::sqrt(v_[i]) * inv_sqrt_bias2 + eps;
    params[i] -= step_size * m_[i] / denom;
  }
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
