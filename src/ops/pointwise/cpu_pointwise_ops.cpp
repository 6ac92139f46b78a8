// Element-wise layer math on the CPU: loops over elementwise.hpp's functions,
// built for several instruction sets (MPIDDP_VECTOR_CLONES).
#include <cstring>

#include "pointwise_ops.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "mpiddp/common/simd.hpp"
#include "mpiddp/device/cpu_blas.hpp"

namespace mpiddp::cpu {
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
    case ActivationKind::gelu_tanh:
      for (std::size_t i = 0; i < n; ++i) y[i] = ew::gelu_tanh(x[i]);
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
    case ActivationKind::gelu_tanh:
      for (std::size_t i = 0; i < n; ++i) d[i] = ew::gelu_tanh_grad(x[i], y[i], g[i]);
      break;
  }
}

MPIDDP_VECTOR_CLONES
void multiply_loop(const float* __restrict a, const float* __restrict b, float* __restrict out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

// Not restrict: dx += dy runs in place (out == a). The residual adds stream
// tensors larger than the L2 cache: lines of 16, the next ones asked for ahead.
MPIDDP_VECTOR_CLONES
void add_loop(const float* a, const float* b, float* out, std::size_t n, bool relu) {
  std::size_t i = 0;
  for (; i + kLineFloats <= n; i += kLineFloats) {
    prefetch_ahead(a + i);
    prefetch_ahead(b + i);
    Lanes16 x, y;
    std::memcpy(&x, a + i, sizeof(x));
    std::memcpy(&y, b + i, sizeof(y));
    Lanes16 sum = x + y;
    if (relu) sum = sum <= 0.0f ? Lanes16{} : sum;  // ew::relu: 0 where <= 0, NaN kept
    std::memcpy(out + i, &sum, sizeof(sum));
  }
  for (; i < n; ++i) out[i] = relu ? ew::relu(a[i] + b[i]) : a[i] + b[i];
}

class CpuPointwiseOps final : public PointwiseOps {
 public:
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
  void add(const float* a, const float* b, float* out, std::size_t n) override { add_loop(a, b, out, n, false); }
  void add_relu(const float* a, const float* b, float* out, std::size_t n) override {
    add_loop(a, b, out, n, true);
  }
  void scale(float* data, std::size_t n, float factor) override { cpu::scale(data, n, factor); }
};

std::unique_ptr<PointwiseOps> make_cpu_pointwise_ops(Device&) { return std::make_unique<CpuPointwiseOps>(); }
const bool registered = register_ops<PointwiseOps>(DeviceKind::cpu, make_cpu_pointwise_ops);

}  // namespace

}  // namespace mpiddp::cpu
