// Embeddings on the GPU. The table gradient has no float atomics: the rows are
// first ordered by token with CUB's radix sort, which is stable (a token's rows
// keep their order), then each token's entry adds its rows in that order, one
// thread per column. The sums repeat bit for bit and equal the CPU's, which adds
// the rows in the same order; tokens and columns run in parallel.
#include <cub/device/device_radix_sort.cuh>

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

__global__ void token_keys_kernel(const float* ids, int* tokens, int* rows, int n) {
  MPIDDP_GRID_STRIDE(r, static_cast<std::size_t>(n)) {
    tokens[r] = token_id(ids, r);
    rows[r] = static_cast<int>(r);
  }
}

// Block x: one position of the token-sorted rows; only the first of a token's
// run works, adding the run's rows (ascending, as sorted stably) into the entry.
__global__ void token_runs_add_kernel(const int* tokens, const int* rows, const float* dy, float* dtable, int n,
                                      int d) {
  const int first = blockIdx.x, j = blockIdx.y * blockDim.x + threadIdx.x;
  if (j >= d || (first > 0 && tokens[first] == tokens[first - 1])) return;
  const int token = tokens[first];
  float* entry = dtable + static_cast<std::size_t>(token) * d + j;
  float sum = *entry;
  for (int k = first; k < n && tokens[k] == token; ++k) sum += dy[static_cast<std::size_t>(rows[k]) * d + j];
  *entry = sum;
}

// Bits that hold every token id below `entries` (the radix sort reads no more).
int key_bits(int entries) {
  int bits = 1;
  while (bits < 31 && (1 << bits) < entries) ++bits;
  return bits;
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
                           const EmbeddingGeometry& g, TokenSortScratch& scratch, cudaStream_t s) {
  if (!accumulate) {
    const std::size_t n = static_cast<std::size_t>(g.entries) * g.d;
    zero_kernel<<<blocks_for(n), kThreads, 0, s>>>(dtable, n);
  }
  if (g.rows == 0) return check_launch("embedding_scatter_add");
  const std::size_t n = static_cast<std::size_t>(g.rows);
  int* tokens = scratch.tokens.get(2 * n);
  int* rows = scratch.rows.get(2 * n);
  token_keys_kernel<<<blocks_for(n), kThreads, 0, s>>>(ids, tokens, rows, g.rows);
  const int bits = key_bits(g.entries);
  std::size_t temp_bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, tokens + n, rows, rows + n, g.rows, 0, bits, s),
        "cub::DeviceRadixSort::SortPairs (size)");
  unsigned char* temp = scratch.temp.get(temp_bytes > 0 ? temp_bytes : 1);
  check(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, tokens + n, rows, rows + n, g.rows, 0, bits, s),
        "cub::DeviceRadixSort::SortPairs (embedding gradient)");
  const dim3 grid(static_cast<unsigned>(g.rows), static_cast<unsigned>((g.d + kThreads - 1) / kThreads));
  token_runs_add_kernel<<<grid, kThreads, 0, s>>>(tokens + n, rows + n, dy, dtable, g.rows, g.d);
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
