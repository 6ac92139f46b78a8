#include <cmath>

#include "fma_loops.hpp"

namespace mpiddp::bench {

float fma_scale() {
  static volatile float one = 1.0f;  // read at run time: the compiler must not assume 1
  return one;
}

float fma_start(int chain, int lane) { return 0.5f + 0.01f * static_cast<float>(chain) + static_cast<float>(lane); }

float reference_lane(int chain, int lane, long iterations, bool fused) {
  float x = fma_start(chain, lane);
  const float scale = fma_scale();
  for (long i = 0; i < iterations; ++i) x = fused ? std::fma(x, scale, kFmaShift) : x * scale + kFmaShift;
  return x;
}

// GCC's and Clang's generic vectors: one register of kPortableLanes floats on
// any target with 128-bit vectors (SSE2, NEON), split by the compiler elsewhere.
typedef float Portable __attribute__((vector_size(kPortableLanes * sizeof(float))));

void portable_fma_loop(long iterations, float* out) {
  Portable acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c)
    for (int l = 0; l < kPortableLanes; ++l) acc[c][l] = fma_start(c, l);
  const float scale = fma_scale(), shift = kFmaShift;
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kFmaChains; ++c) acc[c] = acc[c] * scale + shift;
  }
  for (int c = 0; c < kFmaChains; ++c)
    for (int l = 0; l < kPortableLanes; ++l) out[c * kPortableLanes + l] = acc[c][l];
}

}  // namespace mpiddp::bench
