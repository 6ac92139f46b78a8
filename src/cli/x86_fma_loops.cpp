// The x86-64 FMA loops. Each is compiled for its own ISA (a target attribute)
// and called only where the CPU and the operating system support it, so one
// binary built for the baseline measures AVX-512 where it exists.
#include <immintrin.h>

#include "fma_loops.hpp"

namespace mpiddp::bench {

namespace {

// The chains' start values, lane by lane (fma_start), for a loop of `lanes` floats per vector.
void fill_starts(int lanes, float* starts) {
  for (int c = 0; c < kFmaChains; ++c)
    for (int l = 0; l < lanes; ++l) starts[c * lanes + l] = fma_start(c, l);
}

__attribute__((target("avx512f"))) void avx512_fma_loop(long iterations, float* out) {
  float starts[kFmaChains * 16];
  fill_starts(16, starts);
  __m512 acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm512_loadu_ps(starts + 16 * c);
  const __m512 scale = _mm512_set1_ps(fma_scale()), shift = _mm512_set1_ps(kFmaShift);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], scale, shift);
  }
  for (int c = 0; c < kFmaChains; ++c) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

__attribute__((target("avx2,fma"))) void avx2_fma_loop(long iterations, float* out) {
  float starts[kFmaChains * 8];
  fill_starts(8, starts);
  __m256 acc[kFmaChains];
  for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm256_loadu_ps(starts + 8 * c);
  const __m256 scale = _mm256_set1_ps(fma_scale()), shift = _mm256_set1_ps(kFmaShift);
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kFmaChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], scale, shift);
  }
  for (int c = 0; c < kFmaChains; ++c) _mm256_storeu_ps(out + 8 * c, acc[c]);
}

}  // namespace

std::vector<FmaLoop> fma_loops() {
  std::vector<FmaLoop> loops;
  // libgcc's checks include the operating system's support for the wide registers.
  if (__builtin_cpu_supports("avx512f")) loops.push_back({"AVX-512", 16, true, avx512_fma_loop});
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    loops.push_back({"AVX2+FMA", 8, true, avx2_fma_loop});
  loops.push_back({"portable", kPortableLanes, false, portable_fma_loop});
  return loops;
}

}  // namespace mpiddp::bench
