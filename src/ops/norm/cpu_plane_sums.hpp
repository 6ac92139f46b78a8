#pragma once
// Sums over one contiguous plane of floats (a channel of one sample), with eight
// independent partial sums so the compiler can vectorise them without
// reassociating (no -ffast-math); the order is fixed, so results repeat bit for bit.
#include <cstddef>
#include <cstring>

#include "mpiddp/common/simd.hpp"
#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cpu {

// sum(x - centre), and sum((x - centre)^2) into *squares: lane j of the eight
// partial sums takes x[i] for i % 8 == j, and the lanes are added in order.
MPIDDP_VECTOR_CLONES inline float plane_deviations(const float* x, std::size_t n, float centre, float* squares) {
  Lanes8 s = {}, q = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Lanes8 v;
    prefetch_ahead(x + i);
    std::memcpy(&v, x + i, sizeof(v));
    const Lanes8 d = v - centre;
    s += d;
    q += d * d;
  }
  float sum = 0.0f, sq = 0.0f;
  for (int j = 0; j < 8; ++j) {
    sum += s[j];
    sq += q[j];
  }
  for (; i < n; ++i) {
    const float d = x[i] - centre;
    sum += d;
    sq += d * d;
  }
  *squares = sq;
  return sum;
}

// sum(d), and sum(d * (x - centre)) into *projection, where d is dy or, with
// relu (a fused ReLU), the gradient through that ReLU: 0 where its output
// x * scale + shift <= 0, else dy (ew::relu_grad), lane for lane.
MPIDDP_VECTOR_CLONES inline float plane_grad_sums(const float* x, const float* dy, bool relu, float scale, float shift,
                                                  std::size_t n, float centre, float* projection) {
  Lanes8 s = {}, p = {};
  std::size_t i = 0;
  if (relu) {
    for (; i + 8 <= n; i += 8) {
      Lanes8 d, v;
      prefetch_ahead(x + i);
      prefetch_ahead(dy + i);
      std::memcpy(&d, dy + i, sizeof(d));
      std::memcpy(&v, x + i, sizeof(v));
      d = v * scale + shift <= 0.0f ? Lanes8{} : d;
      s += d;
      p += d * (v - centre);
    }
  } else {
    for (; i + 8 <= n; i += 8) {
      Lanes8 d, v;
      prefetch_ahead(x + i);
      prefetch_ahead(dy + i);
      std::memcpy(&d, dy + i, sizeof(d));
      std::memcpy(&v, x + i, sizeof(v));
      s += d;
      p += d * (v - centre);
    }
  }
  float sum = 0.0f, proj = 0.0f;
  for (int j = 0; j < 8; ++j) {
    sum += s[j];
    proj += p[j];
  }
  for (; i < n; ++i) {
    const float d = relu ? ew::relu_grad(x[i] * scale + shift, 0.0f, dy[i]) : dy[i];
    sum += d;
    proj += d * (x[i] - centre);
  }
  *projection = proj;
  return sum;
}

}  // namespace mpiddp::cpu
