// Layer normalisation on the GPU. Forward and the input gradient give one row
// to one warp: each lane sums a fixed stride of the row's columns in double, and
// a fixed butterfly joins the lanes (cuda/warp_reduce.cuh). The parameter
// gradients give one column to one thread, which sums the rows in order. No
// floating-point atomics anywhere, so results repeat bit for bit.
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

__global__ void backward_params_kernel(const float* x, const float* dy, const float* saved, float* dweight,
                                       float* dbias, bool accumulate, LayerNormGeometry g) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= g.d) return;
  double sum_dw = 0.0, sum_db = 0.0;
  for (int r = 0; r < g.rows; ++r) {
    const std::size_t at = static_cast<std::size_t>(r) * g.d + j;
    sum_dw += static_cast<double>(dy[at]) * ((x[at] - saved[r]) * saved[static_cast<std::size_t>(g.rows) + r]);
    sum_db += dy[at];
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
                               bool accumulate, const LayerNormGeometry& g, cudaStream_t s) {
  if (g.d <= 0) return;
  // One thread per column, every column (no cap on the blocks, unlike blocks_for).
  const unsigned blocks = static_cast<unsigned>((static_cast<std::size_t>(g.d) + kThreads - 1) / kThreads);
  backward_params_kernel<<<blocks, kThreads, 0, s>>>(x, dy, saved, dweight, dbias, accumulate, g);
  check_launch("layernorm_backward_params");
}

}  // namespace mpiddp::cuda
