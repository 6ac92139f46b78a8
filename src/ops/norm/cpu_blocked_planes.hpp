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
#include <cstdint>
#include <cstring>

#include "mpiddp/common/simd.hpp"
#include "mpiddp/device/blocked_layout.hpp"
#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cpu {

static_assert(kLineFloats == kLayoutBlock, "a block position is one Lanes16");

// Per channel of the block: sums[c] = sum(x - centre[c]), squares[c] = sum((x - centre[c])^2).
MPIDDP_VECTOR_CLONES inline void block_deviations(const float* x, std::size_t positions, const float* centre,
                                                  float* sums, float* squares) {
  Lanes16 s[8] = {}, q[8] = {}, mid;
  std::memcpy(&mid, centre, sizeof(mid));
  const std::size_t whole = positions - positions % 8;
  for (std::size_t p = 0; p < whole; p += 8)
    for (int j = 0; j < 8; ++j) {
      Lanes16 v;
      prefetch_ahead(x + (p + j) * kLayoutBlock);
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

// x and d at position p of a block plane: d = dy, or with relu dy through a fused
// ReLU whose output was x * a + b (ew::relu_grad: 0 where it is <= 0).
__attribute__((always_inline)) inline void block_grad_at(const float* x, const float* dy, std::size_t p, bool relu,
                                                        const Lanes16& a, const Lanes16& b, Lanes16* v, Lanes16* d) {
  prefetch_ahead(dy + p * kLayoutBlock);
  prefetch_ahead(x + p * kLayoutBlock);
  std::memcpy(d, dy + p * kLayoutBlock, sizeof(*d));
  std::memcpy(v, x + p * kLayoutBlock, sizeof(*v));
  if (relu) *d = *v * a + b <= 0.0f ? Lanes16{} : *d;
}

// Per channel: sums[c] = sum(d), projections[c] = sum(d * (x - centre[c])), d = dy
// or, with relu, dy through a fused ReLU whose output was x * scale[c] + shift[c].
MPIDDP_VECTOR_CLONES inline void block_grad_sums(const float* x, const float* dy, bool relu, const float* scale,
                                                 const float* shift, std::size_t positions, const float* centre,
                                                 float* sums, float* projections) {
  Lanes16 s[8] = {}, pr[8] = {}, mid, a, b, v, d;
  std::memcpy(&mid, centre, sizeof(mid));
  std::memcpy(&a, scale, sizeof(a));
  std::memcpy(&b, shift, sizeof(b));
  const std::size_t whole = positions - positions % 8;
  for (std::size_t p = 0; p < whole; p += 8)
    for (std::size_t j = 0; j < 8; ++j) {
      block_grad_at(x, dy, p + j, relu, a, b, &v, &d);
      s[j] += d;
      pr[j] += d * (v - mid);
    }
  Lanes16 sum = {}, proj = {};
  for (int j = 0; j < 8; ++j) {
    sum += s[j];
    proj += pr[j];
  }
  for (std::size_t p = whole; p < positions; ++p) {
    block_grad_at(x, dy, p, relu, a, b, &v, &d);
    sum += d;
    proj += d * (v - mid);
  }
  std::memcpy(sums, &sum, sizeof(sum));
  std::memcpy(projections, &proj, sizeof(proj));
}

// y = x * scale[c] + shift[c], through a fused ReLU when asked (ew::relu: 0 where
// y <= 0, NaN kept).
MPIDDP_VECTOR_CLONES inline void block_affine(const float* __restrict x, float* __restrict y, std::size_t positions,
                                              const float* scale, const float* shift, bool relu) {
  Lanes16 a, b;
  std::memcpy(&a, scale, sizeof(a));
  std::memcpy(&b, shift, sizeof(b));
  for (std::size_t p = 0; p < positions; ++p) {
    Lanes16 v;
    prefetch_ahead(x + p * kLayoutBlock);
    std::memcpy(&v, x + p * kLayoutBlock, sizeof(v));
    v = v * a + b;
    if (relu) v = v <= 0.0f ? Lanes16{} : v;
    std::memcpy(y + p * kLayoutBlock, &v, sizeof(v));
  }
}

// dx = (d - mean_dy[c] - (x - mean[c]) * projection[c]) * scale[c] (ew::bn_input_grad),
// d = dy, or with relu dy through a fused ReLU's gradient (ew::relu_grad of x * scale + shift).
MPIDDP_VECTOR_CLONES inline void block_input_grad(const float* __restrict x, const float* __restrict dy, bool relu,
                                                  const float* shift, float* __restrict dx, std::size_t positions,
                                                  const float* mean, const float* mean_dy, const float* projection,
                                                  const float* scale) {
  Lanes16 a, b, m, md, pr;
  std::memcpy(&a, scale, sizeof(a));
  std::memcpy(&b, shift, sizeof(b));
  std::memcpy(&m, mean, sizeof(m));
  std::memcpy(&md, mean_dy, sizeof(md));
  std::memcpy(&pr, projection, sizeof(pr));
  for (std::size_t p = 0; p < positions; ++p) {
    Lanes16 v, d;
    prefetch_ahead(x + p * kLayoutBlock);
    prefetch_ahead(dy + p * kLayoutBlock);
    std::memcpy(&v, x + p * kLayoutBlock, sizeof(v));
    std::memcpy(&d, dy + p * kLayoutBlock, sizeof(d));
    if (relu) d = v * a + b <= 0.0f ? Lanes16{} : d;
    const Lanes16 g = (d - md - (v - m) * pr) * a;
    std::memcpy(dx + p * kLayoutBlock, &g, sizeof(g));
  }
}

typedef std::int32_t IntLanes16 __attribute__((vector_size(kLayoutBlock * sizeof(std::int32_t))));

// Transposes 16 x 16 floats in place, rows[i][j] <-> rows[j][i]: at each level s
// (8, 4, 2, 1) rows i and i + s trade their off-diagonal s x s blocks, one
// two-vector shuffle per row (vpermt2ps with AVX-512).
__attribute__((always_inline)) inline void transpose16(Lanes16* rows) {
  for (int s = 8; s >= 1; s /= 2) {
    IntLanes16 low, high;  // from the pair (rows[i], rows[i + s]): lanes 0-15 and 16-31
    for (int c = 0; c < 16; ++c) {
      low[c] = (c & s) == 0 ? c : 16 + c - s;
      high[c] = (c & s) == 0 ? c + s : 16 + c;
    }
    for (int i = 0; i < 16; ++i) {
      if (i & s) continue;
      const Lanes16 a = rows[i], b = rows[i + s];
      rows[i] = __builtin_shuffle(a, b, low);
      rows[i + s] = __builtin_shuffle(a, b, high);
    }
  }
}

// The 16 planes of a block, one after another ([16][positions]), into the block's
// blocked form ([positions][16]): 16 x 16 tiles through transpose16.
MPIDDP_VECTOR_CLONES inline void planes_to_block(const float* __restrict planes, std::size_t positions,
                                                 float* __restrict block) {
  const std::size_t whole = positions - positions % 16;
  for (std::size_t p0 = 0; p0 < whole; p0 += 16) {
    Lanes16 rows[16];
    for (std::size_t c = 0; c < 16; ++c) std::memcpy(&rows[c], planes + c * positions + p0, sizeof(Lanes16));
    transpose16(rows);
    for (std::size_t k = 0; k < 16; ++k) std::memcpy(block + (p0 + k) * kLayoutBlock, &rows[k], sizeof(Lanes16));
  }
  for (std::size_t p = whole; p < positions; ++p)
    for (std::size_t c = 0; c < kLayoutBlock; ++c) block[p * kLayoutBlock + c] = planes[c * positions + p];
}

}  // namespace mpiddp::cpu
