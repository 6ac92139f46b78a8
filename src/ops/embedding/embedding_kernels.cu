// Embeddings on the GPU. The table gradient has no float atomics: one thread per
// column walks the rows in order and adds each into its token's entry, so the
// sums repeat bit for bit (and equal the CPU's, which adds in the same order).
#include "cuda/check.hpp"
#include "cuda/launch.cuh"
#include "embedding_kernels.hpp"

namespace mpiddp::cuda {
namespace {

__global__ void gather_kernel(const float* ids, const float* table, float* y, int rows, int d) {
  const std::size_t n = static_cast<std::size_t>(rows) * d;
  MPIDDP_GRID_STRIDE(i, n) {
    const std::size_t r = i / d, j = i % d;
    y[i] = table[static_cast<std::size_t>(token_id(ids, r)) * d + j];
  }
}

__global__ void zero_kernel(float* data, std::size_t n) {
  MPIDDP_GRID_STRIDE(i, n) data[i] = 0.0f;
}

__global__ void scatter_add_kernel(const float* ids, const float* dy, float* dtable, int rows, int d) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  for (int r = 0; r < rows; ++r)
    dtable[static_cast<std::size_t>(token_id(ids, r)) * d + j] += dy[static_cast<std::size_t>(r) * d + j];
}

__global__ void add_positions_kernel(const float* x, const float* table, float* y, int samples, std::size_t plane) {
  const std::size_t n = static_cast<std::size_t>(samples) * plane;
  MPIDDP_GRID_STRIDE(i, n) y[i] = x[i] + table[i % plane];
}

__global__ void position_grad_kernel(const float* dy, float* dtable, int samples, std::size_t plane, bool accumulate) {
  MPIDDP_GRID_STRIDE(i, plane) {
    float sum = accumulate ? dtable[i] : 0.0f;
    for (int s = 0; s < samples; ++s) sum += dy[static_cast<std::size_t>(s) * plane + i];
    dtable[i] = sum;
  }
}

}  // namespace

void embedding_gather(const float* ids, const float* table, float* y, const EmbeddingGeometry& g, cudaStream_t s) {
  const std::size_t n = static_cast<std::size_t>(g.rows) * g.d;
  gather_kernel<<<blocks_for(n), kThreads, 0, s>>>(ids, table, y, g.rows, g.d);
  check_launch("embedding_gather");
}

void embedding_scatter_add(const float* ids, const float* dy, float* dtable, bool accumulate,
                           const EmbeddingGeometry& g, cudaStream_t s) {
  if (!accumulate) {
    const std::size_t n = static_cast<std::size_t>(g.entries) * g.d;
    zero_kernel<<<blocks_for(n), kThreads, 0, s>>>(dtable, n);
  }
  scatter_add_kernel<<<(g.d + kThreads - 1) / kThreads, kThreads, 0, s>>>(ids, dy, dtable, g.rows, g.d);
  check_launch("embedding_scatter_add");
}

void embedding_add_positions(const float* x, const float* table, float* y, const PositionGeometry& g, cudaStream_t s) {
  const std::size_t plane = static_cast<std::size_t>(g.positions) * g.d;
  add_positions_kernel<<<blocks_for(plane * g.samples), kThreads, 0, s>>>(x, table, y, g.samples, plane);
  check_launch("embedding_add_positions");
}

void embedding_position_grad(const float* dy, float* dtable, bool accumulate, const PositionGeometry& g,
                             cudaStream_t s) {
  const std::size_t plane = static_cast<std::size_t>(g.positions) * g.d;
  position_grad_kernel<<<blocks_for(plane), kThreads, 0, s>>>(dy, dtable, g.samples, plane, accumulate);
  check_launch("embedding_position_grad");
}

}  // namespace mpiddp::cuda
