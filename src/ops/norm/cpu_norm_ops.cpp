// Batch normalisation on the CPU. Each plane (one channel of one sample) is
// summed in float (cpu_plane_sums.hpp), planes are added in double (PyTorch's
// CPU kernels accumulate in double too), in a fixed order: results repeat bit
// for bit.
#include <algorithm>
#include <cmath>

#include "norm_ops.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "cpu_plane_sums.hpp"
#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cpu {
namespace {

// One plane of the output: x * scale + shift, through a fused ReLU when asked.
MPIDDP_VECTOR_CLONES
void plane_affine(const float* __restrict x, float* __restrict y, std::size_t n, float scale, float shift,
                  bool relu) {
  if (relu)
    for (std::size_t i = 0; i < n; ++i) y[i] = ew::relu(x[i] * scale + shift);
  else
    for (std::size_t i = 0; i < n; ++i) y[i] = x[i] * scale + shift;
}

// One plane of dx (ew::bn_input_grad), dy first through a fused ReLU's gradient
// when relu: its output recomputed as plane_affine wrote it (x * scale + shift;
// `scale` is also bn_input_grad's invstd * weight).
MPIDDP_VECTOR_CLONES
void plane_input_grad(const float* __restrict x, const float* __restrict dy, bool relu, float shift,
                      float* __restrict dx, std::size_t n, float mean, float mean_dy, float projection, float scale) {
  if (relu)
    for (std::size_t i = 0; i < n; ++i)
      dx[i] = ew::bn_input_grad(x[i], ew::relu_grad(x[i] * scale + shift, 0.0f, dy[i]), mean, mean_dy, projection,
                                scale);
  else
    for (std::size_t i = 0; i < n; ++i) dx[i] = ew::bn_input_grad(x[i], dy[i], mean, mean_dy, projection, scale);
}

// The normalisation of a channel as one affine map, y = x * scale + shift: the
// forward and the fused ReLU's masks in backward take it from here, so they agree
// bit for bit.
struct ChannelAffine {
  float scale, shift;
  ChannelAffine(float mean, float invstd, float weight, float bias)
      : scale(invstd * weight), shift(bias - mean * scale) {}
};

class CpuNormOps final : public NormOps {
 public:
  bool fuses_relu() const override { return true; }

  void batch_moments(const float* x, float* moments, const NormGeometry& g) override {
    const double count = static_cast<double>(g.n) * g.spatial;
    for (int ch = 0; ch < g.c; ++ch) {
      // One pass over deviations from a value of the channel itself (its first),
      // so a large mean costs no precision: mean = c + S1 / n, M2 = S2 - S1^2 / n.
      const float centre = g.n > 0 && g.spatial > 0 ? x[offset(0, ch, g)] : 0.0f;
      double first = 0.0, second = 0.0;
      for (int i = 0; i < g.n; ++i) {
        float squares = 0.0f;
        first += plane_deviations(x + offset(i, ch, g), g.spatial, centre, &squares);
        second += squares;
      }
      const double mean = count > 0 ? centre + first / count : 0.0;
      // max(0, M2) that keeps a NaN: a NaN input must give NaN statistics, as in PyTorch.
      const double m2 = count > 0 ? ew::max_zero(second - first * first / count) : 0.0;
      moments[ch] = static_cast<float>(count);
      moments[g.c + ch] = static_cast<float>(mean);
      moments[2 * g.c + ch] = static_cast<float>(m2);
    }
  }

  void combine_moments(const float* all, int ranks, float* moments, int c) override {
    for (int ch = 0; ch < c; ++ch) {
      double count = 0.0, mean = 0.0, m2 = 0.0;
      for (int r = 0; r < ranks; ++r) {
        const float* m = all + static_cast<std::size_t>(r) * 3 * c;
        ew::bn_combine(count, mean, m2, m[ch], m[c + ch], m[2 * c + ch]);
      }
      moments[ch] = static_cast<float>(count);
      moments[c + ch] = static_cast<float>(mean);
      moments[2 * c + ch] = static_cast<float>(m2);
    }
  }

  void normalize_train(const float* x, float* y, const float* weight, const float* bias, const float* moments,
                       float eps, float momentum, float* running_mean, float* running_var, float* saved,
                       const NormGeometry& g) override {
    for (int ch = 0; ch < g.c; ++ch) {
      const double count = moments[ch], mean = moments[g.c + ch], m2 = moments[2 * g.c + ch];
      const float invstd = ew::bn_invstd(m2 / count, eps);
      running_mean[ch] = ew::bn_running(running_mean[ch], momentum, mean);
      running_var[ch] = ew::bn_running(running_var[ch], momentum, ew::bn_unbiased_variance(m2, count));
      saved[ch] = static_cast<float>(mean);
      saved[g.c + ch] = invstd;
      saved[2 * g.c + ch] = static_cast<float>(count);
      apply(x, y, ch, g, static_cast<float>(mean), invstd, weight[ch], bias[ch]);
    }
  }

  void normalize_eval(const float* x, float* y, const float* weight, const float* bias, const float* running_mean,
                      const float* running_var, float eps, const NormGeometry& g) override {
    for (int ch = 0; ch < g.c; ++ch) {
      const float invstd = ew::bn_invstd(running_var[ch], eps);
      apply(x, y, ch, g, running_mean[ch], invstd, weight[ch], bias[ch]);
    }
  }

  void backward_sums(const float* x, const float* dy, const float* weight, const float* bias, const float* saved,
                     float* sums, const NormGeometry& g) override {
    for (int ch = 0; ch < g.c; ++ch) {
      double sum_dy = 0.0, sum_dy_xmu = 0.0;
      const ChannelAffine fused = g.relu_after ? ChannelAffine(saved[ch], saved[g.c + ch], weight[ch], bias[ch])
                                               : ChannelAffine(0.0f, 0.0f, 0.0f, 0.0f);
      for (int i = 0; i < g.n; ++i) {
        const std::size_t at = offset(i, ch, g);
        float projection = 0.0f;
        sum_dy += plane_grad_sums(x + at, dy + at, g.relu_after, fused.scale, fused.shift, g.spatial, saved[ch],
                                  &projection);
        sum_dy_xmu += projection;
      }
      sums[ch] = static_cast<float>(sum_dy);
      sums[g.c + ch] = static_cast<float>(sum_dy_xmu);
    }
  }

  void backward_params(const float* sums, const float* saved, float* dweight, float* dbias, int c,
                       bool accumulate) override {
    for (int ch = 0; ch < c; ++ch) {
      const float dw = sums[c + ch] * saved[c + ch];
      dweight[ch] = accumulate ? dweight[ch] + dw : dw;
      dbias[ch] = accumulate ? dbias[ch] + sums[ch] : sums[ch];
    }
  }

  void backward_input(const float* x, const float* dy, const float* weight, const float* bias, const float* saved,
                      const float* sums, float* dx, const NormGeometry& g) override {
    for (int ch = 0; ch < g.c; ++ch) {
      const float mean = saved[ch], invstd = saved[g.c + ch], count = saved[2 * g.c + ch];
      const float mean_dy = sums[ch] / count;
      const float projection = sums[g.c + ch] / count * invstd * invstd;
      const ChannelAffine affine(mean, invstd, weight[ch], bias[ch]);
      for (int i = 0; i < g.n; ++i) {
        const std::size_t at = offset(i, ch, g);
        plane_input_grad(x + at, dy + at, g.relu_after, affine.shift, dx + at, g.spatial, mean, mean_dy, projection,
                         affine.scale);
      }
    }
  }

 private:
  static std::size_t offset(int sample, int ch, const NormGeometry& g) {
    return (static_cast<std::size_t>(sample) * g.c + ch) * g.spatial;
  }
  static void apply(const float* x, float* y, int ch, const NormGeometry& g, float mean, float invstd, float w,
                    float b) {
    const ChannelAffine affine(mean, invstd, w, b);
    for (int i = 0; i < g.n; ++i) {
      const std::size_t at = offset(i, ch, g);
      plane_affine(x + at, y + at, g.spatial, affine.scale, affine.shift, g.relu_after);
    }
  }
};

std::unique_ptr<NormOps> make_cpu_norm_ops(Device&) { return std::make_unique<CpuNormOps>(); }
const bool registered = register_ops<NormOps>(DeviceKind::cpu, make_cpu_norm_ops);

}  // namespace

}  // namespace mpiddp::cpu
