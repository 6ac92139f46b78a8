// The dense family's own kernel: the bias broadcast before the product.
#include "cuda/check.hpp"
#include "cuda/launch.cuh"
#include "dense_kernels.hpp"

namespace mpiddp::cuda {
namespace {

__global__ void broadcast_rows_kernel(const float* bias, float* y, int n, int out) {
  MPIDDP_GRID_STRIDE(i, static_cast<std::size_t>(n) * out) y[i] = bias[i % out];
}

}  // namespace

void broadcast_rows(const float* bias, float* y, int n, int out, cudaStream_t s) {
  broadcast_rows_kernel<<<blocks_for(static_cast<std::size_t>(n) * out), kThreads, 0, s>>>(bias, y, n, out);
  check_launch("broadcast_rows");
}

}  // namespace mpiddp::cuda
