#pragma once
// How the element-wise kernels are launched (shared by the .cu files): fixed
// blocks of kThreads threads, at most 65535 blocks, each thread striding over
// the grid so any n fits.
#include <cstddef>

namespace mpiddp::cuda {

constexpr int kThreads = 256;

inline unsigned blocks_for(std::size_t n) {
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

}  // namespace mpiddp::cuda

#define MPIDDP_GRID_STRIDE(i, n) \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
