// Pooling kernels. Backward gathers: each input element sums its own gradient
// from the windows that contain it, in window order, so it needs no atomics and
// adds in the CPU's order (results equal the CPU's bit for bit).
#include "cuda/check.hpp"
#include "cuda/launch.cuh"
#include "mpiddp/device/elementwise.hpp"
#include "pool_kernels.hpp"

namespace mpiddp::cuda {
namespace {

// One thread per output (forward) or per input element (backward).

struct PoolShape {
  int h, w, oh, ow, kernel, stride;
  std::size_t planes;
  explicit PoolShape(const PoolGeometry& g)
      : h(g.h), w(g.w), oh(g.out_h()), ow(g.out_w()), kernel(g.kernel), stride(g.stride),
        planes(static_cast<std::size_t>(g.n) * g.c) {}
  // The windows (rows or columns of outputs) that contain input row/column `at`: [first, last].
  __device__ int first_window(int at) const { return at < kernel ? 0 : (at - kernel) / stride + 1; }
  __device__ int last_window(int at, int outs) const { return min(at / stride, outs - 1); }
};

__global__ void max_pool_forward_kernel(const float* x, float* y, std::int32_t* argmax, PoolShape p) {
  MPIDDP_GRID_STRIDE(o, p.planes * p.oh * p.ow) {
    const std::size_t plane = o / (static_cast<std::size_t>(p.oh) * p.ow);
    const int within = static_cast<int>(o % (static_cast<std::size_t>(p.oh) * p.ow));
    const int oy = within / p.ow, ox = within % p.ow;
    const float* in = x + plane * p.h * p.w;
    int best = oy * p.stride * p.w + ox * p.stride;
    float value = in[best];
    for (int ky = 0; ky < p.kernel; ++ky)
      for (int kx = 0; kx < p.kernel; ++kx) {
        const int at = (oy * p.stride + ky) * p.w + ox * p.stride + kx;
        // The first maximum wins, the last NaN over all (PyTorch's rule), as on the CPU.
        const float v = in[at];
        if (ew::max_pool_takes(v, value)) {
          value = v;
          best = at;
        }
      }
    y[o] = value;
    argmax[o] = best;
  }
}

__global__ void max_pool_backward_kernel(const float* dy, const std::int32_t* argmax, float* dx, PoolShape p) {
  MPIDDP_GRID_STRIDE(i, p.planes * p.h * p.w) {
    const std::size_t plane = i / (static_cast<std::size_t>(p.h) * p.w);
    const int at = static_cast<int>(i % (static_cast<std::size_t>(p.h) * p.w));
    const int iy = at / p.w, ix = at % p.w;
    const std::size_t outs = plane * p.oh * p.ow;
    float sum = 0.0f;
    for (int oy = p.first_window(iy); oy <= p.last_window(iy, p.oh); ++oy)
      for (int ox = p.first_window(ix); ox <= p.last_window(ix, p.ow); ++ox) {
        const std::size_t o = outs + static_cast<std::size_t>(oy) * p.ow + ox;
        if (argmax[o] == at) sum += dy[o];
      }
    dx[i] = sum;
  }
}

__global__ void avg_pool_forward_kernel(const float* x, float* y, PoolShape p, float inv) {
  MPIDDP_GRID_STRIDE(o, p.planes * p.oh * p.ow) {
    const std::size_t plane = o / (static_cast<std::size_t>(p.oh) * p.ow);
    const int within = static_cast<int>(o % (static_cast<std::size_t>(p.oh) * p.ow));
    const int oy = within / p.ow, ox = within % p.ow;
    const float* in = x + plane * p.h * p.w;
    float sum = 0.0f;
    for (int ky = 0; ky < p.kernel; ++ky)
      for (int kx = 0; kx < p.kernel; ++kx) sum += in[(oy * p.stride + ky) * p.w + ox * p.stride + kx];
    y[o] = sum * inv;
  }
}

__global__ void avg_pool_backward_kernel(const float* dy, float* dx, PoolShape p, float inv) {
  MPIDDP_GRID_STRIDE(i, p.planes * p.h * p.w) {
    const std::size_t plane = i / (static_cast<std::size_t>(p.h) * p.w);
    const int at = static_cast<int>(i % (static_cast<std::size_t>(p.h) * p.w));
    const int iy = at / p.w, ix = at % p.w;
    const float* grad = dy + plane * p.oh * p.ow;
    float sum = 0.0f;
    for (int oy = p.first_window(iy); oy <= p.last_window(iy, p.oh); ++oy)
      for (int ox = p.first_window(ix); ox <= p.last_window(ix, p.ow); ++ox)
        sum += __fmul_rn(grad[oy * p.ow + ox], inv);  // _rn: the share rounded first, like the CPU (no FMA)
    dx[i] = sum;
  }
}

}  // namespace

void max_pool_forward(const float* x, float* y, std::int32_t* argmax, const PoolGeometry& g, cudaStream_t s) {
  const PoolShape p(g);
  max_pool_forward_kernel<<<blocks_for(p.planes * p.oh * p.ow), kThreads, 0, s>>>(x, y, argmax, p);
  check_launch("max_pool_forward");
}

void max_pool_backward(const float* dy, const std::int32_t* argmax, float* dx, const PoolGeometry& g,
                       cudaStream_t s) {
  const PoolShape p(g);
  max_pool_backward_kernel<<<blocks_for(p.planes * p.h * p.w), kThreads, 0, s>>>(dy, argmax, dx, p);
  check_launch("max_pool_backward");
}

void avg_pool_forward(const float* x, float* y, const PoolGeometry& g, cudaStream_t s) {
  const PoolShape p(g);
  const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
  avg_pool_forward_kernel<<<blocks_for(p.planes * p.oh * p.ow), kThreads, 0, s>>>(x, y, p, inv);
  check_launch("avg_pool_forward");
}

void avg_pool_backward(const float* dy, float* dx, const PoolGeometry& g, cudaStream_t s) {
  const PoolShape p(g);
  const float inv = 1.0f / static_cast<float>(g.kernel * g.kernel);
  avg_pool_backward_kernel<<<blocks_for(p.planes * p.h * p.w), kThreads, 0, s>>>(dy, dx, p, inv);
  check_launch("avg_pool_backward");
}

}  // namespace mpiddp::cuda
