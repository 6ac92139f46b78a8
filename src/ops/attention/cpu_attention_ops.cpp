// Attention on the CPU: per sample and head, the products through BLAS
// (strided views of qkv, no copies) and the causal softmax in a row loop whose
// sums run in a fixed order.
#include <cmath>
#include <cstddef>

#include "attention_ops.hpp"
#include "mpiddp/device/cpu_gemm.hpp"
#include "mpiddp/device/elementwise.hpp"
#include "mpiddp/device/op_registry.hpp"

namespace mpiddp::cpu {
namespace {

// Where sample s, head h lives: its q, k, v columns in qkv, its [T][T] block of scores.
struct Head {
  const AttentionGeometry& g;
  int s, h;
  int t() const { return g.positions; }
  int ld() const { return 3 * g.width(); }
  std::size_t row0() const { return static_cast<std::size_t>(s) * t(); }
  std::size_t q(int part = 0) const { return row0() * ld() + part * g.width() + h * g.head_dim; }
  std::size_t block() const { return (static_cast<std::size_t>(s) * g.heads + h) * t() * t(); }
  std::size_t out() const { return row0() * g.width() + h * g.head_dim; }
};

template <class Body>
void each_head(const AttentionGeometry& g, Body body) {
  for (int s = 0; s < g.samples; ++s)
    for (int h = 0; h < g.heads; ++h) body(Head{g, s, h});
}

float scale_of(const AttentionGeometry& g) { return 1.0f / std::sqrt(static_cast<float>(g.head_dim)); }

class CpuAttentionOps final : public AttentionOps {
 public:
  void probabilities(const float* qkv, float* probs, const AttentionGeometry& g) override {
    each_head(g, [&](const Head& x) {
      const int t = x.t();
      float* p = probs + x.block();
      cpu::sgemm(false, true, t, t, g.head_dim, scale_of(g), qkv + x.q(0), x.ld(), qkv + x.q(1), x.ld(), 0.0f, p, t);
      for (int i = 0; i < t; ++i) ew::causal_softmax_row(p + static_cast<std::size_t>(i) * t, i + 1, t);
    });
  }

  void weighted_sum(const float* weights, const float* qkv, float* y, const AttentionGeometry& g) override {
    each_head(g, [&](const Head& x) {
      const int t = x.t();
      cpu::sgemm(false, false, t, g.head_dim, t, 1.0f, weights + x.block(), t, qkv + x.q(2), x.ld(), 0.0f,
                 y + x.out(), g.width());
    });
  }

  void weighted_sum_backward(const float* weights, const float* qkv, const float* dy, float* dqkv, float* dweights,
                             const AttentionGeometry& g) override {
    each_head(g, [&](const Head& x) {
      const int t = x.t();
      // dv = weights^T dy; dweights = dy v^T
      cpu::sgemm(true, false, t, g.head_dim, t, 1.0f, weights + x.block(), t, dy + x.out(), g.width(), 0.0f,
                 dqkv + x.q(2), x.ld());
      cpu::sgemm(false, true, t, t, g.head_dim, 1.0f, dy + x.out(), g.width(), qkv + x.q(2), x.ld(), 0.0f,
                 dweights + x.block(), t);
    });
  }

  void probabilities_backward(const float* probs, float* dprobs, const float* qkv, float* dqkv,
                              const AttentionGeometry& g) override {
    each_head(g, [&](const Head& x) {
      const int t = x.t();
      const float* p = probs + x.block();
      float* ds = dprobs + x.block();
      for (int i = 0; i < t; ++i)
        ew::causal_softmax_grad_row(p + static_cast<std::size_t>(i) * t, ds + static_cast<std::size_t>(i) * t, i + 1,
                                    t);
      // dq = scale ds k; dk = scale ds^T q
      cpu::sgemm(false, false, t, g.head_dim, t, scale_of(g), ds, t, qkv + x.q(1), x.ld(), 0.0f, dqkv + x.q(0),
                 x.ld());
      cpu::sgemm(true, false, t, g.head_dim, t, scale_of(g), ds, t, qkv + x.q(0), x.ld(), 0.0f, dqkv + x.q(1),
                 x.ld());
    });
  }
};

std::unique_ptr<AttentionOps> make_cpu_attention_ops(Device&) { return std::make_unique<CpuAttentionOps>(); }
const bool registered = register_ops<AttentionOps>(DeviceKind::cpu, make_cpu_attention_ops);

}  // namespace
}  // namespace mpiddp::cpu
