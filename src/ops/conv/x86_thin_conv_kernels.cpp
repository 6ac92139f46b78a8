// The thin convolutions' kernels for x86-64: AVX-512 and AVX2+FMA, each compiled
// for its own ISA (a target attribute) and used only where the CPU and the
// operating system support it. The register tiles: forward, 4 output channels x
// 4 (AVX-512) or 2 (AVX2) vectors of positions; weight gradient, 4 (AVX-512) or
// 2 (AVX2) output channels x kThinRowBlock rows of accumulators. Results are the
// same bits on both (thin_conv_kernels.hpp says why). The loops over a tile are
// unrolled by pragma: without it GCC keeps the accumulator arrays on the stack
// and stores every one of them at each step (3x slower).
#include <immintrin.h>

#include "thin_conv_kernels.hpp"

namespace mpiddp::cpu {
namespace {

// Forward tiles: output channels x vectors of positions (AVX-512: 16 of its 32
// registers hold accumulators; AVX2: 8 of its 16).
constexpr int kOutBlock = 4;
constexpr int kVectorBlock512 = 4;
constexpr int kVectorBlock256 = 2;

// ---- AVX-512: one vector is a weight gradient's kThinLanes lanes ----

// Lanes [0, n) of a 16-float vector.
__attribute__((target("avx512f"))) inline __mmask16 first_lanes_512(int n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

template <int OB, int PB>
__attribute__((target("avx512f"))) void forward_tile_512(const ThinColumns& cols, const float* w, const float* bias,
                                                         float* y, int p, __mmask16 last) {
  __m512 acc[OB][PB];
  #pragma GCC unroll 16
  for (int o = 0; o < OB; ++o)
    #pragma GCC unroll 16
    for (int j = 0; j < PB; ++j) acc[o][j] = _mm512_set1_ps(bias[o]);
  for (int r = 0; r < cols.rows; ++r) {
    const float* row = cols.data + r * cols.stride + p;
    __m512 c[PB];
    #pragma GCC unroll 16
    for (int j = 0; j < PB; ++j) c[j] = _mm512_loadu_ps(row + 16 * j);
    #pragma GCC unroll 16
    for (int o = 0; o < OB; ++o) {
      const __m512 wv = _mm512_set1_ps(w[static_cast<std::size_t>(o) * cols.rows + r]);
      #pragma GCC unroll 16
      for (int j = 0; j < PB; ++j) acc[o][j] = _mm512_fmadd_ps(wv, c[j], acc[o][j]);
    }
  }
  #pragma GCC unroll 16
  for (int o = 0; o < OB; ++o) {
    float* out = y + static_cast<std::size_t>(o) * cols.positions + p;
    #pragma GCC unroll 16
    for (int j = 0; j + 1 < PB; ++j) _mm512_storeu_ps(out + 16 * j, acc[o][j]);
    _mm512_mask_storeu_ps(out + 16 * (PB - 1), last, acc[o][PB - 1]);
  }
}

template <int OB>
__attribute__((target("avx512f"))) void forward_channels_512(const ThinColumns& cols, const float* w,
                                                             const float* bias, float* y) {
  int p = 0;
  for (; p + 16 * kVectorBlock512 <= cols.positions; p += 16 * kVectorBlock512)
    forward_tile_512<OB, kVectorBlock512>(cols, w, bias, y, p, first_lanes_512(16));
  for (; p < cols.positions; p += 16)
    forward_tile_512<OB, 1>(cols, w, bias, y, p, first_lanes_512(cols.positions - p));
}

__attribute__((target("avx512f"))) void forward_512(const ThinColumns& cols, const float* w, const float* bias,
                                                    float* y, int out_c) {
  int o = 0;
  for (; o + kOutBlock <= out_c; o += kOutBlock)
    forward_channels_512<kOutBlock>(cols, w + static_cast<std::size_t>(o) * cols.rows, bias + o, y + static_cast<std::size_t>(o) * cols.positions);
  for (; o < out_c; ++o)
    forward_channels_512<1>(cols, w + static_cast<std::size_t>(o) * cols.rows, bias + o, y + static_cast<std::size_t>(o) * cols.positions);
}

// Rows [r, r + RB) of OB output channels' accumulators, over every position.
template <int OB, int RB>
__attribute__((target("avx512f"))) void grad_tile_512(const ThinColumns& cols, const float* dy, int r, float* acc) {
  __m512 a[OB][RB];
  #pragma GCC unroll 16
  for (int o = 0; o < OB; ++o)
    #pragma GCC unroll 16
    for (int k = 0; k < RB; ++k) a[o][k] = _mm512_loadu_ps(acc + (static_cast<std::size_t>(o) * cols.rows + r + k) * kThinLanes);
  const float* row = cols.data + r * cols.stride;
  for (int p = 0; p < cols.positions; p += 16) {
    const __mmask16 valid = first_lanes_512(cols.positions - p);
    __m512 d[OB];
    #pragma GCC unroll 16
    for (int o = 0; o < OB; ++o) d[o] = _mm512_maskz_loadu_ps(valid, dy + static_cast<std::size_t>(o) * cols.positions + p);
    #pragma GCC unroll 16
    for (int k = 0; k < RB; ++k) {
      const __m512 c = _mm512_loadu_ps(row + k * cols.stride + p);
      #pragma GCC unroll 16
      for (int o = 0; o < OB; ++o) a[o][k] = _mm512_fmadd_ps(d[o], c, a[o][k]);
    }
  }
  #pragma GCC unroll 16
  for (int o = 0; o < OB; ++o)
    #pragma GCC unroll 16
    for (int k = 0; k < RB; ++k) _mm512_storeu_ps(acc + (static_cast<std::size_t>(o) * cols.rows + r + k) * kThinLanes, a[o][k]);
}

// 4 output channels x a row block: 20 of the 32 vector registers hold
// accumulators, 9 loads per 20 FMAs. (2 x 10 rows, reading each sample's dy once
// instead of twice, ran 1.2x slower: 12 loads per 20 FMAs.)
__attribute__((target("avx512f"))) void weight_grad_512(const ThinColumns& cols, const float* dy, int out_c,
                                                        float* acc) {
  constexpr int OB = 4, RB = kThinRowBlock;
  int o = 0;
  for (; o + OB <= out_c; o += OB)
    for (int r = 0; r < cols.rows; r += RB)
      grad_tile_512<OB, RB>(cols, dy + static_cast<std::size_t>(o) * cols.positions, r,
                            acc + static_cast<std::size_t>(o) * cols.rows * kThinLanes);
  for (; o < out_c; ++o)
    for (int r = 0; r < cols.rows; r += RB)
      grad_tile_512<1, RB>(cols, dy + static_cast<std::size_t>(o) * cols.positions, r,
                           acc + static_cast<std::size_t>(o) * cols.rows * kThinLanes);
}

// ---- AVX2: 8-float vectors; a weight gradient's 16 lanes as two halves ----

// Lanes [0, n) of an 8-float vector, as maskload/maskstore want them.
__attribute__((target("avx2,fma"))) inline __m256i first_lanes_256(int n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);
}

template <int OB, int PB>
__attribute__((target("avx2,fma"))) void forward_tile_256(const ThinColumns& cols, const float* w, const float* bias,
                                                         float* y, int p, int last_count) {
  __m256 acc[OB][PB];
  #pragma GCC unroll 16
  for (int o = 0; o < OB; ++o)
    #pragma GCC unroll 16
    for (int j = 0; j < PB; ++j) acc[o][j] = _mm256_set1_ps(bias[o]);
  for (int r = 0; r < cols.rows; ++r) {
    const float* row = cols.data + r * cols.stride + p;
    __m256 c[PB];
    #pragma GCC unroll 16
    for (int j = 0; j < PB; ++j) c[j] = _mm256_loadu_ps(row + 8 * j);
    #pragma GCC unroll 16
    for (int o = 0; o < OB; ++o) {
      const __m256 wv = _mm256_set1_ps(w[static_cast<std::size_t>(o) * cols.rows + r]);
      #pragma GCC unroll 16
      for (int j = 0; j < PB; ++j) acc[o][j] = _mm256_fmadd_ps(wv, c[j], acc[o][j]);
    }
  }
  #pragma GCC unroll 16
  for (int o = 0; o < OB; ++o) {
    float* out = y + static_cast<std::size_t>(o) * cols.positions + p;
    #pragma GCC unroll 16
    for (int j = 0; j + 1 < PB; ++j) _mm256_storeu_ps(out + 8 * j, acc[o][j]);
    if (last_count >= 8) _mm256_storeu_ps(out + 8 * (PB - 1), acc[o][PB - 1]);
    else _mm256_maskstore_ps(out + 8 * (PB - 1), first_lanes_256(last_count), acc[o][PB - 1]);
  }
}

template <int OB>
__attribute__((target("avx2,fma"))) void forward_channels_256(const ThinColumns& cols, const float* w,
                                                             const float* bias, float* y) {
  int p = 0;
  for (; p + 8 * kVectorBlock256 <= cols.positions; p += 8 * kVectorBlock256)
    forward_tile_256<OB, kVectorBlock256>(cols, w, bias, y, p, 8);
  for (; p < cols.positions; p += 8) forward_tile_256<OB, 1>(cols, w, bias, y, p, cols.positions - p);
}

__attribute__((target("avx2,fma"))) void forward_256(const ThinColumns& cols, const float* w, const float* bias,
                                                    float* y, int out_c) {
  int o = 0;
  for (; o + kOutBlock <= out_c; o += kOutBlock)
    forward_channels_256<kOutBlock>(cols, w + static_cast<std::size_t>(o) * cols.rows, bias + o, y + static_cast<std::size_t>(o) * cols.positions);
  for (; o < out_c; ++o)
    forward_channels_256<1>(cols, w + static_cast<std::size_t>(o) * cols.rows, bias + o, y + static_cast<std::size_t>(o) * cols.positions);
}

// As grad_tile_512, for the half (0: lanes 0-7, 1: lanes 8-15) of every 16 positions.
template <int OB, int RB>
__attribute__((target("avx2,fma"))) void grad_tile_256(const ThinColumns& cols, const float* dy, int r, int half,
                                                       float* acc) {
  const int lane0 = 8 * half;
  __m256 a[OB][RB];
  #pragma GCC unroll 16
  for (int o = 0; o < OB; ++o)
    #pragma GCC unroll 16
    for (int k = 0; k < RB; ++k) a[o][k] = _mm256_loadu_ps(acc + (static_cast<std::size_t>(o) * cols.rows + r + k) * kThinLanes + lane0);
  const float* row = cols.data + r * cols.stride;
  for (int p = lane0; p < cols.positions; p += 16) {
    const int count = cols.positions - p;
    __m256 d[OB];
    #pragma GCC unroll 16
    for (int o = 0; o < OB; ++o) {
      const float* from = dy + static_cast<std::size_t>(o) * cols.positions + p;
      d[o] = count >= 8 ? _mm256_loadu_ps(from) : _mm256_maskload_ps(from, first_lanes_256(count));
    }
    #pragma GCC unroll 16
    for (int k = 0; k < RB; ++k) {
      const __m256 c = _mm256_loadu_ps(row + k * cols.stride + p);
      #pragma GCC unroll 16
      for (int o = 0; o < OB; ++o) a[o][k] = _mm256_fmadd_ps(d[o], c, a[o][k]);
    }
  }
  #pragma GCC unroll 16
  for (int o = 0; o < OB; ++o)
    #pragma GCC unroll 16
    for (int k = 0; k < RB; ++k) _mm256_storeu_ps(acc + (static_cast<std::size_t>(o) * cols.rows + r + k) * kThinLanes + lane0, a[o][k]);
}

__attribute__((target("avx2,fma"))) void weight_grad_256(const ThinColumns& cols, const float* dy, int out_c,
                                                        float* acc) {
  constexpr int OB = 2, RB = kThinRowBlock;  // 10 of the 16 registers hold accumulators
  int o = 0;
  for (; o + OB <= out_c; o += OB)
    for (int r = 0; r < cols.rows; r += RB)
      for (int half = 0; half < 2; ++half)
        grad_tile_256<OB, RB>(cols, dy + static_cast<std::size_t>(o) * cols.positions, r, half,
                              acc + static_cast<std::size_t>(o) * cols.rows * kThinLanes);
  for (; o < out_c; ++o)
    for (int r = 0; r < cols.rows; r += RB)
      for (int half = 0; half < 2; ++half)
        grad_tile_256<1, RB>(cols, dy + static_cast<std::size_t>(o) * cols.positions, r, half,
                             acc + static_cast<std::size_t>(o) * cols.rows * kThinLanes);
}

}  // namespace

std::vector<ThinKernels> thin_kernel_sets() {
  std::vector<ThinKernels> sets;
  // libgcc's checks include the operating system's support for the wide registers.
  if (__builtin_cpu_supports("avx512f")) sets.push_back({"AVX-512", forward_512, weight_grad_512});
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    sets.push_back({"AVX2+FMA", forward_256, weight_grad_256});
  return sets;
}

}  // namespace mpiddp::cpu
