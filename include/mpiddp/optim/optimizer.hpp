#pragma once
// Optimizers update the flat parameter buffer from the flat gradient buffer.
// They follow PyTorch's update rules exactly (torch.optim.SGD / AdamW).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/config/config.hpp"
#include "mpiddp/device/device.hpp"
#include "ops/update/update_ops.hpp"
#include "mpiddp/device/flat_buffer.hpp"

namespace mpiddp {

// A named state buffer of an optimizer, for checkpoints. Empty until created
// (first step); pull() before reading its host copy, push() after changing it.
struct OptimizerState {
  std::string name;
  FlatBuffer* values;
};

// Parameters, gradients and state are on the optimizer's device: the update is
// one fused pass over the flat buffers there.
class Optimizer {
 public:
  explicit Optimizer(Device& device) : update_(device.ops<UpdateOps>()) {}
  virtual ~Optimizer() = default;
  virtual OptimizerKind kind() const = 0;
  std::string name() const { return name_of(kind()); }  // optim.name's value
  virtual void step(float* params, const float* grads, std::size_t count, double lr) = 0;
  virtual std::vector<OptimizerState> state() = 0;
  // Floats of state per parameter it updates (SGD: 1 with momentum, else 0; AdamW: 2).
  virtual int state_floats_per_parameter() const = 0;
  std::int64_t steps_taken() const { return steps_; }
  void set_steps_taken(std::int64_t steps) { steps_ = steps; }
  void pull_state() {
    for (auto& s : state()) s.values->pull();
  }
  void push_state() {
    for (auto& s : state()) s.values->push();
  }

 protected:
  UpdateOps& update_;
  std::int64_t steps_ = 0;
};

class Sgd final : public Optimizer {
 public:
  Sgd(Device& device, double momentum, bool nesterov, double weight_decay)
      : Optimizer(device), momentum_(momentum), nesterov_(nesterov), weight_decay_(weight_decay),
        momentum_buffer_(device) {}
  OptimizerKind kind() const override { return OptimizerKind::sgd; }
  void step(float* params, const float* grads, std::size_t count, double lr) override;
  std::vector<OptimizerState> state() override { return {{"momentum", &momentum_buffer_}}; }
  int state_floats_per_parameter() const override { return momentum_ != 0.0 ? 1 : 0; }

 private:
  double momentum_;
  bool nesterov_;
  double weight_decay_;
  FlatBuffer momentum_buffer_;
};

class AdamW final : public Optimizer {
 public:
  AdamW(Device& device, double beta1, double beta2, double eps, double weight_decay)
      : Optimizer(device), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay), m_(device),
        v_(device) {}
  OptimizerKind kind() const override { return OptimizerKind::adamw; }
  void step(float* params, const float* grads, std::size_t count, double lr) override;
  std::vector<OptimizerState> state() override { return {{"exp_avg", &m_}, {"exp_avg_sq", &v_}}; }
  int state_floats_per_parameter() const override { return 2; }

 private:
  double beta1_, beta2_, eps_, weight_decay_;
  FlatBuffer m_, v_;
};

// AdamW's per-step coefficients for optimizer step `step` (counted from 1), as
// torch.optim.AdamW forms them.
ew::AdamWCoefficients adamw_coefficients(double lr, double beta1, double beta2, double eps, double weight_decay,
                                         std::int64_t step);

// On `device` (the CPU when null).
std::unique_ptr<Optimizer> make_optimizer(const OptimConfig& config, Device* device = nullptr);

// Learning rate as a function of the optimizer step (0-based).
class LrSchedule {
 public:
  LrSchedule(const OptimConfig& config, std::int64_t steps_per_epoch, std::int64_t total_steps);
  double at(std::int64_t step) const;

 private:
  OptimConfig config_;
  std::int64_t steps_per_epoch_, total_steps_;
};

}  // namespace mpiddp
