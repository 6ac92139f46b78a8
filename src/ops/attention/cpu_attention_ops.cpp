// Attention on the CPU: per sample and head, the products through BLAS
// (strided views of qkv, no copies) and the causal softmax in a row loop whose
// sums run in a fixed order.
#include "mpiddp/device/cpu_gemm.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "attention_ops.hpp"
#include "mpiddp/device/elementwise.hpp"
#include "mpiddp/device/op_registry.hpp"

namespace mpiddp::cpu {
namespace {

class CpuAttentionOps final : public AttentionOps {
 public:
  void forward(const float* qkv, float* y, float* probs, const AttentionGeometry& g) override {
    const int t = g.positions, d = g.width(), hd = g.head_dim, ld = 3 * d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (int s = 0; s < g.samples; ++s) {
      const float* base = qkv + static_cast<std::size_t>(s) * t * ld;
      for (int h = 0; h < g.heads; ++h) {
        float* p = probs + (static_cast<std::size_t>(s) * g.heads + h) * t * t;
        const float *q = base + h * hd, *k = base + d + h * hd, *v = base + 2 * d + h * hd;
        cpu::sgemm(false, true, t, t, hd, scale, q, ld, k, ld, 0.0f, p, t);
        for (int i = 0; i < t; ++i) ew::causal_softmax_row(p + static_cast<std::size_t>(i) * t, i + 1, t);
        cpu::sgemm(false, false, t, hd, t, 1.0f, p, t, v, ld, 0.0f,
                    y + static_cast<std::size_t>(s) * t * d + h * hd, d);
      }
    }
  }

  void backward(const float* qkv, const float* probs, const float* dy, float* dqkv,
                const AttentionGeometry& g) override {
    const int t = g.positions, d = g.width(), hd = g.head_dim, ld = 3 * d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    dscores_.resize(static_cast<std::size_t>(t) * t);
    float* ds = dscores_.data();
    for (int s = 0; s < g.samples; ++s) {
      const float* base = qkv + static_cast<std::size_t>(s) * t * ld;
      float* dbase = dqkv + static_cast<std::size_t>(s) * t * ld;
      const float* go = dy + static_cast<std::size_t>(s) * t * d;
      for (int h = 0; h < g.heads; ++h) {
        const float* p = probs + (static_cast<std::size_t>(s) * g.heads + h) * t * t;
        const float *q = base + h * hd, *k = base + d + h * hd, *v = base + 2 * d + h * hd;
        float *dq = dbase + h * hd, *dk = dbase + d + h * hd, *dv = dbase + 2 * d + h * hd;
        // dv = p^T dy; dp = dy v^T (then the softmax's gradient in place)
        cpu::sgemm(true, false, t, hd, t, 1.0f, p, t, go + h * hd, d, 0.0f, dv, ld);
        cpu::sgemm(false, true, t, t, hd, 1.0f, go + h * hd, d, v, ld, 0.0f, ds, t);
        for (int i = 0; i < t; ++i)
          ew::causal_softmax_grad_row(p + static_cast<std::size_t>(i) * t, ds + static_cast<std::size_t>(i) * t,
                                      i + 1, t);
        // dq = scale ds k; dk = scale ds^T q
        cpu::sgemm(false, false, t, hd, t, scale, ds, t, k, ld, 0.0f, dq, ld);
        cpu::sgemm(true, false, t, hd, t, scale, ds, t, q, ld, 0.0f, dk, ld);
      }
    }
  }

 private:
  std::vector<float> dscores_;
};

std::unique_ptr<AttentionOps> make_cpu_attention_ops(Device&) { return std::make_unique<CpuAttentionOps>(); }
const bool registered = register_ops<AttentionOps>(DeviceKind::cpu, make_cpu_attention_ops);

}  // namespace
}  // namespace mpiddp::cpu
