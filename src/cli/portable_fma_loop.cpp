#include "fma_loops.hpp"

namespace mpiddp::bench {

void portable_fma_loop(long iterations, float* out) {
  float acc[kFmaChains][kPortableLanes];
  for (int c = 0; c < kFmaChains; ++c)
    for (int l = 0; l < kPortableLanes; ++l) acc[c][l] = 0.5f + 0.01f * static_cast<float>(c * kPortableLanes + l);
  const float scale = kFmaScale, shift = 1.0f - kFmaScale;
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kFmaChains; ++c)
#pragma GCC unroll 16
      for (int l = 0; l < kPortableLanes; ++l) acc[c][l] = acc[c][l] * scale + shift;
  }
  for (int c = 0; c < kFmaChains; ++c)
    for (int l = 0; l < kPortableLanes; ++l) out[c * kPortableLanes + l] = acc[c][l];
}

}  // namespace mpiddp::bench
