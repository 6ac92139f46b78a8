// Batch normalisation on the CPU. Each plane (one channel of one sample) is
// summed in float (cpu_plane_sums.hpp), planes are added in double (PyTorch's
// CPU kernels accumulate in double too), in a fixed order: results repeat bit
// for bit. A ReLU and a max pooling fused after it (NormGeometry) run plane by
// plane through a scratch plane that stays in cache: the full-size output is never
// written, nor the full-size gradient read, and every value is the one the layers
// one by one would give, from the same loops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "norm_ops.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "cpu_blocked_planes.hpp"
#include "cpu_plane_sums.hpp"
#include "device/cpu_max_pool_plane.hpp"
#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cpu {
namespace {

// One plane of the output: x * scale + shift, through a fused ReLU when asked
// (ew::relu: 0 where <= 0, NaN kept). A line of 16 at a time, the next lines
// asked for ahead (prefetch_ahead), then the rest one by one.
MPIDDP_VECTOR_CLONES
void plane_affine(const float* __restrict x, float* __restrict y, std::size_t n, float scale, float shift,
                  bool relu) {
  std::size_t i = 0;
  for (; i + kLineFloats <= n; i += kLineFloats) {
    prefetch_ahead(x + i);
    Lanes16 v;
    std::memcpy(&v, x + i, sizeof(v));
    v = v * scale + shift;
    if (relu) v = v <= 0.0f ? Lanes16{} : v;
    std::memcpy(y + i, &v, sizeof(v));
  }
  for (; i < n; ++i) y[i] = relu ? ew::relu(x[i] * scale + shift) : x[i] * scale + shift;
}

// One plane of dx (ew::bn_input_grad), dy first through a fused ReLU's gradient
// when relu: its output recomputed as plane_affine wrote it (x * scale + shift;
// `scale` is also bn_input_grad's invstd * weight). Lines of 16 as plane_affine.
MPIDDP_VECTOR_CLONES
void plane_input_grad(const float* __restrict x, const float* __restrict dy, bool relu, float shift,
                      float* __restrict dx, std::size_t n, float mean, float mean_dy, float projection, float scale) {
  std::size_t i = 0;
  for (; i + kLineFloats <= n; i += kLineFloats) {
    prefetch_ahead(x + i);
    prefetch_ahead(dy + i);
    Lanes16 v, d;
    std::memcpy(&v, x + i, sizeof(v));
    std::memcpy(&d, dy + i, sizeof(d));
    if (relu) d = v * scale + shift <= 0.0f ? Lanes16{} : d;
    const Lanes16 g = (d - mean_dy - (v - mean) * projection) * scale;
    std::memcpy(dx + i, &g, sizeof(g));
  }
  for (; i < n; ++i) {
    const float d = relu ? ew::relu_grad(x[i] * scale + shift, 0.0f, dy[i]) : dy[i];
    dx[i] = ew::bn_input_grad(x[i], d, mean, mean_dy, projection, scale);
  }
}

// The fused pooling's windows over one plane.
PoolPlane pool_plane(const FusedMaxPool& pool) {
  return {pool.h, pool.w, pool.window, pool.window, pool.out_h(), pool.out_w()};
}

// The normalisation of a channel as one affine map, y = x * scale + shift: the
// forward and the fused ReLU's masks in backward take it from here, so they agree
// bit for bit.
struct ChannelAffine {
  float scale, shift;
  ChannelAffine(float mean, float invstd, float weight, float bias)
      : scale(invstd * weight), shift(bias - mean * scale) {}
};

// A batch's moments, its samples added in order: each plane summed in float, the
// planes added per channel in double, sample after sample. One pass over
// deviations from a value of the channel itself (its first), so a large mean
// costs no precision: mean = c + S1 / n, M2 = S2 - S1^2 / n.
class Moments final : public MomentStream {
 public:
  explicit Moments(const NormGeometry& g)
      : g_(g), centre_(static_cast<std::size_t>(g.c), 0.0f), first_(centre_.size(), 0.0), second_(centre_.size(), 0.0) {}

  void add(const float* x, int samples) override {
    if (samples_ == 0 && samples > 0 && g_.spatial > 0)
      for (int ch = 0; ch < g_.c; ++ch) centre_[ch] = x[g_.blocked ? blocked_offset(0, ch, 0, g_.c, g_.spatial) : plane(0, ch)];
    for (int i = 0; i < samples; ++i)
      if (g_.blocked) {  // a block's 16 channels at once, each summed as its own plane would be
        float sums[kLayoutBlock], squares[kLayoutBlock];
        for (int ch = 0; ch < g_.c; ch += static_cast<int>(kLayoutBlock)) {
          block_deviations(x + plane(i, ch), g_.spatial, &centre_[ch], sums, squares);
          for (std::size_t k = 0; k < kLayoutBlock; ++k) {
            first_[ch + k] += sums[k];
            second_[ch + k] += squares[k];
          }
        }
      } else {
        for (int ch = 0; ch < g_.c; ++ch) {
          float squares = 0.0f;
          first_[ch] += plane_deviations(x + plane(i, ch), g_.spatial, centre_[ch], &squares);
          second_[ch] += squares;
        }
      }
    samples_ += samples;
  }
  int samples() const override { return samples_; }

  void finish(float* moments) override {
    const double count = static_cast<double>(samples_) * g_.spatial;
    for (int ch = 0; ch < g_.c; ++ch) {
      const double mean = count > 0 ? centre_[ch] + first_[ch] / count : 0.0;
      // max(0, M2) that keeps a NaN: a NaN input must give NaN statistics, as in PyTorch.
      const double m2 = count > 0 ? ew::max_zero(second_[ch] - first_[ch] * first_[ch] / count) : 0.0;
      moments[ch] = static_cast<float>(count);
      moments[g_.c + ch] = static_cast<float>(mean);
      moments[2 * g_.c + ch] = static_cast<float>(m2);
    }
  }

 private:
  // Where plane (sample i of those added now, ch) starts; blocked: ch's block plane.
  std::size_t plane(int i, int ch) const { return (static_cast<std::size_t>(i) * g_.c + ch) * g_.spatial; }

  NormGeometry g_;
  std::vector<float> centre_;
  std::vector<double> first_, second_;
  int samples_ = 0;
};

class CpuNormOps final : public NormOps {
 public:
  bool fuses_relu() const override { return true; }
  bool fuses_max_pool() const override { return true; }
  bool takes_blocked() const override { return true; }

  // Every pass walks the tensor in memory order (samples, then channels), which
  // the prefetchers follow; a channel's planes are still added in sample order
  // into its own accumulators, so each sum is the one a channel-by-channel walk gives.
  void batch_moments(const float* x, float* moments, const NormGeometry& g) override {
    Moments stream(g);
    stream.add(x, g.n);
    stream.finish(moments);
  }

  bool streams_samples() const override { return true; }
  std::unique_ptr<MomentStream> start_moments(const NormGeometry& g) override {
    return std::make_unique<Moments>(g);
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
    std::vector<ChannelAffine> affine;
    for (int ch = 0; ch < g.c; ++ch) {
      const double count = moments[ch], mean = moments[g.c + ch], m2 = moments[2 * g.c + ch];
      const float invstd = ew::bn_invstd(m2 / count, eps);
      running_mean[ch] = ew::bn_running(running_mean[ch], momentum, mean);
      running_var[ch] = ew::bn_running(running_var[ch], momentum, ew::bn_unbiased_variance(m2, count));
      saved[ch] = static_cast<float>(mean);
      saved[g.c + ch] = invstd;
      saved[2 * g.c + ch] = static_cast<float>(count);
      affine.emplace_back(static_cast<float>(mean), invstd, weight[ch], bias[ch]);
    }
    apply(x, y, affine, g);
  }

  void normalize_eval(const float* x, float* y, const float* weight, const float* bias, const float* running_mean,
                      const float* running_var, float eps, const NormGeometry& g) override {
    std::vector<ChannelAffine> affine;
    for (int ch = 0; ch < g.c; ++ch)
      affine.emplace_back(running_mean[ch], ew::bn_invstd(running_var[ch], eps), weight[ch], bias[ch]);
    apply(x, y, affine, g);
  }

  void backward_sums(const float* x, const float* dy, const float* weight, const float* bias, const float* saved,
                     float* sums, const NormGeometry& g) override {
    std::vector<ChannelAffine> affine;
    saved_affine(weight, bias, saved, g.c, affine);
    std::vector<double> sum_dy(static_cast<std::size_t>(g.c), 0.0), sum_dy_xmu(static_cast<std::size_t>(g.c), 0.0);
    const Blocks blocks(affine, g.blocked);
    for (int i = 0; i < g.n; ++i)
      if (g.blocked) {
        float block_sums[kLayoutBlock], projections[kLayoutBlock];
        for (int ch = 0; ch < g.c; ch += static_cast<int>(kLayoutBlock)) {
          block_grad_sums(x + offset(i, ch, g), dy + offset(i, ch, g), g.relu_after, blocks.scale(ch),
                          blocks.shift(ch), g.spatial, saved + ch, block_sums, projections);
          for (std::size_t k = 0; k < kLayoutBlock; ++k) {
            sum_dy[ch + k] += block_sums[k];
            sum_dy_xmu[ch + k] += projections[k];
          }
        }
      } else {
        for (int ch = 0; ch < g.c; ++ch) {
          float projection = 0.0f;
          sum_dy[ch] += plane_grad_sums(x + offset(i, ch, g), plane_grad(dy, i, ch, g), g.relu_after,
                                        affine[ch].scale, affine[ch].shift, g.spatial, saved[ch], &projection);
          sum_dy_xmu[ch] += projection;
        }
      }
    for (int ch = 0; ch < g.c; ++ch) {
      sums[ch] = static_cast<float>(sum_dy[ch]);
      sums[g.c + ch] = static_cast<float>(sum_dy_xmu[ch]);
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
    backward_input_samples(x, dy, weight, bias, saved, sums, dx, g, 0, g.n);
  }

  void backward_input_samples(const float* x, const float* dy, const float* weight, const float* bias,
                              const float* saved, const float* sums, float* dx, const NormGeometry& g, int begin,
                              int end) override {
    // Called once a sample where a convolution streams: the per-channel terms go
    // into buffers kept between calls, not new ones each time.
    std::vector<ChannelAffine>& affine = affine_;
    std::vector<float>& mean_dy = mean_dy_;
    std::vector<float>& projection = projection_;
    saved_affine(weight, bias, saved, g.c, affine);
    mean_dy.clear();
    projection.clear();
    for (int ch = 0; ch < g.c; ++ch) {
      const float invstd = saved[g.c + ch], count = saved[2 * g.c + ch];
      mean_dy.push_back(sums[ch] / count);
      projection.push_back(sums[g.c + ch] / count * invstd * invstd);
    }
    const Blocks blocks(affine, g.blocked);
    const std::size_t first = offset(begin, 0, g);  // where dx starts in the batch
    for (int i = begin; i < end; ++i)
      if (g.blocked) {
        for (int ch = 0; ch < g.c; ch += static_cast<int>(kLayoutBlock)) {
          const std::size_t at = offset(i, ch, g);
          block_input_grad(x + at, dy + at, g.relu_after, blocks.shift(ch), dx + (at - first), g.spatial,
                           saved + ch, &mean_dy[ch], &projection[ch], blocks.scale(ch));
        }
      } else {
        for (int ch = 0; ch < g.c; ++ch) {
          const std::size_t at = offset(i, ch, g);
          plane_input_grad(x + at, plane_grad(dy, i, ch, g), g.relu_after, affine[ch].shift, dx + (at - first),
                           g.spatial, saved[ch], mean_dy[ch], projection[ch], affine[ch].scale);
        }
      }
  }

 private:
  // Where plane (sample, ch) starts; blocked: where ch's block plane starts, ch a multiple of 16.
  static std::size_t offset(int sample, int ch, const NormGeometry& g) {
    return (static_cast<std::size_t>(sample) * g.c + ch) * g.spatial;
  }

  // The channels' scale and shift as arrays, for the blocked loops (empty otherwise).
  struct Blocks {
    std::vector<float> scales, shifts;
    Blocks(const std::vector<ChannelAffine>& affine, bool blocked) {
      if (!blocked) return;
      for (const ChannelAffine& a : affine) {
        scales.push_back(a.scale);
        shifts.push_back(a.shift);
      }
    }
    const float* scale(int ch) const { return scales.data() + ch; }
    const float* shift(int ch) const { return shifts.data() + ch; }
  };

  // Each channel's y = x * scale + shift from the saved mean and invstd, as the
  // forward computed it (also backward_input's scale = invstd * weight).
  // (Into `affine`, whose memory is reused.)
  static void saved_affine(const float* weight, const float* bias, const float* saved, int c,
                           std::vector<ChannelAffine>& affine) {
    affine.clear();
    for (int ch = 0; ch < c; ++ch) affine.emplace_back(saved[ch], saved[c + ch], weight[ch], bias[ch]);
  }

  // Writes the output: normalised, through the fused ReLU and pooling where there are.
  void apply(const float* x, float* y, const std::vector<ChannelAffine>& affine, const NormGeometry& g) {
    const FusedMaxPool& pool = g.pool_after;
    if (g.blocked) {
      const Blocks blocks(affine, true);
      for (int i = 0; i < g.n; ++i)
        for (int ch = 0; ch < g.c; ch += static_cast<int>(kLayoutBlock))
          block_affine(x + offset(i, ch, g), y + offset(i, ch, g), g.spatial, blocks.scale(ch), blocks.shift(ch),
                       g.relu_after);
      return;
    }
    plane_.resize(static_cast<std::size_t>(g.spatial));
    const std::size_t outs = pool.window ? static_cast<std::size_t>(pool.out_h()) * pool.out_w() : 0;
    pooled_.resize(g.pooled_blocked ? kLayoutBlock * outs : 0);
    for (int i = 0; i < g.n; ++i)
      for (int ch = 0; ch < g.c; ++ch) {
        const std::size_t at = offset(i, ch, g);
        if (!pool.window) {
          plane_affine(x + at, y + at, g.spatial, affine[ch].scale, affine[ch].shift, g.relu_after);
          continue;
        }
        plane_affine(x + at, plane_.data(), g.spatial, affine[ch].scale, affine[ch].shift, g.relu_after);
        const std::size_t pooled = pooled_offset(i, ch, g);
        if (!g.pooled_blocked) {
          max_pool_plane(plane_.data(), pool_plane(pool), y + pooled, pool.argmax + pooled);
          continue;
        }
        // A block's 16 pooled planes, then the block in the blocked layout.
        const std::size_t k = static_cast<std::size_t>(ch) % kLayoutBlock;
        max_pool_plane(plane_.data(), pool_plane(pool), pooled_.data() + k * outs, pool.argmax + pooled);
        if (k + 1 == kLayoutBlock) planes_to_block(pooled_.data(), outs, y + pooled_offset(i, ch - k, g));
      }
  }

  // dy of plane (sample, ch) as the normalisation's output gradient: dy's own
  // plane, or with a fused pooling its gradient spread back into the scratch plane
  // (from a blocked pooled gradient in place: channel ch's value every 16 floats).
  const float* plane_grad(const float* dy, int sample, int ch, const NormGeometry& g) {
    const FusedMaxPool& pool = g.pool_after;
    if (!pool.window) return dy + offset(sample, ch, g);
    plane_.resize(static_cast<std::size_t>(g.spatial));
    const std::size_t pooled = pooled_offset(sample, ch, g);
    if (!g.pooled_blocked) {
      max_pool_plane_grad(dy + pooled, pool.argmax + pooled, pool_plane(pool), plane_.data());
    } else {
      const std::size_t k = static_cast<std::size_t>(ch) % kLayoutBlock;
      const float* block = dy + pooled_offset(sample, ch - static_cast<int>(k), g);
      max_pool_plane_grad(block + k, pool.argmax + pooled, pool_plane(pool), plane_.data(), kLayoutBlock);
    }
    return plane_.data();
  }

  static std::size_t pooled_offset(int sample, int ch, const NormGeometry& g) {
    return (static_cast<std::size_t>(sample) * g.c + ch) * g.pool_after.out_h() * g.pool_after.out_w();
  }

  std::vector<float> plane_;  // one plane of the fused output or its gradient
  // backward_input_samples' per-channel terms, kept for the next call.
  std::vector<ChannelAffine> affine_;
  std::vector<float> mean_dy_, projection_;
  // A block's 16 pooled planes, on their way to a blocked output (pooled_blocked).
  std::vector<float> pooled_;
};

std::unique_ptr<NormOps> make_cpu_norm_ops(Device&) { return std::make_unique<CpuNormOps>(); }
const bool registered = register_ops<NormOps>(DeviceKind::cpu, make_cpu_norm_ops);

}  // namespace

}  // namespace mpiddp::cpu
