// Layer normalisation on the CPU: one row at a time, its sums in double in
// column order; the per-element math is elementwise.hpp's, shared with the GPU.
#include <vector>

#include "layernorm_ops.hpp"
#include "mpiddp/device/elementwise.hpp"
#include "mpiddp/device/op_registry.hpp"

namespace mpiddp::cpu {
namespace {

class CpuLayerNormOps final : public LayerNormOps {
 public:
  void forward(const float* x, float* y, const float* weight, const float* bias, float eps, float* saved,
               const LayerNormGeometry& g) override {
    for (int r = 0; r < g.rows; ++r) {
      const float* row = x + static_cast<std::size_t>(r) * g.d;
      double sum = 0.0;
      for (int j = 0; j < g.d; ++j) sum += row[j];
      const float mean = static_cast<float>(sum / g.d);
      double deviations = 0.0;
      for (int j = 0; j < g.d; ++j) deviations += static_cast<double>(row[j] - mean) * (row[j] - mean);
      const float rstd = ew::layernorm_rstd(deviations, g.d, eps);
      float* out = y + static_cast<std::size_t>(r) * g.d;
      for (int j = 0; j < g.d; ++j) out[j] = ew::layernorm_value(row[j], mean, rstd, weight[j], bias[j]);
      saved[r] = mean;
      saved[static_cast<std::size_t>(g.rows) + r] = rstd;
    }
  }

  void backward(const float* x, const float* dy, const float* weight, const float* saved, float* dx, float* dweight,
                float* dbias, bool accumulate, const LayerNormGeometry& g) override {
    std::vector<double> sum_dw(g.d, 0.0), sum_db(g.d, 0.0);
    for (int r = 0; r < g.rows; ++r) {
      const std::size_t at = static_cast<std::size_t>(r) * g.d;
      const float mean = saved[r], rstd = saved[static_cast<std::size_t>(g.rows) + r];
      double sum_g = 0.0, sum_g_xhat = 0.0;
      for (int j = 0; j < g.d; ++j) {
        const float xhat = (x[at + j] - mean) * rstd;
        const float grad = dy[at + j] * weight[j];
        sum_g += grad;
        sum_g_xhat += static_cast<double>(grad) * xhat;
        sum_dw[j] += static_cast<double>(dy[at + j]) * xhat;
        sum_db[j] += dy[at + j];
      }
      if (!dx) continue;
      const float mean_g = static_cast<float>(sum_g / g.d), mean_g_xhat = static_cast<float>(sum_g_xhat / g.d);
      for (int j = 0; j < g.d; ++j)
        dx[at + j] = ew::layernorm_grad(dy[at + j] * weight[j], (x[at + j] - mean) * rstd, rstd, mean_g, mean_g_xhat);
    }
    for (int j = 0; j < g.d; ++j) {
      dweight[j] = (accumulate ? dweight[j] : 0.0f) + static_cast<float>(sum_dw[j]);
      dbias[j] = (accumulate ? dbias[j] : 0.0f) + static_cast<float>(sum_db[j]);
    }
  }
};

std::unique_ptr<LayerNormOps> make_cpu_layernorm_ops(Device&) { return std::make_unique<CpuLayerNormOps>(); }
const bool registered = register_ops<LayerNormOps>(DeviceKind::cpu, make_cpu_layernorm_ops);

}  // namespace
}  // namespace mpiddp::cpu
