#pragma once
// BatchNorm's loops over one block plane of the blocked layout (nChw16c: the 16
// channels of a block side by side at each position; device/blocked_layout.hpp).
// Each channel's values go through the same float operations, in the same order,
// as the plane loops of cpu_plane_sums.hpp and cpu_norm_ops.cpp give it in NCHW:
// lane j of eight partial sums takes positions p with p % 8 == j, the lanes are
// added in order, then the positions after the last whole eight. So either layout
// gives every sum, and every value, the same bits; here the 16 channels of a
// position form one vector instead of eight positions of a channel.
#include <cstddef>
#include <cstring>

#include "mpiddp/common/simd.hpp"
#include "mpiddp/device/blocked_layout.hpp"
#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cpu {

typedef float Lanes16 __attribute__((vector_size(kLayoutBlock * sizeof(float))));

// Per channel of the block: sums[c] = sum(x - centre[c]), squares[c] = sum((x - centre[c])^2).
MPIDDP_VECTOR_CLONES inline void block_deviations(const float* x, std::size_t positions, const float* centre,
                                                  float* sums, float* squares) {
  Lanes16 s[8] = {}, q[8] = {}, mid;
  std::memcpy(&mid, centre, sizeof(mid));
  const std::size_t whole = positions - positions % 8;
  for (std::size_t p = 0; p < whole; p += 8)
    for (int j = 0; j < 8; ++j) {
      Lanes16 v;
      std::memcpy(&v, x + (p + j) * kLayoutBlock, sizeof(v));
      const Lanes16 d = v - mid;
      s[j] += d;
      q[j] += d * d;
    }
  Lanes16 sum = {}, sq = {};
  for (int j = 0; j < 8; ++j) {
    sum += s[j];
    sq += q[j];
  }
  for (std::size_t p = whole; p < positions; ++p) {
    Lanes16 v;
    std::memcpy(&v, x + p * kLayoutBlock, sizeof(v));
    const Lanes16 d = v - mid;
    sum += d;
    sq += d * d;
  }
  std::memcpy(sums, &sum, sizeof(sum));
  std::memcpy(squares, &sq, sizeof(sq));
}

// Per channel: sums[c] = sum(d), projections[c] = sum(d * (x - centre[c])), d = dy
// or, with relu, dy through a fused ReLU whose output was x * scale[c] + shift[c].
MPIDDP_VECTOR_CLONES inline void block_grad_sums(const float* x, const float* dy, bool relu, const float* scale,
                                                 const float* shift, std::size_t positions, const float* centre,
                                                 float* sums, float* projections) {
  Lanes16 s[8] = {}, pr[8] = {}, mid, a, b;
  std::memcpy(&mid, centre, sizeof(mid));
  std::memcpy(&a, scale, sizeof(a));
  std::memcpy(&b, shift, sizeof(b));
  // d and x at position p: d through the fused ReLU's gradient where there is one.
#define MPIDDP_BLOCK_GRAD(p)                                                  \
  Lanes16 v, d;                                                               \
  std::memcpy(&d, dy + (p) * kLayoutBlock, sizeof(d));                        \
  std::memcpy(&v, x + (p) * kLayoutBlock, sizeof(v));                         \
  if (relu) d = v * a + b <= 0.0f ? Lanes16{} : d
  const std::size_t whole = positions - positions % 8;
  for (std::size_t p = 0; p < whole; p += 8)
    for (std::size_t j = 0; j < 8; ++j) {
      MPIDDP_BLOCK_GRAD(p + j);
      s[j] += d;
      pr[j] += d * (v - mid);
    }
  Lanes16 sum = {}, proj = {};
  for (int j = 0; j < 8; ++j) {
    sum += s[j];
    proj += pr[j];
  }
  for (std::size_t p = whole; p < positions; ++p) {
    MPIDDP_BLOCK_GRAD(p);
    sum += d;
    proj += d * (v - mid);
  }
#undef MPIDDP_BLOCK_GRAD
  std::memcpy(sums, &sum, sizeof(sum));
  std::memcpy(projections, &proj, sizeof(proj));
}

// y = x * scale[c] + shift[c], through a fused ReLU when asked.
MPIDDP_VECTOR_CLONES inline void block_affine(const float* __restrict x, float* __restrict y, std::size_t positions,
                                              const float* scale, const float* shift, bool relu) {
  for (std::size_t p = 0; p < positions; ++p, x += kLayoutBlock, y += kLayoutBlock)
    for (std::size_t c = 0; c < kLayoutBlock; ++c) {
      const float v = x[c] * scale[c] + shift[c];
      y[c] = relu ? ew::relu(v) : v;
    }
}

// dx (ew::bn_input_grad per channel), dy first through a fused ReLU's gradient when relu.
MPIDDP_VECTOR_CLONES inline void block_input_grad(const float* __restrict x, const float* __restrict dy, bool relu,
                                                  const float* shift, float* __restrict dx, std::size_t positions,
                                                  const float* mean, const float* mean_dy, const float* projection,
                                                  const float* scale) {
  for (std::size_t p = 0; p < positions; ++p, x += kLayoutBlock, dy += kLayoutBlock, dx += kLayoutBlock)
    for (std::size_t c = 0; c < kLayoutBlock; ++c) {
      const float d = relu ? ew::relu_grad(x[c] * scale[c] + shift[c], 0.0f, dy[c]) : dy[c];
      dx[c] = ew::bn_input_grad(x[c], d, mean[c], mean_dy[c], projection[c], scale[c]);
    }
}

}  // namespace mpiddp::cpu
