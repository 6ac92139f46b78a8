#pragma once
// Sums across the 32 lanes of a warp in a fixed butterfly of shuffles, for the
// kernels that give one row to one warp (the losses, LayerNorm): every lane ends
// with the same bits, and the order of the additions is the same in every run.
namespace mpiddp::cuda {

constexpr int kWarp = 32;
constexpr unsigned kAllLanes = 0xffffffffu;

__device__ inline double warp_sum(double v) {
  for (int mask = kWarp / 2; mask > 0; mask /= 2) v += __shfl_xor_sync(kAllLanes, v, mask);
  return v;
}

}  // namespace mpiddp::cuda
