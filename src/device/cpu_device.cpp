// The CPU device: BLAS for the matrix products, and loops over the shared
// element-wise math (elementwise.hpp) built for several instruction sets.
#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "mpiddp/common/error.hpp"
#include "mpiddp/common/simd.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/device/device.hpp"
#include "mpiddp/tensor/cpu_ops.hpp"

namespace mpiddp {
namespace {

MPIDDP_VECTOR_CLONES
void activation_forward_loop(ActivationKind kind, const float* __restrict x, float* __restrict y, std::size_t n) {
  // One loop per kind: a switch inside the loop would stop vectorisation.
  switch (kind) {
    case ActivationKind::relu:
      for (std::size_t i = 0; i < n; ++i) y[i] = ew::relu(x[i]);
      break;
    case ActivationKind::gelu:
      for (std::size_t i = 0; i < n; ++i) y[i] = ew::gelu(x[i]);
      break;
    case ActivationKind::tanh:
      for (std::size_t i = 0; i < n; ++i) y[i] = ew::tanh_value(x[i]);
      break;
  }
}

MPIDDP_VECTOR_CLONES
void activation_backward_loop(ActivationKind kind, const float* __restrict x, const float* __restrict y,
                              const float* __restrict g, float* __restrict d, std::size_t n) {
  switch (kind) {
    case ActivationKind::relu:
      for (std::size_t i = 0; i < n; ++i) d[i] = ew::relu_grad(x[i], y[i], g[i]);
      break;
    case ActivationKind::gelu:
      for (std::size_t i = 0; i < n; ++i) d[i] = ew::gelu_grad(x[i], y[i], g[i]);
      break;
    case ActivationKind::tanh:
      for (std::size_t i = 0; i < n; ++i) d[i] = ew::tanh_grad(x[i], y[i], g[i]);
      break;
  }
}

MPIDDP_VECTOR_CLONES
void multiply_loop(const float* __restrict a, const float* __restrict b, float* __restrict out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

MPIDDP_VECTOR_CLONES
void sgd_loop(float* __restrict params, const float* __restrict grads, float* __restrict buffer, std::size_t n,
              ew::SgdCoefficients k) {
  if (k.has_buffer) {
    for (std::size_t i = 0; i < n; ++i) ew::sgd_update(params[i], grads[i], buffer + i, k);
  } else {
    for (std::size_t i = 0; i < n; ++i) ew::sgd_update(params[i], grads[i], nullptr, k);
  }
}

MPIDDP_VECTOR_CLONES
void adamw_loop(float* __restrict params, const float* __restrict grads, float* __restrict m, float* __restrict v,
                std::size_t n, ew::AdamWCoefficients k) {
  for (std::size_t i = 0; i < n; ++i) ew::adamw_update(params[i], grads[i], m[i], v[i], k);
}

MPIDDP_VECTOR_CLONES
bool all_finite_loop(const float* data, std::size_t n) {
  // NaN and Inf are the floats whose exponent bits are all ones; an integer OR
  // reduction vectorises (a float one would not, without fast-math).
  std::uint32_t all_ones = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t exponent = std::bit_cast<std::uint32_t>(data[i]) & 0x7f800000u;
    all_ones |= exponent == 0x7f800000u;
  }
  return all_ones == 0;
}

class CpuDevice final : public Device {
 public:
  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string describe() const override { return "cpu"; }
  void set_precision(Precision p) override {
    // setup_compute refuses other precisions on the CPU (config/rules.cpp) before this.
    if (p != Precision::fp32) throw std::logic_error(std::string("cpu device asked for ") + name_of(p));
  }
  Precision precision() const override { return Precision::fp32; }

  void* allocate(std::size_t bytes) override { return ::operator new(bytes); }
  void release(void* data) override { ::operator delete(data); }
  void copy_to_host(void* host, const void* device, std::size_t bytes) override { copy_within(host, device, bytes); }
  void copy_to_device(void* device, const void* host, std::size_t bytes) override { copy_within(device, host, bytes); }
  void copy_within(void* to, const void* from, std::size_t bytes) override {
    if (bytes && to != from) std::memmove(to, from, bytes);
  }
  void synchronize() override {}

  // Host batches are used where they are.
  StagedBatch stage(const Batch& batch, int) override {
    StagedBatch s;
    s.features = &batch.features;
    s.labels = batch.class_ids.empty() ? nullptr : batch.class_ids.data();
    s.targets = batch.targets.size() ? batch.targets.data() : nullptr;
    return s;
  }
  void done_with_stage(int) override {}

  void linear_forward(const float* x, const float* w, const float* b, float* y, int n, int in, int out,
                      LayerScratch*) override {
    cpu::linear_forward(x, w, b, y, n, in, out);
  }
  void linear_backward_params(const float* x, const float* dy, float* dw, float* db, int n, int in, int out,
                              bool accumulate, LayerScratch*) override {
    cpu::linear_backward_params(x, dy, dw, db, n, in, out, accumulate);
  }
  void linear_backward_input(const float* dy, const float* w, float* dx, int n, int in, int out,
                             LayerScratch*) override {
    cpu::linear_backward_input(dy, w, dx, n, in, out);
  }

  void activation_forward(ActivationKind kind, const float* x, float* y, std::size_t n) override {
    activation_forward_loop(kind, x, y, n);
  }
  void activation_backward(ActivationKind kind, const float* x, const float* y, const float* dy, float* dx,
                           std::size_t n) override {
    activation_backward_loop(kind, x, y, dy, dx, n);
  }
  void dropout_forward(const float* x, float* y, float* mask, std::size_t n, std::uint64_t key, float p,
                       float keep_scale) override {
    for (std::size_t i = 0; i < n; ++i) {
      mask[i] = ew::dropout_mask(key, i, p, keep_scale);
      y[i] = x[i] * mask[i];
    }
  }
  void multiply(const float* a, const float* b, float* out, std::size_t n) override { multiply_loop(a, b, out, n); }
  void scale(float* data, std::size_t n, float factor) override { cpu::scale(data, n, factor); }

  void softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* grad, int n, int c) override {
    const float inv_n = 1.0f / static_cast<float>(n);
    for (int r = 0; r < n; ++r) {
      bool correct = false;
      const std::size_t at = static_cast<std::size_t>(r) * c;
      loss_.loss_sum +=
          ew::softmax_cross_entropy_row(logits + at, c, labels[r], inv_n, grad ? grad + at : nullptr, &correct);
      loss_.correct += correct;
    }
    loss_.count += n;
  }
  void mean_squared_error(const float* y, const float* targets, float* grad, int n, int t) override {
    const float scale = 2.0f / static_cast<float>(static_cast<std::size_t>(n) * t);
    for (int r = 0; r < n; ++r) {
      const std::size_t at = static_cast<std::size_t>(r) * t;
      loss_.loss_sum += ew::squared_error_row(y + at, targets + at, t, scale, grad ? grad + at : nullptr);
    }
    loss_.count += n;
  }
  void check_finite(const float* data, std::size_t n) override { loss_.finite = all_finite_loop(data, n); }
  LossResult take_loss() override { return std::exchange(loss_, LossResult{}); }

  void sgd_update(float* params, const float* grads, float* buffer, std::size_t n,
                  const ew::SgdCoefficients& k) override {
    sgd_loop(params, grads, buffer, n, k);
  }
  void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                    const ew::AdamWCoefficients& k) override {
    adamw_loop(params, grads, m, v, n, k);
  }
  bool all_finite(const float* data, std::size_t n) override { return all_finite_loop(data, n); }

 private:
  LossResult loss_;
};

}  // namespace

Device& cpu_device() {
  static CpuDevice device;
  return device;
}

const char* device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::cuda: return "cuda";
    case DeviceKind::emulated: return "emulated";
  }
  return "?";
}

}  // namespace mpiddp
