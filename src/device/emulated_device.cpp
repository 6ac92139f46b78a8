// A stand-in for a GPU on machines without one (tests only: debug.emulate_device
// and MPIDDP_TEST_DEVICE=emulated). It computes with the CPU device's code but
// keeps its own memory, reached only through explicit copies, and it is not a
// host device: everything the GPU path adds around the arithmetic (host/device
// copies of parameters and optimizer state, checkpoint pulls, batch staging and
// prefetch, host-staged MPI all-reduce) runs exactly as on a GPU. Fresh memory is
// filled with NaN, so reading what was never copied in shows up at once.
#include <cstring>
#include <limits>
#include <vector>

#include "mpiddp/common/error.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/device/device.hpp"
#include "mpiddp/tensor/matrix.hpp"

namespace mpiddp {
namespace {

class EmulatedDevice final : public Device {
 public:
  EmulatedDevice() {
    for (Slot& s : slots_) {
      s.features = Matrix(this);
      s.targets = Matrix(this);
    }
  }
  DeviceKind kind() const override { return DeviceKind::emulated; }
  std::string describe() const override { return "emulated GPU (CPU arithmetic, separate memory; tests only)"; }
  void set_precision(Precision p) override { cpu().set_precision(p); }
  Precision precision() const override { return Precision::fp32; }

  void* allocate(std::size_t bytes) override {
    auto* data = static_cast<float*>(::operator new(bytes));
    std::fill(data, data + bytes / sizeof(float), std::numeric_limits<float>::quiet_NaN());
    return data;
  }
  void release(void* data) override { ::operator delete(data); }
  void copy_to_host(void* host, const void* device, std::size_t bytes) override { copy_within(host, device, bytes); }
  void copy_to_device(void* device, const void* host, std::size_t bytes) override { copy_within(device, host, bytes); }
  void copy_within(void* to, const void* from, std::size_t bytes) override {
    if (bytes && to != from) std::memmove(to, from, bytes);
  }
  void synchronize() override {}

  // Copies into the slot's own memory, like the CUDA device's pinned slots.
  StagedBatch stage(const Batch& batch, int slot) override {
    Slot& s = slots_[slot];
    s.features.resize(batch.features.rows(), batch.features.cols());
    copy_to_device(s.features.data(), batch.features.data(), batch.features.size() * sizeof(float));
    s.labels = batch.class_ids;
    s.targets.resize(batch.targets.rows(), batch.targets.cols());
    copy_to_device(s.targets.data(), batch.targets.data(), batch.targets.size() * sizeof(float));
    StagedBatch staged;
    staged.features = &s.features;
    staged.labels = s.labels.empty() ? nullptr : s.labels.data();
    staged.targets = batch.targets.size() ? s.targets.data() : nullptr;
    return staged;
  }
  void done_with_stage(int) override {}

  void linear_forward(const float* x, const float* w, const float* b, float* y, int n, int in, int out,
                      LayerScratch*) override {
    cpu().linear_forward(x, w, b, y, n, in, out, nullptr);
  }
  void linear_backward_params(const float* x, const float* dy, float* dw, float* db, int n, int in, int out,
                              bool accumulate, LayerScratch*) override {
    cpu().linear_backward_params(x, dy, dw, db, n, in, out, accumulate, nullptr);
  }
  void linear_backward_input(const float* dy, const float* w, float* dx, int n, int in, int out,
                             LayerScratch*) override {
    cpu().linear_backward_input(dy, w, dx, n, in, out, nullptr);
  }
  void activation_forward(ActivationKind kind, const float* x, float* y, std::size_t n) override {
    cpu().activation_forward(kind, x, y, n);
  }
  void activation_backward(ActivationKind kind, const float* x, const float* y, const float* dy, float* dx,
                           std::size_t n) override {
    cpu().activation_backward(kind, x, y, dy, dx, n);
  }
  void dropout_forward(const float* x, float* y, float* mask, std::size_t n, std::uint64_t key, float p,
                       float keep_scale) override {
    cpu().dropout_forward(x, y, mask, n, key, p, keep_scale);
  }
  void multiply(const float* a, const float* b, float* out, std::size_t n) override { cpu().multiply(a, b, out, n); }
  void scale(float* data, std::size_t n, float factor) override { cpu().scale(data, n, factor); }
  void softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* grad, int n, int c) override {
    cpu().softmax_cross_entropy(logits, labels, grad, n, c);
  }
  void mean_squared_error(const float* y, const float* targets, float* grad, int n, int t) override {
    cpu().mean_squared_error(y, targets, grad, n, t);
  }
  void check_finite(const float* data, std::size_t n) override { cpu().check_finite(data, n); }
  LossResult take_loss() override { return cpu().take_loss(); }
  void sgd_update(float* params, const float* grads, float* buffer, std::size_t n,
                  const ew::SgdCoefficients& k) override {
    cpu().sgd_update(params, grads, buffer, n, k);
  }
  void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                    const ew::AdamWCoefficients& k) override {
    cpu().adamw_update(params, grads, m, v, n, k);
  }
  bool all_finite(const float* data, std::size_t n) override { return cpu().all_finite(data, n); }

 private:
  struct Slot {
    Matrix features, targets;
    std::vector<std::int32_t> labels;
  };
  static Device& cpu() { return cpu_device(); }
  Slot slots_[2];
};

}  // namespace

std::unique_ptr<Device> make_emulated_device() { return std::make_unique<EmulatedDevice>(); }

}  // namespace mpiddp
