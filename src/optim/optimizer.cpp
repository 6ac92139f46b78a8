#include "mpiddp/optim/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mpiddp {

void Sgd::step(float* params, const float* grads, std::size_t count, double lr) {
  const bool first = momentum_buffer_.empty();
  if (momentum_ != 0.0 && first) momentum_buffer_.assign_zeros(count);
  ew::SgdCoefficients k{};
  k.rate = static_cast<float>(lr);
  k.weight_decay = static_cast<float>(weight_decay_);
  k.momentum = static_cast<float>(momentum_);
  k.first = first;
  k.nesterov = nesterov_;
  k.has_buffer = momentum_ != 0.0;
  update_.sgd_update(params, grads, k.has_buffer ? momentum_buffer_.data() : nullptr, count, k);
  ++steps_;
}

void AdamW::step(float* params, const float* grads, std::size_t count, double lr) {
  if (m_.empty()) {
    m_.assign_zeros(count);
    v_.assign_zeros(count);
  }
  ++steps_;
  update_.adamw_update(params, grads, m_.data(), v_.data(), count,
                       adamw_coefficients(lr, beta1_, beta2_, eps_, weight_decay_, steps_));
}

ew::AdamWCoefficients adamw_coefficients(double lr, double beta1, double beta2, double eps, double weight_decay,
                                         std::int64_t step) {
  const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bias2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  ew::AdamWCoefficients k{};
  k.decay = static_cast<float>(1.0 - lr * weight_decay);
  // 1 - beta in double, as PyTorch does (1.0f - 0.999f is off by 1.3e-5 relative).
  k.beta1 = static_cast<float>(beta1);
  k.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  k.beta2 = static_cast<float>(beta2);
  k.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  k.step_size = static_cast<float>(lr / bias1);
  k.inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(bias2));
  k.eps = static_cast<float>(eps);
  return k;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& c, Device* device) {
  Device& d = device ? *device : cpu_device();
  switch (c.name) {
    case OptimizerKind::sgd: return std::make_unique<Sgd>(d, c.momentum, c.nesterov, c.weight_decay);
    case OptimizerKind::adamw: return std::make_unique<AdamW>(d, c.beta1, c.beta2, c.eps, c.weight_decay);
  }
  throw std::invalid_argument("make_optimizer: no such optimizer kind");
}

LrSchedule::LrSchedule(const OptimConfig& config, std::int64_t steps_per_epoch, std::int64_t total_steps)
    : config_(config), steps_per_epoch_(std::max<std::int64_t>(1, steps_per_epoch)), total_steps_(total_steps) {}

double LrSchedule::at(std::int64_t step) const {
  const double peak = config_.lr;
  const std::int64_t warmup = config_.warmup_steps;
  if (config_.schedule != ScheduleKind::constant && step < warmup)
    return peak * static_cast<double>(step + 1) / warmup;
  switch (config_.schedule) {
    case ScheduleKind::constant: return peak;
    case ScheduleKind::step: {
      const std::int64_t epoch = step / steps_per_epoch_;
      return peak * std::pow(config_.gamma, static_cast<double>(epoch / config_.step_epochs));
    }
    case ScheduleKind::cosine: {
      const double span = static_cast<double>(std::max<std::int64_t>(1, total_steps_ - warmup));
      const double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
      return config_.min_lr + 0.5 * (peak - config_.min_lr) * (1.0 + std::cos(M_PI * progress));
    }
  }
  return peak;
}

}  // namespace mpiddp
