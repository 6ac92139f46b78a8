#pragma once
// Max pooling of one plane on the CPU and its gradient, shared by the pooling ops (ops/pool) and by
// BatchNorm's fused pooling (ops/norm), so both give the same values and positions:
// windows scanned row by row, the first maximum (or the last NaN) winning
// (ew::max_pool_takes), as PyTorch's kernels do.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "mpiddp/common/simd.hpp"
#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cpu {

// The reference loop, any window and stride. in: h x w (only w is needed);
// out and where: oh x ow, where = row * w + col of each window's maximum.
inline void max_pool_plane_any(const float* in, int w, int kernel, int stride, int oh, int ow, float* out,
                               std::int32_t* where) {
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

// ew::max_pool_takes, lane by lane: where it says so, the candidate and its
// position replace the best so far.
__attribute__((always_inline)) inline void max_pool_take(const Lanes8& candidate, const IntLanes8& at,
                                                        Lanes8* value, IntLanes8* best) {
  const IntLanes8 takes = (candidate > *value) | (candidate != candidate);
  *value = takes ? candidate : *value;
  *best = takes ? at : *best;
}

// Eight pooling windows side by side (the common 2 x 2, stride 2 case), lane j
// window j: windows 0..7 whose top rows start at top[0] and bottom rows at bottom[0] (16
// values of each are read), the top-left one at `first` in the plane: the values
// the scan order of max_pool_plane_any picks (top left, top right, bottom left,
// bottom right; a later one takes over where ew::max_pool_takes says so).
__attribute__((always_inline)) inline void max_pool_8_windows(const float* top, const float* bottom, int first,
                                                             int w, Lanes8* value, IntLanes8* best) {
  const IntLanes8 even = {0, 2, 4, 6, 8, 10, 12, 14}, odd = even + 1;
  Lanes8 low, high;
  std::memcpy(&low, top, sizeof(low));
  std::memcpy(&high, top + 8, sizeof(high));
  const Lanes8 top_left = __builtin_shuffle(low, high, even), top_right = __builtin_shuffle(low, high, odd);
  std::memcpy(&low, bottom, sizeof(low));
  std::memcpy(&high, bottom + 8, sizeof(high));
  const Lanes8 bottom_left = __builtin_shuffle(low, high, even), bottom_right = __builtin_shuffle(low, high, odd);
  const IntLanes8 at = first + even;
  *value = top_left;
  *best = at;
  max_pool_take(top_right, at + 1, value, best);
  max_pool_take(bottom_left, at + w, value, best);
  max_pool_take(bottom_right, at + w + 1, value, best);
}

// A 2 x 2, stride 2 max pooling of an h x w plane, eight windows at a time: the
// same values and positions as max_pool_plane_any. Reads stay inside the plane
// (windows near its end are copied out first); writes stay inside out and where.
MPIDDP_VECTOR_CLONES inline void max_pool_plane_2x2(const float* in, int h, int w, float* out, std::int32_t* where) {
  const int oh = h / 2, ow = w / 2;
  const long plane = static_cast<long>(h) * w, outs = static_cast<long>(oh) * ow;
  for (int oy = 0; oy < oh; ++oy)
    for (int ox0 = 0; ox0 < ow; ox0 += 8) {
      const long top = 2L * oy * w + 2 * ox0, bottom = top + w;
      Lanes8 value;
      IntLanes8 best;
      if (bottom + 16 <= plane) {
        max_pool_8_windows(in + top, in + bottom, static_cast<int>(top), w, &value, &best);
      } else {  // the last windows: their 16 values per row copied out, the rest zero
        float rows[2][16] = {};
        const long count = std::min<long>(16, plane - bottom);
        std::copy(in + top, in + top + count, rows[0]);
        std::copy(in + bottom, in + bottom + count, rows[1]);
        max_pool_8_windows(rows[0], rows[1], static_cast<int>(top), w, &value, &best);
      }
      // A store of all eight lanes may run into the next output row (written after
      // this one), never past the plane's outputs.
      const long at = static_cast<long>(oy) * ow + ox0;
      if (at + 8 <= outs) {
        std::memcpy(out + at, &value, sizeof(value));
        std::memcpy(where + at, &best, sizeof(best));
      } else {
        for (int j = 0; j < ow - ox0; ++j) {
          out[at + j] = value[j];
          where[at + j] = best[j];
        }
      }
    }
}

// One plane's pooling: h x w in, oh x ow windows of kernel x kernel at a stride.
struct PoolPlane {
  int h, w, kernel, stride, oh, ow;
  bool two_by_two() const { return kernel == 2 && stride == 2 && oh == h / 2 && ow == w / 2; }
  std::size_t size() const { return static_cast<std::size_t>(h) * w; }
  std::size_t outs() const { return static_cast<std::size_t>(oh) * ow; }
};

// out and where: oh x ow, where = row * w + col of each window's maximum.
inline void max_pool_plane(const float* in, const PoolPlane& p, float* out, std::int32_t* where) {
  if (p.two_by_two())
    max_pool_plane_2x2(in, p.h, p.w, out, where);
  else
    max_pool_plane_any(in, p.w, p.kernel, p.stride, p.oh, p.ow, out, where);
}

// The gradient: each window's dy added at its maximum onto the plane d of
// p.size() zeros; overlapping windows add up where they share a maximum. dy of
// window o is dy[o * dy_stride] (16: a block plane of the blocked layout, read in
// place). (A vector form for 2 x 2 windows, writing each value once, ran 2.5x
// slower than this on 28 x 28 planes: the zeros are one memset, and the scatter
// touches a quarter.)
inline void max_pool_plane_grad(const float* dy, const std::int32_t* where, const PoolPlane& p, float* d,
                                std::size_t dy_stride = 1) {
  std::fill(d, d + p.size(), 0.0f);
  if (p.kernel <= p.stride) {
    // Windows that never overlap: each maximum is written once, without reading
    // it back. 0 + dy, not dy, so -0 becomes +0 as the sum onto a zero gives it.
    for (std::size_t o = 0; o < p.outs(); ++o) d[where[o]] = 0.0f + dy[o * dy_stride];
    return;
  }
  for (std::size_t o = 0; o < p.outs(); ++o) d[where[o]] += dy[o * dy_stride];
}

}  // namespace mpiddp::cpu
