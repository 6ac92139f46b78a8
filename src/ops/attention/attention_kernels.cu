// The causal softmax of attention on the GPU, one warp per row of scores: the
// lanes stride over the row, then combine in warp_reduce.cuh's fixed butterfly,
// so a run repeats bit for bit.
#include <cfloat>

#include "attention_kernels.hpp"
#include "cuda/check.hpp"
#include "cuda/launch.cuh"
#include "cuda/warp_reduce.cuh"
#include "mpiddp/device/elementwise.hpp"

namespace mpiddp::cuda {
namespace {

__device__ float warp_max(float v) {
  for (int mask = kWarp / 2; mask > 0; mask /= 2) v = fmaxf(v, __shfl_xor_sync(kAllLanes, v, mask));
  return v;
}

__global__ void causal_softmax_kernel(float* scores, int rows, int t) {
  const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  if (warp >= rows) return;
  float* row = scores + warp * t;
  const int n = static_cast<int>(warp % t) + 1;
  float top = -FLT_MAX;
  for (int k = lane; k < n; k += kWarp) top = fmaxf(top, row[k]);
  top = warp_max(top);
  double sum = 0.0;
  for (int k = lane; k < n; k += kWarp) {
    row[k] = ew::exp_arith(row[k] - top);  // the CPU's exp
    sum += row[k];
  }
  const float inv = static_cast<float>(1.0 / warp_sum(sum));
  for (int k = lane; k < n; k += kWarp) row[k] *= inv;
  for (int k = n + lane; k < t; k += kWarp) row[k] = 0.0f;
}

__global__ void causal_softmax_grad_kernel(const float* p, float* dp, int rows, int t) {
  const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  if (warp >= rows) return;
  const float* prow = p + warp * t;
  float* drow = dp + warp * t;
  const int n = static_cast<int>(warp % t) + 1;
  double dot = 0.0;
  for (int k = lane; k < n; k += kWarp) dot += static_cast<double>(prow[k]) * drow[k];
  const float d = static_cast<float>(warp_sum(dot));
  for (int k = lane; k < n; k += kWarp) drow[k] = prow[k] * (drow[k] - d);
  for (int k = n + lane; k < t; k += kWarp) drow[k] = 0.0f;
}

unsigned warp_blocks(int rows) {
  const long long threads = static_cast<long long>(rows) * kWarp;
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

}  // namespace

void causal_softmax(float* scores, int rows, int t, cudaStream_t s) {
  causal_softmax_kernel<<<warp_blocks(rows), kThreads, 0, s>>>(scores, rows, t);
  check_launch("causal_softmax");
}

void causal_softmax_grad(const float* p, float* dp, int rows, int t, cudaStream_t s) {
  causal_softmax_grad_kernel<<<warp_blocks(rows), kThreads, 0, s>>>(p, dp, rows, t);
  check_launch("causal_softmax_grad");
}

}  // namespace mpiddp::cuda
