// Max and average pooling on the CPU: plain loops over each output window.
#include <algorithm>

#include "device/cpu_max_pool_plane.hpp"
#include "mpiddp/device/blocked_layout.hpp"
#include "pool_ops.hpp"
#include "mpiddp/device/op_registry.hpp"
#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cpu {
namespace {

PoolPlane pool_plane(const PoolGeometry& g) { return {g.h, g.w, g.kernel, g.stride, g.out_h(), g.out_w()}; }

class CpuPoolOps final : public PoolOps {
 public:
  void max_pool_forward(const float* x, float* y, std::int32_t* argmax, const PoolGeometry& g) override {
    const PoolPlane p = pool_plane(g);
    for (std::size_t plane = 0; plane < planes(g); ++plane)
      max_pool_plane(x + plane * p.size(), p, y + plane * p.outs(), argmax + plane * p.outs());
  }

  void max_pool_backward(const float* dy, const std::int32_t* argmax, float* dx, const PoolGeometry& g) override {
    const PoolPlane p = pool_plane(g);
    for (std::size_t plane = 0; plane < planes(g); ++plane)
      max_pool_plane_grad(dy + plane * p.outs(), argmax + plane * p.outs(), p, dx + plane * p.size());
  }

  bool takes_blocked_average() const override { return true; }

  // Each output is the sum of its window in row order, then scaled: the same
  // float operations in either layout.
  void avg_pool_forward(const float* x, float* y, const PoolGeometry& g) override {
    const int oh = g.out_h(), ow = g.out_w();
    const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
    const Strides in = strides(g, g.h, g.w), out = strides(g, oh, ow);
    for (int n = 0; n < g.n; ++n)
      for (int ch = 0; ch < g.c; ++ch) {
        const float* plane = x + in.plane(n, ch);
        float* to = y + out.plane(n, ch);
        for (int oy = 0; oy < oh; ++oy)
          for (int ox = 0; ox < ow; ++ox) {
            float sum = 0.0f;
            for (int ky = 0; ky < g.kernel; ++ky)
              for (int kx = 0; kx < g.kernel; ++kx)
                sum += plane[in.at(oy * g.stride + ky, ox * g.stride + kx, g.w)];
            to[out.at(oy, ox, ow)] = sum * inv;
          }
      }
  }

  void avg_pool_backward(const float* dy, float* dx, const PoolGeometry& g) override {
    const int oh = g.out_h(), ow = g.out_w();
    const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
    std::fill(dx, dx + planes(g) * g.h * g.w, 0.0f);
    const Strides in = strides(g, g.h, g.w), out = strides(g, oh, ow);
    for (int n = 0; n < g.n; ++n)
      for (int ch = 0; ch < g.c; ++ch) {
        const float* grad = dy + out.plane(n, ch);
        float* plane = dx + in.plane(n, ch);
        for (int oy = 0; oy < oh; ++oy)
          for (int ox = 0; ox < ow; ++ox) {
            const float share = grad[out.at(oy, ox, ow)] * inv;
            for (int ky = 0; ky < g.kernel; ++ky)
              for (int kx = 0; kx < g.kernel; ++kx)
                plane[in.at(oy * g.stride + ky, ox * g.stride + kx, g.w)] += share;
          }
      }
  }

 private:
  static std::size_t planes(const PoolGeometry& g) { return static_cast<std::size_t>(g.n) * g.c; }

  // Where plane (n, ch) of a tensor with h x w planes starts, and the step between
  // its positions: 1 in NCHW; 16 in nChw16c, whose planes interleave in blocks of 16 channels.
  struct Strides {
    bool blocked;
    std::size_t channels, positions;
    std::size_t plane(int n, int ch) const {
      return blocked ? blocked_offset(n, ch, 0, channels, positions) : (n * channels + ch) * positions;
    }
    std::size_t at(int row, int col, int width) const {
      return (static_cast<std::size_t>(row) * width + col) * (blocked ? kLayoutBlock : 1);
    }
  };
  static Strides strides(const PoolGeometry& g, int h, int w) {
    return {g.blocked, static_cast<std::size_t>(g.c), static_cast<std::size_t>(h) * w};
  }
};

std::unique_ptr<PoolOps> make_cpu_pool_ops(Device&) { return std::make_unique<CpuPoolOps>(); }
const bool registered = register_ops<PoolOps>(DeviceKind::cpu, make_cpu_pool_ops);

}  // namespace

}  // namespace mpiddp::cpu
