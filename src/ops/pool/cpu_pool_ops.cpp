// Max and average pooling on the CPU: plain loops over each output window.
#include <algorithm>

#include "device/cpu_max_pool_plane.hpp"
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

  void avg_pool_forward(const float* x, float* y, const PoolGeometry& g) override {
    const int oh = g.out_h(), ow = g.out_w();
    const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
    for (std::size_t plane = 0; plane < planes(g); ++plane) {
      const float* in = x + plane * g.h * g.w;
      float* out = y + plane * oh * ow;
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          float sum = 0.0f;
          for (int ky = 0; ky < g.kernel; ++ky)
            for (int kx = 0; kx < g.kernel; ++kx) sum += in[(oy * g.stride + ky) * g.w + ox * g.stride + kx];
          out[oy * ow + ox] = sum * inv;
        }
    }
  }

  void avg_pool_backward(const float* dy, float* dx, const PoolGeometry& g) override {
    const int oh = g.out_h(), ow = g.out_w();
    const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
    std::fill(dx, dx + planes(g) * g.h * g.w, 0.0f);
    for (std::size_t plane = 0; plane < planes(g); ++plane) {
      const float* grad = dy + plane * oh * ow;
      float* out = dx + plane * g.h * g.w;
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          const float share = grad[oy * ow + ox] * inv;
          for (int ky = 0; ky < g.kernel; ++ky)
            for (int kx = 0; kx < g.kernel; ++kx) out[(oy * g.stride + ky) * g.w + ox * g.stride + kx] += share;
        }
    }
  }

 private:
  static std::size_t planes(const PoolGeometry& g) { return static_cast<std::size_t>(g.n) * g.c; }
};

std::unique_ptr<PoolOps> make_cpu_pool_ops(Device&) { return std::make_unique<CpuPoolOps>(); }
const bool registered = register_ops<PoolOps>(DeviceKind::cpu, make_cpu_pool_ops);

}  // namespace

}  // namespace mpiddp::cpu
