// Losses and the NaN/Inf check on the CPU. The running sums belong to this
// instance (one per CpuDevice), so several devices never share them.
#include <bit>
#include <utility>

#include "loss_ops.hpp"
#include "mpiddp/device/elementwise.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "mpiddp/common/simd.hpp"

namespace mpiddp::cpu {

MPIDDP_VECTOR_CLONES
bool all_finite(const float* data, std::size_t n) {
  // NaN and Inf are the floats whose exponent bits are all ones; an integer OR
  // reduction vectorises (a float one would not, without fast-math).
  std::uint32_t all_ones = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t exponent = std::bit_cast<std::uint32_t>(data[i]) & 0x7f800000u;
    all_ones |= exponent == 0x7f800000u;
  }
  return all_ones == 0;
}

namespace {

class CpuLossOps final : public LossOps {
 public:
  void softmax_cross_entropy(const float* logits, const std::int32_t* labels, float* grad, int n, int c,
                             float smoothing) override {
    const float inv_n = 1.0f / static_cast<float>(n);
    for (int r = 0; r < n; ++r) {
      bool correct = false;
      const std::size_t at = static_cast<std::size_t>(r) * c;
      sums_.loss_sum += ew::softmax_cross_entropy_row(logits + at, c, labels[r], inv_n, smoothing,
                                                      grad ? grad + at : nullptr, &correct);
      sums_.correct += correct;
    }
    sums_.count += n;
  }
  void mean_squared_error(const float* y, const float* targets, float* grad, int n, int t) override {
    const float scale = 2.0f / static_cast<float>(static_cast<std::size_t>(n) * t);
    for (int r = 0; r < n; ++r) {
      const std::size_t at = static_cast<std::size_t>(r) * t;
      sums_.loss_sum += ew::squared_error_row(y + at, targets + at, t, scale, grad ? grad + at : nullptr);
    }
    sums_.count += n;
  }
  void check_finite(const float* data, std::size_t n) override { sums_.finite = cpu::all_finite(data, n); }
  LossResult take_loss() override { return std::exchange(sums_, LossResult{}); }
  bool all_finite(const float* data, std::size_t n) override { return cpu::all_finite(data, n); }

 private:
  LossResult sums_;
};

std::unique_ptr<LossOps> make_cpu_loss_ops(Device&) { return std::make_unique<CpuLossOps>(); }
const bool registered = register_ops<LossOps>(DeviceKind::cpu, make_cpu_loss_ops);

}  // namespace

}  // namespace mpiddp::cpu
