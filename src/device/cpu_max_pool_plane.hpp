#pragma once
// Max pooling of one plane on the CPU and its gradient, shared by the pooling ops (ops/pool) and by
// BatchNorm's fused pooling (ops/norm), so both give the same values and positions:
// windows scanned row by row, the first maximum (or the last NaN) winning
// (ew::max_pool_takes), as PyTorch's kernels do.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cpu {

// in: h x w (only w is needed); out and where: oh x ow, where = row * w + col of each window's maximum.
inline void max_pool_plane(const float* in, int w, int kernel, int stride, int oh, int ow, float* out,
                           std::int32_t* where) {
  if (kernel == 2 && stride == 2) {  // the common case unrolled, so the compiler selects without branches
    for (int oy = 0; oy < oh; ++oy) {
      const int top = 2 * oy * w, bottom = top + w;
      for (int ox = 0; ox < ow; ++ox) {
        const int at[4] = {top + 2 * ox, top + 2 * ox + 1, bottom + 2 * ox, bottom + 2 * ox + 1};
        int best = at[0];
        float value = in[best];
        for (int k = 1; k < 4; ++k)
          if (ew::max_pool_takes(in[at[k]], value)) {
            value = in[at[k]];
            best = at[k];
          }
        out[oy * ow + ox] = value;
        where[oy * ow + ox] = best;
      }
    }
    return;
  }
  for (int oy = 0; oy < oh; ++oy)
    for (int ox = 0; ox < ow; ++ox) {
      int best = oy * stride * w + ox * stride;
      float value = in[best];
      for (int ky = 0; ky < kernel; ++ky)
        for (int kx = 0; kx < kernel; ++kx) {
          const int at = (oy * stride + ky) * w + ox * stride + kx;
          if (ew::max_pool_takes(in[at], value)) {
            value = in[at];
            best = at;
          }
        }
      out[oy * ow + ox] = value;
      where[oy * ow + ox] = best;
    }
}

// Its gradient: each window's dy added at its maximum onto a plane of `plane`
// zeros (outs windows). Overlapping windows add up where they share a maximum.
inline void max_pool_plane_grad(const float* dy, const std::int32_t* where, std::size_t outs, std::size_t plane,
                                float* d) {
  std::fill(d, d + plane, 0.0f);
  for (std::size_t o = 0; o < outs; ++o) d[where[o]] += dy[o];
}

}  // namespace mpiddp::cpu
