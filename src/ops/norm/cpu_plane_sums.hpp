#pragma once
// Sums over one contiguous plane of floats (a channel of one sample), with eight
// independent partial sums so the compiler can vectorise them without
// reassociating (no -ffast-math); the order is fixed, so results repeat bit for bit.
#include <cstddef>

#include "mpiddp/common/simd.hpp"

namespace mpiddp::cpu {

// sum(x - centre), and sum((x - centre)^2) into *squares.
MPIDDP_VECTOR_CLONES inline float plane_deviations(const float* x, std::size_t n, float centre, float* squares) {
  float s[8] = {}, q[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      const float d = x[i + j] - centre;
      s[j] += d;
      q[j] += d * d;
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

// sum(dy), and sum(dy * (x - centre)) into *projection.
MPIDDP_VECTOR_CLONES inline float plane_grad_sums(const float* x, const float* dy, std::size_t n, float centre,
                                                  float* projection) {
  float s[8] = {}, p[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      s[j] += dy[i + j];
      p[j] += dy[i + j] * (x[i + j] - centre);
    }
  float sum = 0.0f, proj = 0.0f;
  for (int j = 0; j < 8; ++j) {
    sum += s[j];
    proj += p[j];
  }
  for (; i < n; ++i) {
    sum += dy[i];
    proj += dy[i] * (x[i] - centre);
  }
  *projection = proj;
  return sum;
}

}  // namespace mpiddp::cpu
