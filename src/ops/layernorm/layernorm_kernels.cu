// Layer normalisation on the GPU. Forward and the input gradient give one row
// to one warp: each lane sums a fixed stride of the row's columns in double, and
// a fixed butterfly joins the lanes (cuda/warp_reduce.cuh). The parameter
// gradients sum the rows in two passes: each chunk of kRowsPerChunk rows gets
// its partial sums, one thread per column adding the chunk's rows in order, then
// one thread per column adds the chunks' partials in order. The chunks are fixed
// (not the GPU's size), and there are no floating-point atomics anywhere, so
// results repeat bit for bit on any GPU. (One pass, one thread per column, left
// the GPU nearly idle: 3 blocks for D = 768, 1.9 ms per LayerNorm of GPT-2.)
#include <algorithm>

#include "cuda/check.hpp"
#include "cuda/launch.cuh"
#include "cuda/warp_reduce.cuh"
#include "layernorm_kernels.hpp"
#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cuda {
namespace {

constexpr int kRowsPerBlock = kThreads / kWarp;

__global__ void forward_kernel(const float* x, float* y, const float* weight, const float* bias, float eps,
                               float* saved, LayerNormGeometry g) {
  const int r = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (r >= g.rows) return;  // whole warps leave together: the shuffles below stay full
  const float* row = x + static_cast<std::size_t>(r) * g.d;
  double sum = 0.0;
  for (int j = lane; j < g.d; j += kWarp) sum += row[j];
  const float mean = static_cast<float>(warp_sum(sum) / g.d);
  double deviations = 0.0;
  for (int j = lane; j < g.d; j += kWarp) deviations += static_cast<double>(row[j] - mean) * (row[j] - mean);
  const float rstd = ew::layernorm_rstd(warp_sum(deviations), g.d, eps);
  float* out = y + static_cast<std::size_t>(r) * g.d;
  for (int j = lane; j < g.d; j += kWarp) out[j] = ew::layernorm_value(row[j], mean, rstd, weight[j], bias[j]);
  if (lane == 0) {
    saved[r] = mean;
    saved[static_cast<std::size_t>(g.rows) + r] = rstd;
  }
}

__global__ void backward_input_kernel(const float* x, const float* dy, const float* weight, const float* saved,
                                      float* dx, LayerNormGeometry g) {
  const int r = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  if (r >= g.rows) return;
  const std::size_t at = static_cast<std::size_t>(r) * g.d;
  const float mean = saved[r], rstd = saved[static_cast<std::size_t>(g.rows) + r];
  double sum_g = 0.0, sum_g_xhat = 0.0;
  for (int j = lane; j < g.d; j += kWarp) {
    const float grad = dy[at + j] * weight[j];
    sum_g += grad;
    sum_g_xhat += static_cast<double>(grad) * ((x[at + j] - mean) * rstd);
  }
  const float mean_g = static_cast<float>(warp_sum(sum_g) / g.d);
  const float mean_g_xhat = static_cast<float>(warp_sum(sum_g_xhat) / g.d);
  for (int j = lane; j < g.d; j += kWarp)
    dx[at + j] = ew::layernorm_grad(dy[at + j] * weight[j], (x[at + j] - mean) * rstd, rstd, mean_g, mean_g_xhat);
}

constexpr int kRowsPerChunk = 64;

// Block (x, y): the rows of chunk x, columns y * kThreads.. (chunks on x: a grid's y is capped at 65535, its x is
// not). Partials, double: [chunk][column] for dweight, then dbias.
__global__ void params_partials_kernel(const float* x, const float* dy, const float* saved, double* partials,
                                       LayerNormGeometry g) {
  const int j = static_cast<int>(blockIdx.y * blockDim.x + threadIdx.x), chunk = static_cast<int>(blockIdx.x);
  if (j >= g.d) return;
  const long long end = min(static_cast<long long>(g.rows), (chunk + 1LL) * kRowsPerChunk);
  double sum_dw = 0.0, sum_db = 0.0;
  for (long long r = chunk * static_cast<long long>(kRowsPerChunk); r < end; ++r) {
    const std::size_t at = static_cast<std::size_t>(r) * g.d + j;
    sum_dw += static_cast<double>(dy[at]) * ((x[at] - saved[r]) * saved[static_cast<std::size_t>(g.rows) + r]);
    sum_db += dy[at];
  }
  const std::size_t chunks = gridDim.x;
  partials[static_cast<std::size_t>(chunk) * g.d + j] = sum_dw;
  partials[(chunks + chunk) * g.d + j] = sum_db;
}

__global__ void params_total_kernel(const double* partials, int chunks, float* dweight, float* dbias, bool accumulate,
                                    int d) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= d) return;
  double sum_dw = 0.0, sum_db = 0.0;
  for (int c = 0; c < chunks; ++c) {
    sum_dw += partials[static_cast<std::size_t>(c) * d + j];
    sum_db += partials[static_cast<std::size_t>(chunks + c) * d + j];
  }
  dweight[j] = (accumulate ? dweight[j] : 0.0f) + static_cast<float>(sum_dw);
  dbias[j] = (accumulate ? dbias[j] : 0.0f) + static_cast<float>(sum_db);
}

unsigned row_blocks(int rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

}  // namespace

void layernorm_forward(const float* x, float* y, const float* weight, const float* bias, float eps, float* saved,
                       const LayerNormGeometry& g, cudaStream_t s) {
  if (g.rows <= 0 || g.d <= 0) return;
  forward_kernel<<<row_blocks(g.rows), kThreads, 0, s>>>(x, y, weight, bias, eps, saved, g);
  check_launch("layernorm_forward");
}

void layernorm_backward_input(const float* x, const float* dy, const float* weight, const float* saved, float* dx,
                              const LayerNormGeometry& g, cudaStream_t s) {
  if (g.rows <= 0 || g.d <= 0) return;
  backward_input_kernel<<<row_blocks(g.rows), kThreads, 0, s>>>(x, dy, weight, saved, dx, g);
  check_launch("layernorm_backward_input");
}

void layernorm_backward_params(const float* x, const float* dy, const float* saved, float* dweight, float* dbias,
                               bool accumulate, const LayerNormGeometry& g, Scratch<double>& partials,
                               cudaStream_t s) {
  if (g.d <= 0) return;
  // Every column and every chunk (no cap on the blocks, unlike blocks_for); no rows: zero partials.
  const unsigned column_blocks = static_cast<unsigned>((static_cast<std::size_t>(g.d) + kThreads - 1) / kThreads);
  const long long rows = g.rows;
  const int chunks = static_cast<int>(std::max(1LL, (rows + kRowsPerChunk - 1) / kRowsPerChunk));
  double* sums = partials.get(2 * static_cast<std::size_t>(chunks) * g.d);
  params_partials_kernel<<<dim3(static_cast<unsigned>(chunks), column_blocks), kThreads, 0, s>>>(x, dy, saved, sums,
                                                                                                  g);
  params_total_kernel<<<column_blocks, kThreads, 0, s>>>(sums, chunks, dweight, dbias, accumulate, g.d);
  check_launch("layernorm_backward_params");
}

}  // namespace mpiddp::cuda
